package replicator

import (
	"container/list"
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/desired"
)

// sourceContents holds the whole sources of the annotation form that passes read, in a
// cache bounded in bytes. The manager's cache holds the labelled objects' metadata only
// (ManagerCacheOptions): whatever a tenant labels, however large, costs cmsync its
// metadata there, and its content only while a pass needs it or while it is among the
// most recently read sources that fit in the bound.
//
// An entry is the source at one resourceVersion; a pass reads it when the metadata it
// was woken by names that version, and otherwise reads the source from the API server's
// watch cache, at that version or newer. cmsync's own status write changes the version
// but not the content: the entry follows it (advance), so the pass its echo queues
// reads nothing, and neither does a pass whose metadata still shows the version that
// write replaced (the cache trails the write): it gets the newer one.
//
// Written here: the LRUs of the ecosystem (k8s.io/utils/lru, golang-lru) bound the
// number of entries, and a bound in entries is no bound on what a tenant can label.
type sourceContents[T desired.Object] struct {
	kind   desired.Kind[T]
	reader client.Reader // the API server
	limit  int64

	mu    sync.Mutex
	bytes int64
	byKey map[types.NamespacedName]*list.Element
	lru   *list.List // of *contentEntry[T], most recent first
}

type contentEntry[T desired.Object] struct {
	key             types.NamespacedName
	resourceVersion string
	// replaced is the version cmsync's own status write replaced with this one ("" for
	// an entry read from the API server): the same content.
	replaced string
	obj      T
	size     int64
}

// defaultSourceContentBytes bounds the sources held between passes: a few dozen
// ConfigMaps near their 1 MiB limit, or thousands of ordinary ones. A source not held is
// read again from the API server by its next pass, which costs a read, never a write.
const defaultSourceContentBytes = 32 << 20

func newSourceContents[T desired.Object](kind desired.Kind[T], reader client.Reader, limit int64) *sourceContents[T] {
	return &sourceContents[T]{kind: kind, reader: reader, limit: limit, byKey: map[types.NamespacedName]*list.Element{}, lru: list.New()}
}

// Get returns the whole source that meta (from the manager's cache) describes, at its
// version or newer: found is false when it no longer exists. The object is the
// caller's own.
func (c *sourceContents[T]) Get(ctx context.Context, meta metav1.Object) (src T, found bool, err error) {
	key := types.NamespacedName{Namespace: meta.GetNamespace(), Name: meta.GetName()}
	if obj, ok := c.lookup(key, meta.GetResourceVersion()); ok {
		return obj, true, nil
	}
	src = c.kind.New()
	// Not older than the version the pass was woken by, from the API server's watch
	// cache rather than etcd: a start's passes read every source.
	atLeast := &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: meta.GetResourceVersion()}}
	if err := c.reader.Get(ctx, key, src, atLeast); err != nil {
		if apierrors.IsNotFound(err) {
			return src, false, nil
		}
		return src, false, err
	}
	// What a pass does not read is not held: a tenant's finalizers or owner references
	// would cost memory and count for nothing.
	src.SetManagedFields(nil)
	src.SetFinalizers(nil)
	src.SetOwnerReferences(nil)
	c.store(src)
	return src.DeepCopyObject().(T), true, nil
}

func (c *sourceContents[T]) lookup(key types.NamespacedName, resourceVersion string) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	el, ok := c.byKey[key]
	if !ok {
		return zero, false
	}
	entry := el.Value.(*contentEntry[T])
	if resourceVersion == "" || entry.resourceVersion != resourceVersion && entry.replaced != resourceVersion {
		return zero, false
	}
	c.lru.MoveToFront(el)
	return entry.obj.DeepCopyObject().(T), true
}

// store keeps src, evicting the least recently read sources past the bound. A source
// larger than the whole bound is not kept.
func (c *sourceContents[T]) store(src T) {
	size := c.sizeOf(src)
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: src.GetNamespace(), Name: src.GetName()}
	c.removeLocked(key)
	if size > c.limit {
		return
	}
	entry := &contentEntry[T]{key: key, resourceVersion: src.GetResourceVersion(), obj: src, size: size}
	c.byKey[key] = c.lru.PushFront(entry)
	c.bytes += size
	for c.bytes > c.limit {
		c.removeLocked(c.lru.Back().Value.(*contentEntry[T]).key)
	}
}

// advance records cmsync's own write of a source's metadata: a merge patch conditional
// on version from, answered with after. The content is unchanged, so the entry at from
// becomes the entry at after's version, with after's labels and annotations.
func (c *sourceContents[T]) advance(from string, after metav1.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[types.NamespacedName{Namespace: after.GetNamespace(), Name: after.GetName()}]
	if !ok {
		return
	}
	entry := el.Value.(*contentEntry[T])
	if entry.resourceVersion != from || entry.obj.GetUID() != after.GetUID() {
		return
	}
	obj := entry.obj.DeepCopyObject().(T)
	obj.SetLabels(after.GetLabels())
	obj.SetAnnotations(after.GetAnnotations())
	obj.SetResourceVersion(after.GetResourceVersion())
	entry.obj, entry.replaced, entry.resourceVersion = obj, from, after.GetResourceVersion()
}

// forget drops the source at key, which is gone or no longer a source.
func (c *sourceContents[T]) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *sourceContents[T]) removeLocked(key types.NamespacedName) {
	el, ok := c.byKey[key]
	if !ok {
		return
	}
	c.bytes -= el.Value.(*contentEntry[T]).size
	c.lru.Remove(el)
	delete(c.byKey, key)
}

// sizeOf estimates what src costs held: its content and its metadata's keys and values,
// and for each of those the map entry and string headers that hold it, so that many
// tiny keys count what they cost and not only their bytes.
func (c *sourceContents[T]) sizeOf(src T) int64 {
	const fixed, perEntry = 512, 64
	n := int64(fixed)
	content := c.kind.Content(src)
	for k, v := range content.Text {
		n += int64(perEntry + len(k) + len(v))
	}
	for k, v := range content.Binary {
		n += int64(perEntry + len(k) + len(v))
	}
	for k, v := range src.GetLabels() {
		n += int64(perEntry + len(k) + len(v))
	}
	for k, v := range src.GetAnnotations() {
		n += int64(perEntry + len(k) + len(v))
	}
	return n
}
