//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
)

// networkPolicies is the --object-kinds entry of the kind these tests copy.
const networkPolicies = "networking.k8s.io/v1/NetworkPolicy"

// kubectl cmsync for ObjectSyncs, against a real cmsync process started with
// --object-kinds: status lists an ObjectSync with the Ready reason cmsync wrote;
// explain names the rule behind each namespace and what it holds (a replica, an object
// cmsync did not create), by the ObjectSync's name and by one of its replicas; preview
// predicts exactly the replicas a changed spec gains and loses, which cmsync then
// makes. The plugin reads --object-kinds from the release, as every policy flag: under
// a release that enables no kind the same ObjectSync is Invalid, saying what to enable.
func TestPluginObjectSync(t *testing.T) {
	release := objectKindsRelease(t, "--object-kinds="+networkPolicies)
	harness.StartController(t, "--object-kinds="+networkPolicies)
	ctx := context.Background()
	s := randomSuffix()
	src := harness.NewNamespace(t, "osp-src", nil)
	a, b, c, d := harness.NewNamespace(t, "osp-a", nil), harness.NewNamespace(t, "osp-b", nil),
		harness.NewNamespace(t, "osp-c", nil), harness.NewNamespace(t, "osp-d", nil)
	must(t, harness.K8s.Create(ctx, defaultDeny(src, "deny")))
	theirs := defaultDeny(c, "deny")
	must(t, harness.K8s.Create(ctx, theirs))
	name := "deny-" + s
	osync := &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ObjectSyncSpec{
		Source:                v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: src, Name: "deny"},
		DestinationNamespaces: []string{a, b, c},
	}}
	must(t, harness.K8s.Create(ctx, osync))
	deleteObjectSyncAtEnd(t, osync)
	waitForNetworkPolicyReplicas(t, osync, a, b)
	ready := waitForObjectSyncReason(t, name, v1alpha1.ReasonDegraded)

	var rows []cli.StatusRow
	harness.PluginJSON(t, &rows, "status", "-A")
	i := slices.IndexFunc(rows, func(r cli.StatusRow) bool { return r.Kind == v1alpha1.ObjectSyncKind && r.Name == name })
	if i < 0 || rows[i].Status != ready.Reason || rows[i].Message != ready.Message || rows[i].Synced != "2/3" ||
		rows[i].Copies != "NetworkPolicy "+src+"/deny" {
		t.Errorf("status -A: %+v, want the ObjectSync %s as its Ready condition says (%s: %s), 2/3, copying NetworkPolicy %s/deny",
			rows, name, ready.Reason, ready.Message, src)
	}

	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", "osync/"+name, "--all", "--controller-namespace", release)
	want := map[string]string{a: "replica", b: "replica", c: "conflict: a NetworkPolicy not managed by cmsync exists", d: "none"}
	expectExplained(t, e, "ObjectSync "+name, want)
	var byReplica cli.Explanation
	harness.PluginJSON(t, &byReplica, "explain", a+"/deny", "--kind", networkPolicies, "--in", a, "--controller-namespace", release)
	if byReplica.Source != "ObjectSync "+name || len(byReplica.Rows) != 1 || byReplica.Rows[0].Now != "replica" {
		t.Errorf("explain of a replica: %+v, want its ObjectSync %s", byReplica, name)
	}
	t.Logf("kubectl cmsync explain osync/%s --all:\n%s", name, harness.Plugin(t, "explain", "osync/"+name, "--all", "--controller-namespace", release))

	// Under a release that enables no kind, the same ObjectSync is Invalid.
	var none cli.Explanation
	harness.PluginJSON(t, &none, "explain", "osync/"+name, "--all", "--controller-namespace", objectKindsRelease(t))
	if !strings.Contains(none.Invalid, "not enabled for ObjectSync") || !strings.Contains(none.Invalid, "objectSync.kinds") {
		t.Errorf("explain under a release without --object-kinds: %+v, want Invalid, saying to enable the kind", none)
	}

	checkObjectSyncPreview(t, release, osync, a, b, c, d)
}

