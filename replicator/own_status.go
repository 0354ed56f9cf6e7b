package replicator

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ownStatusWrites remembers, for each owner (a source, or a ConfigMapSync), cmsync's
// last status write that the API server took: the resourceVersion of the copy it
// replaced and the status it wrote. A pass that reads that very copy again reads a
// cache that trails cmsync's own write (a namespace's or a replica's event queues a
// pass sooner than the owner's own event arrives); when it finds the status that write
// said, the server already says it. Written again from that copy, the status met the
// newer object (409) and was retried until the cache caught up: a refused write per
// retry, and a pass. A resourceVersion names one version of one object, so an equal
// one is that very copy. same tells two statuses apart as the write would.
type ownStatusWrites[S any] struct {
	mu      sync.Mutex
	written map[types.NamespacedName]ownStatusWrite[S]
	same    func(a, b S) bool
}

type ownStatusWrite[S any] struct {
	replaced string
	status   S
}

func newOwnStatusWrites[S any](same func(a, b S) bool) *ownStatusWrites[S] {
	return &ownStatusWrites[S]{written: map[types.NamespacedName]ownStatusWrite[S]{}, same: same}
}

// wrote records that status was written onto the owner over its copy of version
// replaced.
func (o *ownStatusWrites[S]) wrote(owner types.NamespacedName, replaced string, status S) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.written[owner] = ownStatusWrite[S]{replaced: replaced, status: status}
}

// alreadySays reports whether the owner's copy of this version is the one cmsync's
// last status write replaced, and that write said status.
func (o *ownStatusWrites[S]) alreadySays(owner types.NamespacedName, version string, status S) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.written[owner]
	return ok && w.replaced == version && o.same(w.status, status)
}

// forget drops the record of an owner that is gone.
func (o *ownStatusWrites[S]) forget(owner types.NamespacedName) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.written, owner)
}

// unwrittenChanges remembers, for each owner (a source, or a ConfigMapSync), the time
// of a pass that changed replicas and whose status write did not land, most often a
// 409 from a cached copy that trailed cmsync's own status write. The pass that retries
// may change nothing itself, and the status must still give that change's time as the
// last sync (cmsync.io/last-sync-time, status.lastSyncTime).
type unwrittenChanges struct {
	mu sync.Mutex
	at map[types.NamespacedName]time.Time
}

func newUnwrittenChanges() *unwrittenChanges {
	return &unwrittenChanges{at: map[types.NamespacedName]time.Time{}}
}

// record settles what the status write of a pass did: for a pass that changed replicas
// at changedAt (changed), a write that failed keeps that time, and one that landed (or
// found the status already saying it) ends any kept time.
func (u *unwrittenChanges) record(owner types.NamespacedName, changed bool, changedAt time.Time, writeErr error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case writeErr == nil:
		delete(u.at, owner)
	case changed:
		u.at[owner] = changedAt
	}
}

// lastChange is the time a pass should give as the last sync: its own time when it
// changed replicas, else an earlier pass's change whose status write has not landed;
// changed tells whether either holds.
func (u *unwrittenChanges) lastChange(owner types.NamespacedName, passChanged bool, now time.Time) (changedAt time.Time, changed bool) {
	if passChanged {
		return now, true
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	at, ok := u.at[owner]
	return at, ok
}

// forget drops the record of an owner that is gone.
func (u *unwrittenChanges) forget(owner types.NamespacedName) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.at, owner)
}
