//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// editorIn returns a client acting as a ServiceAccount bound to the built-in "edit"
// ClusterRole in namespace: a real user of the namespace, with a real RBAC binding,
// not an administrator.
func editorIn(t *testing.T, namespace string) client.Client {
	t.Helper()
	c, err := client.New(editorConfigIn(t, namespace), client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	return c
}

// editorConfigIn binds the editor of namespace (editorIn) and returns its REST config,
// once the binding is in effect.
func editorConfigIn(t *testing.T, namespace string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "editor"}}))
	must(t, harness.K8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: "editor"}},
	}))
	cfg := rest.CopyConfig(harness.AdminConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":editor",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	c, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	// The API server's authorizer learns of a new binding through a watch.
	eventually(t, 30*time.Second, "the editor's binding in effect", func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "rbac-probe"}}
		return c.Create(ctx, probe, client.DryRunAll)
	})
	return cfg
}

// expectRefused checks that err is the policy's refusal and carries every fragment.
func expectRefused(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s was allowed", what)
		return
	}
	t.Logf("%s: %v", what, err)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		t.Errorf("%s: %v, want a refusal by the admission policy", what, err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: message %q lacks %q", what, err.Error(), f)
		}
	}
}

// A user with edit rights in a target namespace cannot edit, relabel or delete a
// replica, nor forge one: each is refused with a message naming the source and what
// to do instead, and the replica's resourceVersion does not move. An administrator is
// refused the same way. Labelling the namespace cmsync.io/ignore=true, as the message
// says, has cmsync itself delete the replica.
func TestReplicasAreProtected(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	src, team := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "guarded", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ca-bundle", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team}},
		Data: map[string]string{"ca.crt": "CA"},
	}
	must(t, harness.K8s.Create(ctx, source))
	harness.WaitForReplicas(t, src, "ca-bundle", 30*time.Second, team)
	replica, err := harness.GetConfigMap(team, "ca-bundle")
	must(t, err)
	editor := editorIn(t, team)

	// The editor's rights are real: a ConfigMap of their own is theirs to write.
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "own"}, Data: map[string]string{"k": "v"}}
	must(t, editor.Create(ctx, own))
	must(t, editor.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"w"}}`))))

	told := []string{
		"ConfigMap " + team + "/ca-bundle is a replica of " + src + "/ca-bundle kept by cmsync",
		"change the source " + src + "/ca-bundle instead, or label namespace " + team + " cmsync.io/ignore=true to stop receiving it",
	}
	target := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "ca-bundle"}}
	expectRefused(t, "editing a replica", editor.Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(`{"data":{"ca.crt":"tampered"}}`))), told...)
	expectRefused(t, "relabelling a replica", editor.Patch(ctx, target,
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`))), told...)
	expectRefused(t, "deleting a replica", editor.Delete(ctx, target), told...)
	expectRefused(t, "an administrator editing a replica",
		harness.K8s.Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(`{"data":{"ca.crt":"tampered"}}`))), told...)

	forgedTold := []string{
		"only cmsync writes objects labelled app.kubernetes.io/managed-by=cmsync",
		"(this one names the source " + src + "/ca-bundle): change the source " + src + "/ca-bundle instead, naming this namespace in its targets",
	}
	forged := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "forged", Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
			Annotations: map[string]string{v1alpha1.SourceAnnotation: src + "/ca-bundle"}},
		Data: map[string]string{"ca.crt": "forged"},
	}
	expectRefused(t, "forging a replica", editor.Create(ctx, forged), forgedTold...)
	expectRefused(t, "turning a ConfigMap into a replica", editor.Patch(ctx, own, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"cmsync"}}}`))), "only cmsync writes objects labelled",
		": change the source instead, naming this namespace in its targets to get a replica here, or write the object without cmsync's markers "+
			"(the label app.kubernetes.io/managed-by=cmsync, the annotation cmsync.io/source, owner references to a ConfigMapSync, SecretSync or ObjectSync)")
	// cmsync's other markers, without the label, are cmsync's alone too.
	markerTold := "only cmsync adds its markers (the annotation cmsync.io/source, an owner reference to a ConfigMapSync, SecretSync or ObjectSync) to an object"
	annotated := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "annotated",
		Annotations: map[string]string{v1alpha1.SourceAnnotation: src + "/ca-bundle"}}}
	expectRefused(t, "creating a ConfigMap that names a source", editor.Create(ctx, annotated), markerTold,
		"(this one names the source "+src+"/ca-bundle): change the source "+src+"/ca-bundle instead", "or write the object without cmsync's markers")
	expectRefused(t, "annotating a ConfigMap with a source", editor.Patch(ctx, own, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"cmsync.io/source":"`+src+`/ca-bundle"}}}`))), markerTold)
	holder := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "guarded-" + randomSuffix()}, Spec: v1alpha1.ConfigMapSyncSpec{
		SourceNamespace: src, ConfigMapName: "absent", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: team}}}
	must(t, harness.K8s.Create(ctx, holder))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), holder) })
	ownedBySync := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"cmsync.io/v1alpha1","kind":"ConfigMapSync","name":%q,"uid":%q}]}}`,
		holder.Name, holder.UID)
	expectRefused(t, "owning a ConfigMap by a ConfigMapSync", editor.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(ownedBySync))),
		markerTold, ": change the source instead")
	// Nor by rewriting an owner reference of another kind in place, keeping its uid.
	placeholder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "placeholder-" + randomSuffix(),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "cmsync.io/v1alpha1", Kind: "Placeholder", Name: holder.Name, UID: holder.UID}}}}
	must(t, editor.Create(ctx, placeholder))
	expectRefused(t, "turning an owner reference into a ConfigMapSync's", editor.Patch(ctx, placeholder, client.RawPatch(types.JSONPatchType,
		[]byte(`[{"op":"replace","path":"/metadata/ownerReferences/0/kind","value":"ConfigMapSync"}]`))), markerTold)
	// Any other annotation or owner reference is the editor's own business.
	must(t, editor.Patch(ctx, own, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cmsync.io/sourcery":"x"}}}`))))
	if err := harness.K8s.Get(
		ctx,
		client.ObjectKeyFromObject(own),
		own,
	); err != nil || own.Annotations[v1alpha1.SourceAnnotation] != "" ||
		len(own.OwnerReferences) != 0 {
		t.Errorf("the editor's ConfigMap gained a marker: %v %v (%v)", own.Annotations, own.OwnerReferences, err)
	}

	now, err := harness.GetConfigMap(team, "ca-bundle")
	must(t, err)
	if now.ResourceVersion != replica.ResourceVersion {
		t.Errorf("the replica's resourceVersion moved from %s to %s", replica.ResourceVersion, now.ResourceVersion)
	}

	// What the message tells the namespace's owner works: cmsync deletes the replica.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}
	must(t, harness.K8s.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"cmsync.io/ignore":"true"}}}`))))
	harness.WaitForReplicas(t, src, "ca-bundle", 30*time.Second)
}

// Secret replicas are protected the same way when Secrets are enabled.
func TestSecretReplicasAreProtected(t *testing.T) {
	harness.StartController(t, "--secrets=enabled")
	ctx := context.Background()
	src, team := harness.NewNamespace(t, "vault", nil), harness.NewNamespace(t, "guarded", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	must(t, harness.K8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "db", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team}},
		StringData: map[string]string{"password": "p"},
	}))
	waitForSecretValue(t, "db", "password", "p", team)
	editor := editorIn(t, team)
	target := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "db"}}
	told := "Secret " + team + "/db is a replica of " + src + "/db kept by cmsync"
	expectRefused(
		t,
		"editing a Secret replica",
		editor.Patch(ctx, target, client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"password":"x"}}`))),
		told,
	)
	expectRefused(t, "deleting a Secret replica", editor.Delete(ctx, target), told)
}