// checkObjectSyncPreview previews the ObjectSync moved from a, b, c to a, c, d, then
// applies it: the replicas gained and lost are the ones predicted.
func checkObjectSyncPreview(t *testing.T, release string, osync *v1alpha1.ObjectSync, a, b, c, d string) {
	t.Helper()
	changed := osync.DeepCopy()
	changed.Spec.DestinationNamespaces = []string{a, c, d}
	changed.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ObjectSyncKind}
	changed.ObjectMeta = metav1.ObjectMeta{Name: osync.Name}
	raw, err := yaml.Marshal(changed)
	must(t, err)
	file := filepath.Join(t.TempDir(), "osync.yaml")
	must(t, os.WriteFile(file, raw, 0o600))
	var p cli.Preview
	harness.PluginJSON(t, &p, "preview", "-f", file, "--controller-namespace", release)
	if p.Invalid != "" || !sameSet(changeNamespaces(p.Gain), []string{d}) || !sameSet(changeNamespaces(p.Lose), []string{b}) ||
		!sameSet(changeNamespaces(p.Conflicts), []string{c}) || p.Kept != 1 {
		t.Fatalf("preview: %+v, want %s gained, %s lost, the conflict in %s, 1 kept", p, d, b, c)
	}
	patch := harness.MustJSON(map[string]any{"spec": map[string]any{"destinationNamespaces": changed.Spec.DestinationNamespaces}})
	must(t, harness.K8s.Patch(context.Background(), &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: osync.Name}},
		client.RawPatch(types.MergePatchType, patch)))
	waitForNetworkPolicyReplicas(t, osync, a, d)
}

// expectExplained: the explanation is of source, and each namespace of want holds what
// want says.
func expectExplained(t *testing.T, e cli.Explanation, source string, want map[string]string) {
	t.Helper()
	if e.Source != source || e.Invalid != "" {
		t.Fatalf("explain: %+v, want %s, valid", e, source)
	}
	for _, r := range e.Rows {
		if now, ok := want[r.Namespace]; ok {
			if r.Now != now || r.Wanted != (now != "none") {
				t.Errorf("explain %s: %+v, want %q", r.Namespace, r, now)
			}
			delete(want, r.Namespace)
		}
	}
	if len(want) > 0 {
		t.Errorf("explain has no row for %v", want)
	}
}

// defaultDeny is a NetworkPolicy that denies every ingress to the Pods of namespace.
func defaultDeny(namespace, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
}

// objectKindsRelease makes a release whose Deployment runs cmsync with args (scaled to
// zero: the test runs the process, under the grants the suite's chart gave cmsync's
// ServiceAccount), in a namespace of its own, which it returns: the plugin's
// --controller-namespace.
func objectKindsRelease(t *testing.T, args ...string) string {
	t.Helper()
	// On an existing cluster the release's Pod is the controller, without these flags.
	harness.SkipOnExistingCluster(t)
	namespace := harness.NewNamespace(t, "osync-release", nil)
	must(t, harness.K8s.Create(context.Background(), lookAlike(namespace, "cmsync", args...)))
	return namespace
}

// waitForNetworkPolicyReplicas waits until the replicas of osync are in exactly the
// namespaces, each owned by it.
func waitForNetworkPolicyReplicas(t *testing.T, osync *v1alpha1.ObjectSync, namespaces ...string) {
	t.Helper()
	eventually(t, 60*time.Second, "the replicas of ObjectSync "+osync.Name, func() error {
		current := &v1alpha1.ObjectSync{}
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(osync), current); err != nil {
			return err
		}
		var list networkingv1.NetworkPolicyList
		if err := harness.K8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}); err != nil {
			return err
		}
		var in []string
		for _, np := range list.Items {
			if slices.ContainsFunc(np.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == current.UID }) {
				in = append(in, np.Namespace)
			}
		}
		if !sameSet(in, namespaces) {
			return fmt.Errorf("replicas in %v, want %v", in, namespaces)
		}
		return nil
	})
}

// waitForObjectSyncReason waits until the ObjectSync's Ready condition has reason, and
// returns it.
func waitForObjectSyncReason(t *testing.T, name, reason string) metav1.Condition {
	t.Helper()
	var ready metav1.Condition
	eventually(t, 60*time.Second, "ObjectSync "+name+" "+reason, func() error {
		osync := &v1alpha1.ObjectSync{}
		if err := harness.K8s.Get(context.Background(), types.NamespacedName{Name: name}, osync); err != nil {
			return err
		}
		c := meta.FindStatusCondition(osync.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil || c.Reason != reason {
			return fmt.Errorf("Ready %+v", c)
		}
		ready = *c
		return nil
	})
	return ready
}

// deleteObjectSyncAtEnd deletes osync when the test ends, and waits while the cmsync
// process, stopped after, deletes its replicas and lets it go.
func deleteObjectSyncAtEnd(t *testing.T, osync *v1alpha1.ObjectSync) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = harness.K8s.Delete(ctx, &v1alpha1.ObjectSync{ObjectMeta: metav1.ObjectMeta{Name: osync.Name}})
		_ = harness.WaitUntil(30*time.Second, func() error {
			if err := harness.K8s.Get(ctx, types.NamespacedName{Name: osync.Name}, &v1alpha1.ObjectSync{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ObjectSync %s still there: %v", osync.Name, err)
			}
			return nil
		})
	})
}
