package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/predicates"
)

// SourceReconciler replicates every ConfigMap labelled cmsync.io/replicate=true into the
// namespaces its annotations name, deletes the replicas it no longer wants, and writes
// the outcome onto the source as status annotations and Events. Each pass recomputes
// everything from the caches, so a pass after a restart is the same as any other.
type SourceReconciler struct {
	// Client reads sources and namespaces from the manager's cache, and writes.
	Client client.Client
	// APIReader reads the API server directly, for ConfigMaps outside the caches.
	APIReader client.Reader
	FrontDoor
}

// FrontDoor is what both reconcilers share: the engine that writes replicas, the
// controller's policy, and where they report.
type FrontDoor struct {
	Engine   *Engine
	Policy   Policy
	Recorder events.EventRecorder
	Metrics  *Metrics
	// ConflictRecheck is how soon an owner with a conflict looks again: an unmanaged
	// ConfigMap in the way is not in cmsync's caches, so its removal raises no event.
	ConflictRecheck time.Duration
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings the replicas of one source in line with it.
func (r *SourceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer func(start time.Time) { r.Metrics.ObserveSync(time.Since(start)) }(time.Now())

	src := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, req.NamespacedName, src)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	if apierrors.IsNotFound(err) || !isActiveSource(src) {
		return ctrl.Result{}, r.retire(ctx, req.NamespacedName)
	}

	plan, err := r.planFor(ctx, src)
	if err != nil {
		var invalid invalidSourceError
		if errors.As(err, &invalid) {
			return ctrl.Result{}, r.reportInvalid(ctx, src, invalid)
		}
		return ctrl.Result{}, err
	}
	owner := AnnotationOwner(req.NamespacedName)
	existing, err := r.Engine.ListReplicas(ctx, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	pass := r.Engine.Run(ctx, owner, plan.targets, plan.desired, existing, ReplicasOutside(existing, plan.targetSet()))
	return r.report(ctx, src, pass)
}

// plan is what one pass must do: the desired replica in each target namespace.
type plan struct {
	targets []string
	desired func(namespace string) *corev1.ConfigMap
}

func (p plan) targetSet() map[string]bool {
	set := make(map[string]bool, len(p.targets))
	for _, ns := range p.targets {
		set[ns] = true
	}
	return set
}

// invalidSourceError is a source cmsync will not act on; it is reported on the source,
// and nothing is created or deleted because of it.
type invalidSourceError struct{ error }

// planFor decides what the source wants, or why it cannot be acted on.
func (r *SourceReconciler) planFor(ctx context.Context, src *corev1.ConfigMap) (plan, error) {
	if !r.Policy.AllowsSource(src.Namespace) {
		return plan{}, invalidSourceError{fmt.Errorf("sources are not allowed in namespace %s (the controller's --source-namespaces)", src.Namespace)}
	}
	if IsReplica(src) {
		return plan{}, invalidSourceError{fmt.Errorf("this ConfigMap is a replica of %s and cannot be a source; remove the %s label", src.Annotations[v1alpha1.SourceAnnotation], v1alpha1.ReplicateLabel)}
	}
	spec, err := ParseTargetAnnotations(annotation(src, v1alpha1.TargetNamespacesAnnotation), annotation(src, v1alpha1.TargetSelectorAnnotation))
	if err != nil {
		return plan{}, invalidSourceError{err}
	}
	var strip []string
	if value := annotation(src, v1alpha1.StripMetadataAnnotation); value != nil {
		if strip, err = ParseStripMetadata(*value); err != nil {
			return plan{}, invalidSourceError{err}
		}
	}
	namespaces, err := listNamespaces(ctx, r.Client)
	if err != nil {
		return plan{}, err
	}
	return plan{
		targets: TargetNamespaces(spec, src.Namespace, namespaces, r.Policy),
		desired: func(ns string) *corev1.ConfigMap {
			return DesiredReplica(src, ns, strip, AnnotationOwner(client.ObjectKeyFromObject(src)))
		},
	}, nil
}

// retire deletes every replica of a source that is gone or no longer labelled, and
// takes the status annotations off a ConfigMap that stopped being a source.
func (r *SourceReconciler) retire(ctx context.Context, key types.NamespacedName) error {
	r.Metrics.ForgetSource(AnnotationOwner(key).Key())
	existing, err := r.Engine.ListReplicas(ctx, AnnotationOwner(key))
	if err != nil {
		return err
	}
	deleted, err := r.Engine.DeleteReplicas(ctx, ReplicasOutside(existing, nil))
	if deleted > 0 {
		log.FromContext(ctx).Info("deleted the replicas of a retired source", "deleted", deleted)
	}
	if err != nil {
		return err
	}
	former := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, key, former); err != nil {
		return client.IgnoreNotFound(err)
	}
	if isActiveSource(former) {
		return nil // labelled again since the cache looked; its own event follows
	}
	if patch := ClearStatusPatch(string(former.UID), former.Annotations); patch != nil {
		return client.IgnoreNotFound(r.Client.Patch(ctx, former, client.RawPatch(types.MergePatchType, patch)))
	}
	return nil
}

// reportInvalid writes the Invalid status, an Event and a log line, once per new
// problem; it does not retry, since only an edit of the source can fix it.
func (r *SourceReconciler) reportInvalid(ctx context.Context, src *corev1.ConfigMap, invalid invalidSourceError) error {
	r.Metrics.RecordSource(AnnotationOwner(client.ObjectKeyFromObject(src)).Key(), ReplicaCounts{})
	status := InvalidStatus(invalid, src.Annotations[v1alpha1.SyncedAnnotation])
	patch := StatusPatch(string(src.UID), src.Annotations, status, false, time.Now())
	if patch == nil {
		return nil
	}
	log.FromContext(ctx).Info("source is invalid; nothing was changed", "reason", status.Message)
	r.Recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonInvalid, "Validate", "%s", status.Message)
	return r.patchStatus(ctx, src, patch)
}

