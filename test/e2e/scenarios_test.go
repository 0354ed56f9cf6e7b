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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The README's one-minute example, run verbatim: its commands are read from README.md
// and run by kubectl itself (built from k8s.io/kubectl, hack/kubectl), and what the
// README shows them print is what they print (but for ages and times); then what its
// prose promises.
func TestREADMEExample(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	steps, shown := readmeExample(t)
	kubectl := buildKubectl(t)
	run := exec.Command("bash", "-euo", "pipefail", "-c", steps)
	run.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+harness.AdminKubeconfig)
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the README's commands:\n%s\n%v\n%s", steps, err, out)
	}
	for _, s := range shown {
		eventually(t, 30*time.Second, "$ "+s.command, func() error {
			cmd := exec.Command("bash", "-c", s.command)
			cmd.Env = run.Env
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return sameOutput(s.output, string(out))
		})
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "ca-bundle"}}
	got := harness.WaitForAnnotation(t, "platform", "ca-bundle", v1alpha1.SyncedAnnotation, "2/2")
	if got.Annotations[v1alpha1.StatusAnnotation] != "Synced" || got.Annotations[v1alpha1.LastSyncTimeAnnotation] == "" {
		t.Errorf("status annotations %v", got.Annotations)
	}
	// "Create team-c and it gets a replica. Try to edit or delete a replica: the API
	// server refuses, naming the source. Should one be changed anyway (an
	// administrator's break-glass), it is restored. Change the source and every replica
	// follows; delete the source and its replicas are deleted."
	must(t, harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-c"}}))
	harness.WaitForReplicas(t, "platform", "ca-bundle", 30*time.Second, "team-a", "team-b", "team-c")
	expectRefused(t, "deleting a replica", harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca-bundle"}}),
		"ConfigMap team-a/ca-bundle is a replica of platform/ca-bundle kept by cmsync: change the source platform/ca-bundle instead")
	harness.WithoutProtection(t, func() {
		must(t, harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca-bundle"}}))
		must(t, harness.K8s.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "ca-bundle"}},
			client.RawPatch(types.MergePatchType, []byte(`{"data":{"ca.crt":"tampered"}}`))))
	})
	must(t, harness.K8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"ca.crt":"rotated"}}`))))
	eventually(t, 30*time.Second, "every replica restored and following the source", func() error {
		for _, ns := range []string{"team-a", "team-b", "team-c"} {
			r, err := harness.GetConfigMap(ns, "ca-bundle")
			if err != nil {
				return err
			}
			if r.Data["ca.crt"] != "rotated" {
				return fmt.Errorf("%s: %q", ns, r.Data["ca.crt"])
			}
		}
		return nil
	})
	must(t, harness.K8s.Delete(ctx, cm))
	harness.WaitForReplicas(t, "platform", "ca-bundle", 30*time.Second)
}

// Fan-out to 50 namespaces, a source update and delete.
func TestFanOutUpdateDelete(t *testing.T) {
	c := harness.StartController(t)
	ctx := context.Background()
	group := "fan" + randomSuffix()
	targets := make([]string, 0, 50)
	for range 50 {
		targets = append(targets, harness.NewNamespace(t, "fan", map[string]string{"group": group}))
	}
	src := harness.NewNamespace(t, "src", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "fan",
		Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}},
		Data: map[string]string{"v": "1"}}
	must(t, harness.K8s.Create(ctx, cm))
	harness.WaitForReplicas(t, src, "fan", 60*time.Second, targets...)
	harness.WaitForAnnotation(t, src, "fan", v1alpha1.SyncedAnnotation, "50/50")

	must(t, harness.K8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"2"}}`))))
	harness.WaitForValue(t, 60*time.Second, "fan", "v", "2", targets...)
	// /metrics matches the cluster: this is the only source (earlier scenarios deleted
	// theirs), with 50 replicas in sync. (The in-cluster Pod's metrics are not scraped
	// from here: there, only the delete follows.)
	if c.IsLocal() {
		fanOutMetrics(t, c)
	}
	must(t, harness.K8s.Delete(ctx, cm))
	harness.WaitForReplicas(t, src, "fan", 60*time.Second)
}

func fanOutMetrics(t *testing.T, c *harness.Controller) {
	eventually(t, 10*time.Second, "metrics", func() error {
		if got := c.Metric(t, `cmsync_replicas{kind="ConfigMap",state="synced"}`); got != 50 {
			return fmt.Errorf("cmsync_replicas{synced} = %v, want 50", got)
		}
		if got := c.Metric(t, `cmsync_replicas{kind="ConfigMap",state="conflict"}`); got != 0 {
			return fmt.Errorf("cmsync_replicas{conflict} = %v, want 0", got)
		}
		if got := c.Metric(t, "cmsync_sources"); got != 1 {
			return fmt.Errorf("cmsync_sources = %v, want 1", got)
		}
		if got := c.Metric(t, "cmsync_sync_duration_seconds_count"); got < 1 {
			return fmt.Errorf("cmsync_sync_duration_seconds_count = %v", got)
		}
		return nil
	})
}

