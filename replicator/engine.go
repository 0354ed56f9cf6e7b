package replicator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// OwnerIndex indexes the replica cache by OwnerKeyOf, so the replicas of one owner are
// found without scanning every replica.
const OwnerIndex = "cmsync.owner"

// Outcome is what a pass did, or could not do, in one target namespace.
type Outcome int

const (
	InSync Outcome = iota
	Created
	Updated
	Recreated
	Conflict
	Failed
)

// Changed reports whether the outcome wrote a replica.
func (o Outcome) Changed() bool { return o == Created || o == Updated || o == Recreated }

// Pass sums up one pass of a front door over its targets.
type Pass struct {
	Results []NamespaceResult
	// Deleted counts the replicas deleted because they are no longer wanted.
	Deleted int
	// CleanupErr collects the deletes that failed.
	CleanupErr error
}

// Written counts the replicas the pass created, changed or replaced.
func (p Pass) Written() int {
	n := 0
	for _, r := range p.Results {
		if r.Outcome.Changed() {
			n++
		}
	}
	return n
}

// Changed reports whether the pass wrote or deleted a replica.
func (p Pass) Changed() bool { return p.Deleted > 0 || p.Written() > 0 }

// Failures joins the errors worth a retry: failed writes and failed deletes.
func (p Pass) Failures() error {
	var errs []error
	for _, r := range p.Results {
		if r.Outcome == Failed {
			errs = append(errs, fmt.Errorf("%s: %w", r.Namespace, r.Err))
		}
	}
	return errors.Join(append(errs, p.CleanupErr)...)
}

// Run makes one pass for owner: sync every target, then delete the given replicas that
// are no longer wanted.
func (e *Engine) Run(ctx context.Context, owner Owner, targets []string, desired func(namespace string) *corev1.ConfigMap,
	existing map[string]*corev1.ConfigMap, unwanted []*corev1.ConfigMap) Pass {
	pass := Pass{Results: e.SyncTargets(ctx, owner, targets, desired, existing)}
	pass.Deleted, pass.CleanupErr = e.DeleteReplicas(ctx, unwanted)
	return pass
}

// NamespaceResult is the outcome of one target namespace; Err explains Conflict and Failed.
type NamespaceResult struct {
	Namespace string
	Outcome   Outcome
	Err       error
}

// errNotOurs is the conflict of a ConfigMap in a target namespace that is not a replica
// of this owner; cmsync leaves it alone. The text says who has it.
type errNotOurs struct{ holder string }

func (e errNotOurs) Error() string { return e.holder }

// Engine writes and deletes the replicas of a source. It owns every API write cmsync
// makes to replicas, for both front doors, and never touches a ConfigMap that is not a
// replica of the source it works for.
type Engine struct {
	// Client writes to the API server.
	Client client.Client
	// Replicas reads the replica cache (label-filtered, indexed by owner).
	Replicas *ReplicaCache
	// APIReader reads the API server directly: it sees ConfigMaps the caches filter out.
	APIReader client.Reader
	// Workers bounds the writes one pass makes in parallel.
	Workers int

	// blocked remembers the namespaces where an owner last found a ConfigMap it does not
	// own ("<owner key>|<namespace>"). There the next pass looks before it creates, so a
	// standing conflict costs reads, not a failing write on every recheck. It is only a
	// hint: losing it (a restart) costs one create that fails with AlreadyExists.
	blocked sync.Map
}

// ListOwned returns every replica of owner in the replica cache, whatever its name.
func (e *Engine) ListOwned(ctx context.Context, owner Owner) ([]*corev1.ConfigMap, error) {
	cached, err := e.Replicas.OwnedBy(owner.Key())
	if err != nil {
		return nil, fmt.Errorf("listing replicas of %s: %w", SourceKey(owner.Source), err)
	}
	return slices.DeleteFunc(cached, func(cm *corev1.ConfigMap) bool { return !IsReplica(cm) }), nil
}

// ListReplicas returns the replicas of owner's source by namespace.
func (e *Engine) ListReplicas(ctx context.Context, owner Owner) (map[string]*corev1.ConfigMap, error) {
	owned, err := e.ListOwned(ctx, owner)
	if err != nil {
		return nil, err
	}
	replicas, _ := SplitStrays(owned, owner)
	return replicas, nil
}

