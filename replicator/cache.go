package replicator

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The caches hold only what cmsync manages, so memory grows with the sources and
// replicas, not with the ConfigMaps of the cluster:
//   - the manager's cache: ConfigMaps labelled cmsync.io/replicate=true (sources), and
//     namespaces as metadata only (names, labels, deletion);
//   - the replica cache: ConfigMaps carrying cmsync's replica labels.
// One informer per kind takes one label selector, and sources and replicas carry
// different labels (a replica never carries the replicate label, so it can never become
// a source), hence two caches.

// ManagerCacheOptions filters the manager's cache to sources and namespace metadata.
func ManagerCacheOptions() cache.Options {
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: {
			Label:     labels.SelectorFromSet(labels.Set{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}),
			Transform: cache.TransformStripManagedFields(),
		},
		NamespaceMetadata(): {
			Transform: stripNamespaceMetadata,
		},
	}}
}

// NamespaceMetadata is the metadata-only form of Namespace that the manager's cache
// holds and target resolution lists.
func NamespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// ReplicaCache is the replica cache, with a lookup of an owner's replicas.
type ReplicaCache struct {
	cache.Cache
	byOwner toolscache.Indexer
}

// NewReplicaCache builds the replica cache, indexed by owner. The caller starts it
// (mgr.Add) and waits for it before reconciling (the controller's watch does).
func NewReplicaCache(ctx context.Context, config *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, httpClient *http.Client) (*ReplicaCache, error) {
	sharer := newMapSharer()
	replicas, err := cache.New(config, cache.Options{
		HTTPClient: httpClient,
		Scheme:     scheme,
		Mapper:     mapper,
		ByObject: map[client.Object]cache.ByObject{
			// Reads never modify cached replicas (writes are built from the desired
			// replica), so they can skip the deep copy that would otherwise copy every
			// replica of a source on every pass.
			&corev1.ConfigMap{}: {Label: ReplicaSelector(), Transform: compactReplica(sharer), UnsafeDisableDeepCopy: ptrTo(true)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the replica cache: %w", err)
	}
	// The owner index sits on the informer itself: the cache's IndexField would also
	// index every replica under "<namespace>/<owner>", a set per replica, which costs
	// more memory than the replica.
	informer, err := replicas.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		return nil, fmt.Errorf("indexing the replica cache: %w", err)
	}
	shared, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("indexing the replica cache: unexpected informer %T", informer)
	}
	err = shared.AddIndexers(toolscache.Indexers{OwnerIndex: func(obj any) ([]string, error) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			return []string{OwnerKeyOf(cm)}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing the replica cache: %w", err)
	}
	return &ReplicaCache{Cache: replicas, byOwner: shared.GetIndexer()}, nil
}

// OwnedBy returns the cached replicas naming the owner with this key (Owner.Key). They
// are the cache's own objects: read them, never modify them.
func (c *ReplicaCache) OwnedBy(ownerKey string) ([]*corev1.ConfigMap, error) {
	objs, err := c.byOwner.ByIndex(OwnerIndex, ownerKey)
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.ConfigMap, 0, len(objs))
	for _, obj := range objs {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			out = append(out, cm)
		}
	}
	return out, nil
}

// ReplicaSelector selects the ConfigMaps cmsync wrote. It does not require the
// source-id label, so a replica whose source-id label was removed stays in view and is
// repaired.
func ReplicaSelector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue})
}

// compactReplica is what the replica cache keeps of a replica: long values as digests
// (digestValues), instead of managedFields only the label and annotation keys cmsync
// owns (compactOwnership), which DiffReplica reads to find stale keys, and maps shared
// with the owner's other replicas (mapSharer). An object already compacted is returned
// as it is: informers may transform an object twice, and shared maps must not change.
func compactReplica(sharer *mapSharer) toolscache.TransformFunc {
	return func(in any) (any, error) {
		cm, ok := in.(*corev1.ConfigMap)
		if !ok || (isDigested(cm) && isOwnershipCompacted(cm)) {
			return in, nil
		}
		digestValues(cm)
		compactOwnership(cm)
		sharer.share(cm)
		return cm, nil
	}
}

// stripNamespaceMetadata keeps what target resolution reads of a namespace.
func stripNamespaceMetadata(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil {
		obj.SetManagedFields(nil)
		obj.SetAnnotations(nil)
	}
	return in, nil
}
