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

// sourceForm is the annotation form of kind T: every object labelled
// cmsync.io/replicate=true is replicated into the namespaces its annotations name, and
// the outcome is written onto it as status annotations and Events.
type sourceForm[T desired.Object] struct {
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
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// load reads the source named key: a source gone or no longer labelled is retired; one
// cmsync will not act on (in a namespace where sources may not live, or Invalid) cannot
// be acted on; else its plan is resolved (desired.Resolve).
func (f *sourceForm[T]) load(ctx context.Context, key types.NamespacedName) (subject[T], error) {
	s := subject[T]{verdict: retire, owner: desired.AnnotationOwner(f.kind.Name(), key)}
	cached := desired.NewMetadata(f.kind)
	if err := f.client.Get(ctx, key, cached); err != nil || !desired.IsActiveSource(cached) {
		return s, client.IgnoreNotFound(err)
	}
	s.namespaces = f.namespaces.List()
	if err := f.policy.CheckSourceNamespace(key.Namespace); err != nil {
		// Where sources may not live, a labelled object is never read whole: its
		// metadata says all there is to say.
		return f.invalid(s, cached, err), nil
	}
	src, found, err := f.contents.Get(ctx, cached)
	if err != nil {
		return s, fmt.Errorf("reading the source: %w", err)
	}
	if !found || !desired.IsActiveSource(src) {
		return s, nil
	}
	intent := desired.Resolve(f.kind, desired.AnnotatedSource(src), s.namespaces, f.policy)
	if intent.Invalid != nil {
		return f.invalid(s, src, intent.Invalid), nil
	}
	s.verdict, s.object, s.plan = act, src, planOf(intent)
	return s, nil
}

// invalid marks a source cmsync will not act on; its replicas stay where the namespaces
// admit its origin (its namespace's tenant).
func (f *sourceForm[T]) invalid(s subject[T], src client.Object, err error) subject[T] {
	return s.cannotActOn(src, f.policy.OriginOf(src.GetNamespace(), s.namespaces), desired.InvalidInput(err))
}

func (f *sourceForm[T]) forget(owner desired.Owner) {
	f.contents.forget(owner.Source)
	f.ownStatus.forget(owner.Source)
}

// retired takes the status annotations off an object that stopped being a source.
func (f *sourceForm[T]) retired(ctx context.Context, s subject[T]) error {
	former := f.kind.New()
	if err := f.apiReader.Get(ctx, s.owner.Source, former); err != nil {
		return client.IgnoreNotFound(err)
	}
	if desired.IsActiveSource(former) {
		return nil // labelled again since the cache looked; its own event follows
	}
	if patch := desired.ClearStatusPatch(string(former.GetUID()), former.GetAnnotations()); patch != nil {
		return client.IgnoreNotFound(f.client.Patch(ctx, former, client.RawPatch(types.MergePatchType, patch)))
	}
	return nil
}

// reportProblem writes the Invalid status, then an Event and a log line, once per new
// problem.
func (f *sourceForm[T]) reportProblem(ctx context.Context, s subject[T]) error {
	src := s.object
	status := desired.InvalidStatus(s.problem, src.GetAnnotations()[v1alpha1.SyncedAnnotation])
	patch := desired.StatusPatch(src, status, false, time.Now())
	if patch == nil || f.ownStatus.alreadySays(client.ObjectKeyFromObject(src), src.GetResourceVersion(), status) {
		return nil
	}
	return writeThenAnnounce(
		func() error { return f.writeStatus(ctx, src, status, patch) },
		func() {
			log.FromContext(ctx).Info("source is invalid; nothing was changed", "reason", status.Message)
			f.recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalid, "Validate", "%s", status.Message)
		},
		true, false)
}

// report writes the status annotations of a pass, then an Event when they say
// something new or when the pass wrote or deleted replicas (each change of the
// replicas gets its Event, even when the pass's status write met a newer source: no
// later pass reports that change).
func (f *sourceForm[T]) report(ctx context.Context, s subject[T], pass desired.Summary) error {
	src := s.object
	status := pass.SourceStatus()
	current := src.GetAnnotations()
	key := client.ObjectKeyFromObject(src)
	// A pass that changed nothing still gives an earlier pass's change whose status
	// write did not land as the last sync.
	changedAt, changed := f.ownStatus.lastChange(key, pass.Changed(), time.Now())
	patch := desired.StatusPatch(src, status, changed, changedAt)
	if !changed && f.ownStatus.alreadySays(key, src.GetResourceVersion(), status) {
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
		return f.writeStatus(ctx, src, status, patch)
	}
	err := writeThenAnnounce(write, func() { f.recordPassEvent(ctx, src, pass) }, news, pass.Changed())
	f.ownStatus.settle(key, changed, changedAt, err)
	return err
}

