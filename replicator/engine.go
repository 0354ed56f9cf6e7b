package replicator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/desired"
)

// Engine writes and deletes the replicas of kind T. It decides every API write cmsync
// makes to replicas, for both front doors, makes them through its replica store, and
// never touches an object that is not a replica of the owner it works for.
type Engine[T desired.Object] struct {
	kind desired.Kind[T]
	// replicas is the engine's only door to replicas.
	replicas ReplicaStore[T]
	workers  int
	// policy names the objects the engine never touches (desired.Policy.IsReserved).
	policy desired.Policy

	// blocked remembers the namespaces where an owner last found an object it does not
	// own ("<owner key>|<namespace>"). There the next pass looks before it creates, so a
	// standing conflict costs reads, not a failing write on every recheck. It is only a
	// hint: losing it (a restart) costs one create that fails with AlreadyExists.
	blocked sync.Map
	// inSync spares a pass the read of a replica its metadata cannot judge when an
	// earlier pass read it, as it is, and found it in sync with the same template.
	inSync inSyncVerdicts
}

// ReplicaStore is the engine's door to the replicas of kind T (replicastore.Store). It
// reads replicas' metadata as the owner's own writes left them, and every write it
// makes for an owner records itself there: a pass queued by the first events of
// another pass's writes does not write again what the watch has not brought back yet,
// and the engine reports no write. No answer to a write carries a replica's content.
type ReplicaStore[T desired.Object] interface {
	// OwnedBy returns the replicas of the owner with this key.
	OwnedBy(ownerKey string) ([]*metav1.PartialObjectMetadata, error)
	// Lookup reads the replica at key, for the owner with this key.
	Lookup(ownerKey string, key client.ObjectKey, obj *metav1.PartialObjectMetadata) error
	// ReadLive reads the object at key from the API server, replica or not, whole or
	// as metadata as obj's type says.
	ReadLive(ctx context.Context, key client.ObjectKey, obj client.Object) error
	// Create creates replica; AlreadyExists where any object of its name exists.
	Create(ctx context.Context, ownerKey string, replica T) error
	// Update replaces the replica seen with replacement, conditional on the
	// resourceVersion replacement carries.
	Update(ctx context.Context, ownerKey string, seen *metav1.PartialObjectMetadata, replacement T) error
	// Patch patches the replica seen, on the conditions the patch states.
	Patch(ctx context.Context, ownerKey string, seen *metav1.PartialObjectMetadata, patch client.Patch) error
	// Delete deletes the replica seen, on preconditions.
	Delete(ctx context.Context, ownerKey string, seen *metav1.PartialObjectMetadata, preconditions client.Preconditions) error
}

// NewEngine returns the engine of kind: it reads and writes replicas through replicas,
// and makes at most workers writes of one pass in parallel.
func NewEngine[T desired.Object](kind desired.Kind[T], replicas ReplicaStore[T], workers int) *Engine[T] {
	return &Engine[T]{kind: kind, replicas: replicas, workers: max(1, workers)}
}

// errNotOurs is the conflict of an object in a target namespace that is not a replica
// of this owner; cmsync leaves it alone. The text says who has it.
type errNotOurs struct{ holder string }

func (e errNotOurs) Error() string { return e.holder }

// SyncTargets makes the replica in each target namespace equal to the plan's, given
// the replicas that exist (by namespace, in the store's form), and returns one result
// per target, in target order.
func (e *Engine[T]) SyncTargets(ctx context.Context, owner desired.Owner, plan Plan[T], existing map[string]*metav1.PartialObjectMetadata) []desired.Result {
	results := make([]desired.Result, len(plan.Targets))
	workqueue.ParallelizeUntil(ctx, e.workers, len(plan.Targets), func(i int) {
		ns := plan.Targets[i]
		actual, found := existing[ns]
		outcome, err := e.syncReplica(ctx, owner, plan.Template, ns, actual, found)
		results[i] = desired.Result{Namespace: ns, Outcome: outcome, Err: err}
	})
	return results
}

