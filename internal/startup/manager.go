package startup

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/user"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/leasefence"
	"github.com/cmsync/cmsync/internal/metricsauth"
)

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
func (o Options) restConfig(ctx context.Context) (*rest.Config, error) {
	cfg, err := loadConfig(kubeconfigFlag(), rest.InClusterConfig, defaultLoadingRules())
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

// kubeconfigFlag is --kubeconfig: controller-runtime's config package defines it on
// the process's flag set.
func kubeconfigFlag() string {
	if f := flag.Lookup(config.KubeconfigFlagName); f != nil {
		return f.Value.String()
	}
	return ""
}

// loadConfig finds the cluster to manage in SPEC §4's order: the kubeconfig file
// explicit (--kubeconfig) names; else the in-cluster config (the Pod's service account,
// inCluster); else the kubeconfig files rules load: $KUBECONFIG, else ~/.kube/config.
// controller-runtime's GetConfig puts a set $KUBECONFIG before the in-cluster config,
// so a Pod whose environment carried KUBECONFIG (an image's, a debugging leftover)
// would manage another cluster than its own, under another identity.
func loadConfig(explicit string, inCluster func() (*rest.Config, error), rules *clientcmd.ClientConfigLoadingRules) (*rest.Config, error) {
	var notInCluster error
	if explicit != "" {
		rules = &clientcmd.ClientConfigLoadingRules{ExplicitPath: explicit}
	} else if cfg, err := inCluster(); err == nil {
		return cfg, nil
	} else {
		notInCluster = err
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	switch {
	case err == nil:
		return cfg, nil
	case notInCluster != nil:
		return nil, fmt.Errorf("no in-cluster config (%w), and no usable kubeconfig ($KUBECONFIG, else ~/.kube/config): %w", notInCluster, err)
	default:
		return nil, fmt.Errorf("--kubeconfig %s: %w", explicit, err)
	}
}

// defaultLoadingRules are clientcmd's rules ($KUBECONFIG, else ~/.kube/config), with
// the home directory of the process's user when $HOME is unset, as controller-runtime
// does.
func defaultLoadingRules() *clientcmd.ClientConfigLoadingRules {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if _, set := os.LookupEnv("HOME"); !set {
		if u, err := user.Current(); err == nil {
			rules.Precedence = append(rules.Precedence, filepath.Join(u.HomeDir, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName))
		}
	}
	return rules
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

func (o Options) newManager(cfg *rest.Config, cacheOptions cache.Options) (ctrl.Manager, error) {
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
func (o Options) fencedLeaseLock(cfg *rest.Config) (*fencedLock, error) {
	if !o.leaderElect {
		return nil, nil
	}
	if o.renewDeadline >= o.leaseDuration || o.retryPeriod <= 0 || o.retryPeriod >= o.renewDeadline {
		return nil, fmt.Errorf("--leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s) must hold",
			o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	lease, err := leasefence.LeaseLock(cfg, o.controllerNamespace(), leaseName, o.renewDeadline)
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
func (o Options) metricsServerOptions() metricsserver.Options {
	opts := metricsserver.Options{BindAddress: o.metricsAddr, ExtraHandlers: o.profilingHandlers()}
	if o.metricsSecure {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.Provider
		opts.CertDir = o.metricsCertDir
		opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return opts
}

func (o Options) profilingHandlers() map[string]http.Handler {
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
