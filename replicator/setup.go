package replicator

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Options configure the annotation-form controller.
type Options struct {
	Policy Policy
	// Writers bounds the parallel writes of one pass over a source.
	Writers int
	// ConflictRecheck: see SourceReconciler.ConflictRecheck.
	ConflictRecheck time.Duration
	// Controller sets parallelism and the retry rate limiter.
	Controller controller.Options
	// Registerer receives cmsync's metrics.
	Registerer prometheus.Registerer
}

// Setup adds the replica cache and the source controller to mgr, whose cache must be
// built with ManagerCacheOptions.
func Setup(ctx context.Context, mgr ctrl.Manager, o Options) error {
	replicas, err := NewReplicaCache(ctx, mgr.GetConfig(), mgr.GetScheme(), mgr.GetRESTMapper(), mgr.GetHTTPClient())
	if err != nil {
		return err
	}
	if err := mgr.Add(replicas); err != nil {
		return fmt.Errorf("adding the replica cache: %w", err)
	}
	r := &SourceReconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Engine: &Engine{
			Client:    mgr.GetClient(),
			Replicas:  replicas,
			APIReader: mgr.GetAPIReader(),
			Workers:   o.Writers,
		},
		Policy:          o.Policy,
		Recorder:        mgr.GetEventRecorder(v1alpha1.FieldManager),
		Metrics:         NewMetrics(o.Registerer),
		ConflictRecheck: o.ConflictRecheck,
	}
	if err := r.SetupWithManager(mgr, replicas, o.Controller); err != nil {
		return fmt.Errorf("setting up the source controller: %w", err)
	}
	return nil
}
