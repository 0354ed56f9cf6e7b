//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
	"github.com/cmsync/cmsync/internal/migrate"
)

// A cluster HNC served, stopped (its CRDs installed with their real schemas, no HNC
// controller, its tree in the labels it wrote on the namespaces): a NetworkPolicy
// propagated from org into three namespaces below it (one two levels down), as
// HNC's writeObject leaves a copy (the source's content, hnc.x-k8s.io/inherited-from and
// HNC's managed-by label), a stray copy in a namespace not below org, and a
// LimitRange, a kind the controller does not copy. kubectl cmsync migrate plans an
// ObjectSync into exactly the three namespaces, taking their copies over, leaves the
// stray one, refuses the LimitRange saying what to enable, and writes nothing; --apply
// makes the ObjectSync and takes the copies over in place (same uid), and cmsync then
// keeps them equal to the source.
func TestMigrateFromHNC(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	hncCluster(t, "networking.k8s.io/networkpolicies", "limitranges", "configmaps")
	release := objectKindsRelease(t, "--object-kinds="+networkPolicies)
	harness.StartController(t, "--object-kinds="+networkPolicies)
	ctx := context.Background()
	org, stray := harness.NewNamespace(t, "hnc-org", nil), harness.NewNamespace(t, "hnc-stray", nil)
	teamA, teamB := harness.NewNamespace(t, "hnc-a", hncDepths(org)), harness.NewNamespace(t, "hnc-b", hncDepths(org))
	teamBDev := harness.NewNamespace(t, "hnc-b-dev", hncDepths(teamB, org))
	// A HierarchyConfiguration a tenant wrote while HNC's webhook was gone is not HNC's
	// tree: only the namespaces' labels are.
	must(t, harness.K8s.Create(ctx, hncObject("HierarchyConfiguration", stray, "hierarchy", map[string]any{"parent": org})))

	must(t, harness.K8s.Create(ctx, defaultDeny(org, "deny")))
	copies := make([]client.Object, 0, 4)
	for _, ns := range []string{teamA, teamB, teamBDev, stray} {
		c := defaultDeny(ns, "deny")
		c.Labels = map[string]string{migrate.HNCInheritedFrom: org, "app.kubernetes.io/managed-by": migrate.HNCGroup}
		must(t, harness.K8s.Create(ctx, c))
		copies = append(copies, c)
	}
	limits := hncLimitRanges(t, org, teamA)
	settings := hncConfigMaps(t, org, teamA)

	var plan cli.Migration
	harness.PluginJSON(t, &plan, "migrate", "--controller-namespace", release)
	deny := moveFrom(t, plan, migrate.HNCPeer, "NetworkPolicy", org+"/deny")
	if deny.Refused != "" || deny.ObjectSync == nil || !sameSet(deny.ObjectSync.Spec.DestinationNamespaces, []string{teamA, teamB, teamBDev}) ||
		!sameSet(namespacesOf(deny.TakeOver), []string{teamA, teamB, teamBDev}) || len(deny.Left) != 1 || deny.Left[0].Namespace != stray {
		t.Errorf("the NetworkPolicy's move: %+v, want an ObjectSync into the three namespaces below %s, their copies taken over, %s's left", deny, org, stray)
	}
	if m := moveFrom(t, plan, migrate.HNCPeer, "LimitRange", org+"/limits"); !strings.Contains(m.Refused, "enable it with objectSync.kinds") ||
		!strings.Contains(m.Refused, "v1/LimitRange") {
		t.Errorf("the LimitRange's move: %+v, want it refused, saying to enable v1/LimitRange", m)
	}
	t.Logf("kubectl cmsync migrate:\n%s", harness.Plugin(t, "migrate", "--controller-namespace", release))
	expectUnchanged(t, append(slices.Clone(copies), limits...))

	harness.PluginJSON(t, &plan, "migrate", "--apply", "--controller-namespace", release)
	osync := moveFrom(t, plan, migrate.HNCPeer, "NetworkPolicy", org+"/deny").ObjectSync
	deleteObjectSyncAtEnd(t, osync)
	expectTakenOver(t, copies[:3], migrate.HNCInheritedFrom)
	// HNC's copy of a ConfigMap becomes a ConfigMapSync's replica, in place, too.
	cms := moveFrom(t, plan, migrate.HNCPeer, "ConfigMap", org+"/settings").ConfigMapSync
	if cms == nil {
		t.Fatalf("the ConfigMap's move made no ConfigMapSync: %+v", plan)
	}
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), cms) })
	taken := &corev1.ConfigMap{}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(settings), taken))
	if taken.UID != settings.UID || taken.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue ||
		len(taken.OwnerReferences) != 1 || taken.OwnerReferences[0].Kind != v1alpha1.ConfigMapSyncKind {
		t.Errorf("HNC's ConfigMap copy was not taken over in place: uid %s -> %s, labels %v, owners %v",
			settings.UID, taken.UID, taken.Labels, taken.OwnerReferences)
	}
	expectUnchanged(t, append(copies[3:], limits...))
	waitForObjectSyncReason(t, osync.Name, v1alpha1.ReasonSynced)
	expectFollowsSource(t, org, copies[:3])
}

