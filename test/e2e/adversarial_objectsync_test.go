//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/cli"
)

// objectTakerIn returns a client acting as a user who may create ObjectSyncs (a real
// ClusterRole and ClusterRoleBinding) and edit namespace: whom the admission policy
// lets take an HNC or Kyverno copy over (kubectl cmsync migrate --apply).
func objectTakerIn(t *testing.T, namespace string) client.Client {
	t.Helper()
	ctx := context.Background()
	name := "cmsync-object-taker-" + randomSuffix()
	user := []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: name}}
	objs := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"objectsyncs"}, Verbs: []string{"create"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}, Subjects: user},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}, Subjects: user},
	}
	for _, obj := range objs {
		must(t, harness.K8s.Create(ctx, obj))
	}
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), objs[1])
		_ = harness.K8s.Delete(context.Background(), objs[0])
	})
	cfg := rest.CopyConfig(harness.AdminConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	eventually(t, 30*time.Second, "the taker's bindings in effect", func() error {
		probe := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: "rbac-probe"}, Spec: v1alpha1.ObjectSyncSpec{
			Source:               v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: "default", Name: "probe"},
			DestinationNamespace: namespace}}
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return err
		}
		return c.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "rbac-probe"}}, client.DryRunAll)
	})
	return c
}

// takeOverPatch is the merge patch that adds cmsync's markers for sync, and change
// besides (a merge patch of its own, or nil), to a copy.
func takeOverPatch(t *testing.T, sync *v1alpha1.ObjectSync, change map[string]any) client.Patch {
	t.Helper()
	labels, annotations, ref := desired.ReplicaMarkers(desired.SyncOwner(sync))
	patch := map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations,
		"ownerReferences": []metav1.OwnerReference{*ref}}}
	maps.Copy(patch, change)
	raw, err := json.Marshal(patch)
	must(t, err)
	return client.RawPatch(types.MergePatchType, raw)
}

