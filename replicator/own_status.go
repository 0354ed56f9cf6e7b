package replicator

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ownStatus keeps, for each owner (a source, or a ConfigMapSync or SecretSync), what a front door
// knows of its own status writes that its cache may not show yet.
//
// The last status write the API server took: the resourceVersion of the copy it
// replaced and the status it wrote. A pass that reads that very copy again reads a
// cache that trails cmsync's own write (a namespace's or a replica's event queues a
// pass sooner than the owner's own event arrives); when it finds the status that write
// said, the server already says it. Written again from that copy, the status met the
// newer object (409) and was retried until the cache caught up: a refused write per
// retry, and a pass. A resourceVersion names one version of one object, so an equal
// one is that very copy. same tells two statuses apart as the write would.
//
// The time of a pass that changed replicas and whose status write did not land, most
// often a 409 from such a copy. The pass that retries may change nothing itself, and
// the status must still give that change's time as the last sync
// (cmsync.io/last-sync-time, status.lastSyncTime).
type ownStatus[S any] struct {
	mu     sync.Mutex
	owners map[types.NamespacedName]ownStatusRecord[S]
	same   func(a, b S) bool
}

type ownStatusRecord[S any] struct {
	// replaced and status are the last status write that landed (replaced "": none).
	replaced string
	status   S
	// unwrittenChange is the time of a change no status write has given yet (zero:
	// none).
	unwrittenChange time.Time
}

func newOwnStatus[S any](same func(a, b S) bool) *ownStatus[S] {
	return &ownStatus[S]{owners: map[types.NamespacedName]ownStatusRecord[S]{}, same: same}
}

// wrote records that status was written onto the owner over its copy of version
// replaced.
func (o *ownStatus[S]) wrote(owner types.NamespacedName, replaced string, status S) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.owners[owner]
	rec.replaced, rec.status = replaced, status
	o.owners[owner] = rec
}

// alreadySays reports whether the owner's copy of this version is the one cmsync's
// last status write replaced, and that write said status.
func (o *ownStatus[S]) alreadySays(owner types.NamespacedName, version string, status S) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec, ok := o.owners[owner]
	return ok && rec.replaced != "" && rec.replaced == version && o.same(rec.status, status)
}

// lastChange is the time a pass should give as the last sync: its own time when it
// changed replicas, else an earlier pass's change whose status write has not landed;
// changed tells whether either holds.
func (o *ownStatus[S]) lastChange(owner types.NamespacedName, passChanged bool, now time.Time) (changedAt time.Time, changed bool) {
	if passChanged {
		return now, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	at := o.owners[owner].unwrittenChange
	return at, !at.IsZero()
}

// settle records what the status write of a pass did: for a pass that changed
// replicas at changedAt (changed), a write that failed keeps that time, and one that
// landed (or found the status already saying it) ends any kept time.
func (o *ownStatus[S]) settle(owner types.NamespacedName, changed bool, changedAt time.Time, writeErr error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	rec, ok := o.owners[owner]
	switch {
	case writeErr == nil && !ok:
		return
	case writeErr == nil:
		rec.unwrittenChange = time.Time{}
	case changed:
		rec.unwrittenChange = changedAt
	default:
		return
	}
	o.owners[owner] = rec
}

// forget drops the record of an owner that is gone.
func (o *ownStatus[S]) forget(owner types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.owners, owner)
}
