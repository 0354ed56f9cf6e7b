package desired

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// oversizedSlack is what an object labelled as a replica may carry beyond
// MaxReplicaMetadataBytes of labels and annotations before the replica store compacts
// it: cmsync's owner reference, and room for the finalizers and owner references of
// others, which cmsync never writes.
const oversizedSlack = 4 << 10

// maxManagedFieldsBytes bounds the managedFields of a replica that the store reduces
// (ReducedManagedFields) and keeps: they name every key of the replica's content, so a
// source of many thousands of keys would otherwise cost its keys' names once more for
// each of its replicas' ownerships. Past it, the replica is compacted: read whole to be
// compared, at the cost of one read per replica in a pass of its source.
const maxManagedFieldsBytes = 64 << 10

// markerValueLimit bounds the value of a marker CompactOversized keeps: the source
// annotation names a namespace and a name (at most 317 bytes); a longer one is not
// cmsync's.
const markerValueLimit = 1 << 10

// CompactOversized reduces obj, an object labelled as a replica as the replica store
// received it, when its metadata is more than cmsync writes (MaxReplicaMetadataBytes of
// labels and annotations, and one owner reference: someone else added the rest, or
// wrote the object), or its managedFields more than maxManagedFieldsBytes. The store keeps every replica's metadata, so it keeps of such an
// object only what routes it to its owner — cmsync's labels, the source annotation and
// the ConfigMapSync, SecretSync or ObjectSync owner reference — and records, in its
// managedFields, that another manager wrote its content: DiffMetadata then cannot tell,
// and a pass reads the object whole to compare it (a read; it writes only when the
// object differs). Memory held per such object is bounded whatever its labels. It
// reports whether obj was reduced.
func CompactOversized[T Object](kind Kind[T], obj metav1.Object) bool {
	if metadataBytesOf(obj) <= MaxReplicaMetadataBytes+oversizedSlack && managedFieldsBytes(obj.GetManagedFields()) <= maxManagedFieldsBytes {
		return false
	}
	labels := map[string]string{}
	for _, key := range []string{v1alpha1.ManagedByLabel, v1alpha1.SourceIDLabel, v1alpha1.ContentHashLabel} {
		keepMarker(labels, obj.GetLabels(), key)
	}
	annotations := map[string]string{}
	keepMarker(annotations, obj.GetAnnotations(), v1alpha1.SourceAnnotation)
	var refs []metav1.OwnerReference
	if ref := syncReference(obj); ref != nil && len(ref.Name) <= markerValueLimit && len(ref.UID) <= markerValueLimit {
		refs = []metav1.OwnerReference{*ref}
	}
	obj.SetLabels(labels)
	obj.SetAnnotations(annotations)
	obj.SetOwnerReferences(refs)
	obj.SetFinalizers(nil)
	fields := contentFieldsOf(kind)
	obj.SetManagedFields([]metav1.ManagedFieldsEntry{
		entryOf(compactedManager, fieldpath.NewSet(fieldpath.MakePathOrDie(fields.someContent()))),
	})
	return true
}

// compactedManager names the one managedFields entry of a compacted object: a manager
// other than cmsync that owns its content, so that its metadata cannot tell whether it
// is in sync.
const compactedManager = "(compacted)"

// IsCompacted reports whether obj is as CompactOversized left it. Its metadata no
// longer changes with its content, so only its resourceVersion shows an edit.
func IsCompacted(obj metav1.Object) bool {
	entries := obj.GetManagedFields()
	return len(entries) == 1 && entries[0].Manager == compactedManager && entries[0].Time == nil
}

// keepMarker copies key from all into kept when its value is short enough to be cmsync's.
func keepMarker(kept, all map[string]string, key string) {
	if v, ok := all[key]; ok && len(v) <= markerValueLimit {
		kept[key] = v
	}
}

// metadataBytesOf is the bytes of obj's labels, annotations, owner references and
// finalizers: the metadata a cached replica holds besides its names and managedFields.
func metadataBytesOf(obj metav1.Object) int64 {
	n := metadataBytes(obj.GetLabels(), obj.GetAnnotations())
	for _, ref := range obj.GetOwnerReferences() {
		n += int64(len(ref.APIVersion)+len(ref.Kind)+len(ref.Name)+len(ref.UID)) + 16
	}
	for _, f := range obj.GetFinalizers() {
		n += int64(len(f))
	}
	return n
}

// managedFieldsBytes is the bytes of the field sets of entries, and of their managers,
// as OwnershipOf reads them: the entries of a subresource (a status an operator writes)
// are not a replica's content and do not count.
func managedFieldsBytes(entries []metav1.ManagedFieldsEntry) int {
	n := 0
	for _, entry := range entries {
		if entry.FieldsV1 != nil && entry.Subresource == "" {
			n += len(entry.FieldsV1.GetRawBytes()) + len(entry.Manager)
		}
	}
	return n
}
