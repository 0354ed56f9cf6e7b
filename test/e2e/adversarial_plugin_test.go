//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
)

// The plugin believes only the controller (SPEC §12). A tenant who may edit their own
// namespace (the built-in edit ClusterRole) creates a Deployment labelled exactly as
// the chart labels cmsync's, scaled to zero, with --exclude-namespaces= — a policy under
// which every namespace, kube-system too, is a target. The administrator's documented
// kubectl cmsync migrate and migrate --apply still read the policy from the release in
// cmsync-system, say so, and neither plan nor make a take-over of the copy in
// kube-system, which the real controller would then delete as a stale replica: it
// stays, untouched. A second release in the controller's namespace makes every command
// refuse as ambiguous until --controller-name names one; a controller namespace with no
// release, or one whose Deployments the user may not read, leaves the read-only
// commands on the binary's defaults, saying so, and makes migrate --apply refuse; get
// and list on Deployments in that one namespace suffice.
func TestPluginBelievesOnlyTheController(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	s := randomSuffix()
	// "tenant-…" lists after cmsync-system: before the plugin was pointed at one
	// release, the last Deployment it found, this one, set the policy.
	tenant := harness.NewNamespace(t, "tenant", nil)
	src, team := harness.NewNamespace(t, "lookalike-src", nil), harness.NewNamespace(t, "lookalike-team", nil)
	must(t, editorIn(t, tenant).Create(ctx, lookAlike(tenant, "cmsync", "--exclude-namespaces=")))

	name := "ca-" + s
	harness.DeleteSourcesAtEnd(t, []string{src})
	copies := arrangeReflected(t, src, name, team, "kube-system")
	inTeam, inKubeSystem := copies[0], copies[1]
	release := "Deployment " + harness.ReleaseNamespace + "/" + harness.Release

	// The preview reads the release's policy, says so, and leaves the copy in kube-system.
	var m cli.Migration
	harness.PluginJSON(t, &m, "migrate")
	expectReleasePolicy(t, "migrate", m.Policy, release, tenant)
	expectTakeOver(t, m, src, name, team, `excluded by the controller's --exclude-namespaces ("kube-system")`)
	table := harness.Plugin(t, "migrate")
	t.Logf("kubectl cmsync migrate, a look-alike in %s:\n%s", tenant, table)
	if !strings.Contains(table, "(controller policy from the flags of "+release+")") ||
		regexp.MustCompile(`take over\s+kube-system/`).MatchString(table) {
		t.Errorf("the preview's table does not say where its policy is from, or takes over in kube-system:\n%s", table)
	}
	expectUnchanged(t, copies)

	// --apply takes over the copy in the target, and not the one in kube-system, which
	// cmsync then leaves alone: it is no replica of its.
	harness.PluginJSON(t, &m, "migrate", "--apply")
	expectReleasePolicy(t, "migrate --apply", m.Policy, release, tenant)
	for _, applied := range m.Applied {
		if strings.Contains(applied, "kube-system/") {
			t.Errorf("--apply wrote in kube-system: %s", applied)
		}
	}
	expectUnchanged(t, []client.Object{inKubeSystem})
	now := &corev1.ConfigMap{}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(inTeam), now))
	if now.UID != inTeam.GetUID() || now.Labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
		t.Errorf("the copy in %s was not taken over in place: uid %s -> %s, labels %v", team, inTeam.GetUID(), now.UID, now.Labels)
	}
	harness.WaitForAnnotation(t, src, name, v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	consistently(t, 5*time.Second, "the copy in kube-system stays, untouched", func() error {
		cm := &corev1.ConfigMap{}
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(inKubeSystem), cm); err != nil {
			return err
		}
		if cm.UID != inKubeSystem.GetUID() || cm.ResourceVersion != inKubeSystem.GetResourceVersion() {
			return fmt.Errorf("uid %s, version %s: it was written", cm.UID, cm.ResourceVersion)
		}
		return nil
	})

	// A source still to migrate: the refusals below must leave it, and its copy, as
	// they are.
	pending := "pending-" + s
	pendingCopies := arrangeReflected(t, src, pending, team)
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: pending}})
	})
	untouched := func() {
		t.Helper()
		source := &corev1.ConfigMap{}
		must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: src, Name: pending}, source))
		if source.Labels[v1alpha1.ReplicateLabel] != "" {
			t.Errorf("a refused migrate --apply labelled %s/%s: %v", src, pending, source.Labels)
		}
		expectUnchanged(t, pendingCopies)
	}

	// Two releases in the controller's namespace: every command refuses, naming them,
	// until --controller-name names one.
	shadow := lookAlike(harness.ReleaseNamespace, "cmsync-shadow", "--exclude-namespaces=")
	must(t, harness.K8s.Create(ctx, shadow))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), shadow) })
	for _, args := range [][]string{{"migrate"}, {"migrate", "--apply"}, {"explain", src + "/" + name, "--all"}} {
		expectPluginRefuses(t, args, "the controller's policy is ambiguous", "cmsync, cmsync-shadow", "--controller-name")
	}
	untouched()
	harness.PluginJSON(t, &m, "migrate", "--controller-name", harness.Release)
	expectReleasePolicy(t, "migrate --controller-name", m.Policy, release, tenant)
	expectTakeOver(t, m, src, pending, team, "")
	must(t, harness.K8s.Delete(ctx, shadow))

	// No release in the namespace pointed at: the preview goes on with the binary's
	// defaults and says that they are not the controller's; --apply refuses, also with
	// every policy flag given.
	missing := "cmsync-missing-" + s
	stdout, stderr, err := harness.PluginRun(t, "migrate", "--controller-namespace", missing, "-o", "json")
	if err != nil || !strings.Contains(stdout, "NOT the controller's policy: no cmsync release in namespace "+missing) ||
		!strings.Contains(stderr, "warning: NOT the controller's policy") {
		t.Errorf("migrate --controller-namespace %s: %v\n%s\n%s", missing, err, stdout, stderr)
	}
	how := []string{"migrate --apply refused", "no cmsync release in namespace " + missing, "Point --controller-namespace"}
	expectPluginRefuses(t, []string{"migrate", "--apply", "--controller-namespace", missing}, how...)
	expectPluginRefuses(t, []string{"migrate", "--apply", "--controller-namespace", missing, "--namespaces=", "--exclude-namespaces=kube-*",
		"--source-namespaces=*", "--max-replicated-bytes=1Gi", "--reserved-names=", "--tenant-label="}, how...)
	untouched()

	// Someone who may read namespaces and ConfigMaps but no Deployment in cmsync-system:
	// the same. Given get and list on Deployments there, and nowhere else, the plugin
	// reads the release.
	reader := "plugin-reader-" + s
	asReader := harness.PluginAs(rest.ImpersonationConfig{UserName: reader})
	grantClusterWide(t, reader, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps"}, Verbs: []string{"get", "list"}})
	eventually(t, 30*time.Second, "the preview as "+reader, func() error {
		stdout, stderr, err := asReader.Run(t, "migrate", "-o", "json")
		if err != nil || !strings.Contains(stdout, "NOT the controller's policy: you may not list Deployments in namespace "+harness.ReleaseNamespace) {
			return fmt.Errorf("%v\n%s\n%s", err, stdout, stderr)
		}
		return nil
	})
	expectRefusedAs(t, asReader, []string{"migrate", "--apply"},
		"migrate --apply refused", "you may not list Deployments in namespace "+harness.ReleaseNamespace)
	untouched()
	must(t, harness.K8s.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: reader},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}}},
	}))
	must(t, harness.K8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: reader},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: reader}},
	}))
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: reader}})
		_ = harness.K8s.Delete(context.Background(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: reader}})
	})
	eventually(t, 30*time.Second, "the release read as "+reader, func() error {
		var m cli.Migration
		stdout, stderr, err := asReader.Run(t, "migrate", "-o", "json")
		if err == nil {
			err = json.Unmarshal([]byte(stdout), &m)
		}
		if err != nil || m.Policy != "the flags of "+release {
			return fmt.Errorf("policy %q: %v\n%s", m.Policy, err, stderr)
		}
		return nil
	})
}

