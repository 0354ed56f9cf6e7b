// Command cmsync replicates labelled ConfigMaps across namespaces. main only wires:
// flags, scheme, manager, reconcilers, health checks, start.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"syscall"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/gctune"
	"github.com/cmsync/cmsync/internal/leasefence"
	"github.com/cmsync/cmsync/internal/metricsauth"
	"github.com/cmsync/cmsync/internal/policyflags"
	"github.com/cmsync/cmsync/replicator"
)

// writersPerSource bounds the writes one pass over a source makes in parallel; with
// --max-concurrent-reconciles it bounds cmsync's requests in flight.
const writersPerSource = 16

type options struct {
	policy                  func() policyflags.Values
	configMapSync           string
	secrets                 string
	secretSync              string
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

func parseFlags() options {
	o := bindFlags(flag.CommandLine)
	flag.Parse()
	return *o
}

// bindFlags defines the controller's flags on fs; the values are read once fs is parsed.
// (--kubeconfig is controller-runtime's, on the process's flag set.)
func bindFlags(fs *flag.FlagSet) *options {
	o := &options{}
	o.policy = policyflags.Bind(fs)
	fs.StringVar(&o.configMapSync, "configmapsync", "auto",
		"Run the ConfigMapSync controller: auto (when its CRD is installed), enabled or disabled.")
	fs.StringVar(&o.secrets, "secrets", "disabled",
		"Replicate labelled Secrets too: enabled or disabled (no request about Secrets at all).")
	fs.StringVar(&o.secretSync, "secretsync", "auto",
		"Run the SecretSync controller (with --secrets=enabled): auto (when its CRD is installed), enabled or disabled.")
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

func main() {
	o := parseFlags()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	ctx := ctrl.SetupSignalHandler()
	started := make(chan struct{})
	if os.Getenv("GOGC") == "" {
		go gctune.Run(ctx, started)
	}
	err := run(ctx, o, func() { close(started) })
	var again errStartAgain
	if errors.As(err, &again) {
		startAgainInPlace(again)
	}
	if err != nil {
		ctrl.Log.WithName("setup").Error(err, "cmsync stopped")
		os.Exit(1)
	}
}

// errStartAgain stops cmsync to start it again: to serve more of the namespaces it
// lists, or to run the controller of a CRD installed since it started.
type errStartAgain struct{ reason string }

func (e errStartAgain) Error() string { return "starting again: " + e.reason }

// startAgainInPlace starts cmsync again in this process (same pid, flags and
// environment), as a new start of the binary: its caches and controllers are built
// anew over what it can now serve. The manager has stopped and released the lease.
func startAgainInPlace(why errStartAgain) {
	ctrl.Log.WithName("setup").Info("starting again", "reason", why.reason)
	exe, err := os.Executable()
	if err == nil {
		err = syscall.Exec(exe, os.Args, os.Environ())
	}
	ctrl.Log.WithName("setup").Error(err, "cmsync could not start again; stopping so that it is restarted")
	os.Exit(1)
}

// run runs cmsync until ctx ends; cachesSynced is called once its caches have listed.
func run(ctx context.Context, o options, cachesSynced func()) error {
	replicate, err := o.replicatorOptions()
	if err != nil {
		return err
	}
	replicate.CachesSynced = cachesSynced
	cfg, err := o.restConfig(ctx)
	if err != nil {
		return err
	}
	// The scope's checks are not writes of the leader's: their client is made before
	// the lease's fence wraps cfg, and asks in every process.
	scopeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var waiting []string
	if listed := replicate.Policy.Scope; len(listed) > 0 {
		if replicate.Policy.Scope, waiting, err = servedScope(ctx, scopeClient, listed, replicate.Secrets); err != nil {
			return err
		}
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	replicate.StartAgain = func(reason string) { stop(errStartAgain{reason}) }
	mgr, err := newManager(o, cfg, replicator.ManagerCacheOptions(replicate))
	if err != nil {
		return err
	}
	if err := replicator.Setup(ctx, mgr, replicate); err != nil {
		return err
	}
	if err := addHealthChecks(mgr); err != nil {
		return err
	}
	rescope, err := replicator.NewRescope(ctx, mgr, scopeClient, waiting, replicate.Secrets, replicate.StartAgain)
	if err != nil {
		return err
	}
	if err := mgr.Add(rescope); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting cmsync", "namespaces", replicate.Policy.Scope, "excludeNamespaces", replicate.Policy.ExcludeNamespaces,
		"sourceNamespaces", replicate.Policy.SourceNamespaces, "reservedNames", replicate.Policy.ReservedNames,
		"tenantLabel", replicate.Policy.TenantLabel, "secrets", o.secrets)
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	if cause := context.Cause(ctx); errors.As(cause, new(errStartAgain)) {
		return cause
	}
	return nil
}

// servedScope is the listed namespaces cmsync can serve now; it logs each of the others
// with its reason, and returns them to be checked again. While it can serve none, it
// waits: with an empty scope cmsync would serve every namespace.
func servedScope(ctx context.Context, cs kubernetes.Interface, listed []string, secrets bool) (served, waiting []string, err error) {
	logger := ctrl.Log.WithName("scope")
	for {
		namespaces, err := replicator.ListNamespaces(ctx, cs)
		if err != nil {
			return nil, nil, err
		}
		served, reasons, err := replicator.Reachable(ctx, cs, namespaces, listed, secrets)
		if err != nil {
			return nil, nil, err
		}
		for _, ns := range slices.Sorted(maps.Keys(reasons)) {
			logger.Info("a namespace of --namespaces is not served yet; cmsync serves it once it can", "namespace", ns, "reason", reasons[ns])
		}
		if len(served) > 0 {
			return served, slices.Sorted(maps.Keys(reasons)), nil
		}
		logger.Info("cmsync can serve none of its --namespaces yet; waiting", "namespaces", listed)
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(10 * time.Second):
		}
	}
}

// replicatorOptions checks the flags the controllers take.
func (o options) replicatorOptions() (replicator.Options, error) {
	policy, err := o.policy().Policy()
	if err != nil {
		return replicator.Options{}, err
	}
	if o.secrets != "enabled" && o.secrets != "disabled" {
		return replicator.Options{}, fmt.Errorf("--secrets=%q: must be enabled or disabled", o.secrets)
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
	}, nil
}

// clientRateLimit is client-go's QPS and burst for --kube-api-qps and --kube-api-burst.
// Without a positive QPS there is no client-side limit (client-go's negative QPS): the
// API server's flow control shares its capacity between clients and tells cmsync to
// wait (429 with Retry-After, which client-go honours), and cmsync's workers bound its
// requests in flight. client-go's own 0 would mean 5 requests per second.
func clientRateLimit(qps float64, burst int) (float32, int) {
	if qps <= 0 {
		return -1, 0
	}
	return float32(qps), burst
}

// restConfig is cmsync's connection to the API server, once the API server answers.
func (o options) restConfig(ctx context.Context) (*rest.Config, error) {
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = clientRateLimit(o.qps, o.burst)
	cfg.UserAgent = "cmsync"
	// Ask for uncompressed responses, as kube-controller-manager and kube-scheduler do:
	// a controller next to the API server gains nothing from gzip, and the API server
	// would otherwise compress every event of cmsync's watches (make bench).
	cfg.DisableCompression = true
	if err := waitForAPIServer(ctx, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

func newManager(o options, cfg *rest.Config, cacheOptions cache.Options) (ctrl.Manager, error) {
	lock, err := o.fencedLeaseLock(cfg)
	if err != nil {
		return nil, err
	}
	var resourceLock resourcelock.Interface // stays nil, not a nil *fencedLock, without --leader-elect
	if lock != nil {
		resourceLock = lock
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              newScheme(),
		Cache:                               cacheOptions,
		Metrics:                             o.metricsServerOptions(),
		HealthProbeBindAddress:              o.probeAddr,
		LeaderElection:                      o.leaderElect,
		LeaderElectionID:                    leaseName,
		LeaderElectionResourceLockInterface: resourceLock,
		LeaseDuration:                       &o.leaseDuration,
		RenewDeadline:                       &o.renewDeadline,
		RetryPeriod:                         &o.retryPeriod,
		// Step down at once on SIGTERM so a new Pod takes over without waiting out the lease.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if lock != nil {
		lock.recordEventsWith(mgr)
	}
	return mgr, nil
}

// leaseName is the leader election Lease's name.
const leaseName = "cmsync.io"

// fencedLock is the leader election lock, and what its events are recorded with.
type fencedLock struct {
	resourcelock.Interface
	lease *resourcelock.LeaseLock
}

func (l *fencedLock) recordEventsWith(mgr ctrl.Manager) {
	l.lease.LockConfig.EventRecorder = mgr.GetEventRecorderFor(l.lease.Identity()) //nolint:staticcheck // the elector takes the old recorder
}

// fencedLeaseLock builds, with --leader-elect, the Lease lock behind a leasefence.Fence,
// and routes every write of cfg through that Fence: a leader frozen past its renew
// deadline (a GC pause, a stopped VM, SIGSTOP) sends nothing when it wakes, although
// another process may have taken over meanwhile. Without --leader-elect, nil.
func (o options) fencedLeaseLock(cfg *rest.Config) (*fencedLock, error) {
	if !o.leaderElect {
		return nil, nil
	}
	if o.renewDeadline >= o.leaseDuration || o.retryPeriod <= 0 || o.retryPeriod >= o.renewDeadline {
		return nil, fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold",
			o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	lease, err := leasefence.LeaseLock(cfg, o.leaderElectionNamespace, leaseName, o.renewDeadline)
	if err != nil {
		return nil, err
	}
	fence := leasefence.New(o.leaseDuration, o.renewDeadline)
	cfg.Wrap(fence.Transport)
	return &fencedLock{Interface: fence.Lock(lease), lease: lease}, nil
}

// metricsServerOptions serves metrics as kubebuilder scaffolds a secure endpoint: with
// --metrics-secure, over HTTPS (HTTP/1.1 only, so the endpoint is not exposed to
// HTTP/2's stream-reset and rapid-reset attacks) and only to clients the API server
// authenticates and authorizes, through controller-runtime's filter.
func (o options) metricsServerOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, ExtraHandlers: o.profilingHandlers()}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.Provider
		opts.CertDir = o.metricsCertDir
		opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return opts
}

func (o options) profilingHandlers() map[string]http.Handler {
	if !o.profiling {
		return nil
	}
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/heap":    pprof.Handler("heap"),
		"/debug/pprof/allocs":  pprof.Handler("allocs"),
	}
}

// apiServerWait bounds how long cmsync waits at start for an API server that is
// restarting or still starting, before giving up and exiting.
const apiServerWait = 2 * time.Minute

// waitForAPIServer waits until the API server serves discovery: building the manager
// needs it, and an API server that is restarting answers with errors for a moment.
func waitForAPIServer(ctx context.Context, cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, time.Second, apiServerWait, true, func(context.Context) (bool, error) {
		_, lastErr = dc.ServerGroups()
		if lastErr != nil {
			ctrl.Log.WithName("setup").Info("waiting for the API server", "error", lastErr.Error())
		}
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the API server did not serve discovery within %s: %w", apiServerWait, errors.Join(lastErr, err))
	}
	return nil
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	// Only a programming error can make registering compiled-in types fail.
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return scheme
}

// controllerOptions sets the reconcile parallelism and the retry rate limiter: a failed
// pass is retried after 250ms, doubling up to 5 minutes, so a namespace that keeps
// refusing writes costs a handful of requests an hour, not a hot loop; the overall
// bucket (20/s, burst 200) caps retries across all sources after a mass failure such as
// an API server restart.
func (o options) controllerOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: o.maxConcurrentReconciles,
		RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](250*time.Millisecond, 5*time.Minute),
			&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(20), 200)},
		),
	}
}

// cachesSynced makes /readyz wait until the informers of sources, namespaces and
// ConfigMapSyncs have their first list, so "ready" means cmsync sees the cluster.
func cachesSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced yet")
		}
		return nil
	}
}

func addHealthChecks(mgr ctrl.Manager) error {
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding /healthz: %w", err)
	}
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr)); err != nil {
		return fmt.Errorf("adding /readyz: %w", err)
	}
	return nil
}
