//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
)

// An operator's Secret shared by a SecretSync, as docs/secretsync.md shows it: the
// unlabelled source fans out under another name with some of its keys, a Secret of
// the application's own is left alone and reported, the operator's rotation reaches
// the replicas, kubectl get ssync and kubectl cmsync say where it stands, a narrowing
// and the deletion clean up. Throughout, no value of the Secret appears anywhere but in
// the replicas: not in cmsync's debug log, the SecretSync's status, its Events,
// /metrics, or what kubectl cmsync prints.
func TestSecretSyncSharesAnOperatorsSecretAndNeverLeaksAValue(t *testing.T) {
	c := harness.StartController(t, "--secrets=enabled", "--zap-log-level=10")
	c.Local(t)
	ctx := context.Background()
	dbNS := harness.NewNamespace(t, "databases", nil)
	a, b, taken := harness.NewNamespace(t, "shop", nil), harness.NewNamespace(t, "shop", nil), harness.NewNamespace(t, "shop", nil)
	planted, rotated := "planted-"+randomSuffix()+randomSuffix(), "rotated-"+randomSuffix()+randomSuffix()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "orders-db"}, StringData: map[string]string{"password": "theirs"}}
	must(t, harness.K8s.Create(ctx, theirs))
	source := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: dbNS, Name: "orders-app", Labels: map[string]string{"operator.example/cluster": "orders"}},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"username": "app", "password": planted, "superuser-password": planted + "-su"},
	}
	must(t, harness.K8s.Create(ctx, source))
	sync := &v1alpha1.SecretSync{
		ObjectMeta: metav1.ObjectMeta{Name: "orders-db-" + randomSuffix()},
		Spec: v1alpha1.SecretSyncSpec{
			SourceNamespace: dbNS,
			SecretName:      "orders-app",
			ReplicaSpec: v1alpha1.ReplicaSpec{
				TargetName:            "orders-db",
				Keys:                  []string{"username", "password"},
				DestinationNamespaces: []string{a, b, taken},
			},
		},
	}
	must(t, harness.K8s.Create(ctx, sync))
	waitForSecretValue(t, "orders-db", "password", planted, a, b)
	status := waitForSecretSyncStatus(t, sync, "2/3", v1alpha1.ReasonDegraded)
	// Other scenarios' labelled Secrets may still be sources here: the replicas of this
	// one are at least counted, and its conflict is the only one.
	for series, least := range map[string]float64{
		`cmsync_sources{kind="Secret"}`:                 1,
		`cmsync_replicas{kind="Secret",state="synced"}`: 2,
	} {
		if got := c.Metric(t, series); got < least {
			t.Errorf("%s = %v, want at least %v", series, got, least)
		}
	}
	if got := c.Metric(t, `cmsync_replicas{kind="Secret",state="conflict"}`); got != 1 {
		t.Errorf(`cmsync_replicas{kind="Secret",state="conflict"} = %v, want 1`, got)
	}
	replica := &corev1.Secret{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: a, Name: "orders-db"}, replica))
	if _, copied := replica.Data["superuser-password"]; copied || replica.Labels["operator.example/cluster"] != "orders" {
		t.Errorf("replica keys %v, labels %v", sortedSecretKeys(replica), replica.Labels)
	}

	// The operator rotates the password and rewrites its metadata.
	must(t, harness.K8s.Patch(ctx, source, client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"operator.example/rotated":"1"}},"stringData":{"password":"`+rotated+`"}}`))))
	waitForSecretValue(t, "orders-db", "password", rotated, a, b)

	said := map[string]string{
		"kubectl get ssync":       getSecretSyncs(t, sync.Name, sync.Status.Source),
		"kubectl cmsync status":   checkSecretSyncStatusRow(t, sync.Name),
		"kubectl cmsync explain":  checkSecretSyncExplain(t, sync.Name, a, taken),
		"kubectl cmsync preview":  checkSecretSyncPreview(t, sync, b),
		"the SecretSync's status": status,
		"/metrics":                c.Metrics(t),
	}

	// Narrowing deletes a replica; deleting the SecretSync deletes the rest.
	must(t, harness.K8s.Patch(ctx, sync, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"destinationNamespaces":["`+a+`"]}}`))))
	waitForSecretGone(t, b, "orders-db")
	must(t, harness.K8s.Delete(ctx, sync))
	waitForSecretGone(t, a, "orders-db")

	var events eventsv1.EventList
	must(t, harness.K8s.List(ctx, &events))
	said["the SecretSync's Events"] = eventNotes(events.Items, sync.Name)
	logText, err := os.ReadFile(c.LogPath)
	must(t, err)
	said["the debug log"] = string(logText)
	if !strings.Contains(said["the debug log"], `"level":"debug"`) ||
		!strings.Contains(said["the SecretSync's Events"], "a Secret not managed by cmsync exists") {
		t.Errorf("the search below would prove little: no debug line, or no conflict Event (%q)", said["the SecretSync's Events"])
	}
	for where, text := range said {
		for _, value := range []string{planted, rotated} {
			if strings.Contains(text, value) {
				t.Errorf("a Secret's value appears in %s", where)
			}
		}
	}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(theirs), theirs))
	now := &corev1.Secret{}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(source), now))
	if string(theirs.Data["password"]) != "theirs" || now.Annotations[v1alpha1.StatusAnnotation] != "" || now.Labels[v1alpha1.ReplicateLabel] != "" {
		t.Errorf("cmsync wrote what it does not own: theirs %q, source metadata %v %v", theirs.Data["password"], now.Labels, now.Annotations)
	}
}