// Protection never stands in the way of Kubernetes itself: a target namespace holding
// replicas is deleted completely (the namespace controller), and a ConfigMapSync's
// replicas are deleted by the garbage collector when cmsync is not there to do it.
func TestProtectionLetsKubernetesClean(t *testing.T) {
	c := harness.StartController(t)
	ctx := context.Background()
	src, goes := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "goes", nil)
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: goes}},
		Data: map[string]string{"k": "v"},
	}))
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ca"}, Data: map[string]string{"k": "v"}}))
	cms := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "guarded-" + randomSuffix()},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: src, ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: goes}}}
	must(t, harness.K8s.Create(ctx, cms))
	harness.DeleteSourcesAtEnd(t, []string{src}, cms.Name)
	harness.WaitForReplicas(t, src, "app", 30*time.Second, goes)
	harness.WaitForReplicas(t, src, "ca", 30*time.Second, goes)
	expectRefused(
		t,
		"deleting a ConfigMapSync's replica",
		harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: goes, Name: "ca"}}),
		"ConfigMap "+goes+"/ca is a replica of "+src+"/ca kept by cmsync for ConfigMapSync "+cms.Name+": change the source "+src+"/ca or the ConfigMapSync instead",
	)

	must(t, harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: goes}}))
	eventually(t, 90*time.Second, "namespace "+goes+" deleted", func() error {
		err := harness.K8s.Get(ctx, client.ObjectKey{Name: goes}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})

	// The garbage collector: cmsync stopped, its finalizer removed by hand.
	c.Local(t)
	other := harness.NewNamespace(t, "gc", nil)
	must(t, harness.K8s.Patch(ctx, cms, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"destinationNamespace":"`+other+`"}}`))))
	harness.WaitForReplicas(t, src, "ca", 30*time.Second, other)
	c.Stop()
	must(t, harness.K8s.Patch(ctx, cms, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	must(t, harness.K8s.Delete(ctx, cms))
	harness.WaitForReplicas(t, src, "ca", 60*time.Second)
}

// warningCollector keeps the Warning headers of the API's responses.
type warningCollector struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningCollector) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func (w *warningCollector) take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := strings.Join(w.seen, "\n")
	w.seen = nil
	return out
}

// warnedAdmin is a cluster administrator's client whose API warnings are collected.
func warnedAdmin(t *testing.T) (client.Client, *warningCollector) {
	t.Helper()
	warnings := &warningCollector{}
	cfg := rest.CopyConfig(harness.AdminConfig(t))
	cfg.WarningHandler = warnings
	user, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	return user, warnings
}

// A malformed source annotation gets a warning at once, in the API's response (what
// kubectl prints), and the source still turns Invalid. Every value the policy warns
// about is one cmsync itself refuses: the warnings never cry wolf.
func TestMalformedSourceAnnotationsWarn(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	user, warnings := warnedAdmin(t)
	src := harness.NewNamespace(t, "platform", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})

	source := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "team-*", v1alpha1.KeysAnnotation: "log-*,a/b"}},
		Data: map[string]string{"log-level": "debug"},
	}
	must(t, user.Create(ctx, source))
	got := warnings.take()
	t.Logf("warning: %s", got)
	if !strings.Contains(got, `cmsync.io/keys "log-*,a/b" has an entry no key can match`) {
		t.Errorf("warnings %q", got)
	}
	invalid := harness.WaitForAnnotation(t, src, "app", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)
	if !strings.Contains(invalid.Annotations[v1alpha1.MessageAnnotation], `invalid keys "log-*,a/b"`) {
		t.Errorf("message %q", invalid.Annotations[v1alpha1.MessageAnnotation])
	}
	must(t, user.Patch(ctx, source, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cmsync.io/keys":"log-*"}}}`))))
	if got := warnings.take(); got != "" {
		t.Errorf("a valid source was warned about: %q", got)
	}

	// Each value, written with a server-side dry run: warned only when cmsync refuses it.
	cases := []struct {
		key    string
		value  string
		warned bool
	}{
		{v1alpha1.TargetNamespacesAnnotation, "team-*,shared,!team-legacy", false},
		{v1alpha1.TargetNamespacesAnnotation, "[^0-9]*,a?b", false},
		{v1alpha1.TargetNamespacesAnnotation, "team-[a", true},
		{v1alpha1.TargetNamespacesAnnotation, "Team-A", true},
		{v1alpha1.TargetNamespacesAnnotation, "a,,b", true},
		{v1alpha1.TargetNamespacesAnnotation, "", true},
		{v1alpha1.TargetNamespacesAnnotation, "!a,!b", true},
		{v1alpha1.TargetNamespacesAnnotation, "team.a", true},
		{v1alpha1.TargetNamespacesAnnotation, "[]", true},
		{v1alpha1.TargetSelectorAnnotation, "env=prod", false},
		{v1alpha1.TargetSelectorAnnotation, " ", true},
		// SPEC §1's examples, and the grammar's corners.
		{v1alpha1.TargetSelectorAnnotation, "env=prod,tier in (web,api),!deprecated", false},
		{v1alpha1.TargetSelectorAnnotation, "env=", false},
		{v1alpha1.TargetSelectorAnnotation, "=prod", true},
		{v1alpha1.TargetSelectorAnnotation, "tier in (", true},
		{v1alpha1.TargetSelectorAnnotation, "a b", true},
		{v1alpha1.TargetSelectorAnnotation, " example.com/team notin ( a , b ) , x>3, y < 10, z==Z_1.v, ! old, w!=", false},
		{v1alpha1.TargetSelectorAnnotation, "tier in (web,)", false},
		{v1alpha1.TargetSelectorAnnotation, "a,", true},
		{v1alpha1.TargetSelectorAnnotation, "!a=b", true},
		{v1alpha1.TargetSelectorAnnotation, "x>y", true},
		{v1alpha1.TargetSelectorAnnotation, "Example.com/a=b", true},
		{v1alpha1.TargetSelectorAnnotation, "a=-b", true},
		{v1alpha1.StripMetadataAnnotation, "example.com/*, secret-*,", false},
		{v1alpha1.StripMetadataAnnotation, `a\[b`, false},
		{v1alpha1.StripMetadataAnnotation, ",", true},
		{v1alpha1.StripMetadataAnnotation, "app.kubernetes.io/managed-by", true},
		{v1alpha1.StripMetadataAnnotation, "example.com/[a", true},
		{v1alpha1.KeysAnnotation, "ca.crt", false},
		{v1alpha1.KeysAnnotation, "tls.*,!tls.key,[^x]_y", false},
		{v1alpha1.KeysAnnotation, "tls.[a", true},
		{v1alpha1.KeysAnnotation, "a,", true},
		{v1alpha1.KeysAnnotation, "!", true},
		{v1alpha1.KeysAnnotation, "a b", true},
		{v1alpha1.TargetNameAnnotation, "platform-ca", false},
		{v1alpha1.TargetNameAnnotation, "ca.platform.example", false},
		{v1alpha1.TargetNameAnnotation, "Platform_CA", true},
		{v1alpha1.TargetNameAnnotation, "", true},
		{v1alpha1.TargetNameAnnotation, strings.Repeat("a", 254), true},
		{v1alpha1.TargetNameAnnotation, "-ca", true},
		{v1alpha1.TargetNamespacesAnnotation, entries("team-", v1alpha1.MaxListEntries), false},
		{v1alpha1.TargetNamespacesAnnotation, entries("team-", v1alpha1.MaxListEntries+1), true},
		{v1alpha1.KeysAnnotation, entries("key-", v1alpha1.MaxListEntries+1), true},
		{v1alpha1.StripMetadataAnnotation, entries("example.com/", v1alpha1.MaxListEntries+1), true},
	}
	for _, tc := range cases {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "probe-" + randomSuffix(),
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{tc.key: tc.value}}}
		if tc.key != v1alpha1.TargetNamespacesAnnotation && tc.key != v1alpha1.TargetSelectorAnnotation {
			cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = "team-*"
		}
		must(t, user.Create(ctx, cm, client.DryRunAll))
		got := warnings.take()
		if (got != "") != tc.warned {
			t.Errorf("%s=%q: warnings %q, want warned=%v", tc.key, tc.value, got, tc.warned)
		}
		_, targetsErr := desired.TargetsOf(cm)
		_, shapeErr := desired.ShapeOf(cm)
		if got != "" && targetsErr == nil && shapeErr == nil {
			t.Errorf("%s=%q: warned (%q), but cmsync accepts it", tc.key, tc.value, got)
		}
		if got != "" && !strings.Contains(got, tc.key) {
			t.Errorf("%s=%q: the warning %q does not name the annotation", tc.key, tc.value, got)
		}
	}
}

