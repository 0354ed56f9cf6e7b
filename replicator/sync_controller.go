package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/predicates"
)

// SyncReconciler is the ConfigMapSync front door: it resolves a ConfigMapSync's targets
// and hands them to the same Engine as the annotation form. Its replicas carry an owner
// reference to the ConfigMapSync; a finalizer deletes them when the ConfigMapSync is
// deleted, also where no garbage collector runs.
type SyncReconciler struct {
	// Client reads ConfigMapSyncs and namespaces from the manager's cache, and writes.
	Client client.Client
	// Sources watches the ConfigMaps that ConfigMapSyncs name.
	Sources *SourceWatcher
	FrontDoor
}

// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=cmsync.io,resources=configmapsyncs/status,verbs=patch

// Reconcile brings the replicas of one ConfigMapSync in line with its spec and source.
func (r *SyncReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer func(start time.Time) { r.Metrics.ObserveSync(time.Since(start)) }(time.Now())

	sync := &v1alpha1.ConfigMapSync{}
	if err := r.Client.Get(ctx, req.NamespacedName, sync); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	r.retainSourceWatches(ctx)
	if !sync.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, sync)
	}
	if err := r.ensureFinalizer(ctx, sync); err != nil {
		return ctrl.Result{}, err
	}

	owner := SyncOwner(sync)
	before := sync.Status.DeepCopy()
	existing, err := r.Engine.ListOwned(ctx, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	replicas, strays := SplitStrays(existing, owner)
	plan, problem, err := r.planFor(ctx, sync, owner)
	if err != nil {
		return ctrl.Result{}, err
	}
	if problem != nil {
		SetSyncProblem(&sync.Status, sync.Generation, SourceKey(owner.Source), problem.reason, problem, len(plan.targets), countSynced(plan, replicas))
		r.Metrics.RecordSource(owner.Key(), ReplicaCounts{})
		return ctrl.Result{}, r.writeStatus(ctx, sync, before, problem.reason)
		// No retry: a spec edit, the source's creation or a namespace event wakes it.
	}
	pass := r.Engine.Run(ctx, owner, plan.targets, plan.desired, replicas, append(ReplicasOutside(replicas, plan.targetSet()), strays...))
	counts := CountReplicas(pass.Results)
	r.Metrics.RecordSource(owner.Key(), counts)
	if pass.Changed() {
		log.FromContext(ctx).Info("replicas written", "written", pass.Written(), "deleted", pass.Deleted, "synced", fmt.Sprintf("%d/%d", counts.Synced, len(pass.Results)))
	}
	SetSyncStatus(&sync.Status, sync.Generation, SourceKey(owner.Source), pass.Results, pass.CleanupErr, pass.Changed(), metav1.Now())
	failures := pass.Failures()
	reason := v1alpha1.ReasonSynced
	if counts.Conflict > 0 {
		reason = v1alpha1.ReasonConflict
	} else if failures != nil {
		reason = v1alpha1.ReasonFailed
	}
	if err := errors.Join(failures, r.writeStatus(ctx, sync, before, reason)); err != nil {
		return ctrl.Result{}, err
	}
	if counts.Conflict > 0 {
		return ctrl.Result{RequeueAfter: r.ConflictRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// syncProblem is why a ConfigMapSync cannot be acted on now; nothing is changed.
type syncProblem struct {
	reason string
	error
}

// planFor resolves targets and reads the source. A problem means: report and change
// nothing; an error means: retry.
func (r *SyncReconciler) planFor(ctx context.Context, sync *v1alpha1.ConfigMapSync, owner Owner) (plan, *syncProblem, error) {
	spec, err := ParseSyncTargets(sync.Spec)
	if err != nil {
		return plan{}, &syncProblem{v1alpha1.ReasonInvalid, err}, nil
	}
	if !r.Policy.AllowsSource(owner.Source.Namespace) {
		return plan{}, &syncProblem{v1alpha1.ReasonInvalid, fmt.Errorf("sources are not allowed in namespace %s (the controller's --source-namespaces)", owner.Source.Namespace)}, nil
	}
	namespaces, err := listNamespaces(ctx, r.Client)
	if err != nil {
		return plan{}, nil, err
	}
	p := plan{targets: TargetNamespaces(spec, owner.Source.Namespace, namespaces, r.Policy)}
	src, found, err := r.Sources.Get(ctx, owner.Source)
	if err != nil {
		return plan{}, nil, err
	}
	if !found {
		return p, &syncProblem{v1alpha1.ReasonSourceNotFound, fmt.Errorf("source ConfigMap %s not found; existing replicas are kept until it returns or this ConfigMapSync is deleted", SourceKey(owner.Source))}, nil
	}
	if IsReplica(src) {
		return p, &syncProblem{v1alpha1.ReasonInvalid, fmt.Errorf("source ConfigMap %s is itself a replica of %s; name the original", SourceKey(owner.Source), src.Annotations[v1alpha1.SourceAnnotation])}, nil
	}
	var strip []string
	if value := annotation(src, v1alpha1.StripMetadataAnnotation); value != nil {
		if strip, err = ParseStripMetadata(*value); err != nil {
			return p, &syncProblem{v1alpha1.ReasonInvalid, fmt.Errorf("source ConfigMap %s: %w", SourceKey(owner.Source), err)}, nil
		}
	}
	p.desired = func(ns string) *corev1.ConfigMap { return DesiredReplica(src, ns, strip, owner) }
	return p, nil, nil
}

func countSynced(p plan, replicas map[string]*corev1.ConfigMap) int {
	n := 0
	for _, ns := range p.targets {
		if replicas[ns] != nil {
			n++
		}
	}
	return n
}

// finalize deletes every replica of a ConfigMapSync being deleted, then lets it go.
func (r *SyncReconciler) finalize(ctx context.Context, sync *v1alpha1.ConfigMapSync) error {
	owner := SyncOwner(sync)
	r.Metrics.ForgetSource(owner.Key())
	if !controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
		return nil
	}
	owned, err := r.Engine.ListOwned(ctx, owner)
	if err != nil {
		return err
	}
	deleted, err := r.Engine.DeleteReplicas(ctx, owned)
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("deleted the replicas of a deleted ConfigMapSync", "deleted", deleted)
	before := sync.DeepCopy()
	controllerutil.RemoveFinalizer(sync, v1alpha1.CleanupFinalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})))
}