// A target namespace deleted (the namespace controller really finishes it, deleting the
// replica while the namespace terminates) and recreated gets its replica back; the
// status tells the truth in between.
func TestTargetNamespaceDeletedAndRecreated(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	src, stays, goes := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "stays", nil), harness.NewNamespace(t, "goes", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "app",
		Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: stays + "," + goes}}}
	must(t, harness.K8s.Create(ctx, cm))
	harness.WaitForReplicas(t, src, "app", 30*time.Second, stays, goes)

	// While the namespace terminates, the namespace controller deletes the replica in it;
	// cmsync must not try to recreate it there (a terminating namespace is no target), so
	// the source never turns Degraded on the way.
	must(t, harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: goes}}))
	eventually(t, 60*time.Second, "namespace deleted for good", func() error {
		if cm, err := harness.GetConfigMap(src, "app"); err == nil && cm.Annotations[v1alpha1.StatusAnnotation] == v1alpha1.StatusDegraded {
			t.Fatalf("source Degraded while a target namespace terminates: %s", cm.Annotations[v1alpha1.MessageAnnotation])
		}
		err := harness.K8s.Get(ctx, client.ObjectKey{Name: goes}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there: %v", err)
		}
		return nil
	})
	harness.WaitForAnnotation(t, src, "app", v1alpha1.SyncedAnnotation, "1/1")
	must(t, harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: goes}}))
	harness.WaitForReplicas(t, src, "app", 30*time.Second, stays, goes)
	harness.WaitForAnnotation(t, src, "app", v1alpha1.SyncedAnnotation, "2/2")
}

// An unmanaged ConfigMap in the way is never changed; the source says so.
func TestConflictWithUnmanagedConfigMap(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	src, taken := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "taken", nil)
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: taken, Name: "app"}, Data: map[string]string{"mine": "yes"}}
	must(t, harness.K8s.Create(ctx, theirs))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "app",
		Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: taken}}}
	must(t, harness.K8s.Create(ctx, cm))
	got := harness.WaitForAnnotation(t, src, "app", v1alpha1.StatusAnnotation, "Degraded")
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "conflict in "+taken) {
		t.Errorf("message %q", msg)
	}
	consistently(t, 5*time.Second, "unmanaged ConfigMap untouched", func() error {
		now, err := harness.GetConfigMap(taken, "app")
		if err != nil || now.ResourceVersion != theirs.ResourceVersion {
			return fmt.Errorf("changed: %v", err)
		}
		return nil
	})
	must(t, harness.K8s.Delete(ctx, theirs))
	harness.WaitForReplicas(t, src, "app", 30*time.Second, taken)
}

// ConfigMapSync round trip: replicas with an owner reference; deleting the
// ConfigMapSync deletes them; and the garbage collector honours the owner reference on
// its own (shown with cmsync stopped and its finalizer removed by hand).
func TestConfigMapSyncRoundTrip(t *testing.T) {
	c := harness.StartController(t)
	ctx := context.Background()
	src, a, b := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "dst", nil), harness.NewNamespace(t, "dst", nil)
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "ca"}, Data: map[string]string{"k": "v"}}))
	first := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "rt-" + randomSuffix()},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: src, ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: a}}}
	must(t, harness.K8s.Create(ctx, first))
	harness.WaitForReplicas(t, src, "ca", 30*time.Second, a)
	must(t, harness.K8s.Delete(ctx, first))
	harness.WaitForReplicas(t, src, "ca", 30*time.Second)

	second := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "gc-" + randomSuffix()},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: src, ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: b}}}
	must(t, harness.K8s.Create(ctx, second))
	harness.WaitForReplicas(t, src, "ca", 30*time.Second, b)
	eventually(t, 10*time.Second, "finalizer set", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(second), second))
		if len(second.Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	c.Local(t)
	c.Stop()
	must(t, harness.K8s.Patch(ctx, second, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	must(t, harness.K8s.Delete(ctx, second))
	harness.WaitForReplicas(t, src, "ca", 60*time.Second) // the garbage collector's work
}

// Against an API server or client without streaming lists (watch-list), the informers
// fall back to LIST and WATCH: both front doors, and Secrets, work the same. (This is also where the
// least-privilege check sees cmsync use its list permissions.)
func TestWithoutWatchList(t *testing.T) {
	harness.StartControllerWithEnv(t, []string{"KUBE_FEATURE_WatchListClient=false"}, "--secrets=enabled")
	ctx := context.Background()
	src, a, b := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "dst", map[string]string{"wl": "x"}), harness.NewNamespace(t, "dst", nil)
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "plain",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetSelectorAnnotation: "wl=x"}}, Data: map[string]string{"k": "v"}}))
	harness.WaitForReplicas(t, src, "plain", 30*time.Second, a)
	harness.WaitForAnnotation(t, src, "plain", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)

	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "crd"}, Data: map[string]string{"k": "v"}}))
	cms := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "wl-" + randomSuffix()},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: src, ConfigMapName: "crd", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: b}}}
	must(t, harness.K8s.Create(ctx, cms))
	harness.WaitForReplicas(t, src, "crd", 30*time.Second, b)
	must(t, harness.K8s.Delete(ctx, cms))
	harness.WaitForReplicas(t, src, "crd", 30*time.Second)

	must(t, harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "secret",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{v1alpha1.TargetSelectorAnnotation: "wl=x"}}, StringData: map[string]string{"k": "v"}}))
	waitForSecretValue(t, "secret", "k", "v", a)
}

