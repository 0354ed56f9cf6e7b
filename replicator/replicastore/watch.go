package replicastore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// sharedWatch is the one event handler on the replica informer, shared by every
// controller that watches the replicas (the source controller and the ConfigMapSync
// controller), where controller-runtime's Kind source registers one per controller.
// client-go hands each registered handler every event through a listener of its own
// (a buffer, two goroutines and a trace per event), and every controller's handler
// mapped every replica, though a replica has one owner: in a profiled restart at
// 100,000 replicas the two listeners took a tenth of cmsync's CPU. No library offers
// one handler for several controllers' queues, hence this.
//
// Events that no controller acts on (Config.Changed says which) are dropped here, once
// for all routes, before any route maps them.
//
// The handler is registered once every route has started, so no route misses an
// event and none is held for a route not started yet. Routes are made by Watch while
// the controllers are set up, before the manager starts them.
//
// The replicas of the informer's initial list are not handed on one by one: at a
// start every replica of an owner maps to the same request, so once the handler has
// them all each route gets one create event per owner in the owner index instead
// (enqueueOwners), before its workers start. That is how the replicas of an owner
// deleted while cmsync was down are found; an owner that still exists is enqueued by
// its own watch too. The 100,000 replicas of a restart then cost only client-go's
// handing on each: in an execution trace of a restart, handing them on one at a time
// and mapping each held the start for most of a second, on one core.
type sharedWatch struct {
	informer cache.Informer
	index    *informers
	changed  replicaPredicate // nil: every event passes
	// own hears every event first: the one that brings back a write of cmsync's
	// ends the write's entry, and goes no further. Such an echo is no news: the pass
	// that wrote the replica counted the write in its outcome. Queued all the same, the
	// owner's next pass found nothing to do but cost requests: a status patch computed
	// from a source cache that had not yet seen the first pass's (answered 409), and,
	// after a cleanup, a read of the deleted source per pass (make bench-sweep, the
	// requests of each phase).
	own *ownWrites

	mu           sync.Mutex
	routes       []*route
	started      int
	registration toolscache.ResourceEventHandlerRegistration
	registered   chan struct{} // closed once registration is set
}

func newSharedWatch(informer cache.Informer, index *informers, changed replicaPredicate, own *ownWrites) *sharedWatch {
	return &sharedWatch{informer: informer, index: index, changed: changed, own: own, registered: make(chan struct{})}
}

// route is one controller's part of the shared watch: its handler, as it would give
// it to a Kind source, and, once started, its queue.
type route struct {
	watch   *sharedWatch
	handler handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request]

	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Watch is the source of the replica events for one controller, with the handler it
// would give source.Kind; the store's Config.Changed filters the events for every
// controller. Every Watch of a store must be made before the manager starts the
// controllers.
func (s *Store[T]) Watch(h handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request]) source.TypedSyncingSource[reconcile.Request] {
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	r := &route{watch: s.watch, handler: h}
	if s.watch.registration == nil { // else its Start fails: the routes are fixed once the handler runs
		s.watch.routes = append(s.watch.routes, r)
	}
	return r
}

// Start takes the controller's queue; the last route to start registers the handler.
func (r *route) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	w := r.watch
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.registration != nil || r.queue != nil {
		return errors.New("the shared replica watch was already started: every controller's Watch must be made before the manager starts")
	}
	r.ctx, r.queue = ctx, queue
	w.started++
	if w.started < len(w.routes) {
		return nil
	}
	registration, err := w.informer.AddEventHandler(w)
	if err != nil {
		return fmt.Errorf("registering the shared replica watch: %w", err)
	}
	w.registration = registration
	close(w.registered)
	return nil
}

// WaitForSync returns once the handler has had every replica the informer listed, as
// a Kind source's does for its own handler, and the route has one event per owner.
func (r *route) WaitForSync(ctx context.Context) error {
	select {
	case <-r.watch.registered:
	case <-ctx.Done():
		return waitError(ctx, "for every controller watching the replicas to start")
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), r.watch.registration.HasSynced) {
		return waitError(ctx, "for the replica store to sync")
	}
	return r.enqueueOwners()
}

// enqueueOwners hands the route a create event of the initial list for one replica of
// each owner in the cache, in place of every replica's.
func (r *route) enqueueOwners() error {
	for _, owner := range r.watch.index.owners() {
		replicas, err := r.watch.index.byOwner(owner)
		if err != nil {
			return fmt.Errorf("listing the replicas of %s: %w", owner, err)
		}
		for _, obj := range replicas {
			if replica, ok := obj.(*metav1.PartialObjectMetadata); ok {
				r.create(event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: replica, IsInInitialList: true})
				break
			}
		}
	}
	return nil
}

// waitError is nil when the wait was called off (the manager is stopping), as a Kind
// source's.
func waitError(ctx context.Context, what string) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return nil
	}
	return fmt.Errorf("timed out waiting %s", what)
}

func (r *route) String() string { return "the shared replica watch" }

// OnAdd, OnUpdate and OnDelete hand each event that Config.Changed lets through to
// every route, as controller-runtime's handler for a Kind source does to its one.

func (w *sharedWatch) OnAdd(obj any, isInInitialList bool) {
	replica, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok || isInInitialList { // the initial list: enqueueOwners
		return
	}
	if w.own.observe(keyOf(replica), replica) {
		return
	}
	for _, r := range w.routes {
		r.create(event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: replica})
	}
}

// create hands a create event to the route's handler if Config.Changed lets it through.
func (r *route) create(evt event.TypedCreateEvent[*metav1.PartialObjectMetadata]) {
	if r.watch.changed == nil || r.watch.changed.Create(evt) {
		r.handler.Create(r.ctx, evt, r.queue)
	}
}

func (w *sharedWatch) OnUpdate(oldObj, newObj any) {
	older, ok := oldObj.(*metav1.PartialObjectMetadata)
	newer, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if !ok || !ok2 {
		return
	}
	if w.own.observe(keyOf(newer), newer) {
		return
	}
	evt := event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: older, ObjectNew: newer}
	if w.changed != nil && !w.changed.Update(evt) {
		return
	}
	for _, r := range w.routes {
		r.handler.Update(r.ctx, evt, r.queue)
	}
}

func (w *sharedWatch) OnDelete(obj any) {
	evt := event.TypedDeleteEvent[*metav1.PartialObjectMetadata]{}
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		// The watch missed the deletion; the cache had the replica as last seen.
		obj, evt.DeleteStateUnknown = tombstone.Obj, true
	}
	replica, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	evt.Object = replica
	if w.own.observe(keyOf(replica), nil) {
		return
	}
	if w.changed != nil && !w.changed.Delete(evt) {
		return
	}
	for _, r := range w.routes {
		r.handler.Delete(r.ctx, evt, r.queue)
	}
}

// replicaPredicate is a predicate on replica events.
type replicaPredicate = predicate.TypedPredicate[*metav1.PartialObjectMetadata]
