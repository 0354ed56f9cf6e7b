//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
)

// pluginWorld is one source and a namespace for every rule that can decide about it.
type pluginWorld struct {
	suffix, platform                 string
	named, globbed, legacy, selected string
	ignored, taken, leaving, outside string
	source                           *corev1.ConfigMap
}

// kubectl cmsync against the cluster's truth: explain names the rule behind every
// kind of namespace and what each holds; status reports what the sources say; preview
// predicts exactly the replicas that appear, and the ones that go, once a change is
// applied, for a changed annotation and for a new source from a file.
func TestKubectlPlugin(t *testing.T) {
	harness.StartController(t)
	w := newPluginWorld(t)
	checkExplain(t, w)
	checkStatus(t, w)
	checkPreview(t, w)
}

func newPluginWorld(t *testing.T) pluginWorld {
	t.Helper()
	ctx := context.Background()
	s := randomSuffix()
	w := pluginWorld{
		suffix: s, platform: harness.NewNamespace(t, "platform", nil),
		named: "named-" + s, globbed: "grp-" + s + "-a", legacy: "grp-" + s + "-legacy", selected: "sel-" + s,
		ignored: "ign-" + s, taken: "taken-" + s, leaving: "leaving-" + s, outside: "outside-" + s,
	}
	harness.DeleteSourcesAtEnd(t, []string{w.platform}, "plugin-"+s)
	for _, ns := range []string{w.named, w.globbed, w.legacy, w.taken, w.leaving, w.outside} {
		must(t, harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	must(t, harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.selected, Labels: map[string]string{"plugin-test": s}}}))
	ignored := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ignored, Labels: map[string]string{v1alpha1.IgnoreNamespaceLabel: "true"}}}
	must(t, harness.K8s.Create(ctx, ignored))
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.taken, Name: "app"}, Data: map[string]string{"theirs": "1"}}))
	// A namespace held in Terminating by a finalizer of someone else's.
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.leaving, Name: "held", Finalizers: []string{"example.com/hold"}}}
	must(t, harness.K8s.Create(ctx, held))
	t.Cleanup(func() {
		_ = harness.K8s.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.leaving, Name: "held"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	targets := strings.Join([]string{w.named, "grp-" + s + "-*", "!" + w.legacy, "kube-public", w.ignored, w.taken, w.leaving}, ",")
	w.source = &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.platform, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: targets, v1alpha1.TargetSelectorAnnotation: "plugin-test=" + s}},
		Data: map[string]string{"k": "v"},
	}
	must(t, harness.K8s.Create(ctx, w.source))
	harness.WaitForReplicas(t, w.platform, "app", 30*time.Second, w.named, w.globbed, w.selected, w.leaving)
	must(t, harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.leaving}}))
	harness.WaitForReplicas(t, w.platform, "app", 30*time.Second, w.named, w.globbed, w.selected)
	harness.WaitForAnnotation(t, w.platform, "app", v1alpha1.SyncedAnnotation, "3/4")
	return w
}

