//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
	"github.com/cmsync/cmsync/internal/migrate"
	"github.com/cmsync/cmsync/test/harness"
)

// The permissions the plugin names when a user of one namespace lacks them.
const (
	missingNamespaces     = "list namespaces (cluster-wide)"
	missingConfigMaps     = "list configmaps (cluster-wide)"
	missingConfigMapSyncs = "list configmapsyncs.cmsync.io (cluster-wide)"
	missingRelease        = "list deployments.apps in namespace " + harness.ReleaseNamespace
)

// oneNamespace is a team's namespace with a source replicated into another, and a
// source of another replicator (reflector) with its copy there.
type oneNamespace struct {
	team, dev, legacy string
	copies            []client.Object
}

// kubectl cmsync for someone who may read one namespace only — the built-in edit or
// view ClusterRole bound there by a RoleBinding, as an app team has. Every command
// answers for what that namespace shows, as the administrator's answer says it, and
// names each permission it lacked and what it therefore did not check, instead of
// failing with "forbidden": status, explain, preview and migrate exit 0. What needs
// another namespace's source is refused naming the permission. migrate --apply refuses
// without the controller's release, and still refuses once the user may read it, since
// its plan could not see the other namespaces; nothing is written.
func TestPluginForAUserOfOneNamespace(t *testing.T) {
	harness.StartController(t)
	w := newOneNamespace(t)
	editor := harness.PluginAs(editorConfigIn(t, w.team).Impersonate)
	for _, u := range []struct {
		role    string
		user    harness.PluginUser
		secrets bool
	}{{"edit", editor, true}, {"view", viewerIn(t, w.team), false}} {
		t.Run(u.role, func(t *testing.T) {
			checkStatusInOneNamespace(t, u.user, w, u.secrets)
			checkExplainInOneNamespace(t, u.user, w)
			checkPreviewInOneNamespace(t, u.user, w)
			checkMigrateInOneNamespace(t, u.user, w)
		})
	}
	apply := []string{"migrate", "--apply", "-n", w.team}
	expectRefusedAs(t, editor, apply, "migrate --apply refused", "(missing: "+missingRelease+")")
	grantReleaseReading(t, w.team, "editor")
	eventually(t, 30*time.Second, "migrate --apply refused for its partial plan", func() error {
		_, stderr, err := editor.Run(t, apply...)
		if err == nil || !strings.Contains(stderr, "the plan was made without reading") || !strings.Contains(stderr, "(missing: "+missingConfigMaps+")") {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	})
	legacy := &corev1.ConfigMap{}
	must(t, harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: w.team, Name: w.legacy}, legacy))
	if legacy.Labels[v1alpha1.ReplicateLabel] != "" {
		t.Errorf("a refused migrate --apply labelled %s/%s: %v", w.team, w.legacy, legacy.Labels)
	}
	expectUnchanged(t, w.copies)
}

func newOneNamespace(t *testing.T) oneNamespace {
	t.Helper()
	w := oneNamespace{team: harness.NewNamespace(t, "onens", nil), dev: harness.NewNamespace(t, "onens-dev", nil), legacy: "legacy-" + randomSuffix()}
	harness.DeleteSourcesAtEnd(t, []string{w.team})
	must(t, harness.K8s.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.team, Name: "settings", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: w.dev}},
		Data: map[string]string{"k": "v"},
	}))
	harness.WaitForReplicas(t, w.team, "settings", 30*time.Second, w.dev)
	harness.WaitForAnnotation(t, w.team, "settings", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	w.copies = arrangeReflected(t, w.team, w.legacy, w.dev)
	return w
}

// viewerIn is a user bound to the built-in view ClusterRole in namespace alone, once
// the binding is in effect.
func viewerIn(t *testing.T, namespace string) harness.PluginUser {
	t.Helper()
	name := "viewer-" + namespace
	must(t, harness.K8s.Create(context.Background(), &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "viewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name}},
	}))
	viewer := harness.PluginAs(rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}})
	eventually(t, 30*time.Second, "the viewer's binding in effect", func() error {
		_, stderr, err := viewer.Run(t, "explain", namespace+"/settings", "--in", namespace, "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, stderr)
		}
		return nil
	})
	return viewer
}

// grantReleaseReading lets the ServiceAccount namespace/name get and list the
// Deployments of the controller's namespace, as the plugin's docs say suffices to read
// the controller's policy.
func grantReleaseReading(t *testing.T, namespace, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: "release-reader-" + namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "list"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: role.ObjectMeta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
	}
	must(t, harness.K8s.Create(ctx, role))
	must(t, harness.K8s.Create(ctx, binding))
	t.Cleanup(func() {
		_ = harness.K8s.Delete(context.Background(), binding)
		_ = harness.K8s.Delete(context.Background(), role)
	})
}

