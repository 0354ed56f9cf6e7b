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

// syncForm is the explicit form for sources of kind T: ConfigMapSync for ConfigMaps,
// SecretSync for Secrets (kind.NewSync). Its replicas carry an owner reference to the
// explicit object; a finalizer deletes them when that is deleted, also where no
// garbage collector runs.
type syncForm[T desired.Object] struct {
	// client reads the explicit objects and namespaces from the manager's cache, and
	// writes.
	client client.Client
	// sources watches the objects that the explicit objects name.
	sources *sourceWatcher[T]
	// ownStatus is what cmsync knows of its own status writes of each explicit object
	// that the cache may not show yet.
	ownStatus *ownStatus[v1alpha1.SyncStatus]
	// serves says whether this form copies the source a spec names, and why not (a
	// problem to report, or an error to retry), before anything of the source is
	// read: an ObjectSync names its kind (objectForm). Nil: every spec of the
	// explicit kind is this form's.
	serves func(v1alpha1.SyncSpec) (*desired.Problem, error)
	door[T]
}

// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs;secretsyncs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs/status;secretsyncs/status,verbs=patch

// load reads the explicit object named key: one being deleted is retired (while it
// holds cmsync's finalizer); else it gets the finalizer, and its spec and source are
// resolved (desired.Resolve).
func (f *syncForm[T]) load(ctx context.Context, key types.NamespacedName) (subject[T], error) {
	sync := f.engine.kind.NewSync()
	if err := f.client.Get(ctx, key, sync); err != nil {
		return subject[T]{verdict: skip}, client.IgnoreNotFound(err)
	}
	f.retainSourceWatches(ctx)
	s := subject[T]{verdict: retire, owner: desired.SyncOwner(sync), object: sync}
	if sync.GetDeletionTimestamp() != nil {
		if !controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
			s.verdict = forget
		}
		return s, nil
	}
	if err := f.ensureFinalizer(ctx, sync); err != nil {
		return s, err
	}
	s.namespaces = f.namespaces.List()
	intent, problem, err := f.resolve(ctx, sync, s)
	switch {
	case err != nil:
		return s, err
	case problem != nil:
		s = s.cannotActOn(sync, desired.SyncOrigin(f.engine.kind, s.owner.Source.Namespace, f.policy), problem)
		s.plan.Targets = intent.Targets.Namespaces
		return s, nil
	}
	s.verdict, s.plan = act, planOf(intent)
	return s, nil
}

// resolve resolves the explicit object (desired.Resolve), then reads its source and
// completes the intent with it. A problem means: report and change nothing; an error
// means: retry. With a problem, the intent has its targets when they could be resolved.
func (f *syncForm[T]) resolve(ctx context.Context, sync v1alpha1.Sync, s subject[T]) (desired.Intent[T], *desired.Problem, error) {
	if f.serves != nil {
		if problem, err := f.serves(sync.SyncSpec()); problem != nil || err != nil {
			return desired.Intent[T]{}, problem, err
		}
	}
	named := desired.Source[T]{Key: s.owner.Source, Sync: sync}
	intent := desired.Resolve(f.engine.kind, named, s.namespaces, f.policy)
	if intent.Invalid != nil {
		return intent, desired.InvalidInput(intent.Invalid), nil
	}
	src, found, err := f.sources.Get(ctx, s.owner.Source)
	if err != nil {
		if ctx.Err() != nil {
			return intent, nil, err // called off: the process is stopping
		}
		return intent, desired.SourceUnreadable(fmt.Errorf("%w; existing replicas are kept, retrying", err)), nil
	}
	if !found {
		return intent, desired.SourceNotFound(fmt.Errorf(
			"source %s %s not found; existing replicas are kept until it returns or this %s is deleted",
			s.owner.Kind, s.owner.Source, s.owner.Sync.Kind)), nil
	}
	named.Meta, named.Object, named.Whole = src, src, true
	resolved := intent.WithSource(f.engine.kind, named, f.policy)
	if resolved.Invalid != nil {
		return intent, desired.InvalidInput(resolved.Invalid), nil
	}
	return resolved, nil, nil
}