// A tenant who may edit one namespace below another in HNC's tree, where HNC copies
// ConfigMaps only from sources that ask (mode AllowPropagate), writes HNC's label on a
// ConfigMap of their own, naming a source HNC never copied to them. An administrator's
// kubectl cmsync migrate --apply must not make cmsync copy that source to them: the move
// is refused, saying why, nothing is created and the tenant's ConfigMap stays theirs.
func TestTenantCannotGetASourceThroughAForgedHNCCopy(t *testing.T) {
	release, org, team := hncTeamBelowOrg(t, "configmaps:AllowPropagate")
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: org, Name: "db-root"},
		Data: map[string]string{"password": "not for tenants"}}))
	forged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "db-root",
		Labels: map[string]string{migrate.HNCInheritedFrom: org, "app.kubernetes.io/managed-by": migrate.HNCGroup}}}
	must(t, editorIn(t, team).Create(ctx, forged))

	var plan cli.Migration
	harness.PluginJSON(t, &plan, "migrate", "--apply", "--controller-namespace", release)
	m := moveFrom(t, plan, migrate.HNCPeer, "ConfigMap", org+"/db-root")
	if !strings.Contains(m.Refused, "mode AllowPropagate") || m.ConfigMapSync != nil || len(m.TakeOver) > 0 {
		t.Errorf("the forged copy's move: %+v, want it refused", m)
	}
	var syncs v1alpha1.ConfigMapSyncList
	must(t, harness.K8s.List(ctx, &syncs))
	for _, s := range syncs.Items {
		if s.Spec.SourceNamespace == org {
			t.Errorf("migrate made ConfigMapSync %s of %s/%s", s.Name, org, s.Spec.ConfigMapName)
		}
	}
	expectUnchanged(t, []client.Object{forged})
}

// hncCluster installs HNC's CRDs and its one HNCConfiguration, propagating the
// resources ("group/resource", or "resource" of the core group, in mode Propagate
// unless ":Mode" follows), until the test ends.
func hncCluster(t *testing.T, resources ...string) {
	t.Helper()
	installCRDs(t, "hnc.x-k8s.io_hncconfigurations.yaml", "hnc.x-k8s.io_hierarchyconfigurations.yaml")
	entries := make([]any, 0, len(resources))
	for _, r := range resources {
		r, mode, found := strings.Cut(r, ":")
		if !found {
			mode = "Propagate"
		}
		group, resource, found := strings.Cut(r, "/")
		if !found {
			group, resource = "", r
		}
		entries = append(entries, map[string]any{"group": group, "resource": resource, "mode": mode})
	}
	config := hncObject("HNCConfiguration", "", migrate.HNCConfigName, map[string]any{"resources": entries})
	must(t, harness.K8s.Create(context.Background(), config))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), config) })
}

