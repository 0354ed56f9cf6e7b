package cli

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// ExplainRow says, for one namespace, whether it must hold a replica of the source, the
// rule that decided, and what is there now.
type ExplainRow struct {
	Namespace string `json:"namespace"`
	Replica   string `json:"replica"`
	Wanted    bool   `json:"wanted"`
	Rule      string `json:"rule"`
	// Now is what the namespace holds under the replica's name: "replica" (cmsync's, for
	// this source), "missing", "conflict: <who holds it>", or "stale replica" (cmsync's,
	// no longer wanted: cmsync deletes it).
	Now string `json:"now"`
}

// Explanation is `kubectl cmsync explain`'s answer.
type Explanation struct {
	Source string `json:"source"`
	// Invalid is why the controller does not act on the source; it then changes nothing.
	Invalid string `json:"invalid,omitempty"`
	// Inactive is why the object is no source (not labelled, or being deleted): no
	// namespace is to hold a replica of it, and cmsync deletes those left.
	Inactive string `json:"inactive,omitempty"`
	// Policy says where the controller's policy was read.
	Policy string       `json:"policy"`
	Rows   []ExplainRow `json:"namespaces,omitempty"`
	// NotChecked names what the user's rights did not let the plugin read.
	NotChecked []NotChecked `json:"notChecked,omitempty"`
}

// explain answers for the source kind/ref in the namespace in (every namespace when
// empty).
func explain(ctx context.Context, s session, kind, ref, in string) (Explanation, error) {
	read, err := readSource(ctx, s, kind, ref)
	if err != nil {
		return Explanation{}, err
	}
	near := nearby(in)
	if in == "" {
		near = nearby(read.key.Namespace)
	}
	namespaces, all, err := s.namespaces(ctx, near...)
	if err != nil {
		return Explanation{}, err
	}
	policy := s.controller.policy
	src := resolve(read, namespaces, policy)
	out := Explanation{Source: src.describe, Policy: s.controller.where}
	if src.invalid != nil {
		out.Invalid = src.invalid.Error()
		out.NotChecked = s.missed.list()
		return out, nil
	}
	if src.inactive != nil {
		out.Inactive = src.inactive.Error()
	}
	named, looked, err := s.objectsNamed(ctx, src.kind, src.replicaName, near)
	if err != nil {
		return Explanation{}, err
	}
	for _, ns := range namespaces {
		if in != "" && ns.Name != in {
			continue
		}
		verdict := desired.Verdict{Rule: out.Inactive}
		if src.inactive == nil {
			verdict = desired.ExplainTarget(src.targets, src.origin, ns, policy)
		}
		row := ExplainRow{Namespace: ns.Name, Replica: src.replicaName, Wanted: verdict.Wanted, Rule: verdict.Rule}
		row.Now = whatIsThere(src, named[ns.Name], verdict.Wanted)
		if looked != nil && !looked.Has(ns.Name) {
			row.Now = "not looked at (see not checked)"
		}
		out.Rows = append(out.Rows, row)
	}
	if in != "" && len(out.Rows) == 0 && all {
		return Explanation{}, fmt.Errorf("namespace %q not found", in)
	}
	out.NotChecked = s.missed.list()
	return out, nil
}

// whatIsThere describes obj, the object that has the replica's name in a namespace
// (nil: none).
func whatIsThere(src source, obj *metav1.PartialObjectMetadata, wanted bool) string {
	switch {
	case obj == nil && wanted:
		return "missing (cmsync has not written it yet: see the source's status)"
	case obj == nil:
		return "none"
	case src.owner.Owns(obj) && wanted:
		return "replica"
	case src.owner.Owns(obj):
		return "stale replica (cmsync deletes it)"
	case wanted:
		return "conflict: " + desired.DescribeHolder(kindName(src.kind), obj)
	}
	return "another object of that name (not this source's)"
}

// readSource reads the source kind/ref from the cluster: a ConfigMap or Secret, or a
// ConfigMapSync, SecretSync or ObjectSync and the object it names, or the ObjectSync
// whose replica ref is.
func readSource(ctx context.Context, s session, kind, ref string) (input, error) {
	c := s.cluster
	key, err := parseSourceRef(kind, ref)
	if err != nil {
		return input{}, err
	}
	if isObjectKind(kind) {
		if key, err = c.objectSyncOf(ctx, kind, key); err != nil {
			return input{}, err
		}
		kind = v1alpha1.ObjectSyncKind
	}
	if sync := newSync(kind); sync != nil {
		if err := c.client.Get(ctx, client.ObjectKey{Name: key.Name}, sync); err != nil {
			return input{}, readError(kind, key.Name, mayGet(kind, ""), err)
		}
		return c.syncInput(ctx, sync, s.controller.objectKinds)
	}
	in, err := c.sourceObject(ctx, kind, key)
	if err != nil {
		return input{}, err
	}
	if in.meta == nil {
		return input{}, fmt.Errorf("%s %s not found", kind, key)
	}
	return in, nil
}

// objectSyncOf names the ObjectSync whose replica the object of kind at key is: the one
// its controller owner reference names, as the controller finds its replicas. An object
// that is no such replica is an error that says how to name an ObjectSync instead.
func (c cluster) objectSyncOf(ctx context.Context, kind string, key types.NamespacedName) (types.NamespacedName, error) {
	obj, err := c.objectNamed(ctx, kind, key.Namespace, key.Name)
	if err != nil {
		return key, readError(kindName(kind), key.String(), mayGet(kind, key.Namespace), err)
	}
	if obj == nil {
		return key, fmt.Errorf("%s %s not found", kindName(kind), key)
	}
	for _, ref := range obj.OwnerReferences {
		if ref.Kind == v1alpha1.ObjectSyncKind && ref.APIVersion == v1alpha1.GroupVersion.String() && ptr.Deref(ref.Controller, false) {
			return types.NamespacedName{Name: ref.Name}, nil
		}
	}
	return key, fmt.Errorf("%s %s is no replica of an ObjectSync (no controller owner reference names one): "+
		"name an ObjectSync as osync/NAME", kindName(kind), key)
}
