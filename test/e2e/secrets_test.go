//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// A Secret's value never appears anywhere but in its replicas: not in cmsync's log at
// debug level, not in an Event, not in the source's status annotations, not in
// /metrics. The scenario takes the source through fan-out, a conflict, a renewal, a
// narrowing and its deletion, so every Secret verb the chart grants is used (the
// least-privilege audit checks that at the end of the suite).
func TestSecretsNeverLeakAValue(t *testing.T) {
	c := harness.StartController(t, "--secrets=enabled", "--zap-log-level=10")
	c.Local(t)
	ctx := context.Background()
	src := harness.NewNamespace(t, "vault", nil)
	a, b, taken := harness.NewNamespace(t, "leak", nil), harness.NewNamespace(t, "leak", nil), harness.NewNamespace(t, "leak", nil)
	planted := "planted-" + randomSuffix() + randomSuffix()
	renewed := "renewed-" + randomSuffix() + randomSuffix()
	unmanaged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "db"}, StringData: map[string]string{"password": "theirs"}}
	must(t, harness.K8s.Create(ctx, unmanaged))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: src, Name: "db",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join([]string{a, b, taken}, ",")},
		},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"password": planted, "user": "app"},
	}
	must(t, harness.K8s.Create(ctx, secret))
	waitForSecretValue(t, "db", "password", planted, a, b)
	waitForSecretAnnotation(t, src, "db", v1alpha1.SyncedAnnotation, "2/3")

	// A renewal reaches every replica.
	must(t, harness.K8s.Patch(ctx, secret, client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"password":"`+renewed+`"}}`))))
	waitForSecretValue(t, "db", "password", renewed, a, b)
	status := waitForSecretAnnotation(t, src, "db", v1alpha1.StatusAnnotation, v1alpha1.StatusDegraded)
	if metric := c.Metric(t, `cmsync_replicas{kind="Secret",state="conflict"}`); metric != 1 {
		t.Errorf(`cmsync_replicas{kind="Secret",state="conflict"} = %v, want 1`, metric)
	}
	metrics := c.Metrics(t)

	// Narrowing deletes a replica; deleting the source deletes the rest.
	must(t, harness.K8s.Patch(ctx, secret, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"cmsync.io/target-namespaces":"`+a+`"}}}`))))
	waitForSecretGone(t, b, "db")
	must(t, harness.K8s.Delete(ctx, secret))
	waitForSecretGone(t, a, "db")

	var events eventsv1.EventList
	must(t, harness.K8s.List(ctx, &events))
	logText, err := os.ReadFile(c.LogPath)
	must(t, err)
	if !strings.Contains(string(logText), `"level":"debug"`) {
		t.Errorf("the log has no debug line: the search below would prove little")
	}
	places := map[string]string{
		"the debug log":            string(logText),
		"the status annotations":   fmt.Sprint(status.Annotations),
		"/metrics":                 metrics,
		"the Events of the source": eventNotes(events.Items, "db"),
	}
	for where, text := range places {
		for _, value := range []string{planted, renewed} {
			if strings.Contains(text, value) {
				t.Errorf("a Secret's value appears in %s", where)
			}
		}
	}
	if !strings.Contains(places["the Events of the source"], "a Secret not managed by cmsync exists") {
		t.Errorf("no conflict Event on the source: %q", places["the Events of the source"])
	}
	theirs := &corev1.Secret{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: taken, Name: "db"}, theirs))
	if string(theirs.Data["password"]) != "theirs" {
		t.Errorf("the unmanaged Secret in %s was changed", taken)
	}
}

func eventNotes(events []eventsv1.Event, name string) string {
	var notes []string
	for _, e := range events {
		if e.Regarding.Name == name {
			notes = append(notes, e.Reason+": "+e.Note)
		}
	}
	return strings.Join(notes, "\n")
}

func waitForSecretValue(t *testing.T, name, key, value string, namespaces ...string) {
	t.Helper()
	eventually(t, 30*time.Second, "Secret "+name+" replicas hold the value", func() error {
		for _, ns := range namespaces {
			s := &corev1.Secret{}
			if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				return err
			}
			if string(s.Data[key]) != value {
				return fmt.Errorf("replica in %s does not hold the expected value yet", ns)
			}
		}
		return nil
	})
}

func waitForSecretAnnotation(t *testing.T, namespace, name, key, value string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	eventually(t, 30*time.Second, "Secret "+namespace+"/"+name+" annotation "+key, func() error {
		if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return err
		}
		if got := s.Annotations[key]; got != value {
			return fmt.Errorf("%s = %q, want %q (message %q)", key, got, value, s.Annotations[v1alpha1.MessageAnnotation])
		}
		return nil
	})
	return s
}