// An ObjectSync's NetworkPolicy replica is protected as a ConfigMap replica is. A user
// with edit rights in its namespace cannot edit, relabel or delete it, nor forge one
// (writing it back unchanged is admitted), nor take over a copy of theirs that wears HNC's or Kyverno's markers (a Kyverno clone
// labelled with its source's uid alone too). A user who may create ObjectSyncs takes
// such copies over, their markers naming the source, with cmsync's markers alone (not
// with a change of content), and cmsync then keeps them as its replicas, in place.
func TestObjectSyncReplicasAreProtected(t *testing.T) {
	harness.StartController(t, "--object-kinds="+objectKinds)
	ctx := context.Background()
	platform, team := harness.NewNamespace(t, "osync-platform", nil), harness.NewNamespace(t, "osync-guarded", nil)
	source := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "default-deny"}}
	must(t, harness.K8s.Create(ctx, source))
	newObjectSync(t, v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: platform, Name: "default-deny"}, team)
	replica := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "default-deny"}}
	waitForObject(t, replica, true)
	editor := editorIn(t, team)

	told := []string{"NetworkPolicy " + team + "/default-deny is a replica of " + platform + "/default-deny kept by cmsync for ObjectSync",
		"change the source " + platform + "/default-deny or the ObjectSync instead"}
	target := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "default-deny"}}
	expectRefused(t, "editing a replica", editor.Patch(ctx, target, client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"ingress":[{}]}}`))), told...)
	expectRefused(t, "relabelling a replica", editor.Patch(ctx, target, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`))), told...)
	expectRefused(t, "deleting a replica", editor.Delete(ctx, target), told...)
	forged := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "forged",
		Labels:      map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		Annotations: map[string]string{v1alpha1.SourceAnnotation: platform + "/default-deny"}}}
	expectRefused(t, "forging a replica", editor.Create(ctx, forged), "only cmsync writes objects labelled app.kubernetes.io/managed-by=cmsync")
	// A write that changes nothing is not an edit.
	asRead := &networkingv1.NetworkPolicy{}
	must(t, editor.Get(ctx, client.ObjectKeyFromObject(replica), asRead))
	expectAdmitted(t, "writing a replica back unchanged", editor.Update(ctx, asRead))
	now := &networkingv1.NetworkPolicy{}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(replica), now))
	if now.ResourceVersion != replica.ResourceVersion && now.ResourceVersion != asRead.ResourceVersion {
		t.Errorf("the replica's resourceVersion moved from %s to %s", replica.ResourceVersion, now.ResourceVersion)
	}

	// HNC's and Kyverno's copies of other sources, the ObjectSyncs that name them. A
	// Kyverno version that labels a clone with its source's uid and no name ties it by
	// namespace and kind alone: the editor can write such labels on an object of theirs.
	hnc, kyverno, kyvernoUID := "hnc-deny", "kyverno-deny", "kyverno-uid-deny"
	syncs := map[string]*v1alpha1.ObjectSync{}
	for name, markers := range map[string]map[string]string{
		hnc: {"hnc.x-k8s.io/inherited-from": platform},
		kyverno: {"app.kubernetes.io/managed-by": "kyverno", "generate.kyverno.io/source-namespace": platform,
			"generate.kyverno.io/source-name": kyverno, "generate.kyverno.io/source-kind": "NetworkPolicy",
			"generate.kyverno.io/source-group": "networking.k8s.io", "generate.kyverno.io/source-version": "v1"},
		kyvernoUID: {"app.kubernetes.io/managed-by": "kyverno", "generate.kyverno.io/source-namespace": platform,
			"generate.kyverno.io/source-kind": "NetworkPolicy", "generate.kyverno.io/source-group": "networking.k8s.io"},
	} {
		src := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: name}}
		must(t, harness.K8s.Create(ctx, src))
		if name == kyvernoUID {
			markers["generate.kyverno.io/source-uid"] = string(src.UID)
		}
		must(t, editor.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name, Labels: markers}}))
		syncs[name] = newObjectSync(t, v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: platform, Name: name}, team)
		waitForObjectSyncStatus(t, syncs[name], "0/1", v1alpha1.ReasonDegraded)
	}
	copyOf := func(name string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: name}}
	}
	for _, name := range []string{hnc, kyverno, kyvernoUID} {
		expectRefused(t, "an editor taking their copy "+name+" over", editor.Patch(ctx, copyOf(name), takeOverPatch(t, syncs[name], nil)),
			"taking over a copy as a replica of "+platform+"/"+name, "is for a user who may create ObjectSyncs")
	}
	taker := objectTakerIn(t, team)
	expectRefused(t, "a take-over that changes the content", taker.Patch(ctx, copyOf(hnc),
		takeOverPatch(t, syncs[hnc], map[string]any{"spec": map[string]any{"policyTypes": []string{"Ingress", "Egress"}}})),
		"changes nothing but cmsync's markers", "an owner reference to an ObjectSync")
	expectRefused(t, "taking over an HNC copy as the replica of another source",
		taker.Patch(ctx, copyOf(hnc), takeOverPatch(t, syncs[kyverno], nil)), "only cmsync writes objects labelled")
	for _, name := range []string{hnc, kyverno, kyvernoUID} {
		before := copyOf(name)
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(before), before))
		expectAdmitted(t, "taking over the copy "+name, taker.Patch(ctx, copyOf(name), takeOverPatch(t, syncs[name], nil)))
		waitForObjectSyncStatus(t, syncs[name], "1/1", v1alpha1.ReasonSynced)
		after := copyOf(name)
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(after), after))
		if after.UID != before.UID {
			t.Errorf("the copy %s was replaced (uid %s, was %s), not kept in place", name, after.UID, before.UID)
		}
		expectReplicaOf(t, after, types.NamespacedName{Namespace: platform, Name: name}, syncs[name])
	}
}

