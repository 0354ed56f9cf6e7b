package replicator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cmsync/cmsync/desired"
)

// sourceWatcher watches exactly the objects of kind T that ConfigMapSyncs (or
// SecretSyncs) name. Those need not carry any cmsync label, and a label-filtered cache
// cannot see them; widening the cache to every ConfigMap (or Secret) would make memory
// grow with the cluster. Instead each named source gets its own informer, filtered
// server-side by namespace and metadata.name, so the watcher holds those objects and
// nothing else: one small watch per distinct source. Informers start when a reconcile
// first asks for a source, so only the leader runs them, and stop when no explicit
// object names the source any more.
type sourceWatcher[T desired.Object] struct {
	ctx     context.Context
	kind    desired.Kind[T]
	client  client.WithWatch
	events  chan event.GenericEvent
	mu      sync.Mutex
	sources map[types.NamespacedName]*sourceInformer
}

type sourceInformer struct {
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
	// listError is the latest error of the informer's list or watch, so that a source
	// that cannot be read is reported with the API server's reason; refused is closed
	// at the first.
	listError   atomic.Pointer[error]
	refused     chan struct{}
	refusedOnce sync.Once
}

// refuse records err, the informer's list or watch failing.
func (s *sourceInformer) refuse(err error) {
	s.listError.Store(&err)
	s.refusedOnce.Do(func() { close(s.refused) })
}

// waitListedOrRefused waits until the informer has listed its source, or its list or
// watch failed, or ctx ends. It waits on the informer's own signal, not with
// client-go's WaitForCacheSync, which polls every 100 ms: the first pass of a new
// ObjectSync, ConfigMapSync or SecretSync waits here before its first replica write,
// and the poll would hold every such fan-out back by up to 100 ms.
func (s *sourceInformer) waitListedOrRefused(ctx context.Context) {
	select {
	case <-s.informer.HasSyncedChecker().Done():
	case <-s.refused:
	case <-ctx.Done():
	}
}

// syncTimeout bounds how long a reconcile waits for a new informer's first list.
const syncTimeout = 30 * time.Second

// newSourceWatcher returns a watcher of kind whose informers live until ctx ends.
func newSourceWatcher[T desired.Object](ctx context.Context, kind desired.Kind[T], c client.WithWatch) *sourceWatcher[T] {
	return &sourceWatcher[T]{
		ctx:     ctx,
		kind:    kind,
		client:  c,
		events:  make(chan event.GenericEvent, 1024),
		sources: map[types.NamespacedName]*sourceInformer{},
	}
}

// Events delivers a notification for every change of a watched source (for
// source.Channel).
func (w *sourceWatcher[T]) Events() <-chan event.GenericEvent { return w.events }

// Get returns the source, starting its watch if needed; found is false when it does not
// exist.
func (w *sourceWatcher[T]) Get(ctx context.Context, key types.NamespacedName) (src T, found bool, err error) {
	source := w.ensure(key)
	waitCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	// A list the API server refused (say, forbidden) ends the wait with its reason at
	// once; the informer keeps trying, and the reconcile is retried with backoff.
	source.waitListedOrRefused(waitCtx)
	if !source.informer.HasSynced() {
		cause := fmt.Errorf("no initial list within %s", syncTimeout)
		switch last := source.listError.Load(); {
		case last != nil:
			cause = *last
		case ctx.Err() != nil:
			cause = ctx.Err() // the reconcile was called off (the process is stopping), not timed out
		}
		return src, false, fmt.Errorf("reading source %s %s: %w", w.kind.Name(), key.String(), cause)
	}
	obj, exists, err := source.informer.GetStore().GetByKey(key.String())
	if err != nil || !exists {
		return src, false, err
	}
	return obj.(T).DeepCopyObject().(T), true, nil
}

// Retain stops the watches of sources not in keep.
func (w *sourceWatcher[T]) Retain(keep sets.Set[types.NamespacedName]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, s := range w.sources {
		if !keep.Has(key) {
			s.stop()
			delete(w.sources, key)
		}
	}
}

func (w *sourceWatcher[T]) ensure(key types.NamespacedName) *sourceInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.sources[key]; ok {
		return s
	}
	// The raw options carry what the reflector sets (resourceVersion, bookmarks, the
	// timeout); the selector and namespace are the client's own options.
	only := func(opts *metav1.ListOptions) *client.ListOptions {
		return &client.ListOptions{
			Namespace:     key.Namespace,
			FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name),
			Raw:           opts,
		}
	}
	informer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := w.kind.NewList()
			return list, w.client.List(ctx, list, only(&opts))
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return w.client.Watch(ctx, w.kind.NewList(), only(&opts))
		},
	}, w.kind.New(), 0, toolscache.Indexers{})
	_ = informer.SetTransform(func(in any) (any, error) {
		if obj, ok := in.(T); ok {
			obj.SetManagedFields(nil)
		}
		return in, nil
	})
	notify := func(obj any) {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if src, ok := obj.(T); ok {
			select {
			case w.events <- event.GenericEvent{Object: src}:
			case <-w.ctx.Done():
			}
		}
	}
	_, _ = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	ctx, stop := context.WithCancel(w.ctx)
	source := &sourceInformer{informer: informer, stop: stop, refused: make(chan struct{})}
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		source.refuse(err)
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
	go informer.RunWithContext(ctx)
	w.sources[key] = source
	return source
}
