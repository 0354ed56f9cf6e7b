package cli

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/migrate"
)

// HNC's and Kyverno's kinds the plugin reads.
var (
	hncConfigKind    = schema.GroupVersionKind{Group: migrate.HNCGroup, Version: migrate.HNCVersion, Kind: "HNCConfiguration"}
	clusterPolicyGVK = schema.FromAPIVersionAndKind(migrate.KyvernoAPIVersion, migrate.ClusterPolicyKind)
	policyGVK        = schema.FromAPIVersionAndKind(migrate.KyvernoAPIVersion, migrate.PolicyKind)
)

// planHNC plans the moves of what HNC propagated: it reads HNC's configuration and the
// objects of every kind HNC propagates; its tree is in the namespaces' labels. Without
// HNC's CRDs there is none.
func planHNC(ctx context.Context, s session, namespaces []desired.Namespace, near []string) ([]migrate.Move, error) {
	config := &unstructured.Unstructured{}
	config.SetGroupVersionKind(hncConfigKind)
	err := s.client.Get(ctx, client.ObjectKey{Name: migrate.HNCConfigName}, config)
	switch {
	case meta.IsNoMatchError(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		s.missed.add(mayGet(desired.ObjectKindEntry(hncConfigKind), ""), "HNC's configuration (HNCConfiguration config): what HNC propagated")
		return nil, nil
	case client.IgnoreNotFound(err) != nil:
		return nil, fmt.Errorf("reading HNCConfiguration %s: %w", migrate.HNCConfigName, err)
	}
	var h migrate.HNC
	propagated, onRequest := hncKinds(s.cluster, config)
	for _, kind := range propagated {
		objects, err := objectsOf(ctx, s.cluster, kind, near, "objects HNC propagated")
		if err != nil {
			return nil, err
		}
		h.Objects = append(h.Objects, objects...)
	}
	for _, kind := range onRequest {
		objects, err := objectsOf(ctx, s.cluster, kind, near, "objects HNC propagated on request")
		if err != nil {
			return nil, err
		}
		h.OnRequest = append(h.OnRequest, objects...)
	}
	return migrate.PlanHNC(h, namespaces, s.controller.migrateController()), nil
}

// hncKinds are the kinds HNC propagates, as the API server names them: those its
// configuration's spec.resources set to propagate, and Roles and RoleBindings always;
// and apart, those it propagates only where a source asks. A resource listed both ways
// (HNC's webhook refuses that, but not while it is gone) counts as asked for, but for
// the two HNC always propagates.
func hncKinds(c cluster, config *unstructured.Unstructured) (propagated, onRequest []string) {
	kindOf := func(r migrate.HNCResource) (string, bool) {
		gvk, err := c.client.RESTMapper().KindFor(schema.GroupVersionResource{Group: r.Group, Resource: r.Resource})
		return pluginKindOf(gvk), err == nil
	}
	enforced, kinds, asked := sets.New[string](), sets.New[string](), sets.New[string]()
	for _, r := range migrate.HNCEnforced {
		if kind, ok := kindOf(r); ok {
			enforced.Insert(kind)
		}
	}
	entries, _, _ := unstructured.NestedSlice(config.Object, "spec", "resources")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		group, _ := m["group"].(string)
		resource, _ := m["resource"].(string)
		mode, _ := m["mode"].(string)
		r := migrate.HNCResource{Group: group, Resource: resource, Mode: mode}
		kind, ok := kindOf(r)
		switch {
		case !ok:
		case r.HNCPropagatesOnRequest():
			asked.Insert(kind)
		case r.HNCPropagates():
			kinds.Insert(kind)
		}
	}
	asked = asked.Difference(enforced)
	return sets.List(kinds.Difference(asked).Union(enforced)), sets.List(asked)
}

// pluginKindOf is the plugin's name of gvk: ConfigMap and Secret by name, others as
// --object-kinds writes them.
func pluginKindOf(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" && (gvk.Kind == configMapKind || gvk.Kind == secretKind) {
		return gvk.Kind
	}
	return desired.ObjectKindEntry(gvk)
}

// objectsOf lists the metadata of every object of kind as migrate reads it; none when
// the API server does not serve the kind.
func objectsOf(ctx context.Context, c cluster, kind string, near []string, what string) ([]migrate.Object, error) {
	items, _, err := c.listEverywhere(ctx, kind, near, what+" ("+kindName(kind)+")")
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	apiVersion := ""
	if isObjectKind(kind) {
		apiVersion = gvkOf(kind).GroupVersion().String()
	}
	objects := make([]migrate.Object, 0, len(items))
	for i := range items {
		objects = append(objects, migrate.Object{Kind: kindName(kind), APIVersion: apiVersion, PartialObjectMetadata: &items[i]})
	}
	return objects, nil
}

// planKyverno plans the moves of Kyverno's generate-clone rules: it reads the
// ClusterPolicies and the objects of every kind their clone rules copy. Without
// Kyverno's CRDs there is none.
func planKyverno(ctx context.Context, s session, namespaces []desired.Namespace, near []string) ([]migrate.Move, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(clusterPolicyGVK.GroupVersion().WithKind(clusterPolicyGVK.Kind + "List"))
	err := s.client.List(ctx, list)
	switch {
	case meta.IsNoMatchError(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		s.missed.add(mayList(desired.ObjectKindEntry(clusterPolicyGVK), ""), "Kyverno's ClusterPolicies: their generate-clone rules")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing Kyverno's ClusterPolicies: %w", err)
	}
	k := migrate.Kyverno{}
	for i := range list.Items {
		k.Policies = append(k.Policies, &list.Items[i])
	}
	namespaced := &unstructured.UnstructuredList{}
	namespaced.SetGroupVersionKind(policyGVK.GroupVersion().WithKind(policyGVK.Kind + "List"))
	switch err := s.client.List(ctx, namespaced); {
	case apierrors.IsForbidden(err):
		s.missed.add(mayList(desired.ObjectKindEntry(policyGVK), ""), "Kyverno's namespaced Policies: their generate-clone rules")
	case err != nil && !meta.IsNoMatchError(err):
		return nil, fmt.Errorf("listing Kyverno's Policies: %w", err)
	}
	for i := range namespaced.Items {
		k.NamespacedPolicies = append(k.NamespacedPolicies, &namespaced.Items[i])
	}
	for _, entry := range migrate.KyvernoKinds(k.Policies) {
		objects, err := objectsOf(ctx, s.cluster, pluginKindOf(gvkOf(entry)), near, "objects Kyverno's clone rules copy")
		if err != nil {
			return nil, err
		}
		k.Objects = append(k.Objects, objects...)
	}
	return migrate.PlanKyverno(k, namespaces, s.controller.migrateController()), nil
}

// migrateController is the controller as migrate plans for it.
func (v controllerView) migrateController() migrate.Controller {
	return migrate.Controller{
		Policy: v.policy, Secrets: v.runs.Secrets, ConfigMapSyncs: v.runs.ConfigMapSyncs, SecretSyncs: v.runs.SecretSyncs,
		ObjectKinds: v.objectKinds,
	}
}
