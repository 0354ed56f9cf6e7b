// Package predicates holds the event filters of cmsync's controllers. They only save
// work: every reconcile recomputes the whole desired state, so a dropped event can delay
// nothing that another event or a restart would not also bring about. ConfigMaps have
// no metadata.generation, so generation-based filters cannot be used here: they would
// drop every ConfigMap update.
package predicates

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// SourceChanged passes every source event except an update that changed nothing a
// replica or the target set depends on — above all cmsync's own status writes, which
// would otherwise wake the controller after every pass.
func SourceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldCM, okOld := e.ObjectOld.(*corev1.ConfigMap)
		newCM, okNew := e.ObjectNew.(*corev1.ConfigMap)
		if !okOld || !okNew {
			return true
		}
		return !sameContent(oldCM, newCM) ||
			!maps.Equal(oldCM.Labels, newCM.Labels) ||
			!maps.Equal(withoutStatus(oldCM.Annotations), withoutStatus(newCM.Annotations)) ||
			!sameLifecycle(oldCM, newCM)
	}}
}

// ReplicaChanged passes every replica event except an update that changed neither
// content nor labels nor annotations (a resync, or a change of managedFields only).
// Creates must pass: at start-up they are how orphans of deleted sources are found.
func ReplicaChanged() predicate.TypedPredicate[*corev1.ConfigMap] {
	return predicate.TypedFuncs[*corev1.ConfigMap]{UpdateFunc: func(e event.TypedUpdateEvent[*corev1.ConfigMap]) bool {
		oldCM, newCM := e.ObjectOld, e.ObjectNew
		if oldCM == nil || newCM == nil {
			return true
		}
		return !sameContent(oldCM, newCM) ||
			!maps.Equal(oldCM.Labels, newCM.Labels) ||
			!maps.Equal(oldCM.Annotations, newCM.Annotations) ||
			!sameLifecycle(oldCM, newCM)
	}}
}

// NamespaceChanged passes namespace creates and deletes, and updates that change what
// target resolution reads: the labels, or the start of termination.
func NamespaceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
			!sameLifecycle(e.ObjectOld, e.ObjectNew)
	}}
}

func sameContent(a, b *corev1.ConfigMap) bool {
	return maps.Equal(a.Data, b.Data) &&
		maps.EqualFunc(a.BinaryData, b.BinaryData, func(x, y []byte) bool { return string(x) == string(y) }) &&
		(a.Immutable != nil && *a.Immutable) == (b.Immutable != nil && *b.Immutable)
}

// sameLifecycle reports whether the object is the same incarnation in the same phase of
// its life: a new UID or the start of deletion always matters.
func sameLifecycle(a, b client.Object) bool {
	return a.GetUID() == b.GetUID() &&
		(a.GetDeletionTimestamp() == nil) == (b.GetDeletionTimestamp() == nil)
}

func withoutStatus(annotations map[string]string) map[string]string {
	out := make(map[string]string, len(annotations))
	for k, v := range annotations {
		if !v1alpha1.IsStatusAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

// SyncChanged passes ConfigMapSync events except updates that change neither the spec
// (generation) nor the start of deletion: cmsync's own status and finalizer writes.
func SyncChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return true
		}
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || !sameLifecycle(e.ObjectOld, e.ObjectNew)
	}}
}
