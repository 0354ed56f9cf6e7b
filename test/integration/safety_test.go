package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// A ConfigMap of the same name that cmsync does not manage is never changed or
// deleted: the source is Degraded with a message naming the namespace and a Conflict
// event; once the unmanaged ConfigMap is gone, the replica is created.
func TestNeverTouchesUnmanagedConfigMaps(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	free, taken := newNamespace(t, "free", nil), newNamespace(t, "taken", nil)
	theirs := &corev1.ConfigMap{Data: map[string]string{"owner": "someone else"}}
	theirs.Namespace, theirs.Name = taken, "app"
	must(t, k8s.Create(context.Background(), theirs))

	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: free + "," + taken}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, free)
	degraded := waitForStatus(t, src, v1alpha1.StatusDegraded)
	msg := degraded.Annotations[v1alpha1.MessageAnnotation]
	if !strings.Contains(msg, "conflict in "+taken) || !strings.Contains(msg, "not managed by cmsync") {
		t.Errorf("message %q does not name the conflict and its namespace", msg)
	}
	if got := degraded.Annotations[v1alpha1.SyncedAnnotation]; got != "1/2" {
		t.Errorf("synced %q, want 1/2", got)
	}
	waitForEvent(t, src, v1alpha1.ReasonConflict, taken)
	// The metrics are totals over every source the controller sees, other tests' too.
	conflicts := metricValue(t, running.Metrics, "cmsync_replicas", "conflict")
	if conflicts < 1 {
		t.Errorf("cmsync_replicas{state=conflict} = %v, want at least this source's 1", conflicts)
	}

	// Let several conflict rechecks pass: the unmanaged ConfigMap stays untouched.
	consistently(t, 3*time.Second, "unmanaged ConfigMap untouched", func() error {
		cm, err := getConfigMap(taken, "app")
		if err != nil {
			return err
		}
		if cm.ResourceVersion != theirs.ResourceVersion {
			return errorf("unmanaged ConfigMap changed: %v %v", cm.Labels, cm.Data)
		}
		return nil
	})

	// Deleting the source deletes its replica, not the unmanaged ConfigMap.
	src2 := newSource(t, newNamespace(t, "src", nil), "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: taken}, nil)
	waitForStatus(t, src2, v1alpha1.StatusDegraded)
	must(t, k8s.Delete(context.Background(), src2))
	consistently(t, 2*time.Second, "unmanaged ConfigMap survives a source's deletion", func() error {
		_, err := getConfigMap(taken, "app")
		return err
	})

	must(t, k8s.Delete(context.Background(), theirs))
	waitForReplicasIn(t, src, free, taken)
	waitForSynced(t, src, "2/2")
	if got := metricValue(t, running.Metrics, "cmsync_replicas", "conflict"); got != conflicts-1 {
		t.Errorf("cmsync_replicas{state=conflict} = %v after the conflict ended, want %v", got, conflicts-1)
	}
}

// Invalid annotations are reported (status, message, event) and change nothing: no
// replica is created or deleted because of them, and the controller does not spin.
func TestInvalidAnnotationsChangeNothing(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	target := newNamespace(t, "dst", nil)
	cases := []struct {
		name, key, value, fragment string
	}{
		{"bad glob", v1alpha1.TargetNamespacesAnnotation, "team-[a", "malformed glob"},
		{"upper case", v1alpha1.TargetNamespacesAnnotation, "Team-A", "character 'T'"},
		{"empty list", v1alpha1.TargetNamespacesAnnotation, " ", "empty"},
		{"empty entry", v1alpha1.TargetNamespacesAnnotation, "a,,b", "empty name"},
		{"only exclusions", v1alpha1.TargetNamespacesAnnotation, "!" + target, "only exclusions"},
		{"selector without key", v1alpha1.TargetSelectorAnnotation, "=prod", `invalid target-selector "=prod"`},
		{"unclosed set", v1alpha1.TargetSelectorAnnotation, "tier in (", `invalid target-selector "tier in ("`},
		{"two words", v1alpha1.TargetSelectorAnnotation, "a b", `invalid target-selector "a b"`},
		{"empty selector", v1alpha1.TargetSelectorAnnotation, "", "empty"},
		{"bad strip glob", v1alpha1.StripMetadataAnnotation, "example.com/[", "strip-metadata"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "invalid-" + randomSuffix()
			annotations := map[string]string{tc.key: tc.value}
			if tc.key == v1alpha1.StripMetadataAnnotation {
				annotations[v1alpha1.TargetNamespacesAnnotation] = target
			}
			src := newSource(t, srcNS, name, annotations, nil)
			got := waitForStatus(t, src, v1alpha1.StatusInvalid)
			if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, tc.fragment) {
				t.Errorf("message %q does not contain %q", msg, tc.fragment)
			}
			waitForEvent(t, src, v1alpha1.ReasonInvalid, tc.fragment)
			if got := replicaNamespaces(t, src); len(got) != 0 {
				t.Errorf("replicas created for an invalid source: %v", got)
			}
		})
	}

	// A valid source made invalid keeps its replicas, and the controller goes quiet.
	src := newSource(t, srcNS, "was-valid", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"k": "v"})
	waitForSynced(t, src, "1/1")
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetSelectorAnnotation] = "tier in (" })
	waitForStatus(t, src, v1alpha1.StatusInvalid)
	waitForReplicasIn(t, src, target)
	time.Sleep(time.Second) // let the event recorder flush
	before := running.Writes()
	consistently(t, 3*time.Second, "no retry loop on an invalid source", func() error {
		if w := running.Writes() - before; w != 0 {
			return errorf("%d writes while only invalid sources changed nothing", w)
		}
		return nil
	})
	// Fixing the annotations brings it back.
	update(t, src, func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.TargetSelectorAnnotation) })
	waitForSynced(t, src, "1/1")
}