// waitForSecretSyncStatus waits for the SecretSync's synced count and Ready reason, and
// returns its status as JSON.
func waitForSecretSyncStatus(t *testing.T, sync *v1alpha1.SecretSync, synced, reason string) string {
	t.Helper()
	eventually(t, 30*time.Second, "status of SecretSync "+sync.Name, func() error {
		if err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(sync), sync); err != nil {
			return err
		}
		ready := readyReason(sync.Status.Conditions)
		if sync.Status.Synced != synced || ready != reason {
			return fmt.Errorf("synced %q, Ready reason %q", sync.Status.Synced, ready)
		}
		return nil
	})
	text, err := json.Marshal(sync.Status)
	must(t, err)
	return string(text)
}

func readyReason(conditions []metav1.Condition) string {
	for _, c := range conditions {
		if c.Type == v1alpha1.ConditionReady {
			return c.Reason
		}
	}
	return ""
}

func sortedSecretKeys(s *corev1.Secret) []string {
	return slices.Sorted(maps.Keys(s.Data))
}

// getSecretSyncs runs kubectl get ssync (kubectl built from k8s.io/kubectl) and checks
// the columns the CRD gives it.
func getSecretSyncs(t *testing.T, name, source string) string {
	t.Helper()
	cmd := exec.Command(buildKubectl(t), "get", "ssync", name, "--kubeconfig", harness.AdminKubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get ssync: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SOURCE SYNCED READY AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), name+" "+source+" 2/3 False ") {
		t.Errorf("kubectl get ssync:\n%s", out)
	}
	return string(out)
}

func checkSecretSyncStatusRow(t *testing.T, name string) string {
	t.Helper()
	var rows []cli.StatusRow
	harness.PluginJSON(t, &rows, "status", "-A")
	found := false
	for _, r := range rows {
		if r.Kind == v1alpha1.SecretSyncKind && r.Name == name {
			found = r.Status == v1alpha1.ReasonDegraded && r.Synced == "2/3"
		}
	}
	if !found {
		t.Errorf("kubectl cmsync status -A: no Degraded 2/3 row for SecretSync %s in %+v", name, rows)
	}
	return harness.Plugin(t, "status", "-A")
}

