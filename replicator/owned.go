package replicator

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/desired"
)

// What the engine does with an owner's replicas as a whole: bring them in line with a
// plan, delete them all, or withdraw them from the namespaces that no longer admit
// the owner.

// run writes the replica in every target namespace of the plan, then deletes the
// owner's replicas that are no longer wanted (in a namespace that is no longer a
// target, or under a name the owner no longer gives them).
func (e *Engine[T]) run(ctx context.Context, owner desired.Owner, plan Plan[T]) (desired.Summary, error) {
	owned, err := e.ownedBy(owner)
	if err != nil {
		return desired.Summary{}, err
	}
	current, unwanted := splitOwned(owned, owner, plan.Template.Name(), plan.Targets)
	results := e.SyncTargets(ctx, owner, plan, current)
	deleted, cleanupErr := e.deleteReplicas(ctx, owner, unwanted)
	summary := desired.Summarize(results, deleted, cleanupErr, plan.Template.Notice())
	summary.Within(plan.Boundary)
	return summary, nil
}

// deleteAll deletes every replica of owner, for a source that is gone or retired.
func (e *Engine[T]) deleteAll(ctx context.Context, owner desired.Owner) (int, error) {
	owned, err := e.ownedBy(owner)
	if err != nil {
		return 0, err
	}
	return e.deleteReplicas(ctx, owner, owned)
}

// withdraw deletes the replicas of owner in every namespace but admitting, for an owner
// that cannot be acted on (Invalid, or its source missing): it keeps its replicas only
// where the namespaces still admit them (desired.AdmittingNamespaces). Consent outranks
// a broken source.
func (e *Engine[T]) withdraw(ctx context.Context, owner desired.Owner, admitting []string) (int, error) {
	owned, err := e.ownedBy(owner)
	if err != nil {
		return 0, err
	}
	keep := sets.New(admitting...)
	var doomed []*metav1.PartialObjectMetadata
	for _, obj := range owned {
		if !keep.Has(obj.GetNamespace()) {
			doomed = append(doomed, obj)
		}
	}
	deleted, err := e.deleteReplicas(ctx, owner, doomed)
	if deleted > 0 {
		log.FromContext(ctx).Info("deleted the replicas of a source that cannot be acted on, in namespaces that no longer admit it", "deleted", deleted)
	}
	return deleted, err
}

// countIn counts the targets that hold a replica of owner named name, as they are.
func (e *Engine[T]) countIn(owner desired.Owner, name string, targets []string) (int, error) {
	owned, err := e.ownedBy(owner)
	if err != nil {
		return 0, err
	}
	current, _ := splitOwned(owned, owner, name, targets)
	return len(current), nil
}

// ownedBy returns every replica of owner in the replica store, whatever its name, but
// those of a reserved name: cmsync never changes or deletes them, even when an earlier
// version of cmsync wrote them.
func (e *Engine[T]) ownedBy(owner desired.Owner) ([]*metav1.PartialObjectMetadata, error) {
	owned, err := e.replicas.OwnedBy(owner.Key())
	if err != nil {
		return nil, fmt.Errorf("listing replicas of %s: %w", owner.Source, err)
	}
	if !slices.ContainsFunc(owned, e.hasReservedName) {
		return owned, nil
	}
	return slices.DeleteFunc(slices.Clone(owned), e.hasReservedName), nil
}

func (e *Engine[T]) hasReservedName(obj *metav1.PartialObjectMetadata) bool {
	return e.policy.IsReserved(obj.GetName())
}

// splitOwned separates the owner's replicas that are current (named name, in a target
// namespace), by namespace, from those it does not want.
func splitOwned(owned []*metav1.PartialObjectMetadata, owner desired.Owner, name string, targets []string) (
	current map[string]*metav1.PartialObjectMetadata, unwanted []*metav1.PartialObjectMetadata,
) {
	targetSet := sets.New(targets...)
	current = make(map[string]*metav1.PartialObjectMetadata, len(owned))
	for _, obj := range owned {
		if obj.GetName() == name && targetSet.Has(obj.GetNamespace()) && owner.Owns(obj) {
			current[obj.GetNamespace()] = obj
		} else {
			unwanted = append(unwanted, obj)
		}
	}
	return current, unwanted
}
