package desired

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Diff says how an existing replica differs from the desired one.
type Diff struct {
	// Content: a value, the set of keys, the type or the immutable flag differs.
	Content bool
	// Recreate: the content cannot change in place (the replica is immutable, or of
	// another type): the replica must be deleted and created anew.
	Recreate bool
	// Metadata: a desired label or annotation is missing or has another value.
	Metadata bool
	// Stale labels, annotations and content keys the replica must lose: content keys
	// the source does not have, and labels and annotations cmsync wrote that it no
	// longer wants. Labels and annotations others added to the replica are theirs.
	StaleLabels, StaleAnnotations, StaleText, StaleBinary []string
}

// InSync reports whether the replica needs no write.
func (d Diff) InSync() bool {
	return !d.Content && !d.Metadata && len(d.StaleLabels)+len(d.StaleAnnotations)+len(d.StaleText)+len(d.StaleBinary) == 0
}

// Diff compares the desired replica with have, an existing replica in the form the
// replica cache holds (its content fingerprinted by the kind, its managedFields those
// of the field manager cmsync), which says which labels and annotations cmsync wrote.
func (t Template[T]) Diff(have T) Diff {
	actual := t.kind.Content(have)
	want := t.fingerprint
	var d Diff
	d.Content = !SameContent(want, actual)
	d.Recreate = d.Content && isTrue(actual.Immutable) || want.Type != actual.Type
	d.Metadata = !containsAll(have.GetLabels(), t.labels) || !containsAll(have.GetAnnotations(), t.annotations)
	ownedLabels, ownedAnnotations := MetadataKeysManagedBy(have, v1alpha1.FieldManager)
	d.StaleLabels = missingFrom(t.labels, ownedLabels)
	// Status annotations are cmsync's only on a replica someone labelled as a source
	// (and that was refused); they report on that refusal and are not stale.
	d.StaleAnnotations = slices.DeleteFunc(missingFrom(t.annotations, ownedAnnotations), v1alpha1.IsStatusAnnotation)
	d.StaleText = missingFrom(want.Text, sets.KeySet(actual.Text))
	d.StaleBinary = missingFrom(want.Binary, sets.KeySet(actual.Binary))
	return d
}

