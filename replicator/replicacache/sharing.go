package replicacache

import (
	"maps"
	"sync"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/replicator/desired"
)

// The replicas of one owner are copies of one source: in the replica cache their
// labels, annotations, (fingerprinted) content and reduced managedFields are equal map
// for map. mapSharer lets them share one instance of each, so the cache holds a
// source's metadata and content once, not once per target namespace. It is safe
// because the replica cache's objects are never modified after the transform (reads
// skip the deep copy for the same reason).
type mapSharer struct {
	mu       sync.Mutex
	byOwner  map[string]*sharedMaps
	calls    int
	lastTidy time.Time
}

// sharedMaps are the current maps of one owner's replicas, with their encodings.
type sharedMaps struct {
	labels, annotations, text sharedMap[string]
	binary                    sharedMap[[]byte]
	managedFields             sharedFields
	used                      time.Time
}

// sharedMap is the current instance of one map of an owner's replicas.
type sharedMap[V string | []byte] struct {
	m map[string]V
}

// sharedFields is the current instance of an owner's replicas' managedFields, in the
// compact form: at most one entry (compact.go), told apart by its raw fields.
type sharedFields struct {
	raw     string
	entries []metav1.ManagedFieldsEntry
}

// idleOwner: an owner whose replicas saw no event for this long loses its entry (its
// replicas keep their maps; the next event starts sharing again).
const idleOwner = 10 * time.Minute

func newMapSharer() *mapSharer { return &mapSharer{byOwner: map[string]*sharedMaps{}} }

// share replaces obj's maps by the owner's equal ones, or makes obj's the owner's, and
// interns its name and namespace (shared by the replicas of a source and of a
// namespace).
func share[T desired.Object](s *mapSharer, kind desired.Kind[T], obj T) {
	obj.SetName(unique.Make(obj.GetName()).Value())
	obj.SetNamespace(unique.Make(obj.GetNamespace()).Value())
	owner := desired.OwnerKeyOf(kind.Name(), obj) + "\x00" + obj.GetName()
	now := time.Now()

	s.mu.Lock()
	defer s.mu.Unlock()
	s.tidy(now)
	shared := s.byOwner[owner]
	if shared == nil {
		shared = &sharedMaps{}
		s.byOwner[owner] = shared
	}
	shared.used = now
	obj.SetLabels(shared.labels.adopt(obj.GetLabels()))
	obj.SetAnnotations(shared.annotations.adopt(obj.GetAnnotations()))
	obj.SetManagedFields(shared.managedFields.adopt(obj.GetManagedFields()))
	c := kind.Content(obj)
	c.Text, c.Binary = shared.text.adopt(c.Text), shared.binary.adopt(c.Binary)
	kind.SetContent(obj, c)
}

func (s *mapSharer) tidy(now time.Time) {
	s.calls++
	if s.calls%1024 != 0 || now.Sub(s.lastTidy) < time.Minute {
		return
	}
	s.lastTidy = now
	for owner, shared := range s.byOwner {
		if now.Sub(shared.used) > idleOwner {
			delete(s.byOwner, owner)
		}
	}
}

// adopt returns the shared map when m equals it, else makes m the shared one.
func (sm *sharedMap[V]) adopt(m map[string]V) map[string]V {
	if len(m) == 0 {
		return m
	}
	if sm.m != nil && maps.EqualFunc(m, sm.m, func(a, b V) bool { return string(a) == string(b) }) {
		return sm.m
	}
	sm.m = m
	return m
}

// adopt returns the shared entries when entries (compacted: one entry at most) name
// the same fields, else makes entries the shared ones.
func (sf *sharedFields) adopt(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	if len(entries) != 1 || entries[0].FieldsV1 == nil {
		return entries
	}
	raw := entries[0].FieldsV1.GetRawString()
	if sf.entries != nil && sf.raw == raw {
		return sf.entries
	}
	sf.raw, sf.entries = raw, entries
	return entries
}