// checkExplain: every kind of namespace, its rule and what it holds, against the cluster.
func checkExplain(t *testing.T, w pluginWorld) {
	t.Helper()
	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", w.platform+"/app", "--all")
	if !strings.Contains(e.Policy, "Deployment cmsync-system/cmsync") {
		t.Errorf("policy read from %q, want the chart's Deployment", e.Policy)
	}
	const none, nothing = "none", "not named by the targets (no entry, glob or selector matches it)"
	want := map[string][3]string{ // namespace: wanted, rule, now
		w.named:       {"yes", "listed by name (" + w.named + ")", "replica"},
		w.globbed:     {"yes", `matched by the glob "grp-` + w.suffix + `-*"`, "replica"},
		w.selected:    {"yes", `selected by the namespace selector "plugin-test=` + w.suffix + `"`, "replica"},
		w.legacy:      {"no", `excluded by the entry "!` + w.legacy + `"`, none},
		w.platform:    {"no", "the source's own namespace: a source is never copied onto itself", "another object of that name (not this source's)"},
		"kube-public": {"no", `excluded by the controller's --exclude-namespaces ("kube-public")`, none},
		w.ignored:     {"no", "the namespace is labelled cmsync.io/ignore=true", none},
		w.leaving:     {"no", "the namespace is terminating", none},
		w.taken:       {"yes", "listed by name (" + w.taken + ")", "conflict: a ConfigMap not managed by cmsync exists"},
		w.outside:     {"no", nothing, none},
	}
	seen := 0
	wantedHere := []string{}
	for _, r := range e.Rows {
		if r.Wanted && r.Now == "replica" {
			wantedHere = append(wantedHere, r.Namespace)
		}
		if expected, ok := want[r.Namespace]; ok {
			seen++
			if got := [3]string{yesNo(r.Wanted), r.Rule, r.Now}; got != expected {
				t.Errorf("explain %s: %q, want %q", r.Namespace, got, expected)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("explain covered %d of the %d namespaces", seen, len(want))
	}
	if got := harness.ReplicasOf(t, w.platform, "app"); !sameSet(got, wantedHere) {
		t.Errorf("explain says replicas in %v, the cluster has them in %v", wantedHere, got)
	}
	out := harness.Plugin(t, "explain", w.platform+"/app", "--in", w.taken)
	t.Logf("kubectl cmsync explain %s/app --in %s:\n%s", w.platform, w.taken, out)
	if !strings.Contains(out, "conflict: a ConfigMap not managed by cmsync exists") {
		t.Errorf("explain --in %s:\n%s", w.taken, out)
	}
}

// checkStatus: the source as its annotations say, and a ConfigMapSync.
func checkStatus(t *testing.T, w pluginWorld) {
	t.Helper()
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.platform, Name: "ca"}, Data: map[string]string{"k": "v"}}))
	cms := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "plugin-" + w.suffix},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: w.platform, ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: w.named}}}
	must(t, harness.K8s.Create(ctx, cms))
	harness.WaitForReplicas(t, w.platform, "ca", 30*time.Second, w.named)
	eventually(t, 30*time.Second, "status lists both forms", func() error {
		var rows []cli.StatusRow
		harness.PluginJSON(t, &rows, "status", "-n", w.platform)
		now, err := harness.GetConfigMap(w.platform, "app")
		if err != nil {
			return err
		}
		found := 0
		for _, r := range rows {
			switch {
			case r.Kind == "ConfigMap" && r.Name == "app":
				found++
				a := now.Annotations
				if r.Status != a[v1alpha1.StatusAnnotation] || r.Synced != a[v1alpha1.SyncedAnnotation] || r.Message != a[v1alpha1.MessageAnnotation] {
					return fmt.Errorf("status row %+v, annotations %v", r, a)
				}
			case r.Kind == "ConfigMapSync" && r.Name == cms.Name:
				found++
				if r.Status != "Synced" || r.Synced != "1/1" {
					return fmt.Errorf("ConfigMapSync row %+v", r)
				}
			}
		}
		if found != 2 {
			return fmt.Errorf("%d of 2 sources in %+v", found, rows)
		}
		return nil
	})
	// Someone who may only view the namespace still gets its sources; what they may not
	// list is said.
	must(t, harness.K8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.platform, Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "viewer-" + w.suffix}},
	}))
	eventually(t, 30*time.Second, "status as a viewer", func() error {
		var rows []cli.StatusRow
		harness.PluginAs(rest.ImpersonationConfig{UserName: "viewer-" + w.suffix}).JSON(t, &rows, "status", "-n", w.platform)
		kinds := map[string]string{}
		for _, r := range rows {
			kinds[r.Kind+"/"+r.Name] = r.Status
		}
		if kinds["ConfigMap/app"] == "" || kinds["Secret/-"] != "Unknown" || kinds["ConfigMapSync/-"] != "Unknown" {
			return fmt.Errorf("rows as a viewer: %+v", rows)
		}
		return nil
	})
	table := harness.Plugin(t, "status", "-n", w.platform)
	t.Logf("kubectl cmsync status -n %s:\n%s", w.platform, table)
	if !strings.Contains(table, "KIND") || !strings.Contains(table, w.platform+"/app") {
		t.Errorf("status table:\n%s", table)
	}
}