// hncTeamBelowOrg is a cluster HNC served, propagating resources (as hncCluster), with
// cmsync running with NetworkPolicies enabled, the release that says so, and a team
// namespace below an org namespace in HNC's tree.
func hncTeamBelowOrg(t *testing.T, resources ...string) (release, org, team string) {
	t.Helper()
	harness.SkipOnExistingCluster(t)
	hncCluster(t, resources...)
	release = objectKindsRelease(t, "--object-kinds="+networkPolicies)
	harness.StartController(t, "--object-kinds="+networkPolicies)
	org = harness.NewNamespace(t, "hnc-org", nil)
	return release, org, harness.NewNamespace(t, "hnc-team", hncDepths(org))
}

// hncDepths are the labels HNC writes on a namespace below ancestors, nearest first.
func hncDepths(ancestors ...string) map[string]string {
	labels := map[string]string{}
	for i, a := range ancestors {
		labels[a+migrate.HNCTreeDepth] = fmt.Sprint(i + 1)
	}
	return labels
}

// hncObject is one of HNC's configuration objects.
func hncObject(kind, namespace, name string, spec map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	obj.SetAPIVersion(migrate.HNCGroup + "/" + migrate.HNCVersion)
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj
}

// hncConfigMaps makes a ConfigMap "settings" in src and HNC's copy of it in copyIn,
// which it returns.
func hncConfigMaps(t *testing.T, src, copyIn string) *corev1.ConfigMap {
	t.Helper()
	data := map[string]string{"level": "info"}
	must(t, harness.K8s.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "settings"}, Data: data}))
	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: copyIn, Name: "settings",
		Labels: map[string]string{migrate.HNCInheritedFrom: src, "app.kubernetes.io/managed-by": migrate.HNCGroup}}, Data: data}
	must(t, harness.K8s.Create(context.Background(), copied))
	return copied
}

// hncLimitRanges makes a LimitRange "limits" in src and HNC's copy of it in copyIn.
func hncLimitRanges(t *testing.T, src, copyIn string) []client.Object {
	t.Helper()
	out := make([]client.Object, 0, 2)
	for _, ns := range []string{src, copyIn} {
		lr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"limits": []any{
			map[string]any{"type": "Container", "default": map[string]any{"memory": "64Mi"}},
		}}}}
		lr.SetAPIVersion("v1")
		lr.SetKind("LimitRange")
		lr.SetNamespace(ns)
		lr.SetName("limits")
		if ns != src {
			lr.SetLabels(map[string]string{migrate.HNCInheritedFrom: src, "app.kubernetes.io/managed-by": migrate.HNCGroup})
		}
		must(t, harness.K8s.Create(context.Background(), lr))
		out = append(out, lr)
	}
	return out
}

