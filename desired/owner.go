package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Owner is on whose behalf replicas are written: the annotations of a source (the
// annotation form), or a ConfigMapSync or SecretSync (the explicit form). Every replica
// has exactly one owner, read from its markers: the source annotation, and for the
// explicit form an owner reference. Two
// owners of the same source never share a replica: the first keeps it and the other
// reports a conflict.
type Owner struct {
	// Kind is the kind of the source and its replicas.
	Kind string
	// Source is the object copied.
	Source types.NamespacedName
	// Sync references the ConfigMapSync or SecretSync; nil for the annotation form.
	Sync *metav1.OwnerReference
}

// AnnotationOwner is the owner of the replicas an annotated source of kind asks for.
func AnnotationOwner(kind string, source types.NamespacedName) Owner {
	return Owner{Kind: kind, Source: source}
}

// SyncOwner is the owner of the replicas a ConfigMapSync or SecretSync asks for.
func SyncOwner(sync v1alpha1.Sync) Owner {
	spec := sync.SyncSpec()
	return Owner{
		Kind:   spec.SourceKind,
		Source: spec.Source(),
		Sync: &metav1.OwnerReference{
			APIVersion: v1alpha1.GroupVersion.String(),
			Kind:       spec.Kind,
			Name:       sync.GetName(),
			UID:        sync.GetUID(),
			Controller: ptr.To(true),
		},
	}
}

// Key identifies the owner among the owners of its kind; the replica store of the
// kind is indexed by it (OwnerKeyOf).
func (o Owner) Key() string {
	if o.Sync != nil {
		return o.Sync.Kind + "/" + string(o.Sync.UID)
	}
	return o.Kind + "/" + o.Source.String()
}

// Owns reports whether obj, of the owner's kind, is a replica of this owner: only then
// may cmsync change or delete it for this owner. A replica whose other markers were
// edited is still owned and is repaired; one whose managed-by label was removed has
// been disowned.
//
// It is OwnerKeyOf(o.Kind, obj) == o.Key() with the source annotation naming o.Source,
// decided without building either key: it runs for every replica event and for every
// replica of every pass, and the keys' strings were most of what it cost.
func (o Owner) Owns(obj metav1.Object) bool {
	if !IsReplica(obj) || !namesSource(obj.GetAnnotations()[v1alpha1.SourceAnnotation], o.Source) {
		return false
	}
	ref := syncReference(obj)
	if o.Sync == nil {
		return ref == nil
	}
	return ref != nil && ref.UID == o.Sync.UID
}

// namesSource reports whether a source annotation's value is source.String().
func namesSource(value string, source types.NamespacedName) bool {
	ns, name, found := strings.Cut(value, "/")
	return found && ns == source.Namespace && name == source.Name
}

// OwnerKeyOf is the Key of the owner that a replica of kind names.
func OwnerKeyOf(kind string, obj metav1.Object) string {
	if ref := syncReference(obj); ref != nil {
		return ref.Kind + "/" + string(ref.UID)
	}
	return kind + "/" + obj.GetAnnotations()[v1alpha1.SourceAnnotation]
}

// SyncNameOf returns the name of the ConfigMapSync or SecretSync owning a replica, if
// one does.
func SyncNameOf(obj metav1.Object) (string, bool) {
	if ref := syncReference(obj); ref != nil {
		return ref.Name, true
	}
	return "", false
}

// ReplicaMarkers are the labels and annotation that make an object a replica of owner,
// as NewTemplate stamps them, and its owner reference (nil for the annotation form):
// what taking over an existing copy in place writes onto it (kubectl cmsync migrate).
func ReplicaMarkers(owner Owner) (labels, annotations map[string]string, ref *metav1.OwnerReference) {
	labels = map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.SourceIDLabel: sourceID(owner.Source)}
	annotations = map[string]string{v1alpha1.SourceAnnotation: owner.Source.String()}
	return labels, annotations, owner.Sync
}

// IsReplica reports whether obj carries cmsync's replica markers, for any source.
func IsReplica(obj metav1.Object) bool {
	return obj.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue &&
		obj.GetAnnotations()[v1alpha1.SourceAnnotation] != ""
}

// SourceKeyOf reads the source a replica's annotation names, if it names one.
func SourceKeyOf(obj metav1.Object) (types.NamespacedName, bool) {
	return parseSourceKey(obj.GetAnnotations()[v1alpha1.SourceAnnotation])
}

// sourceID is the value of the source-id label on every replica of source: a hash,
// because a name (up to 253 characters) does not fit in a label value (63). It lets
// anyone list the replicas of one source with one label selector; ownership is decided
// by the source annotation alone.
func sourceID(source types.NamespacedName) string {
	sum := sha256.Sum256([]byte(source.String()))
	return hex.EncodeToString(sum[:])[:40]
}

// DescribeHolder tells the owner of a source who holds the object of kind that is in
// the way of its replica. With the tenant boundary on, another source's replica is not
// named: its source may be beyond the reader's reach (no oracle).
func (p Policy) DescribeHolder(kind string, obj metav1.Object) string {
	if p.TenantLabel != "" && IsReplica(obj) && syncReference(obj) == nil {
		return "a replica of another source exists"
	}
	return DescribeHolder(kind, obj)
}

// DescribeHolder tells a user who holds the object of kind that is in the way of a
// replica.
func DescribeHolder(kind string, obj metav1.Object) string {
	switch {
	case !IsReplica(obj):
		return "a " + kind + " not managed by cmsync exists"
	case syncReference(obj) != nil:
		return "a replica managed by " + syncReference(obj).Kind + " " + syncReference(obj).Name + " exists"
	default:
		return "a replica of " + obj.GetAnnotations()[v1alpha1.SourceAnnotation] + " made for its annotations exists"
	}
}

func syncReference(obj metav1.Object) *metav1.OwnerReference {
	// By index: a pointer to a range variable moves every iteration's copy to the heap,
	// and this runs for every replica event (twice) and every comparison.
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if ref := &refs[i]; isSyncKind(ref.Kind) && ref.APIVersion == syncAPIVersion && ptr.Deref(ref.Controller, false) {
			return ref
		}
	}
	return nil
}

var syncAPIVersion = v1alpha1.GroupVersion.String()

func isSyncKind(kind string) bool {
	return kind == v1alpha1.ConfigMapSyncKind || kind == v1alpha1.SecretSyncKind || kind == v1alpha1.ObjectSyncKind
}
