//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// objectKinds are the kinds the suite's chart lists in objectSync.kinds, as the chart
// renders them into --object-kinds: a NetworkPolicy, and Roles and RoleBindings, whose
// grants (escalate, bind) the chart adds only for them.
const objectKinds = "networking.k8s.io/v1/NetworkPolicy,rbac.authorization.k8s.io/v1/Role,rbac.authorization.k8s.io/v1/RoleBinding"

// objectSyncChartValue lists objectKinds in the chart's values (--set).
const objectSyncChartValue = "objectSync.kinds={" + objectKinds + "}"

// withoutWatchList has cmsync's informers LIST and WATCH, as against an API server
// without streaming lists: the ObjectSync scenarios work the same, and the
// least-privilege audit sees cmsync use its list permissions on the kinds.
var withoutWatchList = []string{"KUBE_FEATURE_WatchListClient=false"}

// newObjectSync creates an ObjectSync of source into the namespaces named, and deletes
// it when the test ends.
func newObjectSync(t *testing.T, source v1alpha1.ObjectSource, namespaces ...string) *v1alpha1.ObjectSync {
	t.Helper()
	sync := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: "osync-" + randomSuffix()},
		Spec: v1alpha1.ObjectSyncSpec{Source: source, DestinationNamespaces: namespaces}}
	must(t, harness.K8s.Create(context.Background(), sync))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), sync) })
	return sync
}

// waitForObjectSyncStatus waits for the ObjectSync's synced count and Ready reason.
func waitForObjectSyncStatus(t *testing.T, sync *v1alpha1.ObjectSync, synced, reason string) {
	t.Helper()
	eventually(t, 60*time.Second, "status of ObjectSync "+sync.Name, func() error {
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(sync), sync); err != nil {
			return err
		}
		if ready := readyReason(sync.Status.Conditions); sync.Status.Synced != synced || ready != reason {
			return fmt.Errorf("synced %q, Ready reason %q, failed %+v", sync.Status.Synced, ready, sync.Status.FailedNamespaces)
		}
		return nil
	})
}

// waitForObject waits until get finds obj (present) or finds it gone (!present).
func waitForObject(t *testing.T, obj client.Object, present bool) {
	t.Helper()
	eventually(t, 60*time.Second, fmt.Sprintf("%T %s/%s present %v", obj, obj.GetNamespace(), obj.GetName(), present), func() error {
		err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		switch {
		case present:
			return err
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		}
		return fmt.Errorf("still there")
	})
}

