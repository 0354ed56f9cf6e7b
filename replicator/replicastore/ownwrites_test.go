package replicastore

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func version(uid, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app", UID: types.UID(uid), ResourceVersion: rv}}
}

const writer, key = "ConfigMap/src/app", "ns/app"

// Each write shows in place of the states it left behind until the cache shows its
// result, or a state cmsync did not write; then the entry is gone.
func TestOwnWritesView(t *testing.T) {
	v1, v2, v3 := version("u1", "1"), version("u1", "2"), version("u1", "3")
	other := version("u2", "9")
	tests := []struct {
		name   string
		writes [][2]*metav1.PartialObjectMetadata // before, after
		cached *metav1.PartialObjectMetadata
		want   *metav1.PartialObjectMetadata
		kept   bool
	}{
		{"create not seen yet", [][2]*metav1.PartialObjectMetadata{{nil, v1}}, nil, v1, true},
		{"create seen", [][2]*metav1.PartialObjectMetadata{{nil, v1}}, v1, v1, false},
		{"update not seen yet", [][2]*metav1.PartialObjectMetadata{{v1, v2}}, v1, v2, true},
		{"update seen", [][2]*metav1.PartialObjectMetadata{{v1, v2}}, v2, v2, false},
		{"someone else's version after ours", [][2]*metav1.PartialObjectMetadata{{v1, v2}}, v3, v3, false},
		{"two updates, cache at the first's start", [][2]*metav1.PartialObjectMetadata{{v1, v2}, {v2, v3}}, v1, v3, true},
		{"two updates, cache at the first's result", [][2]*metav1.PartialObjectMetadata{{v1, v2}, {v2, v3}}, v2, v3, true},
		{"delete not seen yet", [][2]*metav1.PartialObjectMetadata{{v1, nil}}, v1, nil, true},
		{"delete not seen, cache at a later version of it", [][2]*metav1.PartialObjectMetadata{{v1, nil}}, v2, nil, true},
		{"delete seen", [][2]*metav1.PartialObjectMetadata{{v1, nil}}, nil, nil, false},
		{"deleted, then another object there", [][2]*metav1.PartialObjectMetadata{{v1, nil}}, other, other, false},
		{"recreated, cache at the old one", [][2]*metav1.PartialObjectMetadata{{v1, nil}, {nil, other}}, v1, other, true},
		{"recreated, cache at none", [][2]*metav1.PartialObjectMetadata{{v1, nil}, {nil, other}}, nil, other, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := newOwnWrites()
			for _, w := range tt.writes {
				o.wrote(writer, key, w[0], w[1], func() *metav1.PartialObjectMetadata { return v1Before(tt.writes) })
			}
			if got := o.at(writer, key, tt.cached); got != tt.want {
				t.Errorf("view = %v, want %v", got, tt.want)
			}
			if _, kept := o.entries[key]; kept != tt.kept {
				t.Errorf("entry kept = %v, want %v", kept, tt.kept)
			}
			if !tt.kept && len(o.byOwner) != 0 {
				t.Errorf("owner index keeps %v", o.byOwner)
			}
		})
	}
}

// v1Before is what the cache shows while the writes are made: the state before the
// first of them.
func v1Before(writes [][2]*metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	return writes[0][0]
}