// lookAlike is a Deployment labelled as the chart labels cmsync's release, scaled to
// zero, whose container cmsync has args.
func lookAlike(namespace, name string, args ...string) *appsv1.Deployment {
	pod := map[string]string{"look-alike": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{
			"app.kubernetes.io/name": "cmsync", "app.kubernetes.io/instance": harness.Release, "app.kubernetes.io/managed-by": "Helm",
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: harness.Ptr(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: pod},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: pod},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "cmsync", Image: "ghcr.io/cmsync/cmsync:latest", Args: args}}},
			},
		},
	}
}

// arrangeReflected makes src/name a reflector source that auto-reflects into the
// namespaces, with reflector's copy in each, and returns the copies. The copies not
// taken over are deleted at the end (cmsync deletes the others with their source).
func arrangeReflected(t *testing.T, src, name string, namespaces ...string) []client.Object {
	t.Helper()
	ctx := context.Background()
	data := map[string]string{"ca.crt": "pem"}
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: name, Annotations: map[string]string{
		"reflector.v1.k8s.emberstack.com/reflection-allowed": "true", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true",
		"reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces": strings.Join(namespaces, ","),
	}}, Data: data}
	must(t, harness.K8s.Create(ctx, source))
	copies := make([]client.Object, 0, len(namespaces))
	for _, ns := range namespaces {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
			"reflector.v1.k8s.emberstack.com/auto-reflects": "True", "reflector.v1.k8s.emberstack.com/reflects": src + "/" + name,
			"reflector.v1.k8s.emberstack.com/reflected-version": source.ResourceVersion,
			"reflector.v1.k8s.emberstack.com/reflected-at":      "2026-11-28T10:00:00.0000000+00:00",
		}}, Data: data}
		must(t, harness.K8s.Create(ctx, c))
		copies = append(copies, c)
		t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), c) })
	}
	return copies
}

