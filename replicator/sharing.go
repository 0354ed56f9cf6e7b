package replicator

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
)

// The replicas of one owner are copies of one source: in the replica cache their
// labels, annotations and (digested) data are equal map for map. mapSharer lets them
// share one instance of each map, so the cache holds a source's metadata and content
// once, not once per target namespace. It is safe because the replica cache's objects
// are never modified after the transform (reads skip the deep copy for the same
// reason), and an object already compacted is never transformed again.
type mapSharer struct {
	mu       sync.Mutex
	byOwner  map[string]*sharedMaps
	calls    int
	lastTidy time.Time
}

// sharedMaps are the current maps of one owner's replicas, with their encodings.
type sharedMaps struct {
	labels, annotations, data sharedMap[string]
	binaryData                sharedMap[[]byte]
	used                      time.Time
}

// sharedMap is the current instance of one map of an owner's replicas.
type sharedMap[V string | []byte] struct {
	encoding string
	m        map[string]V
}

// idleOwner: an owner whose replicas saw no event for this long loses its entry (its
// replicas keep their maps; the next event starts sharing again).
const idleOwner = 10 * time.Minute

func newMapSharer() *mapSharer { return &mapSharer{byOwner: map[string]*sharedMaps{}} }

// share replaces cm's maps by the owner's equal ones, or makes cm's the owner's, and
// interns its name and namespace (shared by the replicas of a source and of a
// namespace).
func (s *mapSharer) share(cm *corev1.ConfigMap) {
	cm.Name = unique.Make(cm.Name).Value()
	cm.Namespace = unique.Make(cm.Namespace).Value()
	owner := OwnerKeyOf(cm) + "\x00" + cm.Name
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
	cm.Labels = shared.labels.adopt(cm.Labels)
	cm.Annotations = shared.annotations.adopt(cm.Annotations)
	cm.Data = shared.data.adopt(cm.Data)
	cm.BinaryData = shared.binaryData.adopt(cm.BinaryData)
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
	enc := encodeMap(m)
	if sm.m != nil && sm.encoding == enc {
		return sm.m
	}
	sm.encoding, sm.m = enc, m
	return m
}

// encodeMap is a canonical encoding of m: keys sorted, each key and value prefixed by
// its length, so that two maps encode alike only when they are equal.
func encodeMap[V string | []byte](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, field := range []string{k, string(m[k])} {
			b.WriteString(strconv.Itoa(len(field)))
			b.WriteByte(':')
			b.WriteString(field)
		}
	}
	return b.String()
}
