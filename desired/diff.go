package desired

import (
	"encoding/json"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Diff says how an existing replica differs from the desired one.
type Diff struct {
	// Content: a value, the set of keys, the type or the immutable flag differs.
	Content bool
	// Recreate: the content cannot change in place (the replica is immutable, of
	// another type, or differs in a field the API server will not change, such as a
	// RoleBinding's roleRef): the replica must be deleted and created anew.
	Recreate bool
	// Metadata: a desired label or annotation is missing or has another value.
	Metadata bool
	// Stale labels, annotations and content keys the replica must lose: content keys
	// the source does not have, and labels and annotations cmsync wrote that it no
	// longer wants. Labels and annotations others added to the replica are theirs.
	StaleLabels, StaleAnnotations, StaleText, StaleBinary []string
	// StaleFields are the fields of an object (ObjectKind) that cmsync wrote and the
	// source no longer sets: a write removes them. They cause no write of their own: a
	// source that changed changes the content-hash label, which does.
	StaleFields []FieldPath
	// kept is the content an update writes over an object that others wrote fields
	// into: theirs kept, the stale ones removed, the source's set; nil: the source's.
	kept map[string]any
}

// InSync reports whether the replica needs no write.
func (d Diff) InSync() bool {
	return !d.Content && !d.Metadata && len(d.StaleLabels)+len(d.StaleAnnotations)+len(d.StaleText)+len(d.StaleBinary) == 0
}

// Diff compares the desired replica with have, a whole replica read from the API
// server. Its managedFields say which labels and annotations cmsync wrote.
func (t Template[T]) Diff(have T) Diff {
	actual := t.kind.Content(have)
	own := OwnershipOf(t.kind, have)
	d := t.metadataDiff(have, own)
	d.Content = !holdsContent(actual, t.content)
	if _, hashed := have.GetLabels()[v1alpha1.ContentHashLabel]; !hashed && !d.Content {
		// A replica of a release before the content-hash label, in sync: writing the
		// label alone would write every replica of an upgraded cluster once, a write
		// no reader of the replica needs. It gets the label with its next change of
		// content; until then a pass reads it whole (DiffMetadata cannot tell).
		d.Metadata = !containsAll(have.GetLabels(), t.labelsBut(v1alpha1.ContentHashLabel)) || !containsAll(have.GetAnnotations(), t.annotations)
	}
	d.Recreate = d.Content && (ptr.Deref(actual.Immutable, false) || changesImmutableField(t.kind, actual, t.content)) || t.content.Type != actual.Type
	d.StaleText = missingFrom(t.content.Text, sets.KeySet(actual.Text))
	d.StaleBinary = missingFrom(t.content.Binary, sets.KeySet(actual.Binary))
	if t.content.Fields != nil && !d.InSync() {
		// Only a write needs them: a pass over replicas in sync builds nothing.
		d.StaleFields = staleFieldPaths(own.fields, t.content.Fields)
		d.kept = overlay(withoutPaths(actual.Fields, d.StaleFields), t.content.Fields)
	}
	return d
}

// DiffMetadata compares the desired replica with have, a replica's metadata, and says
// whether the metadata could tell. It can when nobody but cmsync wrote the replica's
// content and cmsync owns its content-hash label: then the replica's content keys are
// the ones cmsync owns, and its content is the one the label hashes. It cannot tell
// how the content differs when the replica's immutable flag, type or immutable fields (a
// RoleBinding's roleRef) may stand in the way of an update in place, which only the whole
// replica shows.
//
// What this judgement rests on: the content-hash label and the field manager named
// cmsync are written by cmsync's ServiceAccount alone. Any client could write either,
// so it is the chart's admission policy (docs/protected-replicas.md) that makes it so:
// it refuses every write of an object labelled as a replica by anyone else, but an
// update that changes nothing and a take-over of another replicator's copy, which may
// change markers only and never add the content-hash label (such a copy is read
// whole until cmsync writes its label). Without the policy, whoever may update a
// replica can hide an edit of its content from this comparison until the source's
// content next changes; docs/threat-model.md says so.
func (t Template[T]) DiffMetadata(have metav1.Object) (d Diff, known bool) {
	own := OwnershipOf(t.kind, have)
	if own.OthersWroteContent || !own.Labels.Has(v1alpha1.ContentHashLabel) {
		return Diff{}, false
	}
	d = t.metadataDiff(have, own)
	d.Content = have.GetLabels()[v1alpha1.ContentHashLabel] != t.contentHash ||
		!own.Text.Equal(sets.KeySet(t.content.Text)) || !own.Binary.Equal(sets.KeySet(t.content.Binary)) ||
		own.Immutable != (t.content.Immutable != nil) || own.Type != (t.content.Type != "")
	if d.Content && (own.Immutable || own.Type || len(immutableFieldsOf(t.kind)) > 0) {
		return Diff{}, false
	}
	d.StaleText = missingFrom(t.content.Text, own.Text)
	d.StaleBinary = missingFrom(t.content.Binary, own.Binary)
	if t.content.Fields != nil && !d.InSync() {
		d.StaleFields = staleFieldPaths(own.fields, t.content.Fields)
	}
	return d, true
}

// metadataDiff is how have's labels and annotations differ from the desired ones.
func (t Template[T]) metadataDiff(have metav1.Object, own Ownership) Diff {
	var d Diff
	d.Metadata = !containsAll(have.GetLabels(), t.labels) || !containsAll(have.GetAnnotations(), t.annotations)
	d.StaleLabels = missingFrom(t.labels, own.Labels)
	// Status annotations are cmsync's only on a replica someone labelled as a source
	// (and that was refused); they report on that refusal and are not stale.
	d.StaleAnnotations = slices.DeleteFunc(missingFrom(t.annotations, own.Annotations), v1alpha1.IsStatusAnnotation)
	return d
}

// labelsBut is the desired labels without key.
func (t Template[T]) labelsBut(key string) map[string]string {
	out := maps.Clone(t.labels)
	delete(out, key)
	return out
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

// Replacement is the whole replica an update writes over have, the replica it was
// compared with: have's metadata, with the labels and annotations others added to it,
// plus the desired labels and annotations, minus the stale ones; the desired content;
// and have's resourceVersion, so the write fails rather than overwrite a change it has
// not seen. Its managedFields are left empty, which makes the API server keep the
// recorded ones. It never modifies have (cached objects share their maps).
func (t Template[T]) Replacement(have *metav1.PartialObjectMetadata, d Diff) T {
	meta := *have.ObjectMeta.DeepCopy()
	meta.ManagedFields = nil
	meta.Labels = mergedMetadata(have.Labels, t.labels, d.StaleLabels)
	meta.Annotations = mergedMetadata(have.Annotations, t.annotations, d.StaleAnnotations)
	out := t.kind.WithMeta(meta)
	content := t.contentCopy()
	if d.kept != nil {
		content.Fields = runtime.DeepCopyJSON(d.kept)
	}
	t.kind.SetContent(out, content)
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
	for k, v := range runtime.DeepCopyJSON(t.content.Fields) {
		patch[k] = v
	}
	nullsAt(patch, d.StaleFields)
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