// What a tenant with edit rights in their namespaces cannot do with ObjectSync (SPEC
// §12, §13): create or change an ObjectSync (RBAC: administrators create them), or push
// a deny-all NetworkPolicy into a namespace that is not theirs through any door of
// cmsync's. A deny-all NetworkPolicy of theirs labelled and annotated as a ConfigMap
// source, and a labelled ConfigMap that names a NetworkPolicy kind, get no
// NetworkPolicy anywhere (the ConfigMap door copies ConfigMaps only), and cmsync makes
// no request about NetworkPolicies in the other namespace; a forged replica is refused.
func TestTenantCannotPushANetworkPolicyThroughCmsync(t *testing.T) {
	c := harness.StartController(t, "--object-kinds="+objectKinds)
	ctx := context.Background()
	own, other := harness.NewNamespace(t, "osync-tenant", nil), harness.NewNamespace(t, "osync-victim", nil)
	platform := harness.NewNamespace(t, "osync-platform", nil)
	harness.DeleteSourcesAtEnd(t, []string{own})
	tenant := editorIn(t, own)
	tail := harness.NewAuditTail(t)

	must(t, harness.K8s.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "allow-dns"}}))
	existing := newObjectSync(t, v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: platform, Name: "allow-dns"}, own)
	mine := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + randomSuffix()}, Spec: v1alpha1.ObjectSyncSpec{
		Source:               v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: own, Name: "deny-all"},
		DestinationNamespace: other}}
	for what, err := range map[string]error{
		"creating an ObjectSync": tenant.Create(ctx, mine),
		"retargeting an ObjectSync": tenant.Patch(ctx, existing, client.RawPatch(types.MergePatchType,
			[]byte(`{"spec":{"destinationNamespaces":["`+other+`"]}}`))),
	} {
		if !apierrors.IsForbidden(err) || strings.Contains(fmt.Sprint(err), "ValidatingAdmissionPolicy") {
			t.Errorf("%s: %v, want RBAC's refusal", what, err)
		}
	}

	denyAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "deny-all",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: other}},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}}
	must(t, tenant.Create(ctx, denyAll))
	naming := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "deny-all-policy",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: other, "cmsync.io/kind": "NetworkPolicy"}},
		Data: map[string]string{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "spec": `{"podSelector":{},"policyTypes":["Ingress","Egress"]}`}}
	must(t, tenant.Create(ctx, naming))
	forged := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "forged",
		Labels:      map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		Annotations: map[string]string{v1alpha1.SourceAnnotation: platform + "/allow-dns"}}}
	expectRefused(t, "forging a NetworkPolicy replica", tenant.Create(ctx, forged), "only cmsync writes objects labelled")
	forged.Labels = nil
	expectRefused(t, "a NetworkPolicy naming a source", tenant.Create(ctx, forged), "only cmsync adds its markers")

	// The ConfigMap door copies the labelled ConfigMap as a ConfigMap, as it documents;
	// once it has, any NetworkPolicy would have come with the same passes.
	harness.WaitForReplicas(t, own, naming.Name, 30*time.Second, other)
	waitForObjectSyncStatus(t, existing, "1/1", v1alpha1.ReasonSynced)
	consistently(t, 3*time.Second, "no NetworkPolicy in "+other, func() error {
		var policies networkingv1.NetworkPolicyList
		if err := harness.K8s.List(ctx, &policies, client.InNamespace(other)); err != nil {
			return err
		}
		if len(policies.Items) > 0 {
			return fmt.Errorf("%d NetworkPolicies, the first %s", len(policies.Items), policies.Items[0].Name)
		}
		return nil
	})
	c.Stop()
	for _, r := range tail.Next(t) {
		if r.User.Username == harness.CmsyncUser && r.ObjectRef != nil && r.ObjectRef.Resource == "networkpolicies" && r.ObjectRef.Namespace == other {
			t.Errorf("cmsync made a request about NetworkPolicies in %s: %s %s", other, r.Verb, r.RequestURI)
		}
	}
}