// containsAll reports whether every key of want is in have with the same value.
func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// missingFrom returns, sorted, the keys that want does not have.
func missingFrom[V any](want map[string]V, keys sets.Set[string]) []string {
	var missing []string
	for k := range keys {
		if _, ok := want[k]; !ok {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	return missing
}

// MetadataKeysManagedBy returns the label and annotation keys that manager owns
// according to obj's managedFields, under any operation. The sets may be shared with
// other callers: read them, never modify them.
func MetadataKeysManagedBy(obj Object, manager string) (labels, annotations sets.Set[string]) {
	var raw []byte
	entries := 0
	for _, entry := range obj.GetManagedFields() {
		if entry.Manager == manager && entry.FieldsV1 != nil {
			raw = append(append(raw, entry.FieldsV1.GetRawBytes()...), 0)
			entries++
		}
	}
	if entries == 0 {
		return sets.New[string](), sets.New[string]()
	}
	return managedKeys.of(raw)
}

// managedKeys remembers the keys parsed from the managedFields of the last replicas
// seen: the replicas of one source carry the same, and parsing them (JSON into a
// fieldpath.Set) on every cached event and every comparison was a fifth of cmsync's
// allocations at 100,000 replicas (make bench-sweep). Bounded in entries and in the
// bytes of its keys (a source with many data keys has long managedFields): when full,
// it starts over.
var managedKeys = &keysMemo{byRaw: map[string]metadataKeys{}}

const (
	keysMemoSize  = 4096
	keysMemoBytes = 4 << 20
)

type keysMemo struct {
	mu    sync.Mutex
	byRaw map[string]metadataKeys
	bytes int
}

type metadataKeys struct{ labels, annotations sets.Set[string] }

// of returns the keys named by raw: the FieldsV1 of manager's entries, each followed
// by a zero byte (which JSON never holds).
func (m *keysMemo) of(raw []byte) (labels, annotations sets.Set[string]) {
	m.mu.Lock()
	keys, ok := m.byRaw[string(raw)]
	m.mu.Unlock()
	if ok {
		return keys.labels, keys.annotations
	}
	keys = metadataKeys{sets.New[string](), sets.New[string]()}
	for entry := range bytes.SplitSeq(raw[:len(raw)-1], []byte{0}) {
		fields := &fieldpath.Set{}
		if fields.FromJSON(bytes.NewReader(entry)) != nil {
			continue
		}
		metadata := fields.WithPrefix(fieldpath.FieldNameElement("metadata"))
		insertFieldNames(keys.labels, metadata.WithPrefix(fieldpath.FieldNameElement("labels")))
		insertFieldNames(keys.annotations, metadata.WithPrefix(fieldpath.FieldNameElement("annotations")))
	}
	m.mu.Lock()
	if len(m.byRaw) >= keysMemoSize || m.bytes+len(raw) > keysMemoBytes {
		clear(m.byRaw)
		m.bytes = 0
	}
	m.byRaw[string(raw)] = keys
	m.bytes += len(raw)
	m.mu.Unlock()
	return keys.labels, keys.annotations
}

// insertFieldNames adds the names of the fields in set (a map's keys) to names.
func insertFieldNames(names sets.Set[string], set *fieldpath.Set) {
	for pe := range set.Members.All() {
		if pe.FieldName != nil {
			names.Insert(*pe.FieldName)
		}
	}
	for pe := range set.Children.All() {
		if pe.FieldName != nil {
			names.Insert(*pe.FieldName)
		}
	}
}

// Replacement is the whole replica an update writes over have, the replica it was
// compared with: have's metadata, with the labels and annotations others added to it,
// plus the desired labels and annotations, minus the stale ones; the desired content;
// and have's resourceVersion, so the write fails rather than overwrite a change it has
// not seen. Its managedFields are left empty, which makes the API server keep the
// recorded ones. It never modifies have (cached objects share their maps).
func (t Template[T]) Replacement(have T, d Diff) T {
	out := have.DeepCopyObject().(T)
	out.SetManagedFields(nil)
	out.SetLabels(mergedMetadata(have.GetLabels(), t.labels, d.StaleLabels))
	out.SetAnnotations(mergedMetadata(have.GetAnnotations(), t.annotations, d.StaleAnnotations))
	t.kind.SetContent(out, t.contentCopy())
	return out
}

// mergedMetadata is have with want's entries set and the stale keys removed, in a new map.
func mergedMetadata(have, want map[string]string, stale []string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	maps.Copy(out, have)
	maps.Copy(out, want)
	for _, k := range stale {
		delete(out, k)
	}
	return out
}

// UpdatePatch is the JSON merge patch that brings a replica in line whatever its
// version: the desired labels, annotations and content, null for the diff's stale
// keys, and the replica's UID as a precondition, so it can neither create an object
// nor land on one that replaced the replica.
func (t Template[T]) UpdatePatch(uid types.UID, d Diff) ([]byte, error) {
	// put sets field to the values plus nulls for the stale keys, if that is not empty:
	// an empty object would only create an empty field.
	put := func(into map[string]any, field string, values map[string]any, stale []string) {
		for _, k := range stale {
			values[k] = nil
		}
		if field != "" && len(values) > 0 {
			into[field] = values
		}
	}
	patch, metadata := patchOnUID(uid)
	put(metadata, "labels", anyValues(t.labels), d.StaleLabels)
	put(metadata, "annotations", anyValues(t.annotations), d.StaleAnnotations)
	text, binary := t.kind.PatchFields()
	put(patch, text, anyValues(t.content.Text), d.StaleText)
	put(patch, binary, anyValues(t.content.Binary), d.StaleBinary)
	if t.content.Immutable != nil {
		patch["immutable"] = *t.content.Immutable
	}
	return json.Marshal(patch)
}

// patchOnUID starts a JSON merge patch that is conditional on the object's UID, so it
// can neither create an object nor land on one that replaced the object meant; the
// caller adds fields to patch and to its metadata.
func patchOnUID(uid types.UID) (patch, metadata map[string]any) {
	metadata = map[string]any{"uid": uid}
	return map[string]any{"metadata": metadata}, metadata
}

// anyValues copies a map into one a merge patch can also put nulls in ([]byte values
// marshal as base64, as binary fields must).
func anyValues[V any](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
