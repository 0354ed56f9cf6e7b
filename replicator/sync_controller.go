package replicator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/predicates"
	"github.com/cmsync/cmsync/replicator/desired"
	"github.com/cmsync/cmsync/replicator/replicacache"
)

// syncReconciler is the ConfigMapSync front door: it resolves a ConfigMapSync's targets
// and hands them to the same pass as the annotation form. Its replicas carry an owner
// reference to the ConfigMapSync; a finalizer deletes them when the ConfigMapSync is
// deleted, also where no garbage collector runs.
type syncReconciler struct {
	// client reads ConfigMapSyncs and namespaces from the manager's cache, and writes.
	client client.Client
	// sources watches the ConfigMaps that ConfigMapSyncs name.
	sources *sourceWatcher
	// ownStatus is what cmsync knows of its own status writes of each ConfigMapSync
	// that the cache may not show yet.
	ownStatus *ownStatus[v1alpha1.ConfigMapSyncStatus]
	door[*corev1.ConfigMap]
}

// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs/status,verbs=patch

// Reconcile brings the replicas of one ConfigMapSync in line with its spec and source.
func (r *syncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer func(start time.Time) { r.metrics.ObserveSync(time.Since(start)) }(time.Now())

	sync := &v1alpha1.ConfigMapSync{}
	if err := r.client.Get(ctx, req.NamespacedName, sync); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.retainSourceWatches(ctx)
	if !sync.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, sync)
	}
	if err := r.ensureFinalizer(ctx, sync); err != nil {
		return ctrl.Result{}, err
	}

	owner := desired.SyncOwner(sync)
	before := sync.Status.DeepCopy()
	plan, problem, err := r.planFor(ctx, sync, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != nil {
		err := r.reportProblem(ctx, sync, before, owner, plan, problem)
		if err == nil && problem.retried() {
			err = problem // retried with backoff, and counted as a reconcile error
		}
		// Otherwise no retry (but for a status write that met a newer object).
		return afterStatusWrite(ctx, err)
	}
	pass, err := r.engine.run(ctx, owner, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A pass that changed nothing still gives an earlier pass's change whose status
	// write did not land as the last sync.
	changedAt, changed := r.ownStatus.lastChange(req.NamespacedName, pass.Changed(), time.Now())
	desired.SetSyncStatus(&sync.Status, sync.Generation, owner.Source.String(), pass, changed, metav1.NewTime(changedAt))
	err = r.writeStatus(ctx, sync, before, eventReasonOf(pass), changed)
	r.ownStatus.settle(req.NamespacedName, changed, changedAt, err)
	return r.finish(ctx, owner, pass, err)
}

// eventReasonOf is the reason of the Event that reports a pass.
func eventReasonOf(pass desired.Summary) string {
	switch {
	case pass.Conflicts > 0:
		return v1alpha1.ReasonConflict
	case pass.Err != nil:
		return v1alpha1.ReasonFailed
	default:
		return v1alpha1.ReasonSynced
	}
}

// syncProblem is why a ConfigMapSync cannot be acted on now; nothing is changed.
type syncProblem struct {
	reason string
	error
}

// retried tells whether the pass is tried again with backoff: a Failed read of the
// source (the API server refused it or did not answer) ends with no event to announce
// it. Invalid and SourceNotFound end with an edit of the spec or the source, which
// wakes the ConfigMapSync.
func (p *syncProblem) retried() bool { return p.reason == v1alpha1.ReasonFailed }

// planFor resolves the ConfigMapSync (desired.Resolve), then reads its source and
// completes the plan with it. A problem means: report and change nothing; an error
// means: retry. With a problem, the plan has its targets when they could be resolved,
// and no template.
func (r *syncReconciler) planFor(ctx context.Context, sync *v1alpha1.ConfigMapSync, owner desired.Owner) (Plan[*corev1.ConfigMap], *syncProblem, error) {
	named := desired.Source[*corev1.ConfigMap]{Key: owner.Source, Sync: sync}
	intent := desired.Resolve(r.engine.kind, named, r.namespaces.List(), r.policy)
	plan := Plan[*corev1.ConfigMap]{Targets: intent.Targets.Namespaces}
	if intent.Invalid != nil {
		return plan, &syncProblem{v1alpha1.ReasonInvalid, intent.Invalid}, nil
	}
	src, found, err := r.sources.Get(ctx, owner.Source)
	if err != nil {
		if ctx.Err() != nil {
			return plan, nil, err // called off: the process is stopping
		}
		return plan, &syncProblem{
			v1alpha1.ReasonFailed,
			fmt.Errorf("%w; existing replicas are kept, retrying", err),
		}, nil
	}
	if !found {
		return plan, &syncProblem{
			v1alpha1.ReasonSourceNotFound,
			fmt.Errorf("source ConfigMap %s not found; existing replicas are kept until it returns or this ConfigMapSync is deleted", owner.Source),
		}, nil
	}
	named.Meta, named.Object, named.Whole = src, src, true
	if intent = intent.WithSource(r.engine.kind, named, r.policy); intent.Invalid != nil {
		return plan, &syncProblem{v1alpha1.ReasonInvalid, intent.Invalid}, nil
	}
	plan.Template = intent.Template
	return plan, nil, nil
}

// reportProblem writes the status of a ConfigMapSync cmsync cannot act on: the
// replicas are counted as they are, since nothing was changed.
func (r *syncReconciler) reportProblem(
	ctx context.Context,
	sync *v1alpha1.ConfigMapSync,
	before *v1alpha1.ConfigMapSyncStatus,
	owner desired.Owner,
	plan Plan[*corev1.ConfigMap],
	problem *syncProblem,
) error {
	synced, err := r.engine.countIn(owner, desired.SyncReplicaName(sync.Spec), plan.Targets)
	if err != nil {
		return err
	}
	desired.SetSyncProblem(&sync.Status, sync.Generation, owner.Source.String(), problem.reason, problem, len(plan.Targets), synced)
	r.metrics.RecordProblem(owner, problem.reason)
	return r.writeStatus(ctx, sync, before, problem.reason, false)
}

// finalize deletes every replica of a ConfigMapSync being deleted, then lets it go.
func (r *syncReconciler) finalize(ctx context.Context, sync *v1alpha1.ConfigMapSync) error {
	owner := desired.SyncOwner(sync)
	r.metrics.ForgetSource(owner)
	r.ownStatus.forget(client.ObjectKeyFromObject(sync))
	if !controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
		return nil
	}
	deleted, err := r.engine.deleteAll(ctx, owner)
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("deleted the replicas of a deleted ConfigMapSync", "deleted", deleted)
	before := sync.DeepCopy()
	controllerutil.RemoveFinalizer(sync, v1alpha1.CleanupFinalizer)
	return client.IgnoreNotFound(r.client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

func (r *syncReconciler) ensureFinalizer(ctx context.Context, sync *v1alpha1.ConfigMapSync) error {
	if controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
		return nil
	}
	before := sync.DeepCopy()
	controllerutil.AddFinalizer(sync, v1alpha1.CleanupFinalizer)
	if err := r.client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// writeStatus patches the status when it changed, then records an Event and a log line
// when the Ready condition says something new (writeThenAnnounce). A pass that changed
// no replica (changed) and read the very copy cmsync's own last status write replaced
// writes nothing when that write said the same (ownStatus).
func (r *syncReconciler) writeStatus(
	ctx context.Context, sync *v1alpha1.ConfigMapSync, before *v1alpha1.ConfigMapSyncStatus, eventReason string, changed bool,
) error {
	if equality.Semantic.DeepEqual(*before, sync.Status) {
		return nil
	}
	key, replaced, status := client.ObjectKeyFromObject(sync), sync.ResourceVersion, *sync.Status.DeepCopy()
	if !changed && r.ownStatus.alreadySays(key, replaced, status) {
		return nil
	}
	ready, old := meta.FindStatusCondition(
		sync.Status.Conditions,
		v1alpha1.ConditionReady,
	), meta.FindStatusCondition(
		before.Conditions,
		v1alpha1.ConditionReady,
	)
	news := ready != nil && (old == nil || old.Reason != ready.Reason || old.Message != ready.Message)
	announce := func() {
		eventType := corev1.EventTypeWarning
		if ready.Status == metav1.ConditionTrue {
			eventType = corev1.EventTypeNormal
		} else {
			log.FromContext(ctx).Info("ConfigMapSync not ready", "reason", ready.Reason, "message", ready.Message)
		}
		r.recorder.Eventf(sync, nil, eventType, eventReason, "Sync", "%s (%s)", ready.Message, sync.Status.Synced)
	}
	// The patch holds the cached object's resourceVersion: a merge patch computed from a
	// stale copy leaves out fields the copy already had, and could leave the server
	// with a status no pass computed (a count of one pass beside the generation of
	// the next). A conflict retries the pass (afterStatusWrite).
	patched := sync.DeepCopy()
	patched.Status = *before
	write := func() error {
		err := r.client.Status().Patch(ctx, sync, client.MergeFromWithOptions(patched, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			r.ownStatus.wrote(key, replaced, status) // sync now holds the answer: the copy it replaced is gone
		}
		return client.IgnoreNotFound(err)
	}
	if err := writeThenAnnounce(write, announce, news, false); err != nil {
		return fmt.Errorf("writing ConfigMapSync status: %w", err)
	}
	return nil
}

// retainSourceWatches keeps the source watches of every ConfigMapSync and stops the
// others.
func (r *syncReconciler) retainSourceWatches(ctx context.Context) {
	var syncs v1alpha1.ConfigMapSyncList
	if err := r.client.List(ctx, &syncs); err != nil {
		return // keep every watch; the next pass retries
	}
	keep := sets.New[types.NamespacedName]()
	for i := range syncs.Items {
		if syncs.Items[i].DeletionTimestamp.IsZero() {
			keep.Insert(desired.SyncOwner(&syncs.Items[i]).Source)
		}
	}
	r.sources.Retain(keep)
}

// findSyncsForSource maps a source ConfigMap to the ConfigMapSyncs naming it.
func (r *syncReconciler) findSyncsForSource(ctx context.Context, cm client.Object) []reconcile.Request {
	return r.findSyncs(ctx, func(s *v1alpha1.ConfigMapSync) bool {
		return s.Spec.SourceNamespace == cm.GetNamespace() && s.Spec.ConfigMapName == cm.GetName()
	})
}

// findSyncsForNamespace maps a namespace (old and new, on updates) to the
// ConfigMapSyncs whose targets match it.
func (r *syncReconciler) findSyncsForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := desired.NamespaceOf(obj)
	return r.findSyncs(ctx, func(s *v1alpha1.ConfigMapSync) bool {
		spec, err := desired.ParseSyncTargets(s.Spec)
		return err == nil && spec.Matches(ns)
	})
}

func (r *syncReconciler) findSyncs(ctx context.Context, match func(*v1alpha1.ConfigMapSync) bool) []reconcile.Request {
	var syncs v1alpha1.ConfigMapSyncList
	if err := r.client.List(ctx, &syncs); err != nil {
		log.FromContext(ctx).Error(err, "listing ConfigMapSyncs for an event")
		return nil
	}
	var requests []reconcile.Request
	for i := range syncs.Items {
		if match(&syncs.Items[i]) {
			requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Name: syncs.Items[i].Name}})
		}
	}
	return requests
}

// SetupWithManager watches ConfigMapSyncs, their replicas, the namespaces they may
// target and, through the sourceWatcher, the ConfigMaps they name.
func (r *syncReconciler) SetupWithManager(mgr ctrl.Manager, replicas *replicacache.Cache[*corev1.ConfigMap], options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("configmapsync").
		For(&v1alpha1.ConfigMapSync{}, builder.WithPredicates(predicates.SyncChanged())).
		WatchesRawSource(replicas.Watch(handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](
			mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.ConfigMapSync{}, handler.OnlyControllerOwner()))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.findSyncsForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WatchesRawSource(source.Channel(r.sources.Events(), handler.EnqueueRequestsFromMapFunc(r.findSyncsForSource))).
		WithOptions(options).
		Complete(r)
}
