// Package predicates holds the event filters of cmsync's controllers. They only save
// work: every reconcile recomputes the whole desired state, so a dropped event can delay
// nothing that another event or a restart would not also bring about. ConfigMaps have
// no metadata.generation, so generation-based filters cannot be used here: they would
// drop every ConfigMap update.
package predicates

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// SourceChanged passes every source event except an update that changed nothing: a
// resync. The manager's cache holds a source's metadata only, so a change of its
// content shows as a new resourceVersion and nothing else. A change of the status
// annotations passes: after cmsync's own status write that costs one pass that finds
// everything in place and writes nothing (it reads nothing either: the held source
// follows cmsync's own writes), and a status someone else wrote — a user, or a write of
// an old leader delivered late — is put right instead of standing until the next
// change.
func SourceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() || !sameLifecycle(e.ObjectOld, e.ObjectNew)
	}}
}

// ReplicaChanged passes every replica event except an update that changed neither
// labels nor annotations nor the ownership that the replica store keeps of its
// managedFields (a resync, or a write of cmsync's that changed nothing it owns). The
// replica store holds metadata only: an edit of a replica's content by someone else
// shows as that ownership changing (desired.ReducedManagedFields). Creates pass: at
// start-up they are how orphans of deleted sources are found (the replica store's
// watch hands on one per owner). Of a replica the store keeps compacted
// (desired.CompactOversized), every new version passes: its kept metadata does not
// change with its content.
func ReplicaChanged() predicate.TypedPredicate[*metav1.PartialObjectMetadata] {
	return predicate.TypedFuncs[*metav1.PartialObjectMetadata]{UpdateFunc: func(e event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool {
		return desired.IsCompacted(e.ObjectNew) && e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() ||
			!maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			!maps.Equal(e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()) ||
			!equality.Semantic.DeepEqual(e.ObjectOld.GetManagedFields(), e.ObjectNew.GetManagedFields()) ||
			!sameLifecycle(e.ObjectOld, e.ObjectNew)
	}}
}

// NotReserved drops every event of an object of a name cmsync never touches
// (desired.Policy.IsReserved): one labelled as a replica (a kube-root-ca.crt that an
// older cmsync, or anyone, marked) is no replica, and its edits queue no pass of the
// source it names.
func NotReserved(policy desired.Policy) predicate.TypedPredicate[*metav1.PartialObjectMetadata] {
	return predicate.NewTypedPredicateFuncs(func(obj *metav1.PartialObjectMetadata) bool { return !policy.IsReserved(obj.GetName()) })
}

// NamespaceChanged passes namespace creates and deletes, and updates that change what
// target resolution reads: the labels, cmsync.io/accept-from, or the start of
// termination. It drops the
// creates of a watch's initial list: a controller starts its workers only once all its
// watches have listed, and its own kind's initial list has then queued every source
// (or ConfigMapSync), whose pass reads every namespace; mapping each listed namespace
// to its sources as well was a tenth of cmsync's CPU in a restart at 100,000 replicas
// (make bench-sweep) and queued nothing new.
func NamespaceChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if e.ObjectOld == nil || e.ObjectNew == nil {
				return true
			}
			return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
				!ptr.Equal(desired.NamespaceOf(e.ObjectOld).AcceptFrom, desired.NamespaceOf(e.ObjectNew).AcceptFrom) ||
				!sameLifecycle(e.ObjectOld, e.ObjectNew)
		},
	}
}

// sameLifecycle reports whether the object is the same incarnation in the same phase of
// its life: a new UID or the start of deletion always matters.
func sameLifecycle(a, b desired.Object) bool {
	return a.GetUID() == b.GetUID() &&
		(a.GetDeletionTimestamp() == nil) == (b.GetDeletionTimestamp() == nil)
}

// SyncChanged passes ConfigMapSync and SecretSync events except updates that change neither the spec
// (generation), nor the status, nor the start of deletion: a finalizer write, a resync.
// A status change passes for the reason SourceChanged gives.
func SyncChanged() predicate.Predicate {
	return predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		oldSync, okOld := e.ObjectOld.(v1alpha1.Sync)
		newSync, okNew := e.ObjectNew.(v1alpha1.Sync)
		statusChanged := !okOld || !okNew || !equality.Semantic.DeepEqual(oldSync.SyncStatus(), newSync.SyncStatus())
		return statusChanged || !sameLifecycle(e.ObjectOld, e.ObjectNew)
	}})
}