func waitForSecretGone(t *testing.T, namespace, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "Secret "+namespace+"/"+name+" deleted", func() error {
		err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// plainServiceAccount is a second identity for cmsync, bound to the chart's ClusterRole
// as rendered with secrets.enabled=false (the default), so that what it does can be
// told apart in the audit log from the Secret scenarios' identity.
const (
	plainServiceAccount = "cmsync-plain"
	plainUser           = "system:serviceaccount:" + harness.ReleaseNamespace + ":" + plainServiceAccount
)

// createPlainIdentity creates plainServiceAccount and binds it to the rules of the
// chart's ClusterRole rendered with the default values.
func createPlainIdentity() error {
	rules, err := defaultChartClusterRoleRules()
	if err != nil {
		return err
	}
	ctx := context.Background()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: harness.ReleaseNamespace, Name: plainServiceAccount}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: plainServiceAccount}, Rules: rules},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: plainServiceAccount},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: plainServiceAccount},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: harness.ReleaseNamespace, Name: plainServiceAccount}},
		},
	}
	for _, obj := range objs {
		if err := harness.K8s.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// defaultChartClusterRoleRules renders the chart with its default values and returns
// the rules of its ClusterRole.
func defaultChartClusterRoleRules() ([]rbacv1.PolicyRule, error) {
	out, err := harness.Helm("template", "cmsync", "../../deploy/chart/cmsync", "--namespace", harness.ReleaseNamespace, "--show-only", "templates/rbac.yaml")
	if err != nil {
		return nil, fmt.Errorf("helm template: %v\n%s", err, out)
	}
	for _, doc := range strings.Split(out, "\n---") {
		var role rbacv1.ClusterRole
		if yaml.Unmarshal([]byte(doc), &role) == nil && role.Kind == "ClusterRole" {
			return role.Rules, nil
		}
	}
	return nil, fmt.Errorf("no ClusterRole in the rendered chart:\n%s", out)
}

// With the chart's default values cmsync has no verb on Secrets or SecretSyncs, and with
// --secrets=disabled (the default) it makes no request about them, even with a
// labelled Secret and a SecretSync in the cluster; what it does need is granted.
func TestSecretsOffMakesNoSecretRequest(t *testing.T) {
	rules, err := defaultChartClusterRoleRules()
	must(t, err)
	for _, rule := range rules {
		if slices.Contains(rule.Resources, "secrets") || slices.Contains(rule.Resources, "secretsyncs") {
			t.Errorf("the default chart grants %v on %v", rule.Verbs, rule.Resources)
		}
	}
	c := harness.StartController(t, "--kubeconfig="+plainKubeconfig)
	c.Local(t)
	ctx := context.Background()
	src, dst := harness.NewNamespace(t, "plain", nil), harness.NewNamespace(t, "plain", nil)
	targets := map[string]string{v1alpha1.TargetNamespacesAnnotation: dst}
	labels := map[string]string{v1alpha1.ReplicateLabel: "true"}
	// This identity is not the chart's ServiceAccount, so the chart's admission policy
	// refuses its replica writes, as it should; this scenario is about RBAC and runs
	// without the policy (the documented break-glass).
	harness.WithoutProtection(t, func() {
		must(t, harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "s", Labels: labels, Annotations: targets},
			StringData: map[string]string{"k": "v"}}))
		must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "c", Labels: labels, Annotations: targets},
			Data: map[string]string{"k": "v"}}))
		sync := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "off-" + randomSuffix()},
			Spec: v1alpha1.SecretSyncSpec{SourceNamespace: src, SecretName: "s", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}}}
		must(t, harness.K8s.Create(ctx, sync))
		t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), sync) })
		harness.WaitForReplicas(t, src, "c", 30*time.Second, dst)
		time.Sleep(2 * time.Second) // a request about the Secret would come with the same pass
		c.Stop()
	})

	var about []string
	must(t, harness.EachAuditRecord(func(r harness.AuditRecord) {
		if r.User.Username != plainUser || r.ObjectRef == nil {
			return
		}
		if r.ObjectRef.Resource == "secrets" || r.ObjectRef.Resource == "secretsyncs" {
			about = append(about, r.Verb+" "+r.ObjectRef.Resource)
		}
		if r.Annotations["authorization.k8s.io/decision"] == "forbid" {
			about = append(about, "refused: "+r.Verb+" "+r.ObjectRef.Resource)
		}
	}))
	if len(about) > 0 {
		t.Errorf("with Secrets off, cmsync made these requests: %v", about)
	}
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: dst, Name: "s"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Secret was replicated with Secrets off: %v", err)
	}
}