// A cluster where Kyverno's generate-clone rule kept a default-deny NetworkPolicy in
// every Namespace with a label (its ClusterPolicy CRD installed with its real schema,
// no Kyverno controller): the copies carry the labels Kyverno's background controller
// writes. migrate plans an ObjectSync with the same namespaceSelector and copy name,
// taking the copies over; a rule with an exclude is refused, naming it. --apply takes
// the copies over in place, and a namespace labelled later gets cmsync's replica.
func TestMigrateFromKyvernoClone(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	installCRDs(t, "kyverno.io_clusterpolicies.yaml.gz", "kyverno.io_policies.yaml.gz")
	release := objectKindsRelease(t, "--object-kinds="+networkPolicies)
	harness.StartController(t, "--object-kinds="+networkPolicies)
	ctx := context.Background()
	s := randomSuffix()
	label := map[string]string{"tier-" + s: "team"}
	platform := harness.NewNamespace(t, "kyv-platform", nil)
	t1, t2 := harness.NewNamespace(t, "kyv-t1", label), harness.NewNamespace(t, "kyv-t2", label)
	policy, excluded := "netpol-"+s, "excluded-"+s
	for _, p := range []*unstructured.Unstructured{clonePolicy(t, policy, platform, label, ""), clonePolicy(t, excluded, platform, label, "kube-system")} {
		must(t, harness.K8s.Create(ctx, p))
		t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), p) })
	}
	copies := kyvernoClones(t, platform, policy, t1, t2)
	// The same rule in a namespaced Policy clones into t1 when an object there matches.
	namespaced := clonePolicy(t, "in-"+s, platform, label, "")
	namespaced.SetKind(migrate.PolicyKind)
	namespaced.SetNamespace(t1)
	rule := namespaced.Object["spec"].(map[string]any)["rules"].([]any)[0].(map[string]any)
	rule["match"] = map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"ConfigMap"}}}}}
	must(t, harness.K8s.Create(ctx, namespaced))

	var plan cli.Migration
	harness.PluginJSON(t, &plan, "migrate", "--controller-namespace", release)
	m := moveFrom(t, plan, migrate.KyvernoPeer+" ClusterPolicy "+policy+" rule deny", "NetworkPolicy", platform+"/deny-template")
	if m.Refused != "" || m.ObjectSync == nil || m.ObjectSync.Spec.TargetName != "default-deny" ||
		m.ObjectSync.Spec.NamespaceSelector == nil || m.ObjectSync.Spec.NamespaceSelector.MatchLabels["tier-"+s] != "team" ||
		!sameSet(namespacesOf(m.TakeOver), []string{t1, t2}) {
		t.Errorf("the clone rule's move: %+v, want an ObjectSync by the rule's selector, named default-deny, taking over the copies in %s and %s", m, t1, t2)
	}
	if r := moveFrom(
		t,
		plan,
		migrate.KyvernoPeer+" ClusterPolicy "+excluded+" rule deny",
		"NetworkPolicy",
		platform+"/deny-template",
	); !strings.Contains(
		r.Refused,
		"exclude",
	) {
		t.Errorf("the rule with an exclude: %+v, want it refused, naming exclude", r)
	}
	if r := moveFrom(t, plan, migrate.KyvernoPeer+" Policy "+t1+"/in-"+s+" rule deny", "NetworkPolicy", platform+"/deny-template"); !strings.Contains(
		r.Refused, "a namespaced Policy clones into its own namespace") {
		t.Errorf("the namespaced Policy's rule: %+v, want it refused, saying why", r)
	}
	t.Logf("kubectl cmsync migrate:\n%s", harness.Plugin(t, "migrate", "--controller-namespace", release))
	expectUnchanged(t, copies)

	harness.PluginJSON(t, &plan, "migrate", "--apply", "--controller-namespace", release)
	osync := moveFrom(t, plan, migrate.KyvernoPeer+" ClusterPolicy "+policy+" rule deny", "NetworkPolicy", platform+"/deny-template").ObjectSync
	deleteObjectSyncAtEnd(t, osync)
	expectTakenOver(t, copies, "generate.kyverno.io/rule-name")
	waitForObjectSyncReason(t, osync.Name, v1alpha1.ReasonSynced)
	t3 := harness.NewNamespace(t, "kyv-t3", label)
	waitForNetworkPolicyReplicas(t, osync, t1, t2, t3)
}

// kyvernoClones makes the clone source src/deny-template, labelled as Kyverno labels a
// source it clones, and the copies that the rule "deny" of policy made of it in the
// namespaces, with the labels Kyverno's background controller writes on them; it
// returns the copies.
func kyvernoClones(t *testing.T, src, policy string, namespaces ...string) []client.Object {
	t.Helper()
	ctx := context.Background()
	template := defaultDeny(src, "deny-template")
	template.Labels = map[string]string{"generate.kyverno.io/clone-source": ""}
	must(t, harness.K8s.Create(ctx, template))
	copies := make([]client.Object, 0, len(namespaces))
	for _, ns := range namespaces {
		c := defaultDeny(ns, "default-deny")
		c.Labels = map[string]string{
			"generate.kyverno.io/clone-source": "", "app.kubernetes.io/managed-by": "kyverno",
			"generate.kyverno.io/policy-name": policy, "generate.kyverno.io/policy-namespace": "", "generate.kyverno.io/rule-name": "deny",
			"generate.kyverno.io/trigger-kind": "Namespace", "generate.kyverno.io/trigger-version": "v1", "generate.kyverno.io/trigger-group": "",
			"generate.kyverno.io/trigger-namespace": "", "generate.kyverno.io/trigger-uid": "u",
			"generate.kyverno.io/source-kind": "NetworkPolicy", "generate.kyverno.io/source-namespace": src,
			"generate.kyverno.io/source-group": "networking.k8s.io", "generate.kyverno.io/source-version": "v1",
			"generate.kyverno.io/source-uid": string(template.UID),
		}
		must(t, harness.K8s.Create(ctx, c))
		copies = append(copies, c)
	}
	return copies
}

