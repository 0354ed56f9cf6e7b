package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// newReplicaStore returns a replica store of kind on the test's API server whose
// creates and updates ask for metadata-only answers from metadataFrom bytes up, and
// whose watch uses watchConfig. Its watch is not started: until it is, the store's
// reads show only its own writes.
func newReplicaStore[T desired.Object](t *testing.T, kind desired.Kind[T], metadataFrom int, watchConfig *rest.Config) *replicastore.Store[T] {
	t.Helper()
	httpClient, err := rest.HTTPClientFor(restConfig)
	must(t, err)
	store, err := replicastore.New(context.Background(), replicastore.Config{
		REST: watchConfig, HTTPClient: httpClient, Scheme: k8s.Scheme(), Mapper: k8s.RESTMapper(),
		Client: k8s, APIReader: k8s, MetadataAnswersFrom: metadataFrom,
	}, kind)
	must(t, err)
	return store
}

// Every write of the store records itself: while its watch is held back, its reads
// show each of its writes at once, and once the watch brings a write back, its event
// goes no further; an edit of someone else's does. A delete the API server refused is
// taken back.
func TestReplicaStoreRecordsItsOwnWrites(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "store", nil)
	kind := desired.ConfigMapKind{}
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "settings"}, Data: map[string]string{"k": "v1"}}
	owner := desired.AnnotationOwner(kind.Name(), types.NamespacedName{Namespace: source.Namespace, Name: source.Name})
	watch, events := &heldWatch{}, &replicaEvents{ns: ns}
	s := startReplicaStore(t, kind, watch, events)

	watch.hold()
	must(t, s.Create(ctx, owner.Key(), desired.NewTemplate(kind, source, desired.Shape{}, owner).In(ns)))
	seen := storeShowsLive(t, s, owner, ns, "the create")
	watch.release()
	events.noneHandedOn(t, "the create")

	watch.hold()
	replacement := liveReplica(t, ns)
	replacement.Data["k"] = "v2"
	must(t, s.Update(ctx, owner.Key(), seen, replacement))
	seen = storeShowsLive(t, s, owner, ns, "the update")
	watch.release()
	events.noneHandedOn(t, "the update")

	watch.hold()
	must(t, s.Patch(ctx, owner.Key(), seen, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v3"}}`))))
	storeShowsLive(t, s, owner, ns, "the patch")
	watch.release()
	events.noneHandedOn(t, "the patch")

	update(t, liveReplica(t, ns), func(cm *corev1.ConfigMap) { cm.Labels["edited-by"] = "someone" })
	if got := events.handedOn(t, "someone else's edit"); len(got) != 1 {
		t.Errorf("someone else's edit: events %v handed on, want one", got)
	}
	seen = storeShowsLive(t, s, owner, ns, "someone else's edit")
	otherUID := types.UID("00000000-0000-0000-0000-000000000000")
	if err := s.Delete(ctx, owner.Key(), seen, client.Preconditions{UID: &otherUID}); !apierrors.IsConflict(err) {
		t.Fatalf("delete on another UID: %v, want a conflict", err)
	}
	storeShowsLive(t, s, owner, ns, "the refused delete")

	watch.hold()
	must(t, s.Delete(ctx, owner.Key(), seen, client.Preconditions{UID: &seen.UID}))
	if err := s.Lookup(owner.Key(), client.ObjectKey{Namespace: ns, Name: "settings"}, desired.NewMetadata(kind)); !apierrors.IsNotFound(err) {
		t.Errorf("after the delete the store reads %v, want NotFound", err)
	}
	if owned, err := s.OwnedBy(owner.Key()); err != nil || len(owned) != 0 {
		t.Errorf("after the delete the owner has %d replicas (%v), want none", len(owned), err)
	}
	watch.release()
	events.noneHandedOn(t, "the delete")
}

// startReplicaStore starts a store of kind whose watch goes through watch, and one
// controller's watch of it whose events go to events.
func startReplicaStore[T desired.Object](t *testing.T, kind desired.Kind[T], watch *heldWatch, events *replicaEvents) *replicastore.Store[T] {
	t.Helper()
	cfg := rest.CopyConfig(restConfig)
	cfg.WrapTransport = watch.wrap
	s := newReplicaStore(t, kind, 0, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		watch.release()
		cancel()
	})
	go func() { _ = s.Start(ctx) }()
	if !s.WaitForCacheSync(ctx) {
		t.Fatal("the store's watch did not list")
	}
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(queue.ShutDown)
	route := s.Watch(events.handler())
	must(t, route.Start(ctx, queue))
	must(t, route.WaitForSync(ctx))
	return s
}

