package replicastore

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
)

// ownWrites is what cmsync wrote to replicas that the cache has not seen yet: the
// answer to each write (or the deletion), until the watch brings the same state.
//
// Every write cmsync makes to a replica comes back as a watch event, and the first of
// a pass's events queues the owner's next pass, which runs while the others are still
// on their way. Read from the cache alone, that pass found the replicas the first had
// just deleted and deleted them again (answered 404), created the ones whose creation
// the cache had not seen (409, then a read), and updated from the version the first
// had replaced (409, then a read): in a 900 KiB cleanup of 1,000 replicas it sent up to
// 2,318 deletes, at 100 KiB one update pass sent 300 writes that failed, and each of
// those costs the API server a read of the replica from etcd (make bench-sweep, the
// requests of each phase). Seen through ownWrites, that pass finds each replica as the
// first one left it, and has nothing to do.
//
// It is the informer "expectations" of Kubernetes' own controllers, kept per object:
// an entry lives from the write's answer (a delete's, from before it is sent) to the
// event of the same state (OnAdd, OnUpdate, OnDelete forget it), so it holds only the
// writes in flight through the watch. The store's writes make the entries themselves
// (writes.go), so no write can go unrecorded. No library keeps them for a
// controller-runtime cache, hence this.
type ownWrites struct {
	mu sync.Mutex
	// entries by object key ("namespace/name"), and the keys of each owner.
	entries map[string]*ownWrite
	byOwner map[string]sets.Set[string]
}

// ownWrite is one replica's writes not seen yet: the state they left (nil: deleted),
// and the states the cache may still show in its place, oldest first.
type ownWrite struct {
	owner  string
	result *metav1.PartialObjectMetadata
	behind []state
}

// state names one state of an object: absent (zero), or one version of one object. A
// deleted object's state matches any version of it (anyVersion): the delete was
// conditional on the UID alone, and the cache may show a later version than the one
// the deleter read before it shows the deletion.
type state struct {
	uid        types.UID
	version    string
	anyVersion bool
}

func stateOf(obj *metav1.PartialObjectMetadata) state {
	if obj == nil {
		return state{}
	}
	return state{uid: obj.UID, version: obj.ResourceVersion}
}

// shows reports whether the cache's object (nil: none) is in this state.
func (s state) shows(cached *metav1.PartialObjectMetadata) bool {
	if cached == nil || s.uid == "" {
		return cached == nil && s.uid == ""
	}
	return cached.UID == s.uid && (s.anyVersion || cached.ResourceVersion == s.version)
}

func newOwnWrites() *ownWrites {
	return &ownWrites{entries: map[string]*ownWrite{}, byOwner: map[string]sets.Set[string]{}}
}

// view is what a reader of the cache should see at key, given the cached object (nil:
// none): the result of cmsync's own write while the cache still shows a state that
// write left behind, else the cached object. stale says the entry is done with (the
// cache has caught up, or moved on to a state cmsync did not write).
func (w *ownWrite) view(cached *metav1.PartialObjectMetadata) (seen *metav1.PartialObjectMetadata, stale bool) {
	if stateOf(w.result).shows(cached) {
		return cached, true
	}
	for _, s := range w.behind {
		if s.shows(cached) {
			return w.result, false
		}
	}
	return cached, true
}

// wrote records a write of owner's at key: from before (nil: absent) to after (nil:
// deleted), unless the cache (cached, read under the same lock the event handler takes)
// already shows after.
func (o *ownWrites) wrote(owner, key string, before, after *metav1.PartialObjectMetadata, cached func() *metav1.PartialObjectMetadata) {
	from := stateOf(before)
	if after == nil {
		from.anyVersion = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	behind := []state{from}
	if prev, ok := o.entries[key]; ok && prev.owner == owner && stateOf(prev.result).shows(before) {
		// A write from a state the cache has not shown yet: the cache may still show
		// any state before it.
		behind = append(prev.behind, from)
	}
	o.forgetLocked(key)
	if stateOf(after).shows(cached()) {
		return
	}
	o.entries[key] = &ownWrite{owner: owner, result: after, behind: behind}
	keys := o.byOwner[owner]
	if keys == nil {
		keys = sets.New[string]()
		o.byOwner[owner] = keys
	}
	keys.Insert(key)
}

// observe is the cache's event of key, now showing cached (nil: deleted): it forgets
// the entry once the cache has caught up with it or moved past it, and reports whether
// the event is the echo of a write of cmsync's: the very state that write left (the
// version it answered with, or the deletion).
func (o *ownWrites) observe(key string, cached *metav1.PartialObjectMetadata) (echo bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.entries[key]
	if !ok {
		return false
	}
	echo = stateOf(w.result).shows(cached)
	o.seeLocked(key, w, cached)
	return echo
}

// undoDelete takes back owner's delete recorded at key (wrote with after nil) that did
// not happen, unless the record is gone (its echo came) or a later write replaced it.
func (o *ownWrites) undoDelete(owner, key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.entries[key]; ok && w.owner == owner && w.result == nil {
		o.forgetLocked(key)
	}
}

// at returns the view of key for owner's reads, given the cached object.
func (o *ownWrites) at(owner, key string, cached *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.entries[key]
	if !ok || w.owner != owner {
		return cached
	}
	return o.seeLocked(key, w, cached)
}

// ownedBy returns owner's replicas as cmsync left them: cached (the cache's replicas of
// owner) overlaid with owner's writes not seen yet. lookup reads the cache at a key
// that is not among cached (none, or an object the cache shows under another owner).
func (o *ownWrites) ownedBy(owner string, cached []*metav1.PartialObjectMetadata,
	lookup func(key string) *metav1.PartialObjectMetadata,
) []*metav1.PartialObjectMetadata {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := o.byOwner[owner]
	if len(keys) == 0 {
		return cached // all seen: the cache as it is
	}
	out := make([]*metav1.PartialObjectMetadata, 0, len(cached)+len(keys))
	seenKeys := make(sets.Set[string], len(keys))
	for _, obj := range cached {
		key := keyOf(obj)
		w, pending := o.entries[key]
		if !pending || w.owner != owner {
			out = append(out, obj)
			continue
		}
		seenKeys.Insert(key)
		if seen := o.seeLocked(key, w, obj); seen != nil {
			out = append(out, seen)
		}
	}
	for key := range keys {
		if seenKeys.Has(key) {
			continue
		}
		// Not among the owner's cached replicas: the cache has none there yet, or
		// shows another owner's object.
		other := lookup(key)
		if seen := o.seeLocked(key, o.entries[key], other); seen != nil && seen != other {
			out = append(out, seen)
		}
	}
	return out
}

// keyOf is the cache's key of obj: the informer's own (MetaNamespaceKeyFunc).
func keyOf(obj metav1.Object) string { return toolscache.MetaObjectToName(obj).String() }

// seeLocked is the view of entry w at key given the cached object, and forgets the
// entry once the cache has caught up with it or moved past it.
func (o *ownWrites) seeLocked(key string, w *ownWrite, cached *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	seen, stale := w.view(cached)
	if stale {
		o.forgetLocked(key)
	}
	return seen
}

func (o *ownWrites) forgetLocked(key string) {
	w, ok := o.entries[key]
	if !ok {
		return
	}
	delete(o.entries, key)
	if keys := o.byOwner[w.owner]; keys != nil {
		keys.Delete(key)
		if keys.Len() == 0 {
			delete(o.byOwner, w.owner)
		}
	}
}
