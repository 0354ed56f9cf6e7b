package replicator

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/predicates"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// object is an object of a kind an ObjectSync copies, known only at run time.
type object = *unstructured.Unstructured

// objectSyncController names the ObjectSync controller.
const objectSyncController = "objectsync"

// objectForm is the explicit form of ObjectSync for one enabled kind: the ObjectSync
// form of ConfigMapSync and SecretSync (syncForm) over that kind's replica store and
// source watches. Every ObjectSync has one controller, which hands each one to the
// form of the kind it names (objectSyncs).
type objectForm struct {
	*syncForm[object]
	gvk schema.GroupVersionKind
	// replicas is the kind's replica store.
	replicas *replicastore.Store[object]
	// all are the forms of every kind served, this one's among them.
	all *objectSyncs
}

// +kubebuilder:rbac:groups=cmsync.io,resources=objectsyncs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=cmsync.io,resources=objectsyncs/status,verbs=patch

// serves decides from an ObjectSync's spec alone whether this form copies its source:
// a kind that is not enabled, not served, cluster-scoped, a ConfigMap or a Secret is
// Invalid (desired.CheckObjectKind); another enabled kind is another form's, which
// the ObjectSync changed to after it was handed here: the pass is retried, and then
// handed there.
func (f *objectForm) serves(spec v1alpha1.SyncSpec) (*desired.Problem, error) {
	if err := f.all.kinds.CheckObjectKind(spec.SourceAPIVersion, spec.SourceKind); err != nil {
		return desired.InvalidInput(err), nil
	}
	if named := kindOf(spec); named != f.gvk {
		return nil, fmt.Errorf("the ObjectSync names %s, not %s: passing again", named, f.gvk)
	}
	return nil, nil
}

// load is syncForm's, and an ObjectSync to act on has no replica of another kind: a
// change of spec.source's kind deletes the replicas of the kind it named before.
func (f *objectForm) load(ctx context.Context, key types.NamespacedName) (subject[object], error) {
	s, err := f.syncForm.load(ctx, key)
	if err != nil || s.verdict != act {
		return s, err
	}
	return s, f.all.deleteOtherKinds(ctx, s.owner, f.gvk)
}

// retired deletes the replicas of a deleted ObjectSync in every other kind, then lets
// it go (syncForm.retired); the pass deleted those of this form's kind.
func (f *objectForm) retired(ctx context.Context, s subject[object]) error {
	if err := f.all.deleteOtherKinds(ctx, s.owner, f.gvk); err != nil {
		return err
	}
	return f.syncForm.retired(ctx, s)
}

// kindOf is the kind an ObjectSync's spec names.
func kindOf(spec v1alpha1.SyncSpec) schema.GroupVersionKind {
	gv, _ := schema.ParseGroupVersion(spec.SourceAPIVersion)
	return gv.WithKind(spec.SourceKind)
}

// objectSyncs is the ObjectSync controller: it hands each ObjectSync's pass to the form
// of the kind it names, and one that names no kind served to the first form, which
// reports it Invalid (objectForm.serves) — or, when no enabled kind is served, to
// unserved, which reports every ObjectSync Invalid.
type objectSyncs struct {
	reader client.Reader
	kinds  desired.ObjectKinds
	// forms are the forms of the kinds served, in the order --object-kinds lists them.
	forms  []*objectForm
	passes map[schema.GroupVersionKind]*pass[object]
	// unserved is the pass when forms is empty.
	unserved *unservedObjectSyncs
}

// Reconcile hands the pass over one ObjectSync to its kind's form.
func (o *objectSyncs) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sync := &v1alpha1.ObjectSync{}
	if err := o.reader.Get(ctx, req.NamespacedName, sync); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(o.forms) == 0 {
		return o.unserved.Reconcile(ctx, sync)
	}
	p, ok := o.passes[kindOf(sync.SyncSpec())]
	if !ok {
		p = o.passes[o.forms[0].gvk]
	}
	return p.Reconcile(ctx, req)
}

// deleteOtherKinds deletes owner's replicas of every kind served but gvk.
func (o *objectSyncs) deleteOtherKinds(ctx context.Context, owner desired.Owner, gvk schema.GroupVersionKind) error {
	var errs []error
	for _, f := range o.forms {
		if f.gvk == gvk {
			continue
		}
		deleted, err := f.engine.deleteAll(ctx, owner)
		if deleted > 0 {
			log.FromContext(ctx).Info("deleted the replicas of a kind the ObjectSync no longer names", "kind", f.gvk.String(), "deleted", deleted)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// findSyncsForNamespace maps a namespace (old and new, on updates) to the ObjectSyncs
// whose targets match it, and to those that cannot be acted on where they hold a
// replica of any kind in it (syncForm.findSyncsForNamespace, over every kind's store).
func (o *objectSyncs) findSyncsForNamespace(ctx context.Context, obj client.Object) []reconcile.Request {
	ns := desired.NamespaceOf(obj)
	return o.forms[0].findSyncs(ctx, func(s v1alpha1.Sync) bool {
		spec, err := desired.ParseSyncTargets(s.SyncSpec())
		if err == nil && spec.Matches(ns) {
			return true
		}
		if err == nil && !cannotBeActedOn(s) {
			return false
		}
		for _, f := range o.forms {
			if f.hasReplicaIn(desired.SyncOwner(s), ns.Name) {
				return true
			}
		}
		return false
	})
}

// SetupWithManager watches the ObjectSyncs and, when a kind is served, the replicas of
// every kind served, the namespaces they may target and the sources they name. With no
// kind served a namespace changes nothing: every ObjectSync is Invalid whatever it
// targets.
func (o *objectSyncs) SetupWithManager(mgr ctrl.Manager, options controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(objectSyncController).
		For(&v1alpha1.ObjectSync{}, builder.WithPredicates(predicates.SyncChanged()))
	if len(o.forms) > 0 {
		b = b.WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(o.findSyncsForNamespace),
			builder.WithPredicates(predicates.NamespaceChanged()))
	}
	for _, f := range o.forms {
		b = b.WatchesRawSource(f.replicas.Watch(handler.TypedEnqueueRequestForOwner[*metav1.PartialObjectMetadata](
			mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.ObjectSync{}, handler.OnlyControllerOwner()))).
			WatchesRawSource(source.Channel(f.sources.Events(), handler.EnqueueRequestsFromMapFunc(f.findSyncsForSource)))
	}
	return b.WithOptions(options).Complete(o)
}

// kindScope asks the API server (its discovery, through mapper) what it serves of gvk,
// and under which resource.
func kindScope(mapper meta.RESTMapper, gvk schema.GroupVersionKind) (desired.KindScope, schema.GroupVersionResource, error) {
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	scope, err := desired.ScopeOfMapping(mapping, err)
	if err != nil {
		return scope, schema.GroupVersionResource{}, fmt.Errorf("looking up %s: %w", gvk, err)
	}
	if scope == desired.NotServed {
		return scope, schema.GroupVersionResource{}, nil
	}
	return scope, mapping.Resource, nil
}