// report writes the status of a pass and announces it when its Ready condition says
// something new.
func (f *syncForm[T]) report(ctx context.Context, s subject[T], pass desired.Summary) error {
	sync := s.object.(v1alpha1.Sync)
	before := sync.SyncStatus().DeepCopy()
	key := client.ObjectKeyFromObject(sync)
	// A pass that changed nothing still gives an earlier pass's change whose status
	// write did not land as the last sync.
	changedAt, changed := f.ownStatus.lastChange(key, pass.Changed(), time.Now())
	desired.SetSyncStatus(sync.SyncStatus(), sync.GetGeneration(), s.owner.Source.String(), pass, changed, metav1.NewTime(changedAt))
	err := f.writeStatus(ctx, sync, before, pass.EventReason(), changed)
	f.ownStatus.settle(key, changed, changedAt, err)
	return err
}

// reportProblem writes the status of an explicit object cmsync cannot act on: the
// replicas are counted as they are, since nothing was changed.
func (f *syncForm[T]) reportProblem(ctx context.Context, s subject[T]) error {
	sync := s.object.(v1alpha1.Sync)
	before := sync.SyncStatus().DeepCopy()
	synced, err := f.engine.countIn(s.owner, desired.SyncReplicaName(sync.SyncSpec()), s.plan.Targets)
	if err != nil {
		return err
	}
	desired.SetSyncProblem(sync.SyncStatus(), sync.GetGeneration(), s.owner.Source.String(), s.problem.Reason, s.problem,
		len(s.plan.Targets), synced)
	return f.writeStatus(ctx, sync, before, s.problem.Reason, false)
}

func (f *syncForm[T]) forget(owner desired.Owner) {
	f.ownStatus.forget(types.NamespacedName{Name: owner.Sync.Name})
}

