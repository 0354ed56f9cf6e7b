package replicator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/predicates"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// sourceReconciler is the annotation form's front door for kind T: it replicates every
// object labelled cmsync.io/replicate=true into the namespaces its annotations name,
// deletes the replicas it no longer wants, and writes the outcome onto the source as
// status annotations and Events. Each pass recomputes everything from the caches, so a
// pass after a restart is the same as any other.
type sourceReconciler[T desired.Object] struct {
	kind desired.Kind[T]
	// name names the controller in logs and metrics.
	name string
	// client reads sources and namespaces from the manager's cache, and writes.
	client client.Client
	// apiReader reads the API server directly, for objects outside the caches.
	apiReader client.Reader
	// contents reads the sources whole; the manager's cache holds their metadata only.
	contents *sourceContents[T]
	// ownStatus is what cmsync knows of its own status writes of each source that the
	// cache may not show yet.
	ownStatus *ownStatus[desired.SourceStatus]
	door[T]
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the replicas of one source in line with it.
func (r *sourceReconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer func(start time.Time) { r.metrics.ObserveSync(time.Since(start)) }(time.Now())

	cached := desired.NewMetadata(r.kind)
	err := r.client.Get(ctx, req.NamespacedName, cached)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	owner := desired.AnnotationOwner(r.kind.Name(), req.NamespacedName)
	if apierrors.IsNotFound(err) || !desired.IsActiveSource(cached) {
		return ctrl.Result{}, r.retire(ctx, owner)
	}
	namespaces := r.namespaces.List()
	if err := r.policy.CheckSourceNamespace(req.Namespace); err != nil {
		// Where sources may not live, a labelled object is never read whole: its
		// metadata says all there is to say.
		return r.invalid(ctx, cached, owner, err, namespaces)
	}
	src, found, err := r.contents.Get(ctx, cached)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the source: %w", err)
	}
	if !found || !desired.IsActiveSource(src) {
		return ctrl.Result{}, r.retire(ctx, owner)
	}

	intent := desired.Resolve(r.kind, desired.AnnotatedSource(src), namespaces, r.policy)
	if intent.Invalid != nil {
		return r.invalid(ctx, src, owner, intent.Invalid, namespaces)
	}
	plan := Plan[T]{Targets: intent.Targets.Namespaces, Template: intent.Template, Boundary: intent.Targets.Notice()}
	pass, err := r.engine.run(ctx, owner, plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.finish(ctx, owner, pass, r.report(ctx, src, pass))
}

// invalid handles a source cmsync will not act on: nothing is created because of it,
// its replicas are kept where the namespaces still admit it (and deleted elsewhere:
// consent outranks a broken source), and the problem is reported on the source.
func (r *sourceReconciler[T]) invalid(
	ctx context.Context,
	src client.Object,
	owner desired.Owner,
	problem error,
	namespaces []desired.Namespace,
) (ctrl.Result, error) {
	admitting := desired.AdmittingNamespaces(r.policy.OriginOf(src.GetNamespace(), namespaces), namespaces, r.policy)
	if _, err := r.engine.withdraw(ctx, owner, admitting); err != nil {
		return ctrl.Result{}, err
	}
	return afterStatusWrite(ctx, r.reportInvalid(ctx, src, owner, problem))
}

// retire deletes every replica of a source that is gone or no longer labelled, and
// takes the status annotations off an object that stopped being a source.
func (r *sourceReconciler[T]) retire(ctx context.Context, owner desired.Owner) error {
	r.contents.forget(owner.Source)
	r.metrics.ForgetSource(owner)
	r.ownStatus.forget(owner.Source)
	deleted, err := r.engine.deleteAll(ctx, owner)
	if deleted > 0 {
		log.FromContext(ctx).Info("deleted the replicas of a retired source", "deleted", deleted)
	}
	if err != nil {
		return err
	}
	former := r.kind.New()
	if err := r.apiReader.Get(ctx, owner.Source, former); err != nil {
		return client.IgnoreNotFound(err)
	}
	if desired.IsActiveSource(former) {
		return nil // labelled again since the cache looked; its own event follows
	}
	if patch := desired.ClearStatusPatch(string(former.GetUID()), former.GetAnnotations()); patch != nil {
		return client.IgnoreNotFound(r.client.Patch(ctx, former, client.RawPatch(types.MergePatchType, patch)))
	}
	return nil
}

// reportInvalid writes the Invalid status, then an Event and a log line, once per new
// problem; it does not retry, since only an edit of the source can fix it (but for a
// write that met a newer object: afterStatusWrite).
func (r *sourceReconciler[T]) reportInvalid(ctx context.Context, src client.Object, owner desired.Owner, invalid error) error {
	r.metrics.RecordProblem(owner, v1alpha1.ReasonInvalid)
	status := desired.InvalidStatus(invalid, src.GetAnnotations()[v1alpha1.SyncedAnnotation])
	patch := desired.StatusPatch(src, status, false, time.Now())
	if patch == nil || r.ownStatus.alreadySays(client.ObjectKeyFromObject(src), src.GetResourceVersion(), status) {
		return nil
	}
	return writeThenAnnounce(
		func() error { return r.writeStatus(ctx, src, status, patch) },
		func() {
			log.FromContext(ctx).Info("source is invalid; nothing was changed", "reason", status.Message)
			r.recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalid, "Validate", "%s", status.Message)
		},
		true, false)
}

