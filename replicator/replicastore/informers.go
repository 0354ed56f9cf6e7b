package replicastore

import (
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
)

// informers are the informers of the store's watch: one over every namespace, or, in
// scoped mode, one per namespace cmsync serves (controller-runtime's per-namespace
// cache builds them, with NewInformer). The replicas of one owner may lie in any of them, so
// an owner's read asks each; a read of one replica asks the informer of its namespace,
// which each informer's first object tells (learn).
type informers struct {
	mu          sync.RWMutex
	all         []toolscache.Indexer
	byNamespace map[string]toolscache.Indexer
}

func newInformers() *informers {
	return &informers{byNamespace: map[string]toolscache.Indexer{}}
}

// add keeps a new informer's indexer; perNamespace says that it holds one namespace,
// to be learnt from its objects.
func (x *informers) add(informer toolscache.SharedIndexInformer, perNamespace bool) {
	indexer := informer.GetIndexer()
	x.mu.Lock()
	x.all = append(x.all, indexer)
	x.mu.Unlock()
	if !perNamespace {
		return
	}
	_, _ = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { x.learn(obj, indexer) }})
}

// learn records which informer holds obj's namespace.
func (x *informers) learn(obj any, indexer toolscache.Indexer) {
	o, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	x.mu.RLock()
	_, known := x.byNamespace[o.GetNamespace()]
	x.mu.RUnlock()
	if !known {
		x.mu.Lock()
		x.byNamespace[o.GetNamespace()] = indexer
		x.mu.Unlock()
	}
}

// indexers are every informer's indexer.
func (x *informers) indexers() []toolscache.Indexer {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.all
}

// byOwner lists the replicas of the owner with this key, in every informer.
func (x *informers) byOwner(ownerKey string) ([]any, error) {
	all := x.indexers()
	if len(all) == 1 {
		return all[0].ByIndex(ownerIndex, ownerKey)
	}
	var out []any
	for _, indexer := range all {
		objs, err := indexer.ByIndex(ownerIndex, ownerKey)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// owners lists the owners with a replica in any informer.
func (x *informers) owners() []string {
	all := x.indexers()
	if len(all) == 1 {
		return all[0].ListIndexFuncValues(ownerIndex)
	}
	owners := sets.New[string]()
	for _, indexer := range all {
		owners.Insert(indexer.ListIndexFuncValues(ownerIndex)...)
	}
	return owners.UnsortedList()
}

// getByKey reads the replica at key ("namespace/name"): from the informer of its
// namespace, or, while no informer has shown that namespace yet (its first object may
// be in an indexer before the event that tells it), from whichever holds it.
func (x *informers) getByKey(key string) (any, bool, error) {
	all := x.indexers()
	if len(all) == 1 {
		return all[0].GetByKey(key)
	}
	namespace, _, _ := strings.Cut(key, "/")
	x.mu.RLock()
	indexer, known := x.byNamespace[namespace]
	x.mu.RUnlock()
	if known {
		return indexer.GetByKey(key)
	}
	for _, indexer := range all {
		if obj, exists, err := indexer.GetByKey(key); err != nil || exists {
			return obj, exists, err
		}
	}
	return nil, false, nil
}