// SplitStrays separates the replicas of the owner's current source, by namespace, from
// those it made of a source it no longer names (a ConfigMapSync whose spec changed).
func SplitStrays(owned []*corev1.ConfigMap, owner Owner) (map[string]*corev1.ConfigMap, []*corev1.ConfigMap) {
	replicas := make(map[string]*corev1.ConfigMap, len(owned))
	var strays []*corev1.ConfigMap
	for _, cm := range owned {
		if cm.Name == owner.Source.Name && owner.Owns(cm) {
			replicas[cm.Namespace] = cm
		} else {
			strays = append(strays, cm)
		}
	}
	return replicas, strays
}

// ReplicasOutside returns the replicas whose namespace is not in keep.
func ReplicasOutside(replicas map[string]*corev1.ConfigMap, keep map[string]bool) []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for ns, cm := range replicas {
		if !keep[ns] {
			out = append(out, cm)
		}
	}
	return out
}

// SyncTargets makes the replica in each target namespace equal to desired(namespace),
// given the replicas that exist, and returns one result per target, in target order.
func (e *Engine) SyncTargets(ctx context.Context, owner Owner, targets []string,
	desired func(namespace string) *corev1.ConfigMap, existing map[string]*corev1.ConfigMap) []NamespaceResult {
	results := make([]NamespaceResult, len(targets))
	e.parallel(len(targets), func(i int) {
		ns := targets[i]
		outcome, err := e.syncReplica(ctx, owner, desired(ns), existing[ns])
		results[i] = NamespaceResult{Namespace: ns, Outcome: outcome, Err: err}
	})
	return results
}

// DeleteReplicas deletes the given replicas and returns how many it deleted. Each
// delete is conditional on the UID seen, so a ConfigMap that replaced a replica in the
// meantime is never deleted.
func (e *Engine) DeleteReplicas(ctx context.Context, doomed []*corev1.ConfigMap) (int, error) {
	errs := make([]error, len(doomed))
	var deleted atomic.Int64
	e.parallel(len(doomed), func(i int) {
		cm := doomed[i]
		err := e.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
		switch {
		case err == nil:
			deleted.Add(1)
		case apierrors.IsNotFound(err), apierrors.IsConflict(err):
			// Already gone, or replaced by an object that is not the replica we saw.
		default:
			errs[i] = fmt.Errorf("deleting replica in %s: %w", cm.Namespace, err)
		}
	})
	return int(deleted.Load()), errors.Join(errs...)
}

// syncReplica brings one namespace in line. actual is the cached replica, or nil.
func (e *Engine) syncReplica(ctx context.Context, owner Owner, desired, actual *corev1.ConfigMap) (Outcome, error) {
	if actual == nil {
		var outcome Outcome
		var err error
		if actual, outcome, err = e.createReplica(ctx, owner, desired); actual == nil {
			return outcome, err
		}
	}
	diff := DiffReplica(desired, actual)
	switch {
	case diff.InSync():
		return InSync, nil
	case diff.Content && isImmutable(actual):
		return e.recreate(ctx, desired, actual)
	default:
		return Updated, e.update(ctx, desired, actual, diff)
	}
}

// createReplica creates a missing replica. It returns the existing object instead when
// one of the same name turns out to be ours (the cache lagged), or Conflict when it is
// not: the replica cache sees other owners' replicas, and only an unmanaged ConfigMap
// needs the API. The cache only holds replicas, so an absent entry may still hide an
// unmanaged ConfigMap: create, never apply, and look before deciding anything on
// AlreadyExists.
func (e *Engine) createReplica(ctx context.Context, owner Owner, desired *corev1.ConfigMap) (*corev1.ConfigMap, Outcome, error) {
	key := client.ObjectKeyFromObject(desired)
	blockedKey := owner.Key() + "|" + key.Namespace
	existing := &corev1.ConfigMap{}
	err := e.Replicas.Get(ctx, key, existing)
	if apierrors.IsNotFound(err) {
		if _, blocked := e.blocked.Load(blockedKey); blocked {
			err = e.APIReader.Get(ctx, key, existing)
		}
	}
	if apierrors.IsNotFound(err) {
		err = e.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager))
		if err == nil {
			e.blocked.Delete(blockedKey)
			return nil, Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, Failed, err
		}
		err = e.APIReader.Get(ctx, key, existing)
	}
	if err != nil {
		return nil, Failed, err
	}
	if !owner.Owns(existing) {
		e.blocked.Store(blockedKey, true)
		return nil, Conflict, errNotOurs{holder: describeOwner(existing)}
	}
	e.blocked.Delete(blockedKey)
	return existing, InSync, nil
}