// clonePolicy is a ClusterPolicy whose rule "deny" keeps a clone of src/deny-template,
// named default-deny, in every Namespace labelled so, as Kyverno's docs write one; with
// exclude, the rule leaves that namespace out.
func clonePolicy(t *testing.T, name, src string, label map[string]string, exclude string) *unstructured.Unstructured {
	t.Helper()
	rule := map[string]any{
		"name": "deny",
		"match": map[string]any{
			"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Namespace"}, "selector": map[string]any{"matchLabels": label}}}},
		},
		"generate": map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "name": "default-deny", "namespace": "{{request.object.metadata.name}}",
			"synchronize": true, "generateExisting": true, "clone": map[string]any{"namespace": src, "name": "deny-template"},
		},
	}
	if exclude != "" {
		rule["exclude"] = map[string]any{"any": []any{map[string]any{"resources": map[string]any{"names": []any{exclude}}}}}
	}
	p := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"rules": []any{rule}}}}
	p.SetAPIVersion(migrate.KyvernoAPIVersion)
	p.SetKind(migrate.ClusterPolicyKind)
	p.SetName(name)
	return p
}

// moveFrom is the plan's move of the peer's source (kind, namespace/name).
func moveFrom(t *testing.T, m cli.Migration, peer, kind, source string) migrate.Move {
	t.Helper()
	for _, move := range m.Moves {
		if move.Peer == peer && move.Kind == kind && move.Source.String() == source {
			return move
		}
	}
	t.Fatalf("no move of %s %s by %s in %+v", kind, source, peer, m.Moves)
	return migrate.Move{}
}

func namespacesOf(copies []migrate.Copy) []string {
	out := make([]string, 0, len(copies))
	for _, c := range copies {
		out = append(out, c.Namespace)
	}
	return out
}

// expectTakenOver: each copy is the same object (uid), now carrying cmsync's markers
// and still its own peer's label kept.
func expectTakenOver(t *testing.T, copies []client.Object, kept string) {
	t.Helper()
	for _, c := range copies {
		now := &networkingv1.NetworkPolicy{}
		must(t, harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(c), now))
		if now.UID != c.GetUID() || now.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || now.Annotations[v1alpha1.SourceAnnotation] == "" ||
			len(now.OwnerReferences) != 1 || now.OwnerReferences[0].Kind != v1alpha1.ObjectSyncKind {
			t.Errorf(
				"%s/%s was not taken over in place: uid %s -> %s, labels %v, owners %v",
				c.GetNamespace(),
				c.GetName(),
				c.GetUID(),
				now.UID,
				now.Labels,
				now.OwnerReferences,
			)
		}
		if _, ok := now.Labels[kept]; !ok {
			t.Errorf("%s/%s lost %s: the take-over writes cmsync's markers only", c.GetNamespace(), c.GetName(), kept)
		}
	}
}

// expectFollowsSource changes the source in namespace src and waits until each copy,
// the same object, holds the change.
func expectFollowsSource(t *testing.T, src string, copies []client.Object) {
	t.Helper()
	ctx := context.Background()
	patch := []byte(`{"spec":{"podSelector":{"matchLabels":{"app":"web"}}}}`)
	must(t, harness.K8s.Patch(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: copies[0].GetName()}},
		client.RawPatch(types.MergePatchType, patch)))
	eventually(t, 60*time.Second, "the copies follow their source", func() error {
		for _, c := range copies {
			now := &networkingv1.NetworkPolicy{}
			if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(c), now); err != nil {
				return err
			}
			if now.UID != c.GetUID() || now.Spec.PodSelector.MatchLabels["app"] != "web" {
				return fmt.Errorf("%s/%s: uid %s, podSelector %v", c.GetNamespace(), c.GetName(), now.UID, now.Spec.PodSelector)
			}
		}
		return nil
	})
}