// checkStatusInOneNamespace: the namespace's source as the administrator sees it; the
// ConfigMapSyncs (cluster-scoped), the Secrets for a viewer, and with -A every
// namespace's ConfigMaps, each one row that names the permission missing.
func checkStatusInOneNamespace(t *testing.T, user harness.PluginUser, w oneNamespace, secrets bool) {
	t.Helper()
	var mine, admins []cli.StatusRow
	user.JSON(t, &mine, "status", "-n", w.team)
	harness.PluginJSON(t, &admins, "status", "-n", w.team)
	if want := rowNamed(admins, "ConfigMap", "settings"); want == nil || !slices.Contains(mine, *want) {
		t.Errorf("status -n %s: %+v, want the administrator's row %+v", w.team, mine, want)
	}
	expectUnknownRow(t, mine, "ConfigMapSync", missingConfigMapSyncs)
	if !secrets {
		expectUnknownRow(t, mine, "Secret", "list secrets in namespace "+w.team)
	} else if row := rowNamed(mine, "Secret", "-"); row != nil {
		t.Errorf("status -n %s: %+v, though the user may list Secrets there", w.team, row)
	}
	user.JSON(t, &mine, "status", "-A")
	expectUnknownRow(t, mine, "ConfigMap", missingConfigMaps)
	t.Logf("kubectl cmsync status -n %s, as a user of that namespace:\n%s", w.team, user.Out(t, "status", "-n", w.team))
}

// checkExplainInOneNamespace: explain says for the user's namespace what the
// administrator's explain says, names what it could not read, refuses another
// namespace's source naming the permission, and names a namespace it may not read.
func checkExplainInOneNamespace(t *testing.T, user harness.PluginUser, w oneNamespace) {
	t.Helper()
	var mine, admins cli.Explanation
	user.JSON(t, &mine, "explain", w.team+"/settings", "--all")
	harness.PluginJSON(t, &admins, "explain", w.team+"/settings", "--all")
	if !strings.Contains(mine.Policy, "NOT the controller's policy") || !strings.Contains(mine.Policy, "(missing: "+missingRelease+")") {
		t.Errorf("explain: policy %q does not say it is not the controller's, and why", mine.Policy)
	}
	for _, r := range admins.Rows {
		if r.Namespace == w.team && (len(mine.Rows) != 1 || mine.Rows[0] != r) {
			t.Errorf("explain --all: %+v, want the administrator's row %+v alone", mine.Rows, r)
		}
	}
	expectNotChecked(t, "explain --all", mine.NotChecked, missingNamespaces, missingConfigMaps, missingRelease)

	user.JSON(t, &mine, "explain", w.team+"/settings", "--in", w.dev)
	if len(mine.Rows) != 0 {
		t.Errorf("explain --in %s: %+v from a namespace the user may not read", w.dev, mine.Rows)
	}
	expectNotChecked(t, "explain --in "+w.dev, mine.NotChecked, "get namespace "+w.dev)
	t.Logf("kubectl cmsync explain %s/settings --all, as a user of %s:\n%s", w.team, w.team, user.Out(t, "explain", w.team+"/settings", "--all"))

	expectRefusedAs(t, user, []string{"explain", w.dev + "/settings", "--all"},
		"you may not read ConfigMap "+w.dev+"/settings", "(missing: get configmaps in namespace "+w.dev+")")
}

// checkPreviewInOneNamespace: an invalid change is said, and what was not read named.
func checkPreviewInOneNamespace(t *testing.T, user harness.PluginUser, w oneNamespace) {
	t.Helper()
	var p cli.Preview
	user.JSON(t, &p, "preview", w.team+"/settings", "--set-annotation", "cmsync.io/keys=a/b")
	if !strings.HasPrefix(p.Invalid, `invalid keys "a/b"`) {
		t.Errorf("preview of an invalid change: %+v", p)
	}
	user.JSON(t, &p, "preview", w.team+"/settings", "--set-annotation", v1alpha1.TargetNamespacesAnnotation+"="+w.dev+",elsewhere")
	if p.Invalid != "" || len(p.Gain)+len(p.Lose)+len(p.Conflicts) != 0 {
		t.Errorf("preview: %+v, with changes in namespaces the user may not read", p)
	}
	expectNotChecked(t, "preview", p.NotChecked, missingNamespaces, missingConfigMaps)
}

// checkMigrateInOneNamespace: the plan for the namespace's own sources, saying what it
// could not look at.
func checkMigrateInOneNamespace(t *testing.T, user harness.PluginUser, w oneNamespace) {
	t.Helper()
	var m cli.Migration
	user.JSON(t, &m, "migrate", "-n", w.team)
	if !slices.ContainsFunc(m.Moves, func(move migrate.Move) bool { return move.Source.Namespace == w.team && move.Source.Name == w.legacy }) {
		t.Errorf("migrate: no move of %s/%s in %+v", w.team, w.legacy, m.Moves)
	}
	expectNotChecked(t, "migrate", m.NotChecked, missingNamespaces, missingConfigMaps)
	expectUnchanged(t, w.copies)
}

func rowNamed(rows []cli.StatusRow, kind, name string) *cli.StatusRow {
	for i := range rows {
		if rows[i].Kind == kind && rows[i].Name == name {
			return &rows[i]
		}
	}
	return nil
}

// expectUnknownRow: rows hold the one Unknown row of kind, naming missing.
func expectUnknownRow(t *testing.T, rows []cli.StatusRow, kind, missing string) {
	t.Helper()
	row := rowNamed(rows, kind, "-")
	if row == nil || row.Status != "Unknown" || !strings.Contains(row.Message, "(missing: "+missing+")") {
		t.Errorf("status: %+v, want the row of %s Unknown, naming %q", rows, kind, missing)
	}
}

// expectNotChecked: the answer names every permission of missing.
func expectNotChecked(t *testing.T, what string, got []cli.NotChecked, missing ...string) {
	t.Helper()
	for _, m := range missing {
		if !slices.ContainsFunc(got, func(n cli.NotChecked) bool { return n.Missing == m && n.Unchecked != "" }) {
			t.Errorf("%s: not checked %+v, want %q named with what it left out", what, got, m)
		}
	}
}