// storeShowsLive checks that the store reads the replica as the API server has it
// (the same UID and resourceVersion), by key and among its owner's, and returns it.
func storeShowsLive[T desired.Object](t *testing.T, s *replicastore.Store[T], owner desired.Owner, ns, after string) *metav1.PartialObjectMetadata {
	t.Helper()
	live := liveReplica(t, ns)
	seen := desired.NewMetadata(desired.ConfigMapKind{})
	if err := s.Lookup(owner.Key(), client.ObjectKeyFromObject(live), seen); err != nil {
		t.Fatalf("after %s the store reads %v; the API server has version %s", after, err, live.ResourceVersion)
	}
	if seen.UID != live.UID || seen.ResourceVersion != live.ResourceVersion {
		t.Errorf("after %s the store reads %s at version %s; the API server has %s at %s",
			after, seen.UID, seen.ResourceVersion, live.UID, live.ResourceVersion)
	}
	owned, err := s.OwnedBy(owner.Key())
	if err != nil || len(owned) != 1 || owned[0].ResourceVersion != live.ResourceVersion {
		t.Errorf("after %s the owner has %d replicas (%v), want the one at version %s", after, len(owned), err, live.ResourceVersion)
	}
	return seen
}

func liveReplica(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	live, err := getConfigMap(ns, "settings")
	must(t, err)
	return live
}

// replicaEvents keeps the replica events of namespace ns that a store's watch hands on
// ("name@resourceVersion").
type replicaEvents struct {
	ns     string
	mu     sync.Mutex
	events []string
	marks  int
}

func (e *replicaEvents) handler() handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.TypedFuncs[*metav1.PartialObjectMetadata, reconcile.Request]{
		CreateFunc: func(_ context.Context, evt event.TypedCreateEvent[*metav1.PartialObjectMetadata], _ queue) {
			e.note(evt.Object)
		},
		UpdateFunc: func(_ context.Context, evt event.TypedUpdateEvent[*metav1.PartialObjectMetadata], _ queue) {
			e.note(evt.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, evt event.TypedDeleteEvent[*metav1.PartialObjectMetadata], _ queue) {
			e.note(evt.Object)
		},
	}
}

func (e *replicaEvents) note(obj *metav1.PartialObjectMetadata) {
	if obj.Namespace != e.ns {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.events = append(e.events, obj.Name+"@"+obj.ResourceVersion)
}

// handedOn returns the events handed on since the last call, once the watch has
// brought back everything written before: it writes a marker replica of its own and
// waits for its event, which the watch delivers after theirs.
func (e *replicaEvents) handedOn(t *testing.T, after string) []string {
	t.Helper()
	e.marks++
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("marker-%d", e.marks),
		Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}}}
	must(t, k8s.Create(context.Background(), marker))
	mark := marker.Name + "@" + marker.ResourceVersion
	var got []string
	eventually(t, timeout, "the watch brings back what was written before "+after, func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		i := slices.Index(e.events, mark)
		if i < 0 {
			return errorf("no event of %s yet", mark)
		}
		got = slices.Clone(e.events[:i])
		e.events = e.events[i+1:]
		return nil
	})
	return got
}

// noneHandedOn checks that the watch handed on no event of what was written before.
func (e *replicaEvents) noneHandedOn(t *testing.T, after string) {
	t.Helper()
	if got := e.handedOn(t, after); len(got) > 0 {
		t.Errorf("after %s the watch handed on %v, want no event: the store's own writes are no news", after, got)
	}
}

// heldWatch holds back what the replica watches it wraps receive, while held: the
// store's writes are answered, their events wait.
type heldWatch struct {
	mu   sync.Mutex
	gate chan struct{} // open (nil) or closed on release
}

func (w *heldWatch) hold() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate == nil {
		w.gate = make(chan struct{})
	}
}

func (w *heldWatch) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate != nil {
		close(w.gate)
		w.gate = nil
	}
}

// wait returns once the watch is not held.
func (w *heldWatch) wait() {
	w.mu.Lock()
	gate := w.gate
	w.mu.Unlock()
	if gate != nil {
		<-gate
	}
}

func (w *heldWatch) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && isReplicaWatch(req) {
			resp.Body = heldBody{ReadCloser: resp.Body, watch: w}
		}
		return resp, err
	})
}

// heldBody hands over what it read only once the watch is not held: what arrives while
// it is, waits.
type heldBody struct {
	io.ReadCloser
	watch *heldWatch
}

func (b heldBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.watch.wait()
	return n, err
}