// SIGKILL during fan-out and during cleanup: after a restart the state is exact.
func TestKilledMidFanOut(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	ctx := context.Background()
	group := "kill" + randomSuffix()
	targets := make([]string, 0, 150)
	for range 150 {
		targets = append(targets, harness.NewNamespace(t, "kill", map[string]string{"group": group}))
	}
	src := harness.NewNamespace(t, "src", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "killed",
		Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}},
		Data: map[string]string{"v": "1"}}
	must(t, harness.K8s.Create(ctx, cm))

	c := harness.StartController(t, "--kube-api-qps=50", "--kube-api-burst=10") // slow enough to be caught mid-way
	eventually(t, 60*time.Second, "fan-out under way", func() error {
		if n := len(harness.ReplicasOf(t, src, "killed")); n < 10 {
			return fmt.Errorf("%d replicas", n)
		}
		return nil
	})
	c.Kill()
	if n := len(harness.ReplicasOf(t, src, "killed")); n == len(targets) {
		t.Logf("fan-out finished before the kill; the restart still has to prove an exact state")
	}
	harness.StartController(t)
	harness.WaitForReplicas(t, src, "killed", 60*time.Second, targets...)
	harness.WaitForAnnotation(t, src, "killed", v1alpha1.SyncedAnnotation, "150/150")

	// Kill during cleanup.
	c = harness.StartController(t, "--kube-api-qps=50", "--kube-api-burst=10")
	time.Sleep(2 * time.Second)
	must(t, harness.K8s.Delete(ctx, cm))
	eventually(t, 60*time.Second, "cleanup under way", func() error {
		if n := len(harness.ReplicasOf(t, src, "killed")); n > len(targets)-10 {
			return fmt.Errorf("%d replicas left", n)
		}
		return nil
	})
	c.Kill()
	harness.StartController(t)
	harness.WaitForReplicas(t, src, "killed", 60*time.Second)
}

