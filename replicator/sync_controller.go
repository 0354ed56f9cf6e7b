package replicator

import (
	"context"
	"fmt"
	"strings"
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
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/predicates"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// syncReconciler is the explicit front door for sources of kind T: ConfigMapSync for
// ConfigMaps, SecretSync for Secrets (kind.NewSync). It resolves the explicit object's
// targets and hands them to the same pass as the annotation form. Its replicas carry an
// owner reference to the explicit object; a finalizer deletes them when that is
// deleted, also where no garbage collector runs.
type syncReconciler[T desired.Object] struct {
	// client reads the explicit objects and namespaces from the manager's cache, and
	// writes.
	client client.Client
	// sources watches the objects that the explicit objects name.
	sources *sourceWatcher[T]
	// ownStatus is what cmsync knows of its own status writes of each explicit object
	// that the cache may not show yet.
	ownStatus *ownStatus[v1alpha1.SyncStatus]
	door[T]
}

// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs;secretsyncs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs/status;secretsyncs/status,verbs=patch

// Reconcile brings the replicas of one explicit object in line with its spec and source.
func (r *syncReconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer func(start time.Time) { r.metrics.ObserveSync(time.Since(start)) }(time.Now())

	sync := r.engine.kind.NewSync()
	if err := r.client.Get(ctx, req.NamespacedName, sync); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.retainSourceWatches(ctx)
	if sync.GetDeletionTimestamp() != nil {
		return ctrl.Result{}, r.finalize(ctx, sync)
	}
	if err := r.ensureFinalizer(ctx, sync); err != nil {
		return ctrl.Result{}, err
	}

	owner := desired.SyncOwner(sync)
	before := sync.SyncStatus().DeepCopy()
	plan, problem, err := r.planFor(ctx, sync, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != nil {
		// An explicit kind is not bound by tenants: its source's namespace is its origin.
		admitting := desired.AdmittingNamespaces(desired.Unbound(owner.Source.Namespace), r.namespaces.List(), r.policy)
		if _, err := r.engine.withdraw(ctx, owner, admitting); err != nil {
			return ctrl.Result{}, err
		}
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
	desired.SetSyncStatus(sync.SyncStatus(), sync.GetGeneration(), owner.Source.String(), pass, changed, metav1.NewTime(changedAt))
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

// syncProblem is why an explicit object cannot be acted on now; nothing is created,
// and its replicas are kept where the namespaces still admit them.
type syncProblem struct {
	reason string
	error
}

// retried tells whether the pass is tried again with backoff: a Failed read of the
// source (the API server refused it or did not answer) ends with no event to announce
// it. Invalid and SourceNotFound end with an edit of the spec or the source, which
// wakes the explicit object.
func (p *syncProblem) retried() bool { return p.reason == v1alpha1.ReasonFailed }

// planFor resolves the explicit object (desired.Resolve), then reads its source and
// completes the plan with it. A problem means: report and change nothing; an error
// means: retry. With a problem, the plan has its targets when they could be resolved,
// and no template.
func (r *syncReconciler[T]) planFor(ctx context.Context, sync v1alpha1.Sync, owner desired.Owner) (Plan[T], *syncProblem, error) {
	named := desired.Source[T]{Key: owner.Source, Sync: sync}
	intent := desired.Resolve(r.engine.kind, named, r.namespaces.List(), r.policy)
	plan := Plan[T]{Targets: intent.Targets.Namespaces}
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
			fmt.Errorf("source %s %s not found; existing replicas are kept until it returns or this %s is deleted",
				owner.Kind, owner.Source, owner.Sync.Kind),
		}, nil
	}
	named.Meta, named.Object, named.Whole = src, src, true
	if intent = intent.WithSource(r.engine.kind, named, r.policy); intent.Invalid != nil {
		return plan, &syncProblem{v1alpha1.ReasonInvalid, intent.Invalid}, nil
	}
	plan.Template = intent.Template
	return plan, nil, nil
}

// reportProblem writes the status of an explicit object cmsync cannot act on: the
// replicas are counted as they are, since nothing was changed.
func (r *syncReconciler[T]) reportProblem(
	ctx context.Context,
	sync v1alpha1.Sync,
	before *v1alpha1.SyncStatus,
	owner desired.Owner,
	plan Plan[T],
	problem *syncProblem,
) error {
	synced, err := r.engine.countIn(owner, desired.SyncReplicaName(sync.SyncSpec()), plan.Targets)
	if err != nil {
		return err
	}
	desired.SetSyncProblem(sync.SyncStatus(), sync.GetGeneration(), owner.Source.String(), problem.reason, problem, len(plan.Targets), synced)
	r.metrics.RecordProblem(owner, problem.reason)
	return r.writeStatus(ctx, sync, before, problem.reason, false)
}

// finalize deletes every replica of an explicit object being deleted, then lets it go.
func (r *syncReconciler[T]) finalize(ctx context.Context, sync v1alpha1.Sync) error {
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
	log.FromContext(ctx).Info("deleted the replicas of a deleted "+owner.Sync.Kind, "deleted", deleted)
	before := sync.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(sync, v1alpha1.CleanupFinalizer)
	return client.IgnoreNotFound(r.client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

func (r *syncReconciler[T]) ensureFinalizer(ctx context.Context, sync v1alpha1.Sync) error {
	if controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
		return nil
	}
	before := sync.DeepCopyObject().(client.Object)
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
func (r *syncReconciler[T]) writeStatus(
	ctx context.Context, sync v1alpha1.Sync, before *v1alpha1.SyncStatus, eventReason string, changed bool,
) error {
	if equality.Semantic.DeepEqual(*before, *sync.SyncStatus()) {
		return nil
	}
	key, replaced, status := client.ObjectKeyFromObject(sync), sync.GetResourceVersion(), *sync.SyncStatus().DeepCopy()
	if !changed && r.ownStatus.alreadySays(key, replaced, status) {
		return nil
	}
	ready, old := meta.FindStatusCondition(
		sync.SyncStatus().Conditions,
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
			log.FromContext(ctx).Info(sync.SyncSpec().Kind+" not ready", "reason", ready.Reason, "message", ready.Message)
		}
		r.recorder.Eventf(sync, nil, eventType, eventReason, "Sync", "%s (%s)", ready.Message, sync.SyncStatus().Synced)
	}
	// The patch holds the cached object's resourceVersion: a merge patch computed from a
	// stale copy leaves out fields the copy already had, and could leave the server
	// with a status no pass computed (a count of one pass beside the generation of
	// the next). A conflict retries the pass (afterStatusWrite).
	patched := sync.DeepCopyObject().(v1alpha1.Sync)
	*patched.SyncStatus() = *before
	write := func() error {
		err := r.client.Status().Patch(ctx, sync, client.MergeFromWithOptions(patched, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			r.ownStatus.wrote(key, replaced, status) // sync now holds the answer: the copy it replaced is gone
		}
		return client.IgnoreNotFound(err)
	}
	if err := writeThenAnnounce(write, announce, news, false); err != nil {
		return fmt.Errorf("writing %s status: %w", sync.SyncSpec().Kind, err)
	}
	return nil
}

// retainSourceWatches keeps the source watches of every explicit object and stops the
// others.
func (r *syncReconciler[T]) retainSourceWatches(ctx context.Context) {
	syncs, err := r.list(ctx)
	if err != nil {
		return // keep every watch; the next pass retries
	}
	keep := sets.New[types.NamespacedName]()
	for _, s := range syncs {
		if s.GetDeletionTimestamp() == nil {
			keep.Insert(s.SyncSpec().Source())
		}
	}
	r.sources.Retain(keep)
}

// findSyncsForSource maps a source to the explicit objects naming it.
func (r *syncReconciler[T]) findSyncsForSource(ctx context.Context, src client.Object) []reconcile.Request {
	return r.findSyncs(ctx, func(s v1alpha1.Sync) bool {
		return s.SyncSpec().Source() == client.ObjectKeyFromObject(src)
	})
}

// findSyncsForNamespace maps a namespace (old and new, on updates) to the explicit
// objects whose targets match it, and, where they hold a replica in it, to those that
// cannot be acted on (their spec cannot be parsed, or they are not Ready for a reason
// other than their replicas): that replica must still leave a namespace that stops
// admitting them.
func (r *syncReconciler[T]) findSyncsForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := desired.NamespaceOf(obj)
	return r.findSyncs(ctx, func(s v1alpha1.Sync) bool {
		spec, err := desired.ParseSyncTargets(s.SyncSpec())
		if err == nil && spec.Matches(ns) {
			return true
		}
		return (err != nil || cannotBeActedOn(s)) && r.hasReplicaIn(desired.SyncOwner(s), ns.Name)
	})
}

// cannotBeActedOn reports whether an explicit object's last status says it could not be
// acted on: Invalid, its source missing, or its source unreadable.
func cannotBeActedOn(s v1alpha1.Sync) bool {
	ready := meta.FindStatusCondition(s.SyncStatus().Conditions, v1alpha1.ConditionReady)
	return ready != nil && (ready.Reason == v1alpha1.ReasonInvalid || ready.Reason == v1alpha1.ReasonSourceNotFound || ready.Reason == v1alpha1.ReasonFailed)
}

func (r *syncReconciler[T]) findSyncs(ctx context.Context, match func(v1alpha1.Sync) bool) []reconcile.Request {
	syncs, err := r.list(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the explicit objects for an event")
		return nil
	}
	var requests []reconcile.Request
	for _, s := range syncs {
		if match(s) {
			requests = append(requests, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.GetName()}})
		}
	}
	return requests
}

// list lists the explicit objects of the kind from the cache.
func (r *syncReconciler[T]) list(ctx context.Context) ([]v1alpha1.Sync, error) {
	list := r.engine.kind.NewSyncList()
	if err := r.client.List(ctx, list); err != nil {
		return nil, err
	}
	return list.Syncs(), nil
}

// syncControllerName names the controller of an explicit kind: the kind in lower case
// (configmapsync, secretsync).
func syncControllerName(explicit v1alpha1.Sync) string {
	return strings.ToLower(explicit.SyncSpec().Kind)
}

// SetupWithManager watches the explicit objects, their replicas, the namespaces they
// may target and, through the sourceWatcher, the sources they name.
func (r *syncReconciler[T]) SetupWithManager(mgr ctrl.Manager, replicas *replicastore.Store[T], options controller.Options) error {
	explicit := r.engine.kind.NewSync()
	return ctrl.NewControllerManagedBy(mgr).
		Named(syncControllerName(explicit)).
		For(explicit, builder.WithPredicates(predicates.SyncChanged())).
		WatchesRawSource(replicas.Watch(handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](
			mgr.GetScheme(), mgr.GetRESTMapper(), r.engine.kind.NewSync(), handler.OnlyControllerOwner()))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.findSyncsForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WatchesRawSource(source.Channel(r.sources.Events(), handler.EnqueueRequestsFromMapFunc(r.findSyncsForSource))).
		WithOptions(options).
		Complete(r)
}