// update writes the desired replica over the one we checked, with the field manager
// cmsync either way. First as a whole-object update conditional on the resourceVersion
// seen (ReplacementReplica): the cheapest write for the API server, and it replaces
// only the object we compared. If the replica changed in the meantime, one JSON merge
// patch instead: every desired label, annotation and value, null for each stale key,
// conditional on the UID, so it can neither create an object nor touch one that
// replaced ours. Both record cmsync as the manager of the fields they change, which is
// what DiffReplica reads back to find stale keys. A server-side apply of the same
// object costs the API server about twice the CPU (make bench).
func (e *Engine) update(ctx context.Context, desired, actual *corev1.ConfigMap, diff ReplicaDiff) error {
	err := e.Client.Update(ctx, ReplacementReplica(desired, actual, diff), client.FieldOwner(v1alpha1.FieldManager))
	if !apierrors.IsConflict(err) {
		return err
	}
	// The replica changed since the cache saw it (an edit, or our own last write not
	// yet seen): write our keys without needing its latest version. An edit also
	// raises an event, and the pass that follows finds anything else still to do.
	patch, err := updatePatch(desired, actual.UID, diff)
	if err != nil {
		return err
	}
	return e.Client.Patch(ctx, actual.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v1alpha1.FieldManager))
}

// recreate replaces an immutable replica whose content changed: immutable ConfigMaps
// cannot be edited, only deleted and created anew.
func (e *Engine) recreate(ctx context.Context, desired, actual *corev1.ConfigMap) (Outcome, error) {
	err := e.Client.Delete(ctx, actual, client.Preconditions{UID: &actual.UID, ResourceVersion: &actual.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return Failed, fmt.Errorf("deleting immutable replica to replace it: %w", err)
	}
	if err := e.Client.Create(ctx, desired, client.FieldOwner(v1alpha1.FieldManager)); err != nil {
		return Failed, fmt.Errorf("creating replacement of immutable replica: %w", err)
	}
	return Recreated, nil
}

// updatePatch is the JSON merge patch of update: the desired labels, annotations, data,
// binaryData and immutable flag, null for the diff's stale keys, and the UID as a
// precondition.
func updatePatch(desired *corev1.ConfigMap, uid types.UID, diff ReplicaDiff) ([]byte, error) {
	// put sets field to the values plus nulls for the stale keys, if that is not empty:
	// an empty object would only create an empty field.
	put := func(into map[string]any, field string, values map[string]any, stale []string) {
		for _, k := range stale {
			values[k] = nil
		}
		if len(values) > 0 {
			into[field] = values
		}
	}
	metadata := map[string]any{"uid": uid}
	put(metadata, "labels", anyValues(desired.Labels), diff.StaleLabels)
	put(metadata, "annotations", anyValues(desired.Annotations), diff.StaleAnnotations)
	patch := map[string]any{"metadata": metadata}
	put(patch, "data", anyValues(desired.Data), diff.StaleData)
	put(patch, "binaryData", anyValues(desired.BinaryData), diff.StaleBinaryData)
	if desired.Immutable != nil {
		patch["immutable"] = *desired.Immutable
	}
	return json.Marshal(patch)
}

// anyValues copies a map into one a merge patch can also put nulls in ([]byte values
// marshal as base64, as binaryData must).
func anyValues[V any](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parallel runs fn(0..n-1) on at most e.Workers goroutines.
func (e *Engine) parallel(n int, fn func(i int)) {
	workers := max(1, min(e.Workers, n))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
