package replicator

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// sourceWatcher watches exactly the ConfigMaps that ConfigMapSyncs name. Those need not
// carry any cmsync label, and a label-filtered cache cannot see them; widening the cache
// to every ConfigMap would make memory grow with the cluster. Instead each named source
// gets its own informer, filtered server-side by namespace and metadata.name, so the
// watcher holds those ConfigMaps and nothing else: one small watch per distinct source.
// Informers start when a reconcile first asks for a source, so only the leader runs
// them, and stop when no ConfigMapSync names the source any more.
type sourceWatcher struct {
	ctx     context.Context
	client  kubernetes.Interface
	events  chan event.GenericEvent
	mu      sync.Mutex
	sources map[types.NamespacedName]*sourceInformer
}

type sourceInformer struct {
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
	// listError is the latest error of the informer's list or watch, so that a source
	// that cannot be read is reported with the API server's reason.
	listError atomic.Pointer[error]
}

// syncTimeout bounds how long a reconcile waits for a new informer's first list.
const syncTimeout = 30 * time.Second

// newSourceWatcher returns a watcher whose informers live until ctx ends.
func newSourceWatcher(ctx context.Context, client kubernetes.Interface) *sourceWatcher {
	return &sourceWatcher{
		ctx:     ctx,
		client:  client,
		events:  make(chan event.GenericEvent, 1024),
		sources: map[types.NamespacedName]*sourceInformer{},
	}
}

// Events delivers a notification for every change of a watched source (for
// source.Channel).
func (w *sourceWatcher) Events() <-chan event.GenericEvent { return w.events }

// Get returns the source ConfigMap, starting its watch if needed; found is false when it
// does not exist.
func (w *sourceWatcher) Get(ctx context.Context, key types.NamespacedName) (cm *corev1.ConfigMap, found bool, err error) {
	source := w.ensure(key)
	waitCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	// A list the API server refused (say, forbidden) ends the wait with its reason at
	// once; the informer keeps trying, and the reconcile is retried with backoff.
	listedOrRefused := func() bool { return source.informer.HasSynced() || source.listError.Load() != nil }
	toolscache.WaitForCacheSync(waitCtx.Done(), listedOrRefused)
	if !source.informer.HasSynced() {
		cause := fmt.Errorf("no initial list within %s", syncTimeout)
		switch last := source.listError.Load(); {
		case last != nil:
			cause = *last
		case ctx.Err() != nil:
			cause = ctx.Err() // the reconcile was called off (the process is stopping), not timed out
		}
		return nil, false, fmt.Errorf("reading source ConfigMap %s: %w", key.String(), cause)
	}
	obj, exists, err := source.informer.GetStore().GetByKey(key.String())
	if err != nil || !exists {
		return nil, false, err
	}
	return obj.(*corev1.ConfigMap).DeepCopy(), true, nil
}

// Retain stops the watches of sources not in keep.
func (w *sourceWatcher) Retain(keep sets.Set[types.NamespacedName]) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, s := range w.sources {
		if !keep.Has(key) {
			s.stop()
			delete(w.sources, key)
		}
	}
}

func (w *sourceWatcher) ensure(key types.NamespacedName) *sourceInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.sources[key]; ok {
		return s
	}
	selector := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	configMaps := w.client.CoreV1().ConfigMaps(key.Namespace)
	informer := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return configMaps.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return configMaps.Watch(ctx, opts)
		},
	}, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	_ = informer.SetTransform(func(in any) (any, error) {
		if cm, ok := in.(*corev1.ConfigMap); ok {
			cm.ManagedFields = nil
		}
		return in, nil
	})
	notify := func(obj any) {
		if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			select {
			case w.events <- event.GenericEvent{Object: cm}:
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
	source := &sourceInformer{informer: informer, stop: stop}
	_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		source.listError.Store(&err)
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
	})
	go informer.RunWithContext(ctx)
	w.sources[key] = source
	return source
}
