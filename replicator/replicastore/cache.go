package replicastore

import (
	"context"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// ownerIndex indexes the watch's cache by desired.OwnerKeyOf, so the replicas of one
// owner are found without scanning every replica.
const ownerIndex = "cmsync.owner"

// buildWatch builds the store's watch: a controller-runtime cache of the replicas'
// metadata, in compact form (transform) and indexed by owner, and the shared event
// handler on its informer.
func (s *Store[T]) buildWatch(ctx context.Context, cfg Config) error {
	httpClient, err := watchClientFor(cfg.REST, len(cfg.Namespaces))
	if err != nil {
		return err
	}
	s.index, s.transform = newInformers(), transform(s.kind, newMapSharer())
	s.cache, err = cache.New(cfg.REST, cache.Options{
		HTTPClient: httpClient,
		Scheme:     cfg.Scheme,
		Mapper:     cfg.Mapper,
		ByObject: map[client.Object]cache.ByObject{
			// Reads never modify cached replicas (writes are built from the desired
			// replica), so they can skip the deep copy that would otherwise copy every
			// replica of a source on every pass.
			desired.NewMetadata(s.kind): {
				Label: selector(), Transform: s.transform, UnsafeDisableDeepCopy: ptr.To(true), Namespaces: PerNamespace(cfg.Namespaces),
			},
		},
		NewInformer: indexed(ownerIndexedInformer(s.kind), s.index, len(cfg.Namespaces) > 0),
	})
	if err != nil {
		return err
	}
	informer, err := s.cache.GetInformer(ctx, desired.NewMetadata(s.kind))
	if err != nil {
		return err
	}
	s.watch = newSharedWatch(informer, s.index, cfg.Changed, s.own)
	return nil
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
// so the store offers no list of one namespace.
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

// selector selects the objects cmsync wrote. It does not require the source-id label,
// so a replica whose source-id label was removed stays in view and is repaired.
func selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue})
}

// transform is what the store keeps of a replica: its metadata with the managedFields
// reduced to the ownership cmsync reads (desired.ReducedManagedFields), its maps shared
// with the owner's other replicas, its name and namespace interned; of an object whose
// metadata is more than cmsync writes, only its markers (desired.CompactOversized), so
// that what the store holds per object is bounded whoever wrote it. Running it twice on
// an object changes nothing the second time: informers may transform an object more
// than once (a watch-list runs it when it collects the initial list and again when it
// hands the list on), so an object whose managedFields are already reduced is returned
// as it is.
func transform[T desired.Object](kind desired.Kind[T], sharer *mapSharer) toolscache.TransformFunc {
	return func(in any) (any, error) {
		obj, ok := in.(*metav1.PartialObjectMetadata)
		if !ok {
			return in, nil
		}
		compacted := desired.CompactOversized(kind, obj)
		if !compacted && desired.IsReduced(obj.GetManagedFields()) {
			return in, nil
		}
		obj.SetName(unique.Make(obj.GetName()).Value())
		obj.SetNamespace(unique.Make(obj.GetNamespace()).Value())
		if !compacted {
			// A compacted object's few markers are not worth sharing, and would displace
			// the maps the owner's other replicas share.
			obj.SetManagedFields(desired.ReducedManagedFields(kind, obj))
			sharer.share(desired.OwnerKeyOf(kind.Name(), obj), obj)
		}
		return obj, nil
	}
}
