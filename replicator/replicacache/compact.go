package replicacache

import (
	"strings"
	"sync"

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
// entry of manager cmsync naming the label and annotation keys it owns. The entries are
// shared by every replica owning the same keys (ownedEntries).
func ownedMetadataFields(obj desired.Object) []metav1.ManagedFieldsEntry {
	labels, annotations := desired.MetadataKeysManagedBy(obj, v1alpha1.FieldManager)
	if labels.Len()+annotations.Len() == 0 {
		return nil
	}
	return ownedEntries.of(labels, annotations)
}

// ownedEntries remembers the reduced entry of the last key sets seen, by their sorted
// keys: every replica of a source owns the same keys, and building the entry (a
// fieldpath.Set written as JSON) for each one was a tenth of a restart's CPU at 100,000
// replicas (make bench-sweep). Bounded: when full, it starts over.
var ownedEntries = &entriesMemo{byKeys: map[string][]metav1.ManagedFieldsEntry{}}

const entriesMemoSize = 4096

type entriesMemo struct {
	mu     sync.Mutex
	byKeys map[string][]metav1.ManagedFieldsEntry
}

func (m *entriesMemo) of(labels, annotations sets.Set[string]) []metav1.ManagedFieldsEntry {
	key := strings.Join(sets.List(labels), "\x00") + "\x01" + strings.Join(sets.List(annotations), "\x00")
	m.mu.Lock()
	defer m.mu.Unlock()
	if entries, ok := m.byKeys[key]; ok {
		return entries
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
	entries := []metav1.ManagedFieldsEntry{{
		Manager:    v1alpha1.FieldManager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(string(raw)),
	}}
	if len(m.byKeys) >= entriesMemoSize {
		clear(m.byKeys)
	}
	m.byKeys[key] = entries
	return entries
}

func insertKeys(fields *fieldpath.Set, metadataField string, keys sets.Set[string]) {
	for k := range keys {
		fields.Insert(fieldpath.MakePathOrDie("metadata", metadataField, k))
	}
}