// With Role and RoleBinding enabled, whoever may create ObjectSyncs can put a binding
// into every namespace cmsync writes. cmsync's own namespace is not one of them: a
// binding there could run a Pod as cmsync's ServiceAccount and so hold every right the
// chart gives cmsync (bind on ClusterRoles: cluster-admin), and a deny-all NetworkPolicy
// there would cut cmsync off. A user who may create ObjectSyncs names it by name and
// by glob, for a RoleBinding and a NetworkPolicy: their other destination gets its
// replicas, cmsync's namespace gets nothing, cmsync sends no write about either kind
// there, and kubectl cmsync explain says why.
func TestObjectSyncCannotReachCmsyncsOwnNamespace(t *testing.T) {
	c := harness.StartController(t, "--object-kinds="+objectKinds)
	ctx := context.Background()
	own, team := harness.NewNamespace(t, "osync-taker", nil), harness.NewNamespace(t, "osync-team", nil)
	taker := objectTakerIn(t, own)
	tail := harness.NewAuditTail(t)
	// The binding an attacker would want everywhere: admin for a group of theirs.
	must(t, harness.K8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "takers-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "takers"}}}))
	denyAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: own, Name: "deny-all"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}}
	must(t, taker.Create(ctx, denyAll))

	release := harness.ReleaseNamespace
	syncs := map[string]*v1alpha1.ObjectSync{
		"rolebindings": {ObjectMeta: metav1.ObjectMeta{Name: "takers-admin-" + randomSuffix()}, Spec: v1alpha1.ObjectSyncSpec{
			Source:                v1alpha1.ObjectSource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Namespace: own, Name: "takers-admin"},
			DestinationNamespace:  release,
			DestinationNamespaces: []string{team}}},
		"networkpolicies": {ObjectMeta: metav1.ObjectMeta{Name: "deny-all-" + randomSuffix()}, Spec: v1alpha1.ObjectSyncSpec{
			Source:                v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: own, Name: "deny-all"},
			DestinationNamespaces: []string{team, release + "*"}}},
	}
	for _, sync := range syncs {
		must(t, taker.Create(ctx, sync))
		deleteObjectSyncAtEnd(t, sync)
	}
	for _, sync := range syncs {
		waitForObjectSyncStatus(t, sync, "1/1", v1alpha1.ReasonSynced)
	}
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "takers-admin"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "deny-all"}},
	} {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
	consistently(t, 3*time.Second, "nothing of the ObjectSyncs in "+release, func() error {
		for _, obj := range []client.Object{
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "takers-admin"}},
			&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "deny-all"}},
		} {
			if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%T %s/%s: %v, want none", obj, release, obj.GetName(), err)
			}
		}
		return nil
	})

	// Nor through the take-over door: a copy there that HNC's label ties to the source
	// stays out of cmsync's hands, even for a user who may create ObjectSyncs and edit there.
	stub := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: release, Name: "deny-all",
		Labels: map[string]string{"hnc.x-k8s.io/inherited-from": own}}, Spec: denyAll.Spec}
	must(t, harness.K8s.Create(ctx, stub))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), stub) })
	expectRefused(t, "taking over a copy in cmsync's namespace", objectTakerIn(t, release).Patch(ctx, stub,
		takeOverPatch(t, syncs["networkpolicies"], nil)), "is refused in cmsync's own namespace")

	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", "osync/"+syncs["rolebindings"].Name, "--in", release, "--controller-namespace", release)
	if len(e.Rows) != 1 || e.Rows[0].Wanted || !strings.Contains(e.Rows[0].Rule, "cmsync's own namespace") {
		t.Errorf("explain of %s: %+v, want it not wanted, as cmsync's own namespace", release, e)
	}
	// Their deletion, cmsync's cleanup, ends what it sends; then no write of either kind
	// in its namespace is in the audit log.
	for _, sync := range syncs {
		must(t, harness.K8s.Delete(ctx, sync))
		waitForObject(t, &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: sync.Name}}, false)
	}
	c.Stop()
	for _, r := range tail.Next(t) {
		if r.User.Username == harness.CmsyncUser && r.ObjectRef != nil && r.ObjectRef.Namespace == release &&
			(r.ObjectRef.Resource == "rolebindings" || r.ObjectRef.Resource == "networkpolicies") && r.Verb != "get" && r.Verb != "list" && r.Verb != "watch" {
			t.Errorf("cmsync wrote %s in its own namespace: %s %s", r.ObjectRef.Resource, r.Verb, r.RequestURI)
		}
	}
}