// deleteReplicas deletes the given replicas and returns how many it deleted. Each
// delete is conditional on the UID seen, so an object that replaced a replica in the
// meantime is never deleted.
func (e *Engine[T]) deleteReplicas(ctx context.Context, owner desired.Owner, doomed []*metav1.PartialObjectMetadata) (int, error) {
	errs := make([]error, len(doomed))
	var deleted atomic.Int64
	workqueue.ParallelizeUntil(ctx, e.workers, len(doomed), func(i int) {
		obj := doomed[i]
		err := e.replicas.Delete(ctx, owner.Key(), obj, client.Preconditions{UID: ptr.To(obj.GetUID())})
		switch {
		case err == nil:
			deleted.Add(1)
		case apierrors.IsNotFound(err):
			// Already gone.
		case apierrors.IsConflict(err):
			// Replaced by an object that is not the replica we saw: not ours to delete.
		default:
			errs[i] = fmt.Errorf("deleting replica in %s: %w", obj.GetNamespace(), err)
		}
	})
	return int(deleted.Load()), errors.Join(errs...)
}

// syncReplica brings one namespace in line. actual is the store's replica, if found.
// Its metadata tells most of the time whether and how it differs; when it cannot (an
// edit of its content by someone else, or a change of content the replica's immutable
// flag or type may refuse), the whole replica is read.
func (e *Engine[T]) syncReplica(ctx context.Context, owner desired.Owner, want desired.Template[T], ns string,
	actual *metav1.PartialObjectMetadata, found bool,
) (desired.Outcome, error) {
	if !found {
		var outcome desired.Outcome
		var err error
		if actual, found, outcome, err = e.createReplica(ctx, owner, want.In(ns)); !found {
			return outcome, err
		}
	}
	diff, known := want.DiffMetadata(actual)
	if !known {
		if e.inSync.holds(actual, want.Fingerprint()) {
			return desired.InSync, nil
		}
		whole, err := e.readReplica(ctx, owner, actual)
		if notOurs := (errNotOurs{}); errors.As(err, &notOurs) {
			return desired.Conflict, err
		}
		if err != nil {
			return desired.Failed, err
		}
		diff, actual = want.Diff(whole), meta.AsPartialObjectMetadata(whole)
		if diff.InSync() {
			e.inSync.record(actual, want.Fingerprint())
		}
	}
	switch {
	case diff.InSync():
		return desired.InSync, nil
	case diff.Recreate:
		return e.recreate(ctx, owner, want.In(ns), actual)
	default:
		return e.update(ctx, owner, want, actual, diff)
	}
}

// readReplica reads the whole replica whose metadata the store holds. One that was
// replaced since by an object that is not ours is a conflict, as at creation.
func (e *Engine[T]) readReplica(ctx context.Context, owner desired.Owner, cached *metav1.PartialObjectMetadata) (T, error) {
	whole := e.kind.New()
	if err := e.replicas.ReadLive(ctx, client.ObjectKeyFromObject(cached), whole); err != nil {
		return whole, fmt.Errorf("reading the replica: %w", err)
	}
	if !owner.Owns(whole) {
		return whole, errNotOurs{holder: e.policy.DescribeHolder(e.kind.Name(), whole)}
	}
	return whole, nil
}