// checkPreview: a rename and a narrowing previewed then applied, and a new source from
// a file previewed then created: exactly the predicted replicas appear and go.
func checkPreview(t *testing.T, w pluginWorld) {
	t.Helper()
	ctx := context.Background()
	change := []string{
		"preview",
		w.platform + "/app",
		"--set-annotation",
		"cmsync.io/target-name=app-renamed",
		"--set-annotation",
		"cmsync.io/target-selector-",
	}
	t.Logf("kubectl cmsync %s:\n%s", strings.Join(change, " "), harness.Plugin(t, change...))
	var p cli.Preview
	harness.PluginJSON(t, &p, change...)
	gain, lose, conflicts := changeNamespaces(p.Gain), changeNamespaces(p.Lose), changeNamespaces(p.Conflicts)
	if !sameSet(gain, []string{w.named, w.globbed, w.taken}) || !sameSet(lose, []string{w.named, w.globbed, w.selected}) || len(conflicts) != 0 || p.Kept != 0 {
		t.Errorf("preview: gain %v, lose %v, conflicts %v, kept %d", gain, lose, conflicts, p.Kept)
	}
	must(t, harness.K8s.Patch(ctx, w.source, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"cmsync.io/target-name":"app-renamed","cmsync.io/target-selector":null}}}`))))
	waitForShapedReplicas(t, w.platform+"/app", "app-renamed", 30*time.Second, gain...)
	waitForShapedReplicas(t, w.platform+"/app", "app", 30*time.Second)

	targets := "grp-" + w.suffix + "-*," + w.taken + "," + w.ignored
	manifest := filepath.Join(t.TempDir(), "source.yaml")
	must(t, os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %s
  labels: {cmsync.io/replicate: "true"}
  annotations: {cmsync.io/target-namespaces: %q}
data: {k: v}
`, w.platform, targets)), 0o600))
	harness.PluginJSON(t, &p, "preview", "-f", manifest)
	if !sameSet(changeNamespaces(p.Gain), []string{w.globbed, w.taken, w.legacy}) || len(p.Lose) != 0 || len(p.Conflicts) != 0 {
		t.Errorf("preview -f: %+v", p)
	}
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.platform, Name: "settings",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: targets}},
		Data: map[string]string{"k": "v"}}))
	harness.WaitForReplicas(t, w.platform, "settings", 30*time.Second, changeNamespaces(p.Gain)...)

	// An invalid change is said, not previewed.
	harness.PluginJSON(t, &p, "preview", w.platform+"/app", "--set-annotation", "cmsync.io/keys=a/b")
	if !strings.HasPrefix(p.Invalid, `invalid keys "a/b"`) {
		t.Errorf("preview of an invalid change: %+v", p)
	}
}