// expectReleasePolicy: the policy was read from the release, not from the tenant's
// look-alike, and is said to be.
func expectReleasePolicy(t *testing.T, what, policy, release, tenant string) {
	t.Helper()
	if policy != "the flags of "+release || strings.Contains(policy, tenant) {
		t.Errorf("%s: policy from %q, want the flags of %s", what, policy, release)
	}
}

// expectTakeOver: the move of src/name takes over its copy in target alone; a copy
// left elsewhere says why (left, when not "").
func expectTakeOver(t *testing.T, m cli.Migration, src, name, target, left string) {
	t.Helper()
	for _, move := range m.Moves {
		if move.Source.Namespace != src || move.Source.Name != name {
			continue
		}
		if len(move.TakeOver) != 1 || move.TakeOver[0].Namespace != target || move.Refused != "" {
			t.Errorf("%s/%s: takes over %+v (refused %q), want its copy in %s alone", src, name, move.TakeOver, move.Refused, target)
		}
		for _, c := range move.Left {
			if left != "" && !strings.Contains(c.Why, left) {
				t.Errorf("%s/%s: left %s/%s because %q, want %q", src, name, c.Namespace, c.Name, c.Why, left)
			}
		}
		if left != "" && len(move.Left) != 1 {
			t.Errorf("%s/%s: left %+v, want the copy in kube-system", src, name, move.Left)
		}
		return
	}
	t.Errorf("no move of %s/%s in %+v", src, name, m.Moves)
}

// expectPluginRefuses: kubectl cmsync args, run by the administrator, fails, and its
// error says every fragment.
func expectPluginRefuses(t *testing.T, args []string, fragments ...string) {
	t.Helper()
	expectRefusedAs(t, harness.PluginAdmin(), args, fragments...)
}

// expectRefusedAs: kubectl cmsync args, run by user, fails, and its error says every
// fragment.
func expectRefusedAs(t *testing.T, user harness.PluginUser, args []string, fragments ...string) {
	t.Helper()
	stdout, stderr, err := user.Run(t, args...)
	if err == nil {
		t.Errorf("kubectl cmsync %s succeeded:\n%s", strings.Join(args, " "), stdout)
		return
	}
	t.Logf("kubectl cmsync %s: %s", strings.Join(args, " "), stderr)
	for _, f := range fragments {
		if !strings.Contains(stderr, f) {
			t.Errorf("kubectl cmsync %s: %q does not say %q", strings.Join(args, " "), stderr, f)
		}
	}
}

// grantClusterWide binds the user to a ClusterRole of rule, until the test ends.
func grantClusterWide(t *testing.T, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
	}
	must(t, harness.K8s.Create(ctx, role))
	must(t, harness.K8s.Create(ctx, binding))
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), binding)
		_ = harness.K8s.Delete(context.Background(), role)
	})
}
