package replicator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Owner is on whose behalf replicas are written: the annotations of a source ConfigMap
// (the annotation form), or a ConfigMapSync. Every replica has exactly one owner, read
// from its markers: the source annotation, and for a ConfigMapSync an owner reference.
// Two owners of the same source never share a replica: the first keeps it and the
// other reports a conflict.
type Owner struct {
	// Source is the ConfigMap copied.
	Source types.NamespacedName
	// Sync references the ConfigMapSync; nil for the annotation form.
	Sync *metav1.OwnerReference
}

// AnnotationOwner is the owner of the replicas an annotated source asks for.
func AnnotationOwner(source types.NamespacedName) Owner {
	return Owner{Source: source}
}

// SyncOwner is the owner of the replicas a ConfigMapSync asks for.
func SyncOwner(sync *v1alpha1.ConfigMapSync) Owner {
	return Owner{
		Source: types.NamespacedName{Namespace: sync.Spec.SourceNamespace, Name: sync.Spec.ConfigMapName},
		Sync: &metav1.OwnerReference{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       v1alpha1.ConfigMapSyncKind,
			Name:       sync.Name,
			UID:        sync.UID,
			Controller: ptrTo(true),
		},
	}
}

// Key identifies the owner; the replica cache is indexed by it (OwnerKeyOf).
func (o Owner) Key() string {
	if o.Sync != nil {
		return v1alpha1.ConfigMapSyncKind + "/" + string(o.Sync.UID)
	}
	return "ConfigMap/" + SourceKey(o.Source)
}

// Owns reports whether cm is a replica of this owner: only then may cmsync change or
// delete it for this owner. A replica whose other markers were edited is still owned
// and is repaired; one whose managed-by label was removed has been disowned.
func (o Owner) Owns(cm metav1.Object) bool {
	return IsReplica(cm) && cm.GetAnnotations()[v1alpha1.SourceAnnotation] == SourceKey(o.Source) && OwnerKeyOf(cm) == o.Key()
}

// OwnerKeyOf is the Key of the owner a replica names.
func OwnerKeyOf(cm metav1.Object) string {
	if ref := syncReference(cm); ref != nil {
		return v1alpha1.ConfigMapSyncKind + "/" + string(ref.UID)
	}
	return "ConfigMap/" + cm.GetAnnotations()[v1alpha1.SourceAnnotation]
}

// SyncNameOf returns the name of the ConfigMapSync owning a replica, if one does.
func SyncNameOf(cm metav1.Object) (string, bool) {
	if ref := syncReference(cm); ref != nil {
		return ref.Name, true
	}
	return "", false
}

// describeOwner tells a user who owns a ConfigMap in the way of a replica.
func describeOwner(cm metav1.Object) string {
	switch {
	case !IsReplica(cm):
		return "a ConfigMap not managed by cmsync exists"
	case syncReference(cm) != nil:
		return "a replica managed by ConfigMapSync " + syncReference(cm).Name + " exists"
	default:
		return "a replica of " + cm.GetAnnotations()[v1alpha1.SourceAnnotation] + " made for its annotations exists"
	}
}

func syncReference(cm metav1.Object) *metav1.OwnerReference {
	for _, ref := range cm.GetOwnerReferences() {
		if ref.Kind == v1alpha1.ConfigMapSyncKind && ref.APIVersion == v1alpha1.GroupVersion.String() && ref.Controller != nil && *ref.Controller {
			return &ref
		}
	}
	return nil
}

func ptrTo[T any](v T) *T { return &v }