// The source's own namespace, excluded namespaces (kube-system even under "*"),
// ignored namespaces and sources outside --source-namespaces never produce replicas.
func TestPolicyLimits(t *testing.T) {
	base := "p" + randomSuffix()
	policy := defaultPolicy()
	policy.SourceNamespaces = []string{base + "-allowed-*"}
	startController(t, withPolicy(policy))
	allowed := newNamespace(t, base+"-allowed", nil)
	denied := newNamespace(t, base+"-denied", nil)
	target := newNamespace(t, base+"-target", nil)
	ignored := newNamespace(t, base+"-ignored", map[string]string{v1alpha1.IgnoreNamespaceLabel: "true"})

	src := newSource(t, allowed, "everywhere", map[string]string{v1alpha1.TargetNamespacesAnnotation: "*"}, nil)
	eventually(t, timeout, "replicated everywhere allowed", func() error {
		got := map[string]bool{}
		for _, ns := range replicaNamespaces(t, src) {
			got[ns] = true
		}
		for _, ns := range []string{allowed, "kube-system", "kube-public", "kube-node-lease", ignored} {
			if got[ns] {
				return errorf("replica in %s", ns)
			}
		}
		if !got[target] || !got[denied] || !got["default"] {
			return errorf("missing replicas: %v", got)
		}
		return nil
	})
	waitForStatus(t, src, v1alpha1.StatusSynced)

	outside := newSource(t, denied, "outside", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, nil)
	got := waitForStatus(t, outside, v1alpha1.StatusInvalid)
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "--source-namespaces") {
		t.Errorf("message %q does not explain the refusal", msg)
	}
	consistently(t, 2*time.Second, "no replica of a source outside --source-namespaces", func() error {
		if got := replicaNamespaces(t, outside); len(got) != 0 {
			return errorf("replicas in %v", got)
		}
		return nil
	})
	must(t, k8s.Delete(context.Background(), src))
	waitForReplicasIn(t, src)
}

// A replica never becomes a source, and a source listing its own namespace does not
// loop.
func TestNoChainsNoLoops(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	target := newNamespace(t, "dst", nil)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: srcNS + "," + target}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, target)
	waitForSynced(t, src, "1/1")

	// Someone labels the replica as a source: it is refused, and nothing is copied.
	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = target, "app"
	update(t, replica, func(cm *corev1.ConfigMap) {
		cm.Labels[v1alpha1.ReplicateLabel] = "true"
		cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = "*"
	})
	got := waitForStatus(t, replica, v1alpha1.StatusInvalid)
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "replica of "+srcNS+"/app") {
		t.Errorf("message %q does not say it is a replica", msg)
	}
	if got := replicaNamespaces(t, replica); len(got) != 0 {
		t.Errorf("a replica produced replicas: %v", got)
	}
	time.Sleep(time.Second)
	before := running.Writes()
	consistently(t, 3*time.Second, "quiet after convergence", func() error {
		if w := running.Writes() - before; w != 0 {
			return errorf("%d writes", w)
		}
		return nil
	})
}

// After convergence the controller makes zero writes while idle, the status stays
// unchanged, and a restart with everything in sync makes zero writes too.
func TestIdleAndRestartMakeNoWrites(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "idle", 10)
	// A long value too: its content hash must compare equal after a restart.
	data := map[string]string{"k": "v", "long": strings.Repeat("0123456789", 100)}
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}, data)
	waitForReplicasIn(t, src, targets...)
	synced := waitForSynced(t, src, "10/10")
	if got := metricValue(t, running.Metrics, "cmsync_replicas", "synced"); got < 10 {
		t.Errorf("cmsync_replicas{state=synced} = %v, want at least this source's 10", got)
	}
	if metricValue(t, running.Metrics, "cmsync_sources", "") < 1 || metricValue(t, running.Metrics, "cmsync_sync_duration_seconds", "") < 1 {
		t.Errorf("cmsync_sources or cmsync_sync_duration_seconds not recorded")
	}
	time.Sleep(2 * time.Second) // let every pass triggered by our own writes finish
	assertNoWrites(t, running, src, synced.ResourceVersion, 5*time.Second)

	running.Stop()
	restarted := startController(t)
	assertNoWrites(t, restarted, src, synced.ResourceVersion, 5*time.Second)
}

func assertNoWrites(t *testing.T, c *controllerUnderTest, src *corev1.ConfigMap, sourceVersion string, d time.Duration) {
	t.Helper()
	before := c.Writes()
	consistently(t, d, "idle", func() error {
		if w := c.Writes() - before; w != 0 {
			return errorf("%d writes while idle; last writes:\n%s", w, c.LastWrites())
		}
		cm, err := getConfigMap(src.Namespace, src.Name)
		if err != nil {
			return err
		}
		if cm.ResourceVersion != sourceVersion {
			return errorf("source rewritten while idle: %v", cm.Annotations)
		}
		return nil
	})
}