// report writes the status annotations of a pass, then an Event when they say
// something new or when the pass wrote or deleted replicas (each change of the
// replicas gets its Event, even when the pass's status write met a newer source: no
// later pass reports that change).
func (r *sourceReconciler[T]) report(ctx context.Context, src T, pass desired.Summary) error {
	status := pass.SourceStatus()
	current := src.GetAnnotations()
	key := client.ObjectKeyFromObject(src)
	// A pass that changed nothing still gives an earlier pass's change whose status
	// write did not land as the last sync.
	changedAt, changed := r.ownStatus.lastChange(key, pass.Changed(), time.Now())
	patch := desired.StatusPatch(src, status, changed, changedAt)
	if !changed && r.ownStatus.alreadySays(key, src.GetResourceVersion(), status) {
		return nil // the cache trails cmsync's own write, which said it (and announced it)
	}
	news := status.State != current[v1alpha1.StatusAnnotation] || status.Message != current[v1alpha1.MessageAnnotation]
	write := func() error {
		if patch == nil {
			// The annotations already say it. A pass that wrote replicas can get here
			// too: last-sync-time counts whole seconds, and the change may come within
			// the second of the status before it. Its Event is still due.
			return nil
		}
		return r.writeStatus(ctx, src, status, patch)
	}
	err := writeThenAnnounce(write, func() { r.recordPassEvent(ctx, src, pass) }, news, pass.Changed())
	r.ownStatus.settle(key, changed, changedAt, err)
	return err
}

// recordPassEvent records what a pass found: Synced when all targets are in sync,
// Conflict or Failed otherwise.
func (r *sourceReconciler[T]) recordPassEvent(ctx context.Context, src T, pass desired.Summary) {
	switch {
	case pass.State == v1alpha1.StatusSynced:
		r.recorder.Eventf(src, nil, corev1.EventTypeNormal, v1alpha1.ReasonSynced, "Sync", "%s (%s)", pass.Message, pass.SyncedCount())
	case pass.Conflicts > 0:
		log.FromContext(ctx).Info("conflict: a target namespace holds an object cmsync does not own", "message", pass.Message)
		r.recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonConflict, "Sync", "%s", pass.Message)
	default:
		r.recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonFailed, "Sync", "%s", pass.Message)
	}
}

