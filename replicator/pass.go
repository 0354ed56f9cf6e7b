package replicator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/desired"
)

// Plan is what one pass must do for an owner: the replica of the template in each
// target namespace, and no other replica of the owner.
type Plan[T desired.Object] struct {
	Targets  []string
	Template desired.Template[T]
	// Boundary says what the tenant boundary kept out (desired.Targets.Notice); it ends
	// the status message.
	Boundary string
}

// run is the pass both front doors share: write the replica in every target namespace,
// then delete the owner's replicas that are no longer wanted (in a namespace that is no
// longer a target, or under a name the owner no longer gives them).
func (e *Engine[T]) run(ctx context.Context, owner desired.Owner, plan Plan[T]) (desired.Summary, error) {
	owned, err := e.ownedBy(owner)
	if err != nil {
		return desired.Summary{}, err
	}
	if e.policy.IsReserved(plan.Template.Name()) { // the doors refuse such a source first
		return desired.Summary{}, fmt.Errorf("refusing to write replicas named %s, a reserved name", plan.Template.Name())
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

// hasReplicaIn reports whether owner has a replica in namespace (or the replica cache
// cannot tell): a namespace's event reaches an owner that cannot be acted on only there.
func (d *door[T]) hasReplicaIn(owner desired.Owner, namespace string) bool {
	owned, err := d.engine.ownedBy(owner)
	return err != nil || slices.ContainsFunc(owned, func(obj *metav1.PartialObjectMetadata) bool { return obj.GetNamespace() == namespace })
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

// ownedBy returns every replica of owner in the replica cache, whatever its name, but
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

// door is what both front doors share: the engine that writes their replicas, the
// controller's policy, and where they report.
type door[T desired.Object] struct {
	engine     *Engine[T]
	policy     desired.Policy
	namespaces namespaceLister
	recorder   events.EventRecorder
	metrics    *sourceMetrics
	// conflictRecheck is how soon an owner with a conflict looks again: an unmanaged
	// object in the way is not in cmsync's caches, so its removal raises no event.
	conflictRecheck time.Duration
}

// finish is the tail of every pass: the metrics, a log line when replicas changed, and
// when to look again. Failures back off through the rate limiter; conflicts are
// rechecked on a timer.
func (d *door[T]) finish(ctx context.Context, owner desired.Owner, pass desired.Summary, reportErr error) (ctrl.Result, error) {
	d.metrics.RecordSource(owner, pass)
	log.FromContext(ctx).V(1).Info("pass", "targets", pass.Targets, "synced", pass.Synced, "conflicts", pass.Conflicts,
		"failures", pass.Failures, "written", pass.Written, "deleted", pass.Deleted)
	if pass.Changed() {
		log.FromContext(ctx).Info("replicas written", "written", pass.Written, "deleted", pass.Deleted, "synced", pass.SyncedCount())
	}
	if pass.Err != nil {
		return ctrl.Result{}, errors.Join(pass.Err, reportErr)
	}
	if reportErr != nil {
		return afterStatusWrite(ctx, reportErr)
	}
	if pass.Conflicts > 0 {
		return ctrl.Result{RequeueAfter: d.conflictRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// writeThenAnnounce is how both front doors report a pass: the status first, then its
// announcement (an Event and a log line), only once the status that says it has been
// written and only if it is news — or always, when force says the pass did something
// no later pass will report. The order matters: a pass that read a copy older than
// cmsync's own last status write (its cache trails the server; the replicas' or a
// namespace's events queue passes sooner) and wants another status meets a 409, and
// is run again on the newer copy (afterStatusWrite), which announces the status if it
// is still news. Announcing it before the write repeated the Event of the write the
// copy had missed. (One that wants the status that write said writes nothing:
// ownStatus.)
func writeThenAnnounce(write func() error, announce func(), news, force bool) error {
	err := write()
	if force || news && err == nil {
		announce()
	}
	return err
}

// staleStatusRetry is how soon a pass runs again when its status write met an object
// changed since the cached copy it read: the cache catches up within moments.
const staleStatusRetry = 200 * time.Millisecond

// afterStatusWrite is the result of a pass whose last step wrote a status. A conflict
// is not a failure — the pass was computed from a cache that was behind the server —
// so it is retried soon, quietly: no error logged or counted, which the alert on
// reconcile errors reads.
func afterStatusWrite(ctx context.Context, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("status not written: the object changed since the cached copy; passing again", "reason", err.Error())
		return ctrl.Result{RequeueAfter: staleStatusRetry}, nil
	}
	return ctrl.Result{}, err
}