// A write the cache already shows when its answer comes back (the event was faster)
// leaves no entry; an event that brings a write back ends its entry; another owner's
// reads do not see it.
func TestOwnWritesEntries(t *testing.T) {
	v1, v2 := version("u1", "1"), version("u1", "2")
	o := newOwnWrites()
	o.wrote(writer, key, v1, v2, func() *metav1.PartialObjectMetadata { return v2 })
	if len(o.entries) != 0 {
		t.Fatalf("entry kept for a write the cache already showed: %v", o.entries)
	}
	o.wrote(writer, key, v1, v2, func() *metav1.PartialObjectMetadata { return v1 })
	if got := o.at("ConfigMap/src/other", key, v1); got != v1 {
		t.Errorf("another owner sees %v, want the cache's", got)
	}
	if o.observe(key, v1) { // an older event: still behind
		t.Errorf("an event of the state the write replaced taken for its echo")
	}
	if len(o.entries) != 1 {
		t.Fatalf("entry gone on an event of the state it replaced")
	}
	if !o.observe(key, v2) {
		t.Errorf("the event of the write's result not taken for its echo")
	}
	if len(o.entries) != 0 || len(o.byOwner) != 0 {
		t.Errorf("entry kept after the event of its result: %v %v", o.entries, o.byOwner)
	}
	if o.observe(key, v2) {
		t.Errorf("an event with no write in flight taken for an echo")
	}
}

// Only the very state a write left is its echo: the deletion of a deleted replica,
// not a version someone else wrote over cmsync's.
func TestOwnWritesEcho(t *testing.T) {
	v1, v2, v3 := version("u1", "1"), version("u1", "2"), version("u1", "3")
	o := newOwnWrites()
	o.wrote(writer, key, v1, nil, func() *metav1.PartialObjectMetadata { return v1 })
	if !o.observe(key, nil) {
		t.Errorf("the deletion of a replica cmsync deleted not taken for its echo")
	}
	o.wrote(writer, key, v1, v2, func() *metav1.PartialObjectMetadata { return v1 })
	if o.observe(key, v3) {
		t.Errorf("a version written over cmsync's taken for its echo")
	}
	if len(o.entries) != 0 {
		t.Errorf("entry kept after the cache moved past it: %v", o.entries)
	}

	// A delete recorded before it was sent, then refused: reads see the cache again.
	o.wrote(writer, key, v3, nil, func() *metav1.PartialObjectMetadata { return v3 })
	if got := o.at(writer, key, v3); got != nil {
		t.Errorf("a replica being deleted reads as %v, want none", got)
	}
	o.undoDelete(writer, key)
	if got := o.at(writer, key, v3); got != v3 {
		t.Errorf("after the delete was taken back the replica reads as %v, want the cache's", got)
	}
}

// ownedBy overlays the owner's writes: a created replica the cache has not listed is
// there, a deleted one it still lists is not, an updated one is its answer.
func TestOwnWritesOwnedBy(t *testing.T) {
	at := func(ns, uid, rv string) *metav1.PartialObjectMetadata {
		obj := version(uid, rv)
		obj.Namespace = ns
		return obj
	}
	kept, updatedBefore, updatedAfter, deleted, created := at("a", "ua", "1"), at("b", "ub", "1"), at("b", "ub", "2"), at("c", "uc", "1"), at("d", "ud", "1")
	cached := []*metav1.PartialObjectMetadata{kept, updatedBefore, deleted}
	lookup := func(key string) *metav1.PartialObjectMetadata { return nil }
	o := newOwnWrites()
	if got := o.ownedBy(writer, cached, lookup); len(got) != 3 {
		t.Fatalf("without writes: %d replicas, want the cache's 3", len(got))
	}
	o.wrote(writer, "b/app", updatedBefore, updatedAfter, func() *metav1.PartialObjectMetadata { return updatedBefore })
	o.wrote(writer, "c/app", deleted, nil, func() *metav1.PartialObjectMetadata { return deleted })
	o.wrote(writer, "d/app", nil, created, func() *metav1.PartialObjectMetadata { return nil })
	got := map[string]*metav1.PartialObjectMetadata{}
	for _, obj := range o.ownedBy(writer, cached, lookup) {
		got[obj.Namespace] = obj
	}
	want := map[string]*metav1.PartialObjectMetadata{"a": kept, "b": updatedAfter, "d": created}
	if len(got) != len(want) {
		t.Fatalf("owned: %v, want %v", got, want)
	}
	for ns, obj := range want {
		if got[ns] != obj {
			t.Errorf("in %s: %v, want %v", ns, got[ns], obj)
		}
	}
}