// writeStatus writes the status annotations (patchStatus) and records the write.
func (r *sourceReconciler[T]) writeStatus(ctx context.Context, src client.Object, status desired.SourceStatus, patch []byte) error {
	if err := r.patchStatus(ctx, src, patch); err != nil {
		return err
	}
	r.ownStatus.wrote(client.ObjectKeyFromObject(src), src.GetResourceVersion(), status)
	return nil
}

// patchStatus writes the status annotations; the patch carries the resourceVersion the
// pass read (desired.StatusPatch). It is sent by metadata, so that the answer does
// not carry the source's content back; the answer moves the held source to the version
// the write made (sourceContents.advance).
func (r *sourceReconciler[T]) patchStatus(ctx context.Context, src client.Object, patch []byte) error {
	target := desired.NewMetadata(r.kind)
	target.SetNamespace(src.GetNamespace())
	target.SetName(src.GetName())
	err := r.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v1alpha1.FieldManager))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status annotations: %w", err)
	}
	if err == nil {
		r.contents.advance(src.GetResourceVersion(), target)
	}
	return nil
}

// findSourceOfReplica maps a replica of the annotation form to the source its
// annotation names.
func (r *sourceReconciler[T]) findSourceOfReplica(_ context.Context, replica *metav1.PartialObjectMetadata) []reconcile.Request {
	key, ok := desired.SourceKeyOf(replica)
	if !ok || !desired.AnnotationOwner(r.kind.Name(), key).Owns(replica) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// findSourcesForNamespace maps a namespace to every source whose targets match it and,
// with the tenant boundary on, to every source in it (its tenant decides where they
// reach). The map runs on both the old and the new namespace of an update, so a
// namespace that stopped matching still reaches the sources that must clean it up.
// A source whose targets cannot be parsed, or that is Invalid, is mapped to the
// namespaces that hold one of its replicas: those must still leave a namespace that
// stops admitting it. (Not to every namespace: a tenant's many broken sources would
// cost a pass each, and a read of each, on every namespace event of the cluster.)
func (r *sourceReconciler[T]) findSourcesForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	sources := desired.NewMetadataList(r.kind)
	// The cache's own objects, not copies: only read here.
	if err := r.client.List(ctx, sources, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing sources for a namespace event")
		return nil
	}
	ns := desired.NamespaceOf(obj)
	var requests []reconcile.Request
	for i := range sources.Items {
		src := &sources.Items[i]
		key := types.NamespacedName{Namespace: src.GetNamespace(), Name: src.GetName()}
		if src.GetNamespace() == ns.Name {
			if r.policy.TenantLabel != "" {
				requests = append(requests, reconcile.Request{NamespacedName: key})
			}
			continue
		}
		spec, err := desired.TargetsOf(src)
		switch {
		case err == nil && spec.Matches(ns):
			requests = append(requests, reconcile.Request{NamespacedName: key})
		case err != nil || src.GetAnnotations()[v1alpha1.StatusAnnotation] == v1alpha1.StatusInvalid:
			if r.hasReplicaIn(desired.AnnotationOwner(r.kind.Name(), key), ns.Name) {
				requests = append(requests, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return requests
}

// SetupWithManager watches sources (the manager's cache), replicas (the replica cache,
// mapped to their source), namespaces (mapped to the sources that may target them) and
// the former sources found at the start of a term (formerSources).
func (r *sourceReconciler[T]) SetupWithManager(
	mgr ctrl.Manager, replicas *replicastore.Store[T], former <-chan event.GenericEvent, options controller.Options,
) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.name).
		For(desired.NewMetadata(r.kind), builder.WithPredicates(predicates.SourceChanged())).
		WatchesRawSource(replicas.Watch(handler.TypedEnqueueRequestsFromMapFunc(r.findSourceOfReplica))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.findSourcesForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WatchesRawSource(source.Channel(former, &handler.EnqueueRequestForObject{})).
		WithOptions(options).
		Complete(r)
}