func (r *SyncReconciler) ensureFinalizer(ctx context.Context, sync *v1alpha1.ConfigMapSync) error {
	if controllerutil.ContainsFinalizer(sync, v1alpha1.CleanupFinalizer) {
		return nil
	}
	before := sync.DeepCopy()
	controllerutil.AddFinalizer(sync, v1alpha1.CleanupFinalizer)
	if err := r.Client.Patch(ctx, sync, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// writeStatus patches the status when it changed, with an Event and a log line when the
// Ready condition says something new.
func (r *SyncReconciler) writeStatus(ctx context.Context, sync *v1alpha1.ConfigMapSync, before *v1alpha1.ConfigMapSyncStatus, eventReason string) error {
	if equality.Semantic.DeepEqual(*before, sync.Status) {
		return nil
	}
	ready := findReady(sync.Status.Conditions)
	if old := findReady(before.Conditions); ready != nil && (old == nil || old.Reason != ready.Reason || old.Message != ready.Message) {
		eventType := corev1.EventTypeWarning
		if ready.Status == metav1.ConditionTrue {
			eventType = corev1.EventTypeNormal
		}
		if ready.Status != metav1.ConditionTrue {
			log.FromContext(ctx).Info("ConfigMapSync not ready", "reason", ready.Reason, "message", ready.Message)
		}
		r.Recorder.Eventf(sync, nil, eventType, eventReason, "Sync", "%s (%s)", ready.Message, sync.Status.Synced)
	}
	patched := sync.DeepCopy()
	patched.Status = *before
	if err := r.Client.Status().Patch(ctx, sync, client.MergeFrom(patched)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing ConfigMapSync status: %w", err))
	}
	return nil
}

func findReady(conditions []metav1.Condition) *metav1.Condition {
	for i := range conditions {
		if conditions[i].Type == v1alpha1.ConditionReady {
			return &conditions[i]
		}
	}
	return nil
}

// retainSourceWatches keeps the source watches of every ConfigMapSync and stops the
// others.
func (r *SyncReconciler) retainSourceWatches(ctx context.Context) {
	var syncs v1alpha1.ConfigMapSyncList
	if err := r.Client.List(ctx, &syncs); err != nil {
		return // keep every watch; the next pass retries
	}
	keep := make(map[types.NamespacedName]bool, len(syncs.Items))
	for i := range syncs.Items {
		if syncs.Items[i].DeletionTimestamp.IsZero() {
			keep[SyncOwner(&syncs.Items[i]).Source] = true
		}
	}
	r.Sources.Retain(keep)
}

// findSyncsForSource maps a source ConfigMap to the ConfigMapSyncs naming it.
func (r *SyncReconciler) findSyncsForSource(ctx context.Context, cm client.Object) []reconcile.Request {
	return r.findSyncs(ctx, func(s *v1alpha1.ConfigMapSync) bool {
		return s.Spec.SourceNamespace == cm.GetNamespace() && s.Spec.ConfigMapName == cm.GetName()
	})
}

// findSyncsForNamespace maps a namespace (old and new, on updates) to the
// ConfigMapSyncs whose targets match it.
func (r *SyncReconciler) findSyncsForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := namespaceOf(obj)
	return r.findSyncs(ctx, func(s *v1alpha1.ConfigMapSync) bool {
		spec, err := ParseSyncTargets(s.Spec)
		return err == nil && spec.Matches(ns)
	})
}

func (r *SyncReconciler) findSyncs(ctx context.Context, match func(*v1alpha1.ConfigMapSync) bool) []reconcile.Request {
	var syncs v1alpha1.ConfigMapSyncList
	if err := r.Client.List(ctx, &syncs); err != nil {
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

// findSyncOfReplica maps a replica to the ConfigMapSync owning it.
func findSyncOfReplica(_ context.Context, cm *corev1.ConfigMap) []reconcile.Request {
	if name, ok := SyncNameOf(cm); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: name}}}
	}
	return nil
}

// SetupWithManager watches ConfigMapSyncs, their replicas, the namespaces they may
// target and, through the SourceWatcher, the ConfigMaps they name.
func (r *SyncReconciler) SetupWithManager(mgr ctrl.Manager, replicas cache.Cache, options controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("configmapsync").
		For(&v1alpha1.ConfigMapSync{}, builder.WithPredicates(predicates.SyncChanged())).
		WatchesRawSource(source.Kind(replicas, &corev1.ConfigMap{},
			handler.TypedEnqueueRequestsFromMapFunc(findSyncOfReplica), predicates.ReplicaChanged())).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.findSyncsForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged())).
		WatchesRawSource(source.Channel(r.Sources.Events(), handler.EnqueueRequestsFromMapFunc(r.findSyncsForSource))).
		WithOptions(options).
		Complete(r)
}
