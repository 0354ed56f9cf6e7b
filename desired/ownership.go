package desired

import (
	"bytes"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Ownership is what a replica's managedFields say about who wrote what: the keys and
// content fields cmsync (its field manager) owns, and whether anyone else owns a content
// field. Every write of an update takes the fields it changes from their former
// managers and a removed field leaves every manager, so a replica nobody but cmsync
// wrote content into has exactly the content keys cmsync owns, with the values cmsync
// wrote. The sets may be shared with other callers: read them, never modify them.
type Ownership struct {
	// Labels and Annotations are the metadata keys cmsync owns.
	Labels, Annotations sets.Set[string]
	// Text and Binary are the content keys cmsync owns (Content.Text and Content.Binary).
	Text, Binary sets.Set[string]
	// Immutable and Type: cmsync owns the immutable flag, the type.
	Immutable, Type bool
	// OthersWroteContent: another manager owns a content field, so the metadata cannot
	// tell what the content is.
	OthersWroteContent bool
	// fields are the content fields cmsync owns, of a kind whose content is its
	// top-level fields (ObjectKind); nil for other kinds.
	fields *fieldpath.Set
	// reduced is this ownership as managedFields (ReducedManagedFields), built once
	// with it.
	reduced []metav1.ManagedFieldsEntry
}

// contentFields names a kind's content fields in managedFields: its data-like fields,
// or, for a kind whose content is its top-level fields (every), all of those.
type contentFields struct {
	text, binary string
	every        bool
}

func contentFieldsOf[T Object](kind Kind[T]) contentFields {
	text, binary := kind.PatchFields()
	return contentFields{text: text, binary: binary, every: contentIsFields(kind)}
}

// isContent reports whether a top-level field holds content. A Secret's stringData
// is write-only, but an update that wrote it is recorded under it.
func (f contentFields) isContent(name string) bool {
	if f.every {
		return name != "" && !notContent[name]
	}
	return name == "immutable" || name == "type" || name == "stringData" || name != "" && (name == f.text || name == f.binary)
}

// someContent names one content field: the reduced entry of the other managers says
// they own it.
func (f contentFields) someContent() string {
	if f.every {
		return "spec"
	}
	return f.binary
}

// contentPaths are the paths of set inside a top-level content field.
func (f contentFields) contentPaths(set *fieldpath.Set) *fieldpath.Set {
	out := &fieldpath.Set{}
	set.Iterate(func(p fieldpath.Path) {
		if len(p) > 0 && p[0].FieldName != nil && f.isContent(*p[0].FieldName) {
			out.Insert(p.Copy())
		}
	})
	return out
}

// OwnershipOf reads obj's managedFields as Ownership for a replica of kind.
func OwnershipOf[T Object](kind Kind[T], obj metav1.Object) Ownership {
	entries := obj.GetManagedFields()
	if len(entries) == 0 {
		return emptyOwnership()
	}
	fields := contentFieldsOf(kind)
	if managedFieldsBytes(entries) > maxManagedFieldsBytes {
		// Those of a replica of many thousands of keys, which the replica store does not
		// keep reduced (CompactOversized), are parsed for the one comparison and not
		// remembered: each would hold megabytes of parsed keys for a read that comes once
		// per change of the replica.
		return parseOwnership(fields, entries)
	}
	// The key is built on the stack when it fits (a replica's managedFields are a few
	// hundred bytes): this runs for every cached event and every comparison.
	var buf [1024]byte
	raw := append(append(append(append(buf[:0], fields.text...), 0), fields.binary...), 0)
	if fields.every {
		raw = append(raw, 1, 0)
	}
	for _, entry := range entries {
		if entry.FieldsV1 == nil {
			continue
		}
		raw = append(append(append(append(raw, entry.Manager...), 0), entry.FieldsV1.GetRawBytes()...), 0)
	}
	return ownerships.of(raw, fields, entries)
}

func emptyOwnership() Ownership {
	return Ownership{Labels: sets.New[string](), Annotations: sets.New[string](), Text: sets.New[string](), Binary: sets.New[string]()}
}

// ownerships remembers the Ownership read from the managedFields of the last replicas
// seen: the replicas of one source carry the same, and parsing them (JSON into a
// fieldpath.Set) on every cached event and every comparison was a fifth of cmsync's
// allocations at 100,000 replicas (make bench-sweep). Bounded in entries and in the
// bytes of its keys (a source with many data keys has long managedFields): when full,
// it starts over.
var ownerships = &ownershipMemo{byRaw: map[string]Ownership{}}

const (
	ownershipMemoSize  = 4096
	ownershipMemoBytes = 4 << 20
)

type ownershipMemo struct {
	mu    sync.Mutex
	byRaw map[string]Ownership
	bytes int
}

// of returns the Ownership of entries, whose managers and fields raw spells out.
func (m *ownershipMemo) of(raw []byte, fields contentFields, entries []metav1.ManagedFieldsEntry) Ownership {
	m.mu.Lock()
	own, ok := m.byRaw[string(raw)]
	m.mu.Unlock()
	if ok {
		return own
	}
	own = parseOwnership(fields, entries)
	own.reduced = reducedEntries(own, fields)
	m.mu.Lock()
	if len(m.byRaw) >= ownershipMemoSize || m.bytes+len(raw) > ownershipMemoBytes {
		clear(m.byRaw)
		m.bytes = 0
	}
	m.byRaw[string(raw)] = own
	m.bytes += len(raw)
	m.mu.Unlock()
	return own
}

func parseOwnership(fields contentFields, entries []metav1.ManagedFieldsEntry) Ownership {
	own := emptyOwnership()
	for _, entry := range entries {
		if entry.FieldsV1 == nil {
			continue
		}
		set := &fieldpath.Set{}
		if set.FromJSON(bytes.NewReader(entry.FieldsV1.GetRawBytes())) != nil {
			continue
		}
		if entry.Manager != v1alpha1.FieldManager {
			own.OthersWroteContent = own.OthersWroteContent || ownsContent(set, fields)
			continue
		}
		metadata := set.WithPrefix(fieldpath.FieldNameElement("metadata"))
		insertFieldNames(own.Labels, metadata.WithPrefix(fieldpath.FieldNameElement("labels")))
		insertFieldNames(own.Annotations, metadata.WithPrefix(fieldpath.FieldNameElement("annotations")))
		if fields.text != "" {
			insertFieldNames(own.Text, set.WithPrefix(fieldpath.FieldNameElement(fields.text)))
		}
		insertFieldNames(own.Binary, set.WithPrefix(fieldpath.FieldNameElement(fields.binary)))
		own.Immutable = own.Immutable || hasField(set, "immutable")
		own.Type = own.Type || hasField(set, "type")
		if fields.every {
			own.fields = fields.contentPaths(set).Union(orEmpty(own.fields))
		}
	}
	return own
}

// ownsContent reports whether set names a content field or anything inside one.
func ownsContent(set *fieldpath.Set, fields contentFields) bool {
	names := sets.New[string]()
	insertFieldNames(names, set)
	for name := range names {
		if fields.isContent(name) {
			return true
		}
	}
	return false
}

func hasField(set *fieldpath.Set, name string) bool {
	return set.Has(fieldpath.MakePathOrDie(name))
}

// insertFieldNames adds the names of the fields in set (a map's keys) to names. Its
// loops never stop early: fieldpath's iterators panic when a loop body does.
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

// ReducedManagedFields is obj's managedFields reduced to what OwnershipOf reads: one
// entry of cmsync naming what it owns, and one standing for every other manager that
// owns a content field. The replica store keeps this form: a replica's events change it
// only when ownership does. The entries are built when the ownership is parsed and
// remembered with it, so the replicas of one source share them, and the replica
// cache's transform builds nothing per event.
func ReducedManagedFields[T Object](kind Kind[T], obj metav1.Object) []metav1.ManagedFieldsEntry {
	own := OwnershipOf(kind, obj)
	if own.reduced == nil && managedFieldsBytes(obj.GetManagedFields()) > maxManagedFieldsBytes {
		// Not remembered (OwnershipOf). The replica store compacts such an object before
		// it would ask; this keeps the answer right for any other caller.
		return reducedEntries(own, contentFieldsOf(kind))
	}
	return own.reduced
}

// IsReduced reports whether entries are already in ReducedManagedFields' form: the API
// server gives every entry it records a time, and the reduced entries have none. (Only
// entries a client wrote by hand, every one without a time, pass for reduced; the
// replica store then keeps them as they came, which is correct, only not compact.)
func IsReduced(entries []metav1.ManagedFieldsEntry) bool {
	if len(entries) == 0 {
		return false
	}
	for i := range entries {
		if entries[i].Time != nil {
			return false
		}
	}
	return true
}

// othersManager names the entry of ReducedManagedFields that stands for every manager
// but cmsync.
const othersManager = "(others)"

// reducedEntries writes own as managedFields entries.
func reducedEntries(own Ownership, fields contentFields) []metav1.ManagedFieldsEntry {
	var entries []metav1.ManagedFieldsEntry
	if ours := ownedFieldSet(own, fields); !ours.Empty() {
		entries = append(entries, entryOf(v1alpha1.FieldManager, ours))
	}
	if own.OthersWroteContent {
		// Which content field another manager owns does not matter: any makes the
		// content unknown from metadata.
		entries = append(entries, entryOf(othersManager, fieldpath.NewSet(fieldpath.MakePathOrDie(fields.someContent()))))
	}
	return entries
}

func ownedFieldSet(own Ownership, fields contentFields) *fieldpath.Set {
	set := &fieldpath.Set{}
	insertKeys := func(keys sets.Set[string], prefix ...any) {
		for k := range keys {
			set.Insert(fieldpath.MakePathOrDie(append(prefix, k)...))
		}
	}
	insertKeys(own.Labels, "metadata", "labels")
	insertKeys(own.Annotations, "metadata", "annotations")
	if fields.text != "" {
		insertKeys(own.Text, fields.text)
	}
	insertKeys(own.Binary, fields.binary)
	if own.Immutable {
		set.Insert(fieldpath.MakePathOrDie("immutable"))
	}
	if own.Type {
		set.Insert(fieldpath.MakePathOrDie("type"))
	}
	if own.fields != nil {
		set = set.Union(own.fields)
	}
	return set
}

// entryOf is a managedFields entry of manager owning set. Only field names go into
// set, so writing it as JSON cannot fail.
func entryOf(manager string, set *fieldpath.Set) metav1.ManagedFieldsEntry {
	raw, _ := set.ToJSON()
	return metav1.ManagedFieldsEntry{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1",
		FieldsV1:   metav1.NewFieldsV1(string(raw)),
	}
}

func orEmpty(set *fieldpath.Set) *fieldpath.Set {
	if set == nil {
		return &fieldpath.Set{}
	}
	return set
}
