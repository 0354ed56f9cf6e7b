// Package replicastore is the replica store: for one kind, the only door through which
// cmsync reads and writes replicas. It holds three parts and keeps them consistent:
//
//   - the watch (cache.go, watch.go): the metadata of the objects carrying cmsync's
//     managed-by label, compact and indexed by owner, and the one event handler that
//     hands their events to the controllers;
//   - the writer (metawrite, and the manager's client for patches): every write answers
//     with the replica's metadata only;
//   - the record of its own writes (ownwrites.go): each write's answer, kept until the
//     watch brings the same state back.
//
// Every write records itself: reads show the replicas as the owner's own writes left
// them, and the event that brings a write back (its echo) queues no pass. No caller
// reports a write, so no write path can forget to.
//
// The store holds no content: a replica's content-hash label and the ownership its
// managedFields record tell whether it is in sync (desired.Template.DiffMetadata), so
// neither the API server's watch nor the store carries a replica's data. Memory grows
// with what cmsync wrote, not with the objects of the cluster nor with their size.
//
// The API server's side of the watch does grow with the size: its watch cache copies
// the whole object before it encodes an event for a watcher, metadata-only or not
// (cachingObject.CacheEncode in k8s.io/apiserver), so each replica written costs it a
// copy of the replica. A watch of whole objects would cost that and the encoding and
// sending of the content; no watch would leave edits and deletions of replicas unseen.
package replicastore

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator/replicastore/metawrite"
)

// Store is the replica store of kind T. What its reads return is the store's own: read
// it, never modify it.
type Store[T desired.Object] struct {
	kind desired.Kind[T]
	// cache is the watch's controller-runtime cache, and index its informers: reads
	// go through index (by owner, by key), never through cache's Get or List.
	cache cache.Cache
	index *informers
	watch *sharedWatch
	// own is the store's writes that the watch has not brought back yet; reads see
	// them (ownwrites.go).
	own       *ownWrites
	transform toolscache.TransformFunc

	// writer creates, replaces and deletes replicas; patcher patches them by their
	// metadata (objectAt). Neither answer carries a replica's content.
	writer  *metawrite.Client
	patcher client.Writer
	// apiReader reads objects from the API server, past the watch (ReadLive).
	apiReader client.Reader
}

// Config is what a store needs of the manager.
type Config struct {
	REST *rest.Config
	// HTTPClient carries the writes; it can be shared with other clients (the
	// manager's). The watch has a connection of its own (watchClientFor).
	HTTPClient *http.Client
	Scheme     *runtime.Scheme
	Mapper     meta.RESTMapper
	// Client patches replicas; given an object's metadata, controller-runtime's client
	// patches through its metadata client and asks for metadata back.
	Client client.Writer
	// APIReader reads objects from the API server, not from a cache.
	APIReader client.Reader
	// MetadataAnswersFrom is the size of a replica (in protobuf) from which a create or
	// an update asks the API server for its metadata alone in the answer (metawrite).
	MetadataAnswersFrom int
	// Changed drops the replica events no controller acts on, once for every
	// controller watching (Watch); nil lets every event through.
	Changed predicate.TypedPredicate[*metav1.PartialObjectMetadata]
	// Namespaces are the namespaces cmsync serves: the store lists and watches
	// replicas in each of them, and nowhere else. Empty: every namespace, in one watch.
	Namespaces []string
}

// New builds the replica store of kind. The caller starts it (mgr.Add) and waits for
// it before reconciling (the controller's watch does).
func New[T desired.Object](ctx context.Context, cfg Config, kind desired.Kind[T]) (*Store[T], error) {
	s := &Store[T]{kind: kind, own: newOwnWrites(), patcher: cfg.Client, apiReader: cfg.APIReader}
	if err := s.buildWatch(ctx, cfg); err != nil {
		return nil, fmt.Errorf("creating the %s replica store: %w", kind.Name(), err)
	}
	writer, err := metawrite.New(cfg.REST, cfg.HTTPClient, cfg.Mapper, cfg.MetadataAnswersFrom)
	if err != nil {
		return nil, fmt.Errorf("creating the %s replica store: %w", kind.Name(), err)
	}
	s.writer = writer
	return s, nil
}

// Start runs the watch until ctx ends (the manager runs it as a runnable).
func (s *Store[T]) Start(ctx context.Context) error { return s.cache.Start(ctx) }

// WaitForCacheSync waits until the watch has listed every replica; false when ctx ends
// first.
func (s *Store[T]) WaitForCacheSync(ctx context.Context) bool { return s.cache.WaitForCacheSync(ctx) }

// OwnedBy returns the replicas naming the owner with this key (Owner.Key), as the
// owner's own writes left them: the watch's, overlaid with the writes it has not
// brought back yet.
func (s *Store[T]) OwnedBy(ownerKey string) ([]*metav1.PartialObjectMetadata, error) {
	objs, err := s.index.byOwner(ownerKey)
	if err != nil {
		return nil, err
	}
	cached := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, obj := range objs {
		if replica, ok := obj.(*metav1.PartialObjectMetadata); ok {
			cached = append(cached, replica)
		}
	}
	return s.own.ownedBy(ownerKey, cached, s.cached), nil
}

// Lookup reads the replica at key as the owner's own writes left it: NotFound where
// there is none. obj is the kind's metadata (desired.NewMetadata).
func (s *Store[T]) Lookup(ownerKey string, key client.ObjectKey, obj *metav1.PartialObjectMetadata) error {
	seen := s.own.at(ownerKey, key.String(), s.cached(key.String()))
	if seen == nil {
		return apierrors.NewNotFound(corev1.Resource(strings.ToLower(s.kind.Name())+"s"), key.Name)
	}
	typeMeta := obj.TypeMeta
	*obj = *seen
	obj.TypeMeta = typeMeta
	return nil
}

// ReadLive reads the object at key from the API server, whether or not it is a replica:
// what the watch cannot show (an object of another's in the way, a replica's content,
// a replica's metadata as it is now). obj's type says what is read: the kind's
// metadata (desired.NewMetadata) or the whole object.
func (s *Store[T]) ReadLive(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	return s.apiReader.Get(ctx, key, obj)
}

// cached is the watch's replica at key, or nil.
func (s *Store[T]) cached(key string) *metav1.PartialObjectMetadata {
	obj, exists, err := s.index.getByKey(key)
	if err != nil || !exists {
		return nil
	}
	replica, _ := obj.(*metav1.PartialObjectMetadata)
	return replica
}