// retired lets an explicit object whose replicas are deleted go: it removes cmsync's
// finalizer.
func (f *syncForm[T]) retired(ctx context.Context, s subject[T]) error {
	sync := s.object
	before := sync.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(sync, v1alpha1.CleanupFinalizer)
	return client.IgnoreNotFound(f.client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

func (f *syncForm[T]) ensureFinalizer(ctx context.Context, sync v1alpha1.Sync) error {
	if controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
		return nil
	}
	before := sync.DeepCopyObject().(client.Object)
	controllerutil.AddFinalizer(sync, v1alpha1.CleanupFinalizer)
	if err := f.client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// writeStatus patches the status when it changed, then records an Event and a log line
// when the Ready condition says something new (writeThenAnnounce). A pass that changed
// no replica (changed) and read the very copy cmsync's own last status write replaced
// writes nothing when that write said the same (ownStatus).
func (f *syncForm[T]) writeStatus(
	ctx context.Context, sync v1alpha1.Sync, before *v1alpha1.SyncStatus, eventReason string, changed bool,
) error {
	if equality.Semantic.DeepEqual(*before, *sync.SyncStatus()) {
		return nil
	}
	key, replaced, status := client.ObjectKeyFromObject(sync), sync.GetResourceVersion(), *sync.SyncStatus().DeepCopy()
	if !changed && f.ownStatus.alreadySays(key, replaced, status) {
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
		f.recorder.Eventf(sync, nil, eventType, eventReason, "Sync", "%s", eventNote(ready.Message, sync.SyncStatus().Synced))
	}
	// The patch holds the cached object's resourceVersion: a merge patch computed from a
	// stale copy leaves out fields the copy already had, and could leave the server
	// with a status no pass computed (a count of one pass beside the generation of
	// the next). A conflict retries the pass (afterStatusWrite).
	patched := sync.DeepCopyObject().(v1alpha1.Sync)
	*patched.SyncStatus() = *before
	write := func() error {
		err := f.client.Status().Patch(ctx, sync, client.MergeFromWithOptions(patched, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			f.ownStatus.wrote(key, replaced, status) // sync now holds the answer: the copy it replaced is gone
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
func (f *syncForm[T]) retainSourceWatches(ctx context.Context) {
	syncs, err := f.list(ctx)
	if err != nil {
		return // keep every watch; the next pass retries
	}
	keep := sets.New[types.NamespacedName]()
	for _, s := range syncs {
		if s.GetDeletionTimestamp() == nil && f.copies(s.SyncSpec()) {
			keep.Insert(s.SyncSpec().Source())
		}
	}
	f.sources.Retain(keep)
}

// copies reports whether this form copies the source spec names (serves).
func (f *syncForm[T]) copies(spec v1alpha1.SyncSpec) bool {
	if f.serves == nil {
		return true
	}
	problem, err := f.serves(spec)
	return problem == nil && err == nil
}

// findSyncsForSource maps a source to the explicit objects naming it.
func (f *syncForm[T]) findSyncsForSource(ctx context.Context, src client.Object) []reconcile.Request {
	return f.findSyncs(ctx, func(s v1alpha1.Sync) bool {
		return s.SyncSpec().Source() == client.ObjectKeyFromObject(src)
	})
}

// findSyncsForNamespace maps a namespace (old and new, on updates) to the explicit
// objects whose targets match it, and, where they hold a replica in it, to those that
// cannot be acted on (their spec cannot be parsed, or they are not Ready for a reason
// other than their replicas): that replica must still leave a namespace that stops
// admitting them.
func (f *syncForm[T]) findSyncsForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := desired.NamespaceOf(obj)
	return f.findSyncs(ctx, func(s v1alpha1.Sync) bool {
		spec, err := desired.ParseSyncTargets(s.SyncSpec())
		if err == nil && spec.Matches(ns) {
			return true
		}
		return (err != nil || cannotBeActedOn(s)) && f.hasReplicaIn(desired.SyncOwner(s), ns.Name)
	})
}

// cannotBeActedOn reports whether an explicit object's last status says it could not be
// acted on: Invalid, its source missing, or its source unreadable.
func cannotBeActedOn(s v1alpha1.Sync) bool {
	ready := meta.FindStatusCondition(s.SyncStatus().Conditions, v1alpha1.ConditionReady)
	return ready != nil && (ready.Reason == v1alpha1.ReasonInvalid || ready.Reason == v1alpha1.ReasonSourceNotFound || ready.Reason == v1alpha1.ReasonFailed)
}

func (f *syncForm[T]) findSyncs(ctx context.Context, match func(v1alpha1.Sync) bool) []reconcile.Request {
	syncs, err := f.list(ctx)
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
func (f *syncForm[T]) list(ctx context.Context) ([]v1alpha1.Sync, error) {
	list := f.engine.kind.NewSyncList()
	if err := f.client.List(ctx, list); err != nil {
		return nil, err
	}
	return list.Syncs(), nil
}

// maxEventNote is the API server's limit of an Event's note: it refuses a longer Event,
// which is then lost.
const maxEventNote = 1024

// eventNote is the note of an explicit object's Event: its Ready message, shortened to
// leave room for the synced count after it within maxEventNote.
func eventNote(message, synced string) string {
	suffix := " (" + synced + ")"
	if len(message)+len(suffix) > maxEventNote {
		message = message[:maxEventNote-len(suffix)-len("...")] + "..."
	}
	return message + suffix
}

// syncControllerName names the controller of an explicit kind: the kind in lower case
// (configmapsync, secretsync).
func syncControllerName(explicit v1alpha1.Sync) string {
	return strings.ToLower(explicit.SyncSpec().Kind)
}

// SetupWithManager watches the explicit objects, their replicas, the namespaces they
// may target and, through the sourceWatcher, the sources they name.
func (f *syncForm[T]) SetupWithManager(mgr ctrl.Manager, replicas *replicastore.Store[T], options controller.Options) error {
	explicit := f.engine.kind.NewSync()
	return ctrl.NewControllerManagedBy(mgr).
		Named(syncControllerName(explicit)).
		For(explicit, builder.WithPredicates(predicates.SyncChanged())).
		WatchesRawSource(replicas.Watch(handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](
			mgr.GetScheme(), mgr.GetRESTMapper(), f.engine.kind.NewSync(), handler.OnlyControllerOwner()))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(f.findSyncsForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WatchesRawSource(source.Channel(f.sources.Events(), handler.EnqueueRequestsFromMapFunc(f.findSyncsForSource))).
		WithOptions(options).
		Complete(&pass[T]{door: f.door, form: f})
}
