// Package replicacache is the replica cache: for one kind, the metadata of the objects
// carrying cmsync's managed-by label, in a compact form (transform) and indexed by
// owner. It holds no content: a replica's content-hash label and the ownership its
// managedFields record tell whether it is in sync (desired.Template.DiffMetadata), so
// neither the API server's watch nor the cache carries a replica's data. Memory grows
// with what cmsync wrote, not with the objects of the cluster nor with their size.
//
// The API server's side of the watch does grow with the size: its watch cache copies
// the whole object before it encodes an event for a watcher, metadata-only or not
// (cachingObject.CacheEncode in k8s.io/apiserver), so each replica written costs it a
// copy of the replica. A watch of whole objects would cost that and the encoding and
// sending of the content; no watch would leave edits and deletions of replicas unseen.
package replicacache

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// ownerIndex indexes the cache by desired.OwnerKeyOf, so the replicas of one owner are
// found without scanning every replica.
const ownerIndex = "cmsync.owner"

// Cache is the replica cache of kind T. Its objects are the cache's own: read them,
// never modify them.
type Cache[T desired.Object] struct {
	cache.Cache
	kind  desired.Kind[T]
	index *informers
	watch *sharedWatch
	// own is cmsync's writes to replicas that the watch has not brought back yet;
	// reads see them (ownwrites.go).
	own       *ownWrites
	transform toolscache.TransformFunc
}

// Config is what a cache needs of the manager.
type Config struct {
	REST   *rest.Config
	Scheme *runtime.Scheme
	Mapper meta.RESTMapper
	// Changed drops the replica events no controller acts on, once for every
	// controller watching (Watch); nil lets every event through.
	Changed predicate.TypedPredicate[*metav1.PartialObjectMetadata]
	// Namespaces are the namespaces cmsync serves: the cache lists and watches
	// replicas in each of them, and nowhere else. Empty: every namespace, in one watch.
	Namespaces []string
}

// New builds the replica cache of kind. The caller starts it (mgr.Add) and waits for
// it before reconciling (the controller's watch does).
func New[T desired.Object](ctx context.Context, cfg Config, kind desired.Kind[T]) (*Cache[T], error) {
	httpClient, err := watchClientFor(cfg.REST, len(cfg.Namespaces))
	if err != nil {
		return nil, fmt.Errorf("creating the %s replica cache: %w", kind.Name(), err)
	}
	sharer, index := newMapSharer(), newInformers()
	reduce := transform(kind, sharer)
	replicas, err := cache.New(cfg.REST, cache.Options{
		HTTPClient: httpClient,
		Scheme:     cfg.Scheme,
		Mapper:     cfg.Mapper,
		ByObject: map[client.Object]cache.ByObject{
			// Reads never modify cached replicas (writes are built from the desired
			// replica), so they can skip the deep copy that would otherwise copy every
			// replica of a source on every pass.
			desired.NewMetadata(kind): {
				Label: selector(), Transform: reduce, UnsafeDisableDeepCopy: ptr.To(true), Namespaces: PerNamespace(cfg.Namespaces),
			},
		},
		NewInformer: indexed(ownerIndexedInformer(kind), index, len(cfg.Namespaces) > 0),
	})
	if err != nil {
		return nil, fmt.Errorf("creating the %s replica cache: %w", kind.Name(), err)
	}
	informer, err := replicas.GetInformer(ctx, desired.NewMetadata(kind))
	if err != nil {
		return nil, fmt.Errorf("indexing the %s replica cache: %w", kind.Name(), err)
	}
	own := newOwnWrites()
	return &Cache[T]{
		Cache: replicas, kind: kind, index: index, own: own, transform: reduce,
		watch: newSharedWatch(informer, index, cfg.Changed, own),
	}, nil
}

// PerNamespace is the per-namespace configuration of a controller-runtime cache over
// the namespaces cmsync serves; nil (one watch of every namespace) without any.
func PerNamespace(namespaces []string) map[string]cache.Config {
	if len(namespaces) == 0 {
		return nil
	}
	configs := make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		configs[ns] = cache.Config{}
	}
	return configs
}

// indexed has every informer newInformer builds kept in index.
func indexed(newInformer newInformerFunc, index *informers, perNamespace bool) newInformerFunc {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		informer := newInformer(lw, obj, resync, indexers)
		index.add(informer, perNamespace)
		return informer
	}
}

// newInformerFunc is the type of cache.Options.NewInformer.
type newInformerFunc = func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer

