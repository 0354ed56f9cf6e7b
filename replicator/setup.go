package replicator

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
	"github.com/cmsync/cmsync/replicator/replicacache"
)

// Options configure the controllers.
type Options struct {
	Policy desired.Policy
	// Writers bounds the parallel writes of one pass over a source.
	Writers int
	// ConflictRecheck is how soon an owner with a conflict looks again.
	ConflictRecheck time.Duration
	// Controller sets parallelism and the retry rate limiter.
	Controller controller.Options
	// Registerer receives cmsync's metrics.
	Registerer prometheus.Registerer
	// ConfigMapSync runs the ConfigMapSync controller: "auto" when its CRD is
	// installed, "enabled" (an error without the CRD) or "disabled".
	ConfigMapSync string
}

// Values of Options.ConfigMapSync.
const (
	ConfigMapSyncAuto     = "auto"
	ConfigMapSyncEnabled  = "enabled"
	ConfigMapSyncDisabled = "disabled"
)

// Setup adds the replica cache, the source controller and, as Options.ConfigMapSync
// says, the ConfigMapSync controller to mgr, whose cache must be built with
// ManagerCacheOptions and whose scheme must include v1alpha1.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	runSyncs, err := shouldRunConfigMapSync(mgr, o.ConfigMapSync)
	if err != nil {
		return err
	}
	kind := desired.ConfigMapKind{}
	replicas, err := replicacache.New(ctx, replicacache.Config{
		REST: mgr.GetConfig(), HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
	}, kind)
	if err != nil {
		return err
	}
	if err := mgr.Add(replicas); err != nil {
		return fmt.Errorf("adding the replica cache: %w", err)
	}
	shared := door[*corev1.ConfigMap]{
		engine:          NewEngine(kind, mgr.GetClient(), replicas, mgr.GetAPIReader(), o.Writers),
		policy:          o.Policy,
		recorder:        mgr.GetEventRecorder(v1alpha1.FieldManager),
		metrics:         newMetrics(o.Registerer),
		conflictRecheck: o.ConflictRecheck,
	}
	sources := &sourceReconciler[*corev1.ConfigMap]{kind: kind, name: "source", client: mgr.GetClient(), apiReader: mgr.GetAPIReader(), door: shared}
	if err := sources.SetupWithManager(mgr, replicas, o.Controller); err != nil {
		return fmt.Errorf("setting up the source controller: %w", err)
	}
	if !runSyncs {
		log.FromContext(ctx).Info("the ConfigMapSync controller is off", "configmapsync", o.ConfigMapSync)
		return nil
	}
	clientset, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return fmt.Errorf("creating a clientset: %w", err)
	}
	syncs := &syncReconciler{client: mgr.GetClient(), sources: newSourceWatcher(ctx, clientset), door: shared}
	if err := syncs.SetupWithManager(mgr, replicas, o.Controller); err != nil {
		return fmt.Errorf("setting up the ConfigMapSync controller: %w", err)
	}
	return nil
}

// shouldRunConfigMapSync decides from the mode and whether the API server serves the
// ConfigMapSync CRD.
func shouldRunConfigMapSync(mgr ctrl.Manager, mode string) (bool, error) {
	switch mode {
	case ConfigMapSyncDisabled:
		return false, nil
	case ConfigMapSyncAuto, ConfigMapSyncEnabled:
	default:
		return false, fmt.Errorf("--configmapsync=%q: must be auto, enabled or disabled", mode)
	}
	gk := schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: v1alpha1.ConfigMapSyncKind}
	_, err := mgr.GetRESTMapper().RESTMapping(gk, v1alpha1.GroupVersion.Version)
	switch {
	case err == nil:
		return true, nil
	case meta.IsNoMatchError(err) && mode == ConfigMapSyncAuto:
		return false, nil
	case meta.IsNoMatchError(err):
		return false, fmt.Errorf(
			"--configmapsync=enabled, but the API server does not serve %s.%s/%s: install the CRD from deploy/crds",
			v1alpha1.ConfigMapSyncKind,
			gk.Group,
			v1alpha1.GroupVersion.Version,
		)
	default:
		return false, fmt.Errorf("looking up the ConfigMapSync CRD: %w", err)
	}
}