// Two processes with leader election: only the leader writes; when it dies, the other
// takes over within the lease time.
func TestLeaderElection(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	ctx := context.Background()
	first := harness.StartController(t, "--leader-elect=true")
	second := harness.StartController(t, "--leader-elect=true")
	src, dst := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "dst", nil)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "led",
		Labels: map[string]string{v1alpha1.ReplicateLabel: "true"}, Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: dst}},
		Data: map[string]string{"v": "1"}}
	must(t, harness.K8s.Create(ctx, cm))
	harness.WaitForReplicas(t, src, "led", 60*time.Second, dst)

	leader, follower := first, second
	if reconciles(t, second) > 0 {
		leader, follower = second, first
	}
	if reconciles(t, leader) <= 0 {
		t.Fatalf("neither process reconciled")
	}
	if got := reconciles(t, follower); got > 0 {
		t.Fatalf("the follower reconciled %v times", got)
	}
	if w := writes(t, follower); w > 0 {
		t.Fatalf("the follower made %v write requests", w)
	}

	leader.Kill()
	must(t, harness.K8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"v":"2"}}`))))
	// The lease lasts 15s; the follower retries every 2s.
	eventually(t, 30*time.Second, "the follower took over", func() error {
		r, err := harness.GetConfigMap(dst, "led")
		if err != nil {
			return err
		}
		if r.Data["v"] != "2" {
			return fmt.Errorf("replica still %q", r.Data["v"])
		}
		return nil
	})
	if reconciles(t, follower) <= 0 {
		t.Errorf("the new leader did not reconcile")
	}
}

// reconciles counts the process's reconciles of the source controller (-1: none yet).
func reconciles(t *testing.T, c *harness.Controller) float64 {
	return c.Metric(t, `controller_runtime_reconcile_total{controller="source"`)
}

// writes counts the process's create, patch, update and delete requests.
func writes(t *testing.T, c *harness.Controller) float64 {
	var total float64
	for _, method := range []string{"POST", "PATCH", "PUT", "DELETE"} {
		for _, line := range strings.Split(c.Metrics(t), "\n") {
			if strings.HasPrefix(line, "rest_client_requests_total{") && strings.Contains(line, `method="`+method+`"`) {
				var v float64
				fields := strings.Fields(line)
				_, _ = fmt.Sscan(fields[len(fields)-1], &v) // not a number: 0, which fails the check
				total += v
			}
		}
	}
	return total
}

// The control plane the suite (and `make run`) starts behaves like a real cluster's: a
// new namespace gets its default ServiceAccount and the kube-root-ca.crt ConfigMap, and
// a deleted one finishes deleting.
func TestControlPlaneRunsTheClusterControllers(t *testing.T) {
	ctx := context.Background()
	ns := harness.NewNamespace(t, "real", nil)
	eventually(t, 30*time.Second, "default ServiceAccount and kube-root-ca.crt in "+ns, func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "default"}, &corev1.ServiceAccount{}); err != nil {
			return err
		}
		_, err := harness.GetConfigMap(ns, "kube-root-ca.crt")
		return err
	})
	must(t, harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	eventually(t, 60*time.Second, "namespace "+ns+" deleted", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// shownCommand is a command the README shows with what it prints.
type shownCommand struct{ command, output string }

// readmeExample reads the README's one-minute example: the commands of its first code
// block, and the "$ command" blocks after it with their output.
func readmeExample(t *testing.T) (steps string, shown []shownCommand) {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	must(t, err)
	section, found := strings.CutPrefix(string(raw)[strings.Index(string(raw), "## A one-minute example"):], "## A one-minute example")
	if !found {
		t.Fatal("README.md has no one-minute example")
	}
	section = section[:strings.Index(section, "\n## ")]
	blocks := strings.Split(section, "```sh\n")[1:]
	for i, block := range blocks {
		body := block[:strings.Index(block, "```")]
		if i == 0 {
			steps = body
			continue
		}
		command, output, _ := strings.Cut(strings.TrimPrefix(body, "$ "), "\n")
		shown = append(shown, shownCommand{command, output})
	}
	if !strings.Contains(steps, "kubectl") || len(shown) == 0 {
		t.Fatalf("unexpected example in README.md: %q %v", steps, shown)
	}
	return steps, shown
}

// sameOutput compares what a command printed with what the README shows: a JSON
// object key by key (a time only as present); a table by its header and rows without
// the last column (an age), where the rows of the README's objects (by name) must be
// exactly those shown, beside whatever else the cluster holds.
func sameOutput(want, got string) error {
	if strings.HasPrefix(strings.TrimSpace(want), "{") {
		var w, g map[string]string
		if err := json.Unmarshal([]byte(strings.ReplaceAll(want, "\n", "")), &w); err != nil {
			return fmt.Errorf("the README's output: %w", err)
		}
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			return fmt.Errorf("%w: %s", err, got)
		}
		for k, v := range w {
			if g[k] != v && (k != v1alpha1.LastSyncTimeAnnotation || g[k] == "") {
				return fmt.Errorf("%s=%q, the README shows %q", k, g[k], v)
			}
		}
		return nil
	}
	rows := func(s string) [][]string {
		lines := strings.Split(strings.TrimSpace(s), "\n")
		out := make([][]string, 0, len(lines))
		for _, line := range lines {
			fields := strings.Fields(line)
			out = append(out, fields[:len(fields)-1])
		}
		return out
	}
	w, g := rows(want), rows(got)
	if !slices.Equal(w[0], g[0]) {
		return fmt.Errorf("header %q, the README shows %q", g[0], w[0])
	}
	column := slices.Index(w[0], "NAME")
	names, shown := map[string]bool{}, map[string]bool{}
	for _, row := range w[1:] {
		names[row[column]], shown[strings.Join(row, " ")] = true, true
	}
	var ours []string
	for _, row := range g[1:] {
		if names[row[column]] {
			ours = append(ours, strings.Join(row, " "))
		}
	}
	if !slices.Equal(slices.Sorted(maps.Keys(shown)), slices.Sorted(slices.Values(ours))) {
		return fmt.Errorf("printed %q, the README shows %q", ours, slices.Sorted(maps.Keys(shown)))
	}
	return nil
}

// buildKubectl builds kubectl (hack/kubectl) into the suite's directory, once.
func buildKubectl(t *testing.T) string {
	t.Helper()
	path := filepath.Join(harness.WorkDir, "bin", "kubectl")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	build := exec.Command("go", "build", "-C", "../../hack", "-o", path, "./kubectl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building kubectl: %v\n%s", err, out)
	}
	return path
}