// createReplica creates a missing replica. It returns the existing object instead when
// one of the same name turns out to be ours (the store's watch lagged), or Conflict when
// it is not: the store sees other owners' replicas, and only an unmanaged object needs
// the API. The store only holds replicas, so an absent entry may still hide an
// unmanaged object: create, never apply, and look before deciding anything on
// AlreadyExists. Looks read metadata only.
func (e *Engine[T]) createReplica(ctx context.Context, owner desired.Owner, replica T) (
	existing *metav1.PartialObjectMetadata, found bool, outcome desired.Outcome, err error,
) {
	key := client.ObjectKeyFromObject(replica)
	blockedKey := owner.Key() + "|" + key.Namespace
	existing = desired.NewMetadata(e.kind)
	err = e.replicas.Lookup(owner.Key(), key, existing)
	if apierrors.IsNotFound(err) {
		if _, blocked := e.blocked.Load(blockedKey); blocked {
			err = e.replicas.ReadLive(ctx, key, existing)
		}
	}
	if apierrors.IsNotFound(err) {
		if err = e.replicas.Create(ctx, owner.Key(), replica); err == nil {
			e.blocked.Delete(blockedKey)
			return existing, false, desired.Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return existing, false, desired.Failed, err
		}
		err = e.replicas.ReadLive(ctx, key, existing)
	}
	if err != nil {
		return existing, false, desired.Failed, err
	}
	if !owner.Owns(existing) {
		e.blocked.Store(blockedKey, true)
		return existing, false, desired.Conflict, errNotOurs{holder: e.policy.DescribeHolder(e.kind.Name(), existing)}
	}
	e.blocked.Delete(blockedKey)
	return existing, true, desired.InSync, nil
}

// update writes the desired replica over the one we checked, as cmsync's field manager
// either way (the store writes as it). First as a whole-object update conditional on the resourceVersion
// seen (Template.Replacement): the cheapest write for the API server, and it replaces
// only the object we compared. If the replica changed in the meantime, it looks at the
// replica's metadata as it is now, and when that cannot show it in line, sends one JSON
// merge patch (Template.UpdatePatch), conditional on the UID. Both writes record cmsync
// as the manager of the fields they change, which is what Template.Diff reads back to
// find stale keys. A server-side apply of the same object costs the API server about
// twice the CPU (make bench).
func (e *Engine[T]) update(ctx context.Context, owner desired.Owner, want desired.Template[T], actual *metav1.PartialObjectMetadata,
	diff desired.Diff,
) (desired.Outcome, error) {
	err := e.replicas.Update(ctx, owner.Key(), actual, want.Replacement(actual, diff))
	switch {
	case err == nil:
		return desired.Updated, nil
	case !apierrors.IsConflict(err):
		return desired.Failed, err
	}
	// The replica changed since the store saw it: an edit, or a write of cmsync's that
	// the store did not hear of (one that timed out yet landed, or another front
	// door's). A replica already in line is left alone: writing it again would
	// report a change nobody made.
	now := desired.NewMetadata(e.kind)
	if err := e.replicas.ReadLive(ctx, client.ObjectKeyFromObject(actual), now); err != nil {
		return desired.Failed, fmt.Errorf("reading the replica's metadata after a conflict: %w", err)
	}
	if now.UID == actual.UID {
		if current, known := want.DiffMetadata(now); known {
			if current.InSync() {
				return desired.InSync, nil
			}
			diff = current
		}
	}
	// Write our keys without needing its latest version. An edit also raises an event,
	// and the pass that follows finds anything else still to do.
	patch, err := want.UpdatePatch(actual.GetUID(), diff)
	if err != nil {
		return desired.Failed, err
	}
	if err := e.replicas.Patch(ctx, owner.Key(), actual, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return desired.Failed, err
	}
	return desired.Updated, nil
}

// recreate replaces a replica whose content cannot change in place (an immutable one,
// or one of another type): delete it and create it anew.
func (e *Engine[T]) recreate(ctx context.Context, owner desired.Owner, replica T, actual *metav1.PartialObjectMetadata) (desired.Outcome, error) {
	err := e.replicas.Delete(ctx, owner.Key(), actual, client.Preconditions{UID: ptr.To(actual.GetUID()), ResourceVersion: ptr.To(actual.GetResourceVersion())})
	if err != nil && !apierrors.IsNotFound(err) {
		return desired.Failed, fmt.Errorf("deleting the replica to replace it: %w", err)
	}
	if err := e.replicas.Create(ctx, owner.Key(), replica); err != nil {
		return desired.Failed, fmt.Errorf("creating the replacement of the replica: %w", err)
	}
	return desired.Recreated, nil
}