// The selector warning never cries wolf and misses nothing of its grammar: of random
// selectors, joined of requirements kubectl -l reads and of ones it refuses, exactly
// those labels.Parse (and so cmsync) refuses are warned about.
func TestSelectorWarningsNeverCryWolf(t *testing.T) {
	ctx := context.Background()
	user, warnings := warnedAdmin(t)
	src := harness.NewNamespace(t, "platform", nil)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	valid := []string{"env", "!env", "! env", "env=prod", "env==prod", "env!=prod", "env=", " env = prod ", "tier in (web,api)",
		"tier notin ( a , b )", "tier in (web,)", "x>3", "x < 1", "example.com/team=a", "Tier_1.b-c=V_2"}
	broken := []string{"=prod", "tier in (", "a b", "!a=b", "x>y", "-bad=1", "Example.com/x", "a/b/c", "é=1", "", "a=-b", "in (a)", "a=(b)", "x < -1", "x>+1"}
	var refused int
	for range 150 {
		parts := make([]string, 1+rng.IntN(4))
		for i := range parts {
			parts[i] = valid[rng.IntN(len(valid))]
			if rng.Float64() < 0.15 {
				parts[i] = broken[rng.IntN(len(broken))]
			}
		}
		selector := strings.Join(parts, ",")
		if strings.TrimSpace(selector) == "" {
			continue
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "probe-" + randomSuffix(),
			Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: map[string]string{v1alpha1.TargetSelectorAnnotation: selector}}}
		must(t, user.Create(ctx, cm, client.DryRunAll))
		got := warnings.take()
		_, parseErr := labels.Parse(selector)
		_, targetsErr := desired.TargetsOf(cm)
		switch {
		case parseErr != nil:
			refused++
			if targetsErr == nil {
				t.Errorf("%q: labels.Parse refuses it (%v), cmsync does not", selector, parseErr)
			}
			if got == "" {
				t.Errorf("%q: not warned about, but labels.Parse refuses it: %v", selector, parseErr)
			}
		case got != "":
			t.Errorf("%q: warned (%q), but labels.Parse accepts it", selector, got)
		}
	}
	t.Logf("%d of the selectors refused by labels.Parse", refused)
	if refused < 20 {
		t.Errorf("the corpus does not exercise the warning: %d refused", refused)
	}
}

// entries is a list annotation's value of n entries: prefix0,prefix1,...
func entries(prefix string, n int) string {
	list := make([]string, n)
	for i := range list {
		list[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return strings.Join(list, ",")
}