func checkSecretSyncExplain(t *testing.T, name, replicated, taken string) string {
	t.Helper()
	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", "--kind", "ssync", name, "--all")
	now := map[string]string{}
	for _, r := range e.Rows {
		now[r.Namespace] = r.Now
	}
	if e.Source != "SecretSync "+name || now[replicated] != "replica" || !strings.Contains(now[taken], "a Secret not managed by cmsync exists") {
		t.Errorf("kubectl cmsync explain --kind ssync %s: %+v", name, e)
	}
	return harness.Plugin(t, "explain", "--kind", "secretsync", name, "--all")
}

// checkSecretSyncPreview previews the narrowing the test then applies: the replica in
// dropped goes.
func checkSecretSyncPreview(t *testing.T, sync *v1alpha1.SecretSync, dropped string) string {
	t.Helper()
	changed := sync.DeepCopy()
	changed.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.SecretSyncKind}
	changed.ObjectMeta = metav1.ObjectMeta{Name: sync.Name}
	changed.Status = v1alpha1.SyncStatus{}
	changed.Spec.DestinationNamespaces = []string{sync.Spec.DestinationNamespaces[0]}
	manifest, err := json.Marshal(changed)
	must(t, err)
	path := filepath.Join(t.TempDir(), "secretsync.json")
	must(t, os.WriteFile(path, manifest, 0o600))
	var p cli.Preview
	harness.PluginJSON(t, &p, "preview", "-f", path)
	if got := changeNamespaces(p.Lose); len(got) != 1 || got[0] != dropped || len(p.Gain) != 0 || p.Invalid != "" {
		t.Errorf("kubectl cmsync preview -f (narrowing): %+v", p)
	}
	return harness.Plugin(t, "preview", "-f", path)
}

// Deleting a SecretSync while cmsync is not running: the garbage collector deletes its
// replicas (owner reference). Started without Secrets, cmsync leaves SecretSyncs alone
// and says so in its log.
func TestSecretSyncGarbageCollectedAndInertWithoutSecrets(t *testing.T) {
	c := harness.StartController(t, "--secrets=enabled")
	c.Local(t)
	ctx := context.Background()
	src, dst := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "dst", nil)
	must(t, harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "gc"}, StringData: map[string]string{"k": "v"}}))
	sync := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "gc-" + randomSuffix()},
		Spec: v1alpha1.SecretSyncSpec{SourceNamespace: src, SecretName: "gc", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}}}
	must(t, harness.K8s.Create(ctx, sync))
	waitForSecretValue(t, "gc", "k", "v", dst)
	eventually(t, 10*time.Second, "finalizer set", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(sync), sync))
		if len(sync.Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	c.Stop()
	must(t, harness.K8s.Patch(ctx, sync, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	must(t, harness.K8s.Delete(ctx, sync))
	eventually(t, 60*time.Second, "the garbage collector deletes the replica", func() error {
		err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: dst, Name: "gc"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("replica still there (%v)", err)
		}
		return nil
	})

	off := harness.StartController(t)
	inert := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "inert-" + randomSuffix()},
		Spec: v1alpha1.SecretSyncSpec{SourceNamespace: src, SecretName: "gc", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}}}
	must(t, harness.K8s.Create(ctx, inert))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), inert) })
	eventually(t, 30*time.Second, "the log says why SecretSyncs are left alone", func() error {
		logText, err := os.ReadFile(off.LogPath)
		if err != nil || !strings.Contains(string(logText), "the SecretSync controller is off: Secrets are disabled (--secrets=disabled)") {
			return fmt.Errorf("no such line yet (%v)", err)
		}
		return nil
	})
	consistently(t, 3*time.Second, "the SecretSync is left alone", func() error {
		got := &v1alpha1.SecretSync{}
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(inert), got); err != nil {
			return err
		}
		if len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
			return fmt.Errorf("touched: finalizers %v, status %+v", got.Finalizers, got.Status)
		}
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: dst, Name: "gc"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("a replica appeared (%v)", err)
		}
		return nil
	})
}
