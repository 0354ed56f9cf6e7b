package replicastore

import (
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The replicas of one owner are copies of one source: in the store's watch their
// labels and annotations are equal map for map. mapSharer lets them share one instance
// of each, so the watch holds a source's metadata once, not once per target namespace.
// (Their reduced managedFields are shared already: desired.ReducedManagedFields gives
// equal ownerships one instance.) It is safe because the watch's objects are never
// modified after the transform (reads skip the deep copy for the same reason).
type mapSharer struct {
	mu       sync.Mutex
	byOwner  map[string]*sharedMaps
	calls    int
	lastTidy time.Time
}

// sharedMaps are the current maps of one owner's replicas.
type sharedMaps struct {
	labels, annotations sharedMap
	used                time.Time
}

// sharedMap is the current instance of one map of an owner's replicas.
type sharedMap struct {
	m map[string]string
}

// idleOwner: an owner whose replicas saw no event for this long loses its entry (its
// replicas keep their maps; the next event starts sharing again).
const idleOwner = 10 * time.Minute

func newMapSharer() *mapSharer { return &mapSharer{byOwner: map[string]*sharedMaps{}} }

// share replaces obj's maps by the equal ones of the owner's replicas named alike, or
// makes obj's theirs.
func (s *mapSharer) share(ownerKey string, obj *metav1.PartialObjectMetadata) {
	owner := ownerKey + "\x00" + obj.GetName()
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
func (sm *sharedMap) adopt(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	if sm.m != nil && maps.Equal(m, sm.m) {
		return sm.m
	}
	sm.m = m
	return m
}
