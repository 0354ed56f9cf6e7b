package replicator

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/replicator/desired"
)

// ownStatusWrites remembers, for each source, cmsync's last status write that the API
// server took: the resourceVersion of the copy it replaced and the status it wrote. A
// pass that reads that very copy again reads a cache that trails cmsync's own write
// (a namespace's or a replica's event queues a pass sooner than the source's own event
// arrives); when it finds the status that write said, the server already says it.
// Written again from that copy, the status met the newer source (409) and was retried
// until the cache caught up: a refused write per retry, and a pass. A resourceVersion
// names one version of one object, so an equal one is that very copy.
//
// It also remembers when a pass changed replicas but its status write did not land
// (most often a 409 from such a copy): the pass that retries may change nothing itself,
// and last-sync-time must still move to the time of that change.
type ownStatusWrites struct {
	mu      sync.Mutex
	written map[types.NamespacedName]ownStatusWrite
	// unwritten is the time of the last change of replicas whose status write has not
	// landed yet.
	unwritten map[types.NamespacedName]time.Time
}

type ownStatusWrite struct {
	replaced string
	status   desired.SourceStatus
}

func newOwnStatusWrites() *ownStatusWrites {
	return &ownStatusWrites{written: map[types.NamespacedName]ownStatusWrite{}, unwritten: map[types.NamespacedName]time.Time{}}
}

// wrote records that status was written onto the source over the copy src, with the
// last-sync-time of any change not yet written.
func (o *ownStatusWrites) wrote(src client.Object, status desired.SourceStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := client.ObjectKeyFromObject(src)
	o.written[key] = ownStatusWrite{replaced: src.GetResourceVersion(), status: status}
	delete(o.unwritten, key)
}

// notWritten records that a pass changed the replicas of the source at the given time
// and its status write did not land.
func (o *ownStatusWrites) notWritten(source types.NamespacedName, changedAt time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.unwritten[source] = changedAt
}

// changeWritten records that the source's annotations say its last change of replicas.
func (o *ownStatusWrites) changeWritten(source types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.unwritten, source)
}

// unwrittenChange returns the time of the source's last change of replicas whose status
// write has not landed, if there is one.
func (o *ownStatusWrites) unwrittenChange(source types.NamespacedName) (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at, ok := o.unwritten[source]
	return at, ok
}

// alreadySays reports whether src is the copy cmsync's last status write of the source
// replaced, and that write said status.
func (o *ownStatusWrites) alreadySays(src client.Object, status desired.SourceStatus) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.written[client.ObjectKeyFromObject(src)]
	return ok && w.replaced == src.GetResourceVersion() && w.status == status
}

// forget drops the record of a source that is gone or no longer one.
func (o *ownStatusWrites) forget(source types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.written, source)
	delete(o.unwritten, source)
}