// installCRDs installs the CRDs of testdata/crds, as their projects publish them, and
// deletes them (and every object of theirs) when the test ends.
func installCRDs(t *testing.T, files ...string) {
	t.Helper()
	ctx := context.Background()
	for _, file := range files {
		raw, err := os.ReadFile(filepath.Join("testdata", "crds", file))
		must(t, err)
		if strings.HasSuffix(file, ".gz") {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			must(t, err)
			raw, err = io.ReadAll(zr)
			must(t, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		must(t, yaml.Unmarshal(raw, crd))
		must(t, harness.K8s.Create(ctx, crd))
		t.Cleanup(func() {
			_ = harness.K8s.Delete(context.Background(), crd)
			_ = harness.WaitUntil(60*time.Second, func() error {
				if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(crd), crd); !apierrors.IsNotFound(err) {
					return fmt.Errorf("CRD %s still there: %v", crd.Name, err)
				}
				return nil
			})
		})
		eventually(t, 30*time.Second, "CRD "+crd.Name+" established", func() error {
			now := &apiextensionsv1.CustomResourceDefinition{}
			if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(crd), now); err != nil {
				return err
			}
			for _, c := range now.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("not established: %v", now.Status.Conditions)
		})
	}
}

// An editor of a team namespace forges what looks like HNC's copy of the platform's
// default-deny there, with an ingress rule that opens it, hoping the administrator's
// move makes it cmsync's replica: cmsync keeps the fields a replica sets beyond its
// source, so the copy would stay open as cmsync's. migrate's plan leaves it, saying its
// content differs from its source; --apply creates the ObjectSync and leaves the copy as
// it was, and the ObjectSync reports it as a conflict.
func TestMigrateLeavesACopyThatDiffersFromItsSource(t *testing.T) {
	release, org, team := hncTeamBelowOrg(t, "networking.k8s.io/networkpolicies")
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, defaultDeny(org, "deny")))
	loosened := defaultDeny(team, "deny")
	loosened.Labels = map[string]string{migrate.HNCInheritedFrom: org, "app.kubernetes.io/managed-by": migrate.HNCGroup}
	loosened.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}}
	must(t, editorIn(t, team).Create(ctx, loosened))

	var plan cli.Migration
	harness.PluginJSON(t, &plan, "migrate", "--controller-namespace", release)
	move := moveFrom(t, plan, migrate.HNCPeer, "NetworkPolicy", org+"/deny")
	if len(move.TakeOver) != 0 || len(move.Left) != 1 || !strings.Contains(move.Left[0].Why, "differs from its source") {
		t.Errorf("the plan: take over %+v, left %+v; want the forged copy left, its content differing from its source", move.TakeOver, move.Left)
	}
	harness.PluginJSON(t, &plan, "migrate", "--apply", "--controller-namespace", release)
	osync := moveFrom(t, plan, migrate.HNCPeer, "NetworkPolicy", org+"/deny").ObjectSync
	if osync == nil || len(plan.Failed) > 0 {
		t.Fatalf("migrate --apply: ObjectSync %v, failed %v", osync, plan.Failed)
	}
	deleteObjectSyncAtEnd(t, osync)
	sync := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: osync.Name}}
	waitForObjectSyncStatus(t, sync, "0/1", v1alpha1.ReasonDegraded)
	if f := sync.Status.FailedNamespaces; len(f) != 1 || f[0].Namespace != team || f[0].Reason != v1alpha1.ReasonConflict {
		t.Errorf("ObjectSync %s: failed %+v, want the conflict in %s", osync.Name, f, team)
	}
	expectUnchanged(t, []client.Object{loosened})
}
