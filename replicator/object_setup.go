package replicator

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// setupObjectSync adds the ObjectSync controller to mgr, with a replica store and
// source watches for each kind of o.ObjectKinds that the API server serves in
// namespaces, and returns those stores. Without any kind it adds nothing: cmsync makes
// no request about ObjectSyncs or any kind they could name. With kinds but none served
// in namespaces, the controller still runs, and reports every ObjectSync Invalid
// (unservedObjectSyncs). The ObjectSync CRD and the enabled kinds the API server does
// not serve yet are added to served.WithoutCRD: the process starts again once they are
// served.
func setupObjectSync(ctx context.Context, mgr ctrl.Manager, o Options, metrics *sourceMetrics, served *Served) ([]listed, error) {
	logger := log.FromContext(ctx)
	if len(o.ObjectKinds) == 0 {
		logger.Info("the ObjectSync controller is off: no kind is enabled (--object-kinds); ObjectSyncs are left as they are")
		return nil, nil
	}
	run, err := servesCRD(mgr.GetRESTMapper(), v1alpha1.ObjectSyncKind, SyncAuto)
	if err != nil {
		return nil, fmt.Errorf("--object-kinds: %w", err)
	}
	if !run {
		logger.Info("the ObjectSync controller waits for its CRD: cmsync starts it once the API server serves ObjectSync")
		served.WithoutCRD = append(served.WithoutCRD, v1alpha1.GroupVersion.WithKind(v1alpha1.ObjectSyncKind))
		return nil, nil
	}
	controller, err := newObjectSyncs(ctx, mgr, o, metrics, served)
	if err != nil {
		return nil, err
	}
	if len(controller.forms) == 0 {
		logger.Info("the API server serves none of the enabled kinds in namespaces: every ObjectSync is Invalid, saying why", "kinds", o.ObjectKinds)
		controller.unserved = newUnservedObjectSyncs(mgr, o, metrics, controller.kinds)
	}
	if err := controller.SetupWithManager(mgr, o.Controller); err != nil {
		return nil, fmt.Errorf("setting up the ObjectSync controller: %w", err)
	}
	stores := make([]listed, 0, len(controller.forms))
	for _, f := range controller.forms {
		stores = append(stores, f.replicas)
	}
	return stores, nil
}

// newObjectSyncs asks the API server what it serves of each kind of o.ObjectKinds, and
// makes the form of each kind it serves in namespaces; a kind it does not serve yet is
// added to served.WithoutCRD.
func newObjectSyncs(ctx context.Context, mgr ctrl.Manager, o Options, metrics *sourceMetrics, served *Served) (*objectSyncs, error) {
	logger := log.FromContext(ctx)
	watching, err := client.NewWithWatch(mgr.GetConfig(), client.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
	})
	if err != nil {
		return nil, fmt.Errorf("creating a client for the ObjectSync sources: %w", err)
	}
	access, err := kubernetes.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("creating a client for the access reviews of --object-kinds: %w", err)
	}
	reviews := access.AuthorizationV1().SelfSubjectAccessReviews()
	controller := &objectSyncs{reader: mgr.GetClient(), kinds: desired.ObjectKinds{}, passes: map[schema.GroupVersionKind]*pass[object]{}}
	for _, gvk := range o.ObjectKinds {
		scope, resource, err := kindScope(mgr.GetRESTMapper(), gvk)
		if err != nil {
			return nil, fmt.Errorf("--object-kinds: %w", err)
		}
		controller.kinds[gvk] = scope
		switch scope {
		case desired.NotServed:
			logger.Info("an enabled kind is not served: ObjectSyncs naming it are Invalid until it is, and cmsync starts again then", "kind", gvk.String())
			served.WithoutCRD = append(served.WithoutCRD, gvk)
			continue
		case desired.ClusterScoped:
			logger.Info(
				"an enabled kind is cluster-scoped: ObjectSync copies namespaced kinds only, and ObjectSyncs naming it are Invalid",
				"kind",
				gvk.String(),
			)
			continue
		}
		if err := checkGrants(ctx, reviews, resource, o.Policy.Scope); err != nil {
			return nil, err
		}
		form, err := newObjectForm(ctx, mgr, o, gvk, metrics, controller, watching)
		if err != nil {
			return nil, err
		}
		controller.forms = append(controller.forms, form)
		controller.passes[gvk] = &pass[object]{door: form.door, form: form}
	}
	return controller, nil
}

// newObjectForm adds the replica store of kind gvk to mgr and returns its form.
func newObjectForm(ctx context.Context, mgr ctrl.Manager, o Options, gvk schema.GroupVersionKind, metrics *sourceMetrics,
	all *objectSyncs, watching client.WithWatch,
) (*objectForm, error) {
	kind := desired.NewObjectKind(gvk)
	shared, replicas, err := newDoor(ctx, mgr, o, kind, metrics)
	if err != nil {
		return nil, err
	}
	form := &objectForm{gvk: gvk, replicas: replicas, all: all}
	form.syncForm = &syncForm[object]{client: mgr.GetClient(), sources: newSourceWatcher(ctx, kind, watching),
		ownStatus: newOwnStatus(desired.SameSyncOutcome), serves: form.serves, door: shared}
	return form, nil
}

// objectVerbs are what cmsync does with the objects of an enabled kind: it watches and
// reads sources and replicas, and writes replicas.
var objectVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// checkGrants asks the API server whether cmsync may do every one of objectVerbs on
// resource where it serves (every namespace, or each of scope's), and says what it
// may not. Without them the kind's replica store would never list, and no controller
// would start: a start that says what is missing is better than one that stops after
// the caches' timeout.
func checkGrants(ctx context.Context, reviews authorizationclient.SelfSubjectAccessReviewInterface, resource schema.GroupVersionResource,
	scope []string,
) error {
	namespaces := scope
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		for _, verb := range objectVerbs {
			review, err := reviews.Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: resource.Group, Resource: resource.Resource},
			}}, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("--object-kinds: asking whether cmsync may %s %s: %w", verb, resource.GroupResource(), err)
			}
			if !review.Status.Allowed {
				where := "in every namespace"
				if ns != metav1.NamespaceAll {
					where = "in namespace " + ns
				}
				return fmt.Errorf("--object-kinds: cmsync may not %s %s %s: grant it %v on every kind it copies (the chart's objectSync.kinds does)",
					verb, resource.GroupResource(), where, objectVerbs)
			}
		}
	}
	return nil
}