// ownerIndexedInformer builds the replica informer with the owner index only. The
// cache's own index of every object by namespace (and the cache's IndexField, which
// would index every replica under "<namespace>/<owner>") cost 7% of a replica's memory
// and serve no read: the engine reads replicas by owner and by key, never by namespace,
// so listing this cache in one namespace is not supported.
func ownerIndexedInformer[T desired.Object](kind desired.Kind[T]) newInformerFunc {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, _ toolscache.Indexers) toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, toolscache.Indexers{ownerIndex: func(obj any) ([]string, error) {
			if replica, ok := obj.(*metav1.PartialObjectMetadata); ok {
				return []string{desired.OwnerKeyOf(kind.Name(), replica)}, nil
			}
			return nil, nil
		}})
	}
}

// OwnedBy returns the replicas naming the owner with this key (Owner.Key): the cached
// ones, as the owner's own writes left them (Wrote).
func (c *Cache[T]) OwnedBy(ownerKey string) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := c.index.byOwner(ownerKey)
	if err != nil {
		return nil, err
	}
	cached := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, obj := range objs {
		if replica, ok := obj.(*metav1.PartialObjectMetadata); ok {
			cached = append(cached, replica)
		}
	}
	return c.own.ownedBy(ownerKey, cached, c.cached), nil
}

// Lookup reads the replica at key as the owner's own writes left it (Wrote):
// NotFound where there is none. obj is the kind's metadata (desired.NewMetadata).
func (c *Cache[T]) Lookup(ownerKey string, key client.ObjectKey, obj *metav1.PartialObjectMetadata) error {
	seen := c.own.at(ownerKey, key.String(), c.cached(key.String()))
	if seen == nil {
		return apierrors.NewNotFound(corev1.Resource(strings.ToLower(c.kind.Name())+"s"), key.Name)
	}
	typeMeta := obj.TypeMeta
	*obj = *seen
	obj.TypeMeta = typeMeta
	return nil
}

// Wrote records a write of the owner with this key to a replica, from before (nil: it
// was absent) to after (nil: deleted), as the API server answered it: until the watch
// brings that state back, OwnedBy and Lookup show after in place of the state the cache
// still holds. after becomes the cache's (it is reduced as the cache's replicas are).
func (c *Cache[T]) Wrote(ownerKey string, before, after *metav1.PartialObjectMetadata) {
	at := before
	if after != nil {
		if _, err := c.transform(after); err != nil {
			return // cannot happen for metadata; without the entry, reads see the cache
		}
		at = after
	}
	if at == nil {
		return
	}
	key := keyOf(at)
	c.own.wrote(ownerKey, key, before, after, func() *metav1.PartialObjectMetadata { return c.cached(key) })
}

// Deleting records the delete of replica by the owner with this key before it is sent,
// as Wrote records a write after its answer: the event of the deletion may reach the
// cache before the answer reaches the engine, and is that delete's echo only if the
// record exists by then. undo takes the record back when the delete did not happen.
func (c *Cache[T]) Deleting(ownerKey string, replica *metav1.PartialObjectMetadata) (undo func()) {
	c.Wrote(ownerKey, replica, nil)
	return func() { c.own.undoDelete(ownerKey, keyOf(replica)) }
}

// cached is the cache's replica at key, or nil.
func (c *Cache[T]) cached(key string) *metav1.PartialObjectMetadata {
	obj, exists, err := c.index.getByKey(key)
	if err != nil || !exists {
		return nil
	}
	replica, _ := obj.(*metav1.PartialObjectMetadata)
	return replica
}

// selector selects the objects cmsync wrote. It does not require the source-id label,
// so a replica whose source-id label was removed stays in view and is repaired.
func selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue})
}

// transform is what the cache keeps of a replica: its metadata with the managedFields
// reduced to the ownership cmsync reads (desired.ReducedManagedFields), its maps shared
// with the owner's other replicas, its name and namespace interned. Running it twice on
// an object changes nothing the second time: informers may transform an object more
// than once (a watch-list runs it when it collects the initial list and again when it
// hands the list on), so an object whose managedFields are already reduced is returned
// as it is.
func transform[T desired.Object](kind desired.Kind[T], sharer *mapSharer) toolscache.TransformFunc {
	return func(in any) (any, error) {
		obj, ok := in.(*metav1.PartialObjectMetadata)
		if !ok || desired.IsReduced(obj.GetManagedFields()) {
			return in, nil
		}
		obj.SetManagedFields(desired.ReducedManagedFields(kind, obj))
		obj.SetName(unique.Make(obj.GetName()).Value())
		obj.SetNamespace(unique.Make(obj.GetNamespace()).Value())
		sharer.share(desired.OwnerKeyOf(kind.Name(), obj), obj)
		return obj, nil
	}
}
