package replicator

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// unservedObjectSyncs is the ObjectSync controller's pass while the API server serves
// none of the enabled kinds in namespaces (each is cluster-scoped, or its CRD is not
// installed yet): every ObjectSync then names a kind cmsync cannot copy, and is
// Invalid, saying what to do (desired.CheckObjectKind), as it is beside a kind served
// (objectForm.serves). There is no replica store, so no replica of any kind to keep or
// delete: a pass writes only the ObjectSync's finalizer and status, and lets one being
// deleted go.
type unservedObjectSyncs struct {
	kinds desired.ObjectKinds
	// status writes the ObjectSync's finalizer and status, and announces the status: it
	// is a form with no engine, of which only ensureFinalizer, writeStatus and retired
	// are used.
	status  *syncForm[object]
	metrics *sourceMetrics
}

// newUnservedObjectSyncs makes the pass of the ObjectSync controller for kinds, none of
// which the API server serves in namespaces.
func newUnservedObjectSyncs(mgr ctrl.Manager, o Options, metrics *sourceMetrics, kinds desired.ObjectKinds) *unservedObjectSyncs {
	status := &syncForm[object]{client: mgr.GetClient(), ownStatus: newOwnStatus(desired.SameSyncOutcome),
		door: door[object]{policy: o.Policy, recorder: mgr.GetEventRecorder(v1alpha1.FieldManager), metrics: metrics}}
	return &unservedObjectSyncs{kinds: kinds, status: status, metrics: metrics}
}

// Reconcile reports sync Invalid, or lets it go once it is being deleted.
func (u *unservedObjectSyncs) Reconcile(ctx context.Context, sync *v1alpha1.ObjectSync) (ctrl.Result, error) {
	defer func(start time.Time) { u.metrics.ObserveSync(time.Since(start)) }(time.Now())
	owner := desired.SyncOwner(sync)
	if sync.GetDeletionTimestamp() != nil {
		u.metrics.ForgetSource(owner)
		u.status.forget(owner)
		if !controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, u.status.retired(ctx, subject[object]{object: sync})
	}
	spec := sync.SyncSpec()
	invalid := u.kinds.CheckObjectKind(spec.SourceAPIVersion, spec.SourceKind)
	if invalid == nil {
		// Not reached: a kind CheckObjectKind accepts is served in namespaces, and has a form.
		return ctrl.Result{}, fmt.Errorf("the ObjectSync names %s, which no form copies", kindOf(spec))
	}
	if err := u.status.ensureFinalizer(ctx, sync); err != nil {
		return ctrl.Result{}, err
	}
	problem := desired.InvalidInput(invalid)
	u.metrics.RecordProblem(owner, problem.Reason)
	before := sync.SyncStatus().DeepCopy()
	desired.SetSyncProblem(sync.SyncStatus(), sync.GetGeneration(), owner.Source.String(), problem.Reason, problem, 0, 0)
	return afterStatusWrite(ctx, u.status.writeStatus(ctx, sync, before, problem.Reason, false))
}
