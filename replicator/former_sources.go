package replicator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// formerSources hands the source controller, once each time this process starts
// leading, every object of its kind that still carries cmsync's status annotations but
// is no longer a source. The caches hold labelled objects only, so a source unlabelled
// while no cmsync was running or leading is in none of them; if it had replicas, their
// events bring it to a pass that retires it, but one without replicas (every target
// excluded, or Invalid) would keep a status that is no longer true. The pass for such
// an object is the ordinary retire: its status annotations come off.
//
// The list is of metadata only, a page at a time, and leaves out replicas and current
// sources server-side, so it costs one paged read of the other objects per start. It
// waits for the caches first: at a start with many replicas, their lists are what
// every source's verification waits on, and this sweep, for a rare case, must not
// compete with them for the API server.
type formerSources[T desired.Object] struct {
	kind   desired.Kind[T]
	reader client.Reader // the API server: the objects sought are in no cache
	events chan event.GenericEvent
	// cachesSynced waits for the caches the term's first passes read.
	cachesSynced func(context.Context) bool
	// scope are the namespaces cmsync serves (empty: every namespace, in one list).
	scope []string
}

const formerSourcesPage = 500

func newFormerSources[T desired.Object](kind desired.Kind[T], reader client.Reader, cachesSynced func(context.Context) bool, scope []string) *formerSources[T] {
	return &formerSources[T]{kind: kind, reader: reader, cachesSynced: cachesSynced, scope: scope, events: make(chan event.GenericEvent, formerSourcesPage)}
}

// Events delivers the former sources found (for source.Channel).
func (f *formerSources[T]) Events() <-chan event.GenericEvent { return f.events }

// Start lists until one full list succeeds, retrying with a growing pause (a
// restarting API server, say), then returns: the sweep is done for this term.
func (f *formerSources[T]) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("kind", f.kind.Name())
	if !f.cachesSynced(ctx) {
		return nil // stopped before the caches synced
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		found, err := f.sweep(ctx)
		if err != nil {
			logger.Error(err, "looking for former sources that still carry a status; retrying")
			return false, nil
		}
		if found > 0 {
			logger.Info("found former sources that still carry a status", "count", found)
		}
		return true, nil
	})
	return nil
}

// sweep sends every former source with a status, and returns how many it sent: in
// every namespace, or in each namespace cmsync serves.
func (f *formerSources[T]) sweep(ctx context.Context) (int, error) {
	selector, err := notReplicaNorSource()
	if err != nil {
		return 0, err
	}
	namespaces := f.scope
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	found := 0
	for _, ns := range namespaces {
		n, err := f.sweepIn(ctx, ns, selector)
		found += n
		if err != nil {
			return found, err
		}
	}
	return found, nil
}

// sweepIn sends the former sources with a status in namespace (all: ""), a page at a time.
func (f *formerSources[T]) sweepIn(ctx context.Context, namespace string, selector labels.Selector) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(f.kind.Name() + "List"))
	opts := &client.ListOptions{Namespace: namespace, LabelSelector: selector, Limit: formerSourcesPage}
	found := 0
	for {
		if err := f.reader.List(ctx, list, opts); err != nil {
			return found, fmt.Errorf("listing %s metadata: %w", f.kind.Name(), err)
		}
		for i := range list.Items {
			item := &list.Items[i]
			if !desired.HasStatus(item.GetAnnotations()) { // the selector already left sources out
				continue
			}
			select {
			case f.events <- event.GenericEvent{Object: item}:
				found++
			case <-ctx.Done():
				return found, ctx.Err()
			}
		}
		if list.Continue == "" {
			return found, nil
		}
		opts.Continue = list.Continue
	}
}

// notReplicaNorSource selects objects without cmsync's managed-by label whose replicate
// label is not "true" (absent included).
func notReplicaNorSource() (labels.Selector, error) {
	notReplica, err := labels.NewRequirement(v1alpha1.ManagedByLabel, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	notSource, err := labels.NewRequirement(v1alpha1.ReplicateLabel, selection.NotEquals, []string{v1alpha1.ReplicateLabelValue})
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*notReplica, *notSource), nil
}
