package replicacache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
)

// The replica cache keeps each replica in a compact form that still says all a
// comparison with the desired replica needs (desired.Template.Diff):
//   - its content fingerprinted by its kind (long values of a ConfigMap), so memory
//     does not grow with the source's size times its targets;
//   - its managedFields reduced to one entry of the field manager cmsync naming only
//     the label and annotation keys it owns, instead of every manager's fields;
//   - its maps shared with the other replicas of the same owner (mapSharer).
// Every step can run twice on the same object and changes nothing the second time:
// informers may transform an object more than once.

// compact puts obj into the cache's form, in place (but for the maps shared later).
func compact[T desired.Object](kind desired.Kind[T], obj T) {
	kind.SetContent(obj, kind.Fingerprint(kind.Content(obj)))
	obj.SetManagedFields(ownedMetadataFields(obj))
}

// ownedMetadataFields is obj's managedFields reduced to what cmsync reads of them: one
// entry of manager cmsync naming the label and annotation keys it owns.
func ownedMetadataFields(obj desired.Object) []metav1.ManagedFieldsEntry {
	labels, annotations := desired.MetadataKeysManagedBy(obj, v1alpha1.FieldManager)
	if labels.Len()+annotations.Len() == 0 {
		return nil
	}
	fields := &fieldpath.Set{}
	insertKeys(fields, "labels", labels)
	insertKeys(fields, "annotations", annotations)
	raw, err := fields.ToJSON()
	if err != nil {
		// Only field names go in, so ToJSON cannot fail; keeping nothing would only
		// make cmsync leave a stale key of its own on the replica.
		return nil
	}
	return []metav1.ManagedFieldsEntry{{
		Manager:    v1alpha1.FieldManager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(string(raw)),
	}}
}

func insertKeys(fields *fieldpath.Set, metadataField string, keys sets.Set[string]) {
	for k := range keys {
		fields.Insert(fieldpath.MakePathOrDie("metadata", metadataField, k))
	}
}