// expectReplicaOf checks that replica carries cmsync's markers for source and a
// controller reference to sync.
func expectReplicaOf(t *testing.T, replica client.Object, source types.NamespacedName, sync *v1alpha1.ObjectSync) {
	t.Helper()
	ref := metav1.GetControllerOf(replica)
	if replica.GetLabels()[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue ||
		replica.GetAnnotations()[v1alpha1.SourceAnnotation] != source.String() ||
		ref == nil || ref.Kind != v1alpha1.ObjectSyncKind || ref.UID != sync.UID {
		t.Errorf("%s/%s: labels %v, annotations %v, controller %+v: want the replica markers of %s and ObjectSync %s",
			replica.GetNamespace(), replica.GetName(), replica.GetLabels(), replica.GetAnnotations(), ref, source, sync.Name)
	}
}

// A platform's default-deny NetworkPolicy in every team namespace, under the chart's
// grants alone: it fans out with the API server's defaults kept, a team's own policy of
// the same name is left alone and reported, a change of the source reaches every
// replica, a narrowing deletes a replica and the ObjectSync's deletion the rest.
func TestObjectSyncFansOutANetworkPolicyAndCleansUp(t *testing.T) {
	harness.StartControllerWithEnv(t, withoutWatchList, "--object-kinds="+objectKinds)
	ctx := context.Background()
	platform := harness.NewNamespace(t, "osync-platform", nil)
	a, b := harness.NewNamespace(t, "osync-team", nil), harness.NewNamespace(t, "osync-team", nil)
	taken := harness.NewNamespace(t, "osync-team", nil)
	theirs := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "default-deny"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}}
	must(t, harness.K8s.Create(ctx, theirs))
	// No policyTypes: the API server defaults them (Ingress), and that never causes a write.
	source := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "default-deny",
		Labels: map[string]string{"policy.example/tier": "baseline"}}}
	must(t, harness.K8s.Create(ctx, source))
	sync := newObjectSync(t, v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: platform, Name: "default-deny"},
		a, b, taken)
	waitForObjectSyncStatus(t, sync, "2/3", v1alpha1.ReasonDegraded)
	if len(sync.Status.FailedNamespaces) != 1 || sync.Status.FailedNamespaces[0].Namespace != taken ||
		sync.Status.FailedNamespaces[0].Reason != v1alpha1.ReasonConflict {
		t.Errorf("failedNamespaces %+v, want the conflict in %s alone", sync.Status.FailedNamespaces, taken)
	}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(source), source))
	for _, ns := range []string{a, b} {
		replica := &networkingv1.NetworkPolicy{}
		must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default-deny"}, replica))
		expectReplicaOf(t, replica, client.ObjectKeyFromObject(source), sync)
		if !equality.Semantic.DeepEqual(replica.Spec, source.Spec) || replica.Labels["policy.example/tier"] != "baseline" {
			t.Errorf("replica in %s: spec %+v, labels %v; source spec %+v", ns, replica.Spec, replica.Labels, source.Spec)
		}
	}
	now := &networkingv1.NetworkPolicy{}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(theirs), now))
	if now.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("cmsync wrote the team's own policy in %s", taken)
	}

	// The platform opens port 80 from the ingress controller: every replica follows.
	port := networkingv1.NetworkPolicyPort{Port: harness.Ptr(intstr.FromInt32(80))}
	source.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{port}}}
	must(t, harness.K8s.Update(ctx, source))
	for _, ns := range []string{a, b} {
		eventually(t, 60*time.Second, "the replica in "+ns+" follows the source", func() error {
			replica := &networkingv1.NetworkPolicy{}
			if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default-deny"}, replica); err != nil {
				return err
			}
			if len(replica.Spec.Ingress) != 1 {
				return fmt.Errorf("ingress %+v", replica.Spec.Ingress)
			}
			return nil
		})
	}

	// Narrowed, then deleted: the replicas go, the source and the team's policy stay.
	must(t, harness.K8s.Patch(ctx, sync, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"destinationNamespaces":["`+a+`"]}}`))))
	waitForObject(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "default-deny"}}, false)
	must(t, harness.K8s.Delete(ctx, sync))
	waitForObject(t, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "default-deny"}}, false)
	waitForObject(t, &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: sync.Name}}, false)
	for _, obj := range []client.Object{source, theirs} {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(obj), &networkingv1.NetworkPolicy{}); err != nil {
			t.Errorf("%s/%s: %v", obj.GetNamespace(), obj.GetName(), err)
		}
	}
}

// chartClusterRoleRules renders the chart with sets (--set each) and returns the rules
// of its ClusterRole.
func chartClusterRoleRules(t *testing.T, sets ...string) []rbacv1.PolicyRule {
	t.Helper()
	args := make([]string, 0, 7+2*len(sets))
	args = append(args, "template", "cmsync", "../../deploy/chart/cmsync", "--namespace", harness.ReleaseNamespace, "--show-only", "templates/rbac.yaml")
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := harness.Helm(args...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, doc := range strings.Split(out, "\n---") {
		var role rbacv1.ClusterRole
		if yaml.Unmarshal([]byte(doc), &role) == nil && role.Kind == "ClusterRole" {
			return role.Rules
		}
	}
	t.Fatalf("no ClusterRole in the rendered chart:\n%s", out)
	return nil
}

// grantsVerb reports whether rules grant verb on resource of the rbac group.
func grantsVerb(rules []rbacv1.PolicyRule, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, verb) })
}

// withoutEscalation creates a ServiceAccount bound to rules with escalate and bind
// taken out — the chart's grants for Roles and RoleBindings as an administrator who
// gave cmsync those kinds by hand, without what the chart adds for them, would hold
// them — and returns its kubeconfig.
func withoutEscalation(t *testing.T, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	name := "cmsync-noescalate-" + randomSuffix()
	var kept []rbacv1.PolicyRule
	for _, r := range rules {
		r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "escalate" || v == "bind" })
		if len(r.Verbs) > 0 {
			kept = append(kept, r)
		}
	}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: kept},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: harness.ReleaseNamespace, Name: name}}},
	}
	for _, obj := range objs {
		must(t, harness.K8s.Create(ctx, obj))
	}
	t.Cleanup(func() {
		for _, obj := range objs {
			_ = harness.K8s.Delete(context.Background(), obj)
		}
	})
	kubeconfig, err := harness.ServiceAccountKubeconfig(name)
	must(t, err)
	return kubeconfig
}

// Copying a Role or RoleBinding that grants more than cmsync holds needs escalate and
// bind, which the chart grants only when Role or RoleBinding is listed. Without them
// the API server refuses the copies: the ObjectSyncs say so (Ready=False, the API
// server's reason for the namespace, a Failed Event) and nothing else changes. Under
// the chart's grants with them listed, the same ObjectSyncs fan out, a change of the
// Role and of the binding's subjects reach the replicas, a team's own Role of the same
// name is left alone, and a binding to another role replaces its replicas.
func TestObjectSyncRolesNeedTheChartsEscalateAndBind(t *testing.T) {
	for _, verb := range []string{"escalate", "bind"} {
		if grantsVerb(chartClusterRoleRules(t, "objectSync.kinds={networking.k8s.io/v1/NetworkPolicy}"), verb) {
			t.Errorf("the chart grants %s without Role or RoleBinding listed", verb)
		}
	}
	withGrants := chartClusterRoleRules(t, "secrets.enabled=true", objectSyncChartValue)
	if !grantsVerb(withGrants, "escalate") || !grantsVerb(withGrants, "bind") {
		t.Fatalf("with Role and RoleBinding listed the chart grants no escalate or bind: %+v", withGrants)
	}
	// The rest needs the suite's own release, which lists Role and RoleBinding, and local
	// cmsync processes.
	harness.SkipOnExistingCluster(t)
	// The install notes say what that gives cmsync, and whoever may create ObjectSyncs.
	notes, err := harness.Helm("get", "notes", harness.Release, "--namespace", harness.ReleaseNamespace)
	must(t, err)
	if said := strings.Join(strings.Fields(notes), " "); !strings.Contains(said,
		"RIGHTS: with Role and RoleBinding listed, cmsync holds escalate on Roles and bind on Roles and ClusterRoles: "+
			"it can put any right into the namespaces it writes (those it serves but the excluded ones, never its own), "+
			"and so can whoever may create ObjectSyncs, through it.") {
		t.Errorf("the install notes do not say what listing Role and RoleBinding gives:\n%s", notes)
	}
	ctx := context.Background()
	platform := harness.NewNamespace(t, "osync-platform", nil)
	team, taken := harness.NewNamespace(t, "osync-team", nil), harness.NewNamespace(t, "osync-team", nil)
	// More than cmsync holds: deleting Deployments, and binding the admin ClusterRole.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "deployer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "delete"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "team-admins"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-admins"}}}
	theirs := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "deployer"}}
	theirBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "team-admins"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
	for _, obj := range []client.Object{role, binding, theirs, theirBinding} {
		must(t, harness.K8s.Create(ctx, obj))
	}
	roles := newObjectSync(t, v1alpha1.ObjectSource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role", Namespace: platform, Name: "deployer"},
		team, taken)
	bindings := newObjectSync(t, v1alpha1.ObjectSource{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding", Namespace: platform,
		Name: "team-admins"}, team, taken)

	kubeconfig := withoutEscalation(t, withGrants)
	// This identity is not the chart's ServiceAccount, whose replica writes alone the
	// admission policy admits: without it, RBAC is what answers.
	harness.WithoutProtection(t, func() {
		c := harness.StartController(t, "--kubeconfig="+kubeconfig, "--object-kinds="+objectKinds)
		for _, sync := range []*v1alpha1.ObjectSync{roles, bindings} {
			waitForObjectSyncStatus(t, sync, "0/2", v1alpha1.ReasonDegraded)
			// The API server's escalation check answers before it looks for an object
			// in the way: the team's own object in taken gets the same refusal.
			for _, f := range sync.Status.FailedNamespaces {
				if f.Reason != v1alpha1.ReasonFailed || !strings.Contains(f.Message, "attempting to grant RBAC permissions not currently held") {
					t.Errorf("ObjectSync %s in %s: %+v, want the API server's refusal", sync.Name, f.Namespace, f)
				}
			}
			eventually(t, 30*time.Second, "a Failed Event of ObjectSync "+sync.Name, func() error {
				var events eventsv1.EventList
				if err := harness.K8s.List(ctx, &events); err != nil {
					return err
				}
				if notes := eventNotes(events.Items, sync.Name); !strings.Contains(notes, v1alpha1.ReasonFailed+": ") ||
					!strings.Contains(notes, "attempting to grant RBAC permissions not currently held") {
					return fmt.Errorf("events %q", notes)
				}
				return nil
			})
		}
		c.Stop()
	})
	for _, obj := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "deployer"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "team-admins"}},
	} {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s/%s: %v, want none", obj, team, obj.GetName(), err)
		}
	}

	// The chart's grants, with Role and RoleBinding listed: the copies are made.
	harness.StartControllerWithEnv(t, withoutWatchList, "--object-kinds="+objectKinds)
	waitForObjectSyncStatus(t, roles, "1/2", v1alpha1.ReasonDegraded)
	waitForObjectSyncStatus(t, bindings, "1/2", v1alpha1.ReasonDegraded)
	replica, replicaBinding := &rbacv1.Role{}, &rbacv1.RoleBinding{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: team, Name: "deployer"}, replica))
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: team, Name: "team-admins"}, replicaBinding))
	expectReplicaOf(t, replica, client.ObjectKeyFromObject(role), roles)
	expectReplicaOf(t, replicaBinding, client.ObjectKeyFromObject(binding), bindings)
	if !equality.Semantic.DeepEqual(replica.Rules, role.Rules) || replicaBinding.RoleRef != binding.RoleRef {
		t.Errorf("replicas: rules %+v, roleRef %+v", replica.Rules, replicaBinding.RoleRef)
	}

	// A change of the Role's rules and of the binding's subjects reaches the replicas.
	role.Rules[0].Verbs = []string{"get", "delete", "patch"}
	must(t, harness.K8s.Update(ctx, role))
	binding.Subjects = append(binding.Subjects, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "oncall"})
	must(t, harness.K8s.Update(ctx, binding))
	eventually(t, 60*time.Second, "the replicas follow their sources", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(replica), replica); err != nil {
			return err
		}
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(replicaBinding), replicaBinding); err != nil {
			return err
		}
		if len(replica.Rules[0].Verbs) != 3 || len(replicaBinding.Subjects) != 2 {
			return fmt.Errorf("rules %+v, subjects %+v", replica.Rules, replicaBinding.Subjects)
		}
		return nil
	})
	// A binding cannot change its role in place: made anew with another, its replica is too.
	oldUID := replicaBinding.UID
	must(t, harness.K8s.Delete(ctx, binding))
	binding = &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "team-admins"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "team-admins"}}}
	must(t, harness.K8s.Create(ctx, binding))
	eventually(t, 60*time.Second, "the binding's replica made anew", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(replicaBinding), replicaBinding); err != nil {
			return err
		}
		if replicaBinding.UID == oldUID || replicaBinding.RoleRef.Kind != "Role" {
			return fmt.Errorf("uid %s (was %s), roleRef %+v", replicaBinding.UID, oldUID, replicaBinding.RoleRef)
		}
		return nil
	})
	for _, sync := range []*v1alpha1.ObjectSync{roles, bindings} {
		must(t, harness.K8s.Delete(ctx, sync))
	}
	waitForObject(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "deployer"}}, false)
	waitForObject(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "team-admins"}}, false)
	for _, obj := range []client.Object{theirs, theirBinding} {
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil || obj.GetLabels()[v1alpha1.ManagedByLabel] != "" {
			t.Errorf("the team's own %T %s: %v, labels %v", obj, obj.GetName(), err, obj.GetLabels())
		}
	}
}