// recordPassEvent records what a pass found (desired.Summary.EventReason).
func (f *sourceForm[T]) recordPassEvent(ctx context.Context, src client.Object, pass desired.Summary) {
	reason := pass.EventReason()
	if reason == v1alpha1.ReasonSynced {
		f.recorder.Eventf(src, nil, corev1.EventTypeNormal, reason, "Sync", "%s (%s)", pass.Message, pass.SyncedCount())
		return
	}
	if reason == v1alpha1.ReasonConflict {
		log.FromContext(ctx).Info("conflict: a target namespace holds an object cmsync does not own", "message", pass.Message)
	}
	f.recorder.Eventf(src, nil, corev1.EventTypeWarning, reason, "Sync", "%s", pass.Message)
}

// writeStatus writes the status annotations (patchStatus) and records the write.
func (f *sourceForm[T]) writeStatus(ctx context.Context, src client.Object, status desired.SourceStatus, patch []byte) error {
	if err := f.patchStatus(ctx, src, patch); err != nil {
		return err
	}
	f.ownStatus.wrote(client.ObjectKeyFromObject(src), src.GetResourceVersion(), status)
	return nil
}

// patchStatus writes the status annotations; the patch carries the resourceVersion the
// pass read (desired.StatusPatch). It is sent by metadata, so that the answer does
// not carry the source's content back; the answer moves the held source to the version
// the write made (sourceContents.advance).
func (f *sourceForm[T]) patchStatus(ctx context.Context, src client.Object, patch []byte) error {
	target := desired.NewMetadata(f.kind)
	target.SetNamespace(src.GetNamespace())
	target.SetName(src.GetName())
	err := f.client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v1alpha1.FieldManager))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status annotations: %w", err)
	}
	if err == nil {
		f.contents.advance(src.GetResourceVersion(), target)
	}
	return nil
}

// findSourceOfReplica maps a replica of the annotation form to the source its
// annotation names.
func (f *sourceForm[T]) findSourceOfReplica(_ context.Context, replica *metav1.PartialObjectMetadata) []reconcile.Request {
	key, ok := desired.SourceKeyOf(replica)
	if !ok || !desired.AnnotationOwner(f.kind.Name(), key).Owns(replica) {
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
func (f *sourceForm[T]) findSourcesForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	sources := desired.NewMetadataList(f.kind)
	// The cache's own objects, not copies: only read here.
	if err := f.client.List(ctx, sources, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing sources for a namespace event")
		return nil
	}
	ns := desired.NamespaceOf(obj)
	var requests []reconcile.Request
	for i := range sources.Items {
		src := &sources.Items[i]
		key := types.NamespacedName{Namespace: src.GetNamespace(), Name: src.GetName()}
		if src.GetNamespace() == ns.Name {
			if f.policy.TenantLabel != "" {
				requests = append(requests, reconcile.Request{NamespacedName: key})
			}
			continue
		}
		spec, err := desired.TargetsOf(src)
		switch {
		case err == nil && spec.Matches(ns):
			requests = append(requests, reconcile.Request{NamespacedName: key})
		case err != nil || src.GetAnnotations()[v1alpha1.StatusAnnotation] == v1alpha1.StatusInvalid:
			if f.hasReplicaIn(desired.AnnotationOwner(f.kind.Name(), key), ns.Name) {
				requests = append(requests, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return requests
}

// SetupWithManager watches sources (the manager's cache), replicas (the replica store,
// mapped to their source), namespaces (mapped to the sources that may target them) and
// the former sources found at the start of a term (formerSources).
func (f *sourceForm[T]) SetupWithManager(
	mgr ctrl.Manager, replicas *replicastore.Store[T], former <-chan event.GenericEvent, options controller.Options,
) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(f.name).
		For(desired.NewMetadata(f.kind), builder.WithPredicates(predicates.SourceChanged())).
		WatchesRawSource(replicas.Watch(handler.TypedEnqueueRequestsFromMapFunc(f.findSourceOfReplica))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(f.findSourcesForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WatchesRawSource(source.Channel(former, &handler.EnqueueRequestForObject{})).
		WithOptions(options).
		Complete(&pass[T]{door: f.door, form: f})
}
