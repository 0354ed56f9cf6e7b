package replicastore

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// The store's writes are made for one owner (its Owner.Key), with cmsync's field
// manager, and each records itself: from the state the caller saw to the state the API
// server answered with, until the watch brings that state back (ownwrites.go). A write
// the API server refused records nothing.

// Create creates replica for the owner with this key. It never writes over an object:
// where one of that name exists, replica or not, it fails with AlreadyExists.
func (s *Store[T]) Create(ctx context.Context, ownerKey string, replica T) error {
	created, err := s.writer.Create(ctx, replica, client.FieldOwner(v1alpha1.FieldManager))
	if err != nil {
		return err
	}
	s.record(ownerKey, nil, created)
	return nil
}

// Update replaces the replica seen with replacement, conditional on the resourceVersion
// replacement carries (desired.Template.Replacement carries seen's).
func (s *Store[T]) Update(ctx context.Context, ownerKey string, seen *metav1.PartialObjectMetadata, replacement T) error {
	updated, err := s.writer.Update(ctx, replacement, client.FieldOwner(v1alpha1.FieldManager))
	if err != nil {
		return err
	}
	s.record(ownerKey, seen, updated)
	return nil
}

// Patch sends patch to the object where the replica seen is, on the conditions the
// patch itself states (desired.Template.UpdatePatch: seen's UID).
func (s *Store[T]) Patch(ctx context.Context, ownerKey string, seen *metav1.PartialObjectMetadata, patch client.Patch) error {
	patched := s.objectAt(seen)
	if err := s.patcher.Patch(ctx, patched, patch, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return err
	}
	s.record(ownerKey, seen, patched)
	return nil
}

// Delete deletes the object where the replica seen is, on preconditions (at least
// seen's UID, so that an object that replaced the replica is never deleted). The
// delete is recorded before it is sent: the watch event of a deletion can reach the
// store before the delete's answer does, and is known for this delete's echo only if
// the record is already there. The record is taken back when the object was not
// deleted (a refused or failed delete); a replica already gone keeps it.
func (s *Store[T]) Delete(ctx context.Context, ownerKey string, seen *metav1.PartialObjectMetadata, preconditions client.Preconditions) error {
	s.record(ownerKey, seen, nil)
	err := s.writer.Delete(ctx, s.objectAt(seen), preconditions)
	if err != nil && !apierrors.IsNotFound(err) {
		s.own.undoDelete(ownerKey, keyOf(seen))
	}
	return err
}

// record keeps a write of the owner with this key to a replica, from before (nil: it
// was absent) to after (nil: deleted), as the API server answered it: until the watch
// brings that state back, OwnedBy and Lookup show after in place of the state the watch
// still holds. after becomes the store's (it is reduced as the watch's replicas are).
func (s *Store[T]) record(ownerKey string, before, after *metav1.PartialObjectMetadata) {
	at := before
	if after != nil {
		if _, err := s.transform(after); err != nil {
			return // cannot happen for metadata; without the entry, reads see the watch
		}
		at = after
	}
	if at == nil {
		return
	}
	key := keyOf(at)
	s.own.wrote(ownerKey, key, before, after, func() *metav1.PartialObjectMetadata { return s.cached(key) })
}

// objectAt is the kind's metadata where obj is: what a delete or patch of obj sends,
// whatever form obj was read in. Given metadata, controller-runtime's client patches
// through its metadata client and asks the API server for metadata back, not the whole
// object.
func (s *Store[T]) objectAt(obj metav1.Object) *metav1.PartialObjectMetadata {
	at := desired.NewMetadata(s.kind)
	at.SetNamespace(obj.GetNamespace())
	at.SetName(obj.GetName())
	return at
}