func changeNamespaces(changes []cli.Change) []string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, c.Namespace)
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// kubectl cmsync decides with the controller's own function (desired.Resolve), so it
// calls Invalid exactly what the controller marks Invalid, with the same message: a
// service-account token labelled as a source, and a source over the byte budget.
func TestKubectlPluginDecidesAsTheController(t *testing.T) {
	harness.StartController(t, "--secrets=enabled", "--max-replicated-bytes=1Ki")
	ctx := context.Background()
	suffix := randomSuffix()
	src := harness.NewNamespace(t, "plugdec", nil)
	a, b := harness.NewNamespace(t, "plugdec-"+suffix, nil), harness.NewNamespace(t, "plugdec-"+suffix, nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	targets := map[string]string{v1alpha1.TargetNamespacesAnnotation: "plugdec-" + suffix + "-*"}

	must(t, harness.K8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "robot"}}))
	must(t, harness.K8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: src,
			Name:      "robot-token",
			Labels:    map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{
				corev1.ServiceAccountNameKey:        "robot",
				v1alpha1.TargetNamespacesAnnotation: targets[v1alpha1.TargetNamespacesAnnotation],
			},
		},
		Type: corev1.SecretTypeServiceAccountToken,
	}))
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "big", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: targets},
		Data:       map[string]string{"blob": strings.Repeat("x", 600)},
	}))
	for _, tc := range []struct{ kind, name, fragment string }{
		{"secret", "robot-token", "token"},
		{"configmap", "big", "--max-replicated-bytes"},
	} {
		var controllerSays string
		eventually(t, 30*time.Second, tc.name+" Invalid", func() error {
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(map[string]string{"secret": "Secret", "configmap": "ConfigMap"}[tc.kind]))
			if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: src, Name: tc.name}, obj); err != nil {
				return err
			}
			if obj.Annotations[v1alpha1.StatusAnnotation] != v1alpha1.StatusInvalid {
				return fmt.Errorf("status %q", obj.Annotations[v1alpha1.StatusAnnotation])
			}
			controllerSays = obj.Annotations[v1alpha1.MessageAnnotation]
			return nil
		})
		var e cli.Explanation
		harness.PluginJSON(t, &e, "explain", src+"/"+tc.name, "--kind", tc.kind, "--all", "--max-replicated-bytes=1Ki")
		if e.Invalid == "" || e.Invalid != controllerSays || !strings.Contains(e.Invalid, tc.fragment) {
			t.Errorf("%s: kubectl cmsync says Invalid %q; the controller %q", tc.name, e.Invalid, controllerSays)
		}
	}
	for _, ns := range []string{a, b} {
		if _, err := harness.GetConfigMap(ns, "big"); !apierrors.IsNotFound(err) {
			t.Errorf("%s: a replica of an Invalid source: %v", ns, err)
		}
	}
}

// A labelled source being deleted, held by a finalizer of someone else's, is no source:
// cmsync deletes its replicas, and the plugin says so — status Deleting and who holds
// it, whatever its annotations last said, and explain that no namespace is to hold a
// replica of it.
func TestPluginSaysASourceIsBeingDeleted(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	src, target := harness.NewNamespace(t, "leaving-src", nil), harness.NewNamespace(t, "leaving-target", nil)
	const hold = "example.com/hold"
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, Finalizers: []string{hold}},
		Data: map[string]string{"k": "v"},
	}
	must(t, harness.K8s.Create(ctx, source))
	t.Cleanup(func() {
		_ = harness.K8s.Patch(context.Background(), source, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	harness.WaitForReplicas(t, src, "app", 30*time.Second, target)
	harness.WaitForAnnotation(t, src, "app", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	must(t, harness.K8s.Delete(ctx, source))
	harness.WaitForReplicas(t, src, "app", 30*time.Second)

	var rows []cli.StatusRow
	harness.PluginJSON(t, &rows, "status", "-n", src)
	if len(rows) != 1 || rows[0].Status != "Deleting" || !strings.Contains(rows[0].Message, "being deleted (held by the finalizer "+hold+")") {
		t.Errorf("status of a source being deleted: %+v", rows)
	}
	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", src+"/app", "--all")
	if !strings.HasPrefix(e.Inactive, "it is being deleted") || e.Invalid != "" {
		t.Errorf("explain of a source being deleted: inactive %q, invalid %q", e.Inactive, e.Invalid)
	}
	for _, r := range e.Rows {
		if r.Wanted || (r.Namespace == target && r.Now != "none") {
			t.Errorf("explain of a source being deleted, %s: %+v", r.Namespace, r)
		}
	}
	table := harness.Plugin(t, "explain", src+"/app", "--in", target)
	t.Logf("kubectl cmsync explain %s/app --in %s:\n%s", src, target, table)
	if !strings.Contains(table, "Not a source: it is being deleted") {
		t.Errorf("explain's table does not say the source is being deleted:\n%s", table)
	}
}