// report writes the status of a pass, with an Event and a log line when it changed, and
// decides when to look again: failures back off through the rate limiter, conflicts
// are rechecked on a timer.
func (r *SourceReconciler) report(ctx context.Context, src *corev1.ConfigMap, pass Pass) (ctrl.Result, error) {
	counts := CountReplicas(pass.Results)
	r.Metrics.RecordSource(AnnotationOwner(client.ObjectKeyFromObject(src)).Key(), counts)
	status := StatusOf(pass.Results, pass.CleanupErr)
	changed := pass.Changed()
	if changed {
		log.FromContext(ctx).Info("replicas written", "written", pass.Written(), "deleted", pass.Deleted, "synced", status.Synced)
	}
	failures := pass.Failures()
	if patch := StatusPatch(string(src.UID), src.Annotations, status, changed, time.Now()); patch != nil {
		if status.State != src.Annotations[v1alpha1.StatusAnnotation] || status.Message != src.Annotations[v1alpha1.MessageAnnotation] || changed {
			r.recordPassEvents(ctx, src, status, counts)
		}
		failures = errors.Join(failures, r.patchStatus(ctx, src, patch))
	}
	if failures != nil {
		return ctrl.Result{}, failures
	}
	if counts.Conflict > 0 {
		return ctrl.Result{RequeueAfter: r.ConflictRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// recordPassEvents records what a pass found: Synced when all targets are in sync,
// Conflict and Failed otherwise.
func (r *SourceReconciler) recordPassEvents(ctx context.Context, src *corev1.ConfigMap, status SourceStatus, counts ReplicaCounts) {
	switch {
	case status.State == v1alpha1.StatusSynced:
		r.Recorder.Eventf(src, nil, corev1.EventTypeNormal, v1alpha1.ReasonSynced, "Sync", "%s (%s)", status.Message, status.Synced)
	case counts.Conflict > 0:
		log.FromContext(ctx).Info("conflict: a target namespace holds a ConfigMap cmsync does not own", "message", status.Message)
		r.Recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonConflict, "Sync", "%s", status.Message)
	default:
		r.Recorder.Eventf(src, nil, corev1.EventTypeWarning, v1alpha1.ReasonFailed, "Sync", "%s", status.Message)
	}
}

func (r *SourceReconciler) patchStatus(ctx context.Context, src *corev1.ConfigMap, patch []byte) error {
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name}}
	err := r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v1alpha1.FieldManager))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing status annotations: %w", err)
	}
	return nil
}

// listNamespaces reads every namespace's metadata from the cache.
func listNamespaces(ctx context.Context, reader client.Reader) ([]Namespace, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	namespaces := make([]Namespace, 0, len(list.Items))
	for i := range list.Items {
		namespaces = append(namespaces, namespaceOf(&list.Items[i]))
	}
	return namespaces, nil
}

func namespaceOf(obj client.Object) Namespace {
	return Namespace{Name: obj.GetName(), Labels: obj.GetLabels(), Terminating: obj.GetDeletionTimestamp() != nil}
}

// isActiveSource reports whether cm is labelled as a source and not being deleted.
func isActiveSource(cm *corev1.ConfigMap) bool {
	return cm.Labels[v1alpha1.ReplicateLabel] == v1alpha1.ReplicateLabelValue && cm.DeletionTimestamp == nil
}

// annotation returns a pointer to an annotation's value, nil when it is absent.
func annotation(cm *corev1.ConfigMap, key string) *string {
	if v, ok := cm.Annotations[key]; ok {
		return &v
	}
	return nil
}

// findSourceOfReplica maps a replica of the annotation form to the source its
// annotation names.
func findSourceOfReplica(_ context.Context, cm *corev1.ConfigMap) []reconcile.Request {
	key, ok := ParseSourceKey(cm.Annotations[v1alpha1.SourceAnnotation])
	if !ok || !AnnotationOwner(key).Owns(cm) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// findSourcesForNamespace maps a namespace to every source whose targets match it. The
// map runs on both the old and the new namespace of an update, so a namespace that
// stopped matching still reaches the sources that must clean it up. Sources with
// invalid annotations are skipped: they change nothing until edited.
func (r *SourceReconciler) findSourcesForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	var sources corev1.ConfigMapList
	if err := r.Client.List(ctx, &sources); err != nil {
		log.FromContext(ctx).Error(err, "listing sources for a namespace event")
		return nil
	}
	ns := namespaceOf(obj)
	var requests []reconcile.Request
	for i := range sources.Items {
		src := &sources.Items[i]
		spec, err := ParseTargetAnnotations(annotation(src, v1alpha1.TargetNamespacesAnnotation), annotation(src, v1alpha1.TargetSelectorAnnotation))
		if err == nil && src.Namespace != ns.Name && spec.Matches(ns) {
			requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(src)})
		}
	}
	return requests
}

// SetupWithManager watches sources (the manager's cache), replicas (the replica cache,
// mapped to their source) and namespaces (mapped to the sources that may target them).
func (r *SourceReconciler) SetupWithManager(mgr ctrl.Manager, replicas cache.Cache, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("source").
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicates.SourceChanged())).
		WatchesRawSource(source.Kind(replicas, &corev1.ConfigMap{},
			handler.TypedEnqueueRequestsFromMapFunc(findSourceOfReplica), predicates.ReplicaChanged())).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.findSourcesForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WithOptions(options).
		Complete(r)
}
