package startup

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/policyflags"
	"github.com/cmsync/cmsync/replicator"
)

// writersPerSource bounds the writes one pass over a source makes in parallel; with
// --max-concurrent-reconciles it bounds cmsync's requests in flight.
const writersPerSource = 16

// Options are the controller's flags, as BindFlags binds them.
type Options struct {
	policy                  func() policyflags.Values
	configMapSync           string
	secrets                 string
	secretSync              string
	objectKinds             string
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	metricsAddr             string
	metricsSecure           bool
	metricsCertDir          string
	probeAddr               string
	qps                     float64
	burst                   int
	maxConcurrentReconciles int
	conflictRecheck         time.Duration
	profiling               bool
	zap                     zap.Options
}

// BindFlags defines the controller's flags on fs; the values are read once fs is parsed.
// (--kubeconfig is controller-runtime's, on the process's flag set.)
func BindFlags(fs *flag.FlagSet) *Options {
	o := &Options{}
	o.policy = policyflags.Bind(fs)
	fs.StringVar(&o.configMapSync, "configmapsync", "auto",
		"Run the ConfigMapSync controller: auto (when its CRD is installed), enabled or disabled.")
	fs.StringVar(&o.secrets, "secrets", "disabled",
		"Replicate labelled Secrets too: enabled or disabled (no request about Secrets at all).")
	fs.StringVar(&o.secretSync, "secretsync", "auto",
		"Run the SecretSync controller (with --secrets=enabled): auto (when its CRD is installed), enabled or disabled.")
	fs.StringVar(&o.objectKinds, "object-kinds", "",
		"Kinds an ObjectSync may copy: a comma list of group/version/Kind, core kinds as v1/Kind (networking.k8s.io/v1/NetworkPolicy,v1/LimitRange). "+
			"Empty (the default): ObjectSync is off, and cmsync makes no request about any such kind.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so that only one of several controller processes writes.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election lease; defaults to the Pod's namespace in a cluster.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"How long a follower waits after the leader's last renewal before it takes the lease.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"How long the leader keeps trying to renew before it stops; it sends no write later than this after its last renewal. Below the lease duration.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second,
		"How often the leader renews and followers try to take the lease.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; 0 disables it.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", false,
		"Serve metrics over HTTPS to clients the API server authenticates (TokenReview) and authorizes for GET /metrics (SubjectAccessReview).")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "",
		"Directory holding tls.crt and tls.key for --metrics-secure (reloaded when they change); empty: a self-signed certificate.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	fs.Float64Var(&o.qps, "kube-api-qps", 0,
		"Client-side limit of API requests per second, for each of cmsync's API clients (those of the kinds it reads and writes, "+
			"and the lease's own, so that replica writes never delay a lease renewal); 0 (the default): none, the API server's flow control (APF) paces cmsync, "+
			"whose requests in flight are bounded by --max-concurrent-reconciles.")
	fs.IntVar(&o.burst, "kube-api-burst", 2000, "Client-side burst of API requests, with --kube-api-qps.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 4, "Sources reconciled in parallel.")
	fs.DurationVar(&o.conflictRecheck, "conflict-recheck-interval", 30*time.Second,
		"How soon a source whose replica is blocked by a ConfigMap cmsync does not own looks again.")
	fs.BoolVar(&o.profiling, "profiling", false, "Serve Go's pprof profiles under /debug/pprof/ on the metrics address.")
	o.zap.BindFlags(fs)
	return o
}

// Logger is the logger the zap flags (--zap-log-level, --zap-devel, ...) describe.
func (o *Options) Logger() logr.Logger {
	return zap.New(zap.UseFlagOptions(&o.zap))
}

// controllerNamespace is where cmsync runs: its lease's namespace, which defaults to
// the Pod's (the chart sets both to the release's); no ObjectSync may write into it.
// "" outside a Pod without --leader-election-namespace.
func (o Options) controllerNamespace() string {
	return cmp.Or(o.leaderElectionNamespace, podNamespace())
}

// podNamespace is the namespace of the Pod this process runs in, "" outside a Pod.
func podNamespace() string {
	raw, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// replicatorOptions checks the flags the controllers take.
func (o Options) replicatorOptions() (replicator.Options, error) {
	policy, err := o.policy().Policy()
	if err != nil {
		return replicator.Options{}, err
	}
	policy.ControllerNamespace = o.controllerNamespace()
	if o.secrets != "enabled" && o.secrets != "disabled" {
		return replicator.Options{}, fmt.Errorf("--secrets=%q: must be enabled or disabled", o.secrets)
	}
	objectKinds, err := desired.ParseObjectKinds(o.objectKinds)
	if err != nil {
		return replicator.Options{}, err
	}
	return replicator.Options{
		Policy:          policy,
		Writers:         writersPerSource,
		ConflictRecheck: o.conflictRecheck,
		Controller:      o.controllerOptions(),
		Registerer:      metrics.Registry,
		ConfigMapSync:   o.configMapSync,
		Secrets:         o.secrets == "enabled",
		SecretSync:      o.secretSync,
		ObjectKinds:     objectKinds,
	}, nil
}

// controllerOptions sets the reconcile parallelism and the retry rate limiter: a failed
// pass is retried after 250ms, doubling up to 5 minutes, so a namespace that keeps
// refusing writes costs a handful of requests an hour, not a hot loop; the overall
// bucket (20/s, burst 200) caps retries across all sources after a mass failure such as
// an API server restart.
func (o Options) controllerOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](250*time.Millisecond, 5*time.Minute),
			&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(20), 200)},
		),
	}
}
