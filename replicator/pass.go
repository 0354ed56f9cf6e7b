package replicator

import (
	"context"
	"errors"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// planOf is the plan of a resolved intent.
func planOf[T desired.Object](intent desired.Intent[T]) Plan[T] {
	return Plan[T]{Targets: intent.Targets.Namespaces, Template: intent.Template, Boundary: intent.Targets.Notice()}
}

// A form is one front door's way of naming an owner of replicas: an annotated source,
// or a ConfigMapSync or SecretSync. The pass over an owner is the same for every form
// (pass.Reconcile); a form says how to load an owner and decide what it wants, what to
// do once its replicas are gone, and where to report (status annotations, or a
// status with a Ready condition).
type form[T desired.Object] interface {
	// load reads the owner named key and decides what the pass does with it.
	load(ctx context.Context, key types.NamespacedName) (subject[T], error)
	// forget drops what the form keeps of an owner that is gone.
	forget(owner desired.Owner)
	// retired runs once every replica of an owner being retired is deleted.
	retired(ctx context.Context, s subject[T]) error
	// report writes the status of a pass that acted, and announces it.
	report(ctx context.Context, s subject[T], pass desired.Summary) error
	// reportProblem writes the status of an owner that cannot be acted on.
	reportProblem(ctx context.Context, s subject[T]) error
}

// verdict is what a pass does with an owner.
type verdict int

const (
	// skip: nothing is left of the owner to act on or to forget.
	skip verdict = iota
	// forget: the owner is gone and its replicas go with it (their owner references).
	forget
	// retire: delete every replica of the owner, then let it go (form.retired).
	retire
	// cannotAct: change nothing because of the owner; keep its replicas only where the
	// namespaces still admit them (consent outranks a broken owner), and report why.
	cannotAct
	// act: bring the replicas in line with the plan.
	act
)

// subject is one owner as a form loaded it.
type subject[T desired.Object] struct {
	verdict verdict
	owner   desired.Owner
	// object is what the form reports on: the source, or the ConfigMapSync or SecretSync.
	object client.Object
	// namespaces are the namespaces the decision was made from.
	namespaces []desired.Namespace
	// plan is what to write (act); when the owner cannot be acted on, it holds the
	// targets that could be resolved, and no template.
	plan Plan[T]
	// problem is why the owner cannot be acted on, and origin the namespace whose
	// consent it carries (desired.AdmittingNamespaces).
	problem *desired.Problem
	origin  desired.Origin
}

// cannotActOn marks the subject as one that cannot be acted on, for problem.
func (s subject[T]) cannotActOn(object client.Object, origin desired.Origin, problem *desired.Problem) subject[T] {
	s.verdict, s.object, s.origin, s.problem = cannotAct, object, origin, problem
	return s
}

// pass is a front door: the one pass, over the form of its owners.
type pass[T desired.Object] struct {
	door[T]
	form form[T]
}

// Reconcile is the pass over one owner: load it and decide (form.load, desired.Resolve),
// then retire it, withdraw from the namespaces that no longer admit it, or write its
// replicas; then report. Each pass recomputes everything from the caches, so a pass
// after a restart is the same as any other.
func (p *pass[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	defer func(start time.Time) { p.metrics.ObserveSync(time.Since(start)) }(time.Now())

	s, err := p.form.load(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch s.verdict {
	case skip:
		return ctrl.Result{}, nil
	case forget:
		p.forget(s.owner)
		return ctrl.Result{}, nil
	case retire:
		return ctrl.Result{}, p.retire(ctx, s)
	case cannotAct:
		return p.cannotAct(ctx, s)
	}
	summary, err := p.engine.run(ctx, s.owner, s.plan)
	if err != nil {
		return ctrl.Result{}, err
	}
	return p.finish(ctx, s.owner, summary, p.form.report(ctx, s, summary))
}

func (p *pass[T]) forget(owner desired.Owner) {
	p.metrics.ForgetSource(owner)
	p.form.forget(owner)
}

// retire deletes every replica of an owner that is gone, no longer a source, or being
// deleted, then lets the form end what it keeps (status annotations, a finalizer).
func (p *pass[T]) retire(ctx context.Context, s subject[T]) error {
	p.forget(s.owner)
	deleted, err := p.engine.deleteAll(ctx, s.owner)
	if deleted > 0 {
		log.FromContext(ctx).Info("deleted the replicas of an owner that is gone or retired", "deleted", deleted)
	}
	if err != nil {
		return err
	}
	return p.form.retired(ctx, s)
}

// cannotAct handles an owner cmsync will not act on: nothing is created because of it,
// its replicas are kept where the namespaces still admit it (and deleted elsewhere:
// consent outranks a broken source), and the problem is reported.
func (p *pass[T]) cannotAct(ctx context.Context, s subject[T]) (ctrl.Result, error) {
	admitting := desired.AdmittingNamespaces(s.origin, s.namespaces, p.policy)
	if _, err := p.engine.withdraw(ctx, s.owner, admitting); err != nil {
		return ctrl.Result{}, err
	}
	p.metrics.RecordProblem(s.owner, s.problem.Reason)
	err := p.form.reportProblem(ctx, s)
	if err == nil && s.problem.Retried() {
		err = s.problem // retried with backoff, and counted as a reconcile error
	}
	// Otherwise no retry (but for a status write that met a newer object).
	return afterStatusWrite(ctx, err)
}

// hasReplicaIn reports whether owner has a replica in namespace (or the replica store
// cannot tell): a namespace's event reaches an owner that cannot be acted on only there.
func (d *door[T]) hasReplicaIn(owner desired.Owner, namespace string) bool {
	owned, err := d.engine.ownedBy(owner)
	return err != nil || slices.ContainsFunc(owned, func(obj *metav1.PartialObjectMetadata) bool { return obj.GetNamespace() == namespace })
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
