package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Source data, binaryData, labels and annotations change: replicas follow, and keys
// removed from the source disappear from them; strip-metadata keeps keys out.
func TestReplicasFollowSourceChanges(t *testing.T) {
	startController(t)
	srcNS := newNamespace(t, "src", nil)
	target := newNamespace(t, "dst", nil)
	src := &corev1.ConfigMap{}
	src.Namespace, src.Name = srcNS, "app"
	src.Labels = map[string]string{v1alpha1.ReplicateLabel: "true", "keep": "1", "drop": "1", "internal.example.com/owner": "x"}
	src.Annotations = map[string]string{
		v1alpha1.TargetNamespacesAnnotation: target,
		v1alpha1.StripMetadataAnnotation:    "internal.example.com/*, secret-*",
		"keep":                              "1", "drop": "1", "secret-token": "s",
	}
	src.Data = map[string]string{"keep": "1", "drop": "1"}
	src.BinaryData = map[string][]byte{"bin-keep": {1}, "bin-drop": {2}}
	must(t, k8s.Create(context.Background(), src))
	waitForReplicasIn(t, src, target)
	replica, err := getConfigMap(target, "app")
	must(t, err)
	if _, ok := replica.Labels["internal.example.com/owner"]; ok {
		t.Errorf("stripped label copied: %v", replica.Labels)
	}
	if _, ok := replica.Annotations["secret-token"]; ok {
		t.Errorf("stripped annotation copied: %v", replica.Annotations)
	}

	update(t, src, func(cm *corev1.ConfigMap) {
		delete(cm.Labels, "drop")
		cm.Labels["added"] = "2"
		delete(cm.Annotations, "drop")
		cm.Annotations["added"] = "2"
		cm.Data = map[string]string{"keep": "changed", "added": "2"}
		cm.BinaryData = map[string][]byte{"bin-keep": {9}}
	})
	eventually(t, timeout, "replica follows the source", func() error {
		r, err := getConfigMap(target, "app")
		if err != nil {
			return err
		}
		return expectEqualContent(r, map[string]string{"keep": "changed", "added": "2"}, map[string][]byte{"bin-keep": {9}},
			map[string]string{"keep": "1", "added": "2"}, []string{"drop"})
	})
}

// A replica edited or deleted by someone else is restored, including data keys added
// to it.
func TestRepairsDrift(t *testing.T) {
	startController(t)
	srcNS := newNamespace(t, "src", nil)
	target := newNamespace(t, "dst", nil)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, target)
	waitForSynced(t, src, "1/1")

	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = target, "app"
	update(t, replica, func(cm *corev1.ConfigMap) {
		cm.Data["k"] = "tampered"
		cm.Data["extra"] = "added by hand"
		cm.Labels[v1alpha1.ManagedByLabel] = "cmsync" // still ours
	})
	eventually(t, timeout, "edited replica restored", func() error {
		r, err := getConfigMap(target, "app")
		if err != nil {
			return err
		}
		return expectEqualContent(r, map[string]string{"k": "v"}, nil, nil, nil)
	})

	// Removing a marker label does not make it someone else's: it is repaired.
	update(t, replica, func(cm *corev1.ConfigMap) {
		delete(cm.Labels, v1alpha1.SourceIDLabel)
		cm.Data["k"] = "tampered again"
	})
	eventually(t, timeout, "replica with a removed source-id label restored", func() error {
		r, err := getConfigMap(target, "app")
		if err != nil {
			return err
		}
		if r.Labels[v1alpha1.SourceIDLabel] == "" {
			return errorf("source-id label not restored")
		}
		return expectEqualContent(r, map[string]string{"k": "v"}, nil, nil, nil)
	})

	must(t, k8s.Delete(context.Background(), replica))
	eventually(t, timeout, "deleted replica recreated", func() error {
		r, err := getConfigMap(target, "app")
		if err != nil {
			return err
		}
		return expectEqualContent(r, map[string]string{"k": "v"}, nil, nil, nil)
	})
	waitForSynced(t, src, "1/1")
}

// Immutable sources give immutable replicas; a source recreated with other content
// gets its replicas recreated.
func TestImmutableSourceReplacesReplicas(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	a := newNamespace(t, "dst", nil)
	b := newNamespace(t, "dst", nil)
	annotations := map[string]string{v1alpha1.TargetNamespacesAnnotation: a + "," + b}
	src := &corev1.ConfigMap{}
	src.Namespace, src.Name = srcNS, "frozen"
	src.Labels = map[string]string{v1alpha1.ReplicateLabel: "true"}
	src.Annotations = annotations
	src.Data = map[string]string{"v": "1"}
	src.Immutable = ptr(true)
	must(t, k8s.Create(context.Background(), src))
	waitForReplicasIn(t, src, a, b)
	first, err := getConfigMap(a, "frozen")
	must(t, err)
	if first.Immutable == nil || !*first.Immutable {
		t.Fatalf("replica is not immutable")
	}

	// Recreate the source with new content while the controller is stopped, so that
	// it finds immutable replicas whose content differs, rather than none.
	running.Stop()
	must(t, k8s.Delete(context.Background(), src))
	again := src.DeepCopy()
	again.ResourceVersion, again.UID = "", ""
	again.Data = map[string]string{"v": "2"}
	must(t, k8s.Create(context.Background(), again))
	startController(t)
	eventually(t, timeout, "immutable replicas replaced", func() error {
		for _, ns := range []string{a, b} {
			r, err := getConfigMap(ns, "frozen")
			if err != nil {
				return err
			}
			if err := expectEqualContent(r, map[string]string{"v": "2"}, nil, nil, nil); err != nil {
				return err
			}
			if r.Immutable == nil || !*r.Immutable {
				return errorf("%s: replacement is not immutable", ns)
			}
			if r.UID == first.UID && ns == a {
				return errorf("%s: replica not replaced", ns)
			}
		}
		return nil
	})
	waitForSynced(t, again, "2/2")
}

// Names of 253 characters work, and ConfigMaps of 900 KiB and near the 1 MiB limit
// replicate.
func TestLongNameAndLargeData(t *testing.T) {
	startController(t)
	srcNS := newNamespace(t, "src", nil)
	target := newNamespace(t, "dst", nil)
	name := longName(253)
	big := make([]byte, 900*1024)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	src := newSource(t, srcNS, name, map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"big": string(big)})
	waitForReplicasIn(t, src, target)
	r, err := getConfigMap(target, name)
	must(t, err)
	if r.Data["big"] != string(big) {
		t.Errorf("900 KiB value not copied intact (got %d bytes)", len(r.Data["big"]))
	}
	waitForSynced(t, src, "1/1")
	must(t, k8s.Delete(context.Background(), src))
	waitForReplicasIn(t, src)

	// Near the API server's 1 MiB limit on a ConfigMap's data: the replica's extra
	// markers are metadata, outside that limit.
	nearLimit := make([]byte, 1024*1024-2048)
	for i := range nearLimit {
		nearLimit[i] = 'a' + byte(i%26)
	}
	full := newSource(t, srcNS, "near-limit", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"big": string(nearLimit)})
	waitForReplicasIn(t, full, target)
	waitForSynced(t, full, "1/1")
	r, err = getConfigMap(target, "near-limit")
	must(t, err)
	if len(r.Data["big"]) != len(nearLimit) {
		t.Errorf("near-limit value not copied intact (got %d bytes)", len(r.Data["big"]))
	}
}

func longName(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
		if i%50 == 49 {
			b[i] = '.'
		}
	}
	b[n-1] = 'z'
	return string(b)
}

// expectEqualContent checks a replica's data and binaryData exactly, that it carries
// the given labels and annotations, and that it lacks the absent keys in both.
func expectEqualContent(r *corev1.ConfigMap, data map[string]string, binary map[string][]byte, metadata map[string]string, absent []string) error {
	if len(r.Data) != len(data) {
		return errorf("data %v, want %v", r.Data, data)
	}
	for k, v := range data {
		if r.Data[k] != v {
			return errorf("data %v, want %v", r.Data, data)
		}
	}
	if len(r.BinaryData) != len(binary) {
		return errorf("binaryData %v, want %v", r.BinaryData, binary)
	}
	for k, v := range binary {
		if string(r.BinaryData[k]) != string(v) {
			return errorf("binaryData %v, want %v", r.BinaryData, binary)
		}
	}
	for k, v := range metadata {
		if r.Labels[k] != v || r.Annotations[k] != v {
			return errorf("label/annotation %s: %q/%q, want %q", k, r.Labels[k], r.Annotations[k], v)
		}
	}
	for _, k := range absent {
		_, inLabels := r.Labels[k]
		_, inAnnotations := r.Annotations[k]
		if inLabels || inAnnotations {
			return errorf("%s still on the replica", k)
		}
	}
	return nil
}

// A status written by someone else — a user, or an old leader's write delivered after
// a partition — is put right, on the annotated source and on a ConfigMapSync alike;
// cmsync's own status writes then cost a pass each and no write.
func TestForeignStatusIsPutRight(t *testing.T) {
	running := startController(t)
	ctx := context.Background()
	srcNS, target := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"k": "v"})
	truth := waitForSynced(t, src, "1/1").Annotations
	plainConfigMap(t, srcNS, "plain", map[string]string{"k": "v"})
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "plain", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: target}},
	)
	waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)

	update(t, src, func(cm *corev1.ConfigMap) {
		cm.Annotations[v1alpha1.StatusAnnotation] = v1alpha1.StatusDegraded
		cm.Annotations[v1alpha1.SyncedAnnotation] = "0/1"
		cm.Annotations[v1alpha1.MessageAnnotation] = "a stale status"
	})
	eventually(t, timeout, "the source's status put right", func() error {
		cm, err := getConfigMap(srcNS, "app")
		if err != nil {
			return err
		}
		for _, key := range []string{v1alpha1.StatusAnnotation, v1alpha1.SyncedAnnotation, v1alpha1.MessageAnnotation} {
			if cm.Annotations[key] != truth[key] {
				return errorf("%s=%q, want %q", key, cm.Annotations[key], truth[key])
			}
		}
		return nil
	})

	stale := &v1alpha1.ConfigMapSync{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(sync), stale))
	stale.Status.SyncedNamespaces = 0
	meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ReasonDegraded, Message: "a stale status"})
	must(t, k8s.Status().Update(ctx, stale))
	eventually(t, timeout, "the ConfigMapSync's status put right", func() error {
		got := &v1alpha1.ConfigMapSync{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sync), got); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || got.Status.SyncedNamespaces != 1 {
			return errorf("Ready %+v, synced %d", ready, got.Status.SyncedNamespaces)
		}
		return nil
	})

	time.Sleep(time.Second)
	before := running.Writes()
	consistently(t, 3*time.Second, "no writes once the statuses are right", func() error {
		if w := running.Writes() - before; w != 0 {
			return errorf("%d writes; last:\n%s", w, running.LastWrites())
		}
		return nil
	})
}

// A pass can run before cmsync's own status write has reached its cache of sources:
// the replicas' watch events queue the next pass sooner than the source's own event
// arrives. That pass finds the status cmsync wrote, or, wanting another, its write
// meets the newer source and is retried; each change still gets one Synced Event, not
// a repeat of it (a series).
func TestOneSyncedEventPerChangeWhileTheSourceCacheLags(t *testing.T) {
	startControllerBehind(t, 300*time.Millisecond)
	srcNS := newNamespace(t, "src", nil)
	_, targets := newGroup(t, "lag", 3)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(targets, ",")},
		map[string]string{"v": "1"})
	waitForSynced(t, src, "3/3")
	update(t, src, func(cm *corev1.ConfigMap) { cm.Data["v"] = "2" })
	for _, ns := range targets {
		waitForContent(t, ns, "app", map[string]string{"v": "2"}, nil)
	}
	oneEventEach := eventsOnceEach(t, src, v1alpha1.ReasonSynced, 2)
	eventually(t, timeout, "a Synced Event for each change", oneEventEach)
	consistently(t, 3*time.Second, "one Synced Event for each change", oneEventEach)
}

// A pass that reads a source older than cmsync's own last status write of it (a
// namespace's event queued the pass before the write reached the source cache) and
// finds that status still right does not write it again: sent with the older copy's
// resourceVersion, the write met the newer source (409) and was retried until the
// cache caught up, a status write refused for each retry.
func TestStatusIsNotWrittenAgainFromTheCopyItReplaced(t *testing.T) {
	running := startControllerBehind(t, 500*time.Millisecond)
	srcNS := newNamespace(t, "src", nil) // the source's own: its status writes alone
	group, targets := newGroup(t, "stale", 3)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group},
		map[string]string{"v": "1"})
	waitForSynced(t, src, "3/3")
	// A label the selector does not read: the namespace's event queues a pass at once,
	// while the status is still on its way to the source cache.
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targets[0]}}, func(ns *corev1.Namespace) {
		ns.Labels["touched"] = "yes"
	})
	consistently(t, 3*time.Second, "one status write, and one Synced Event", func() error {
		if got := running.WritesIn(http.MethodPatch, srcNS); got != 1 {
			return errorf("%d status writes onto the source (refused ones included), want 1; last writes:\n%s", got, running.LastWrites())
		}
		return eventsOnceEach(t, src, v1alpha1.ReasonSynced, 1)()
	})

	// A status that changed is still written, from whichever copy: a namespace that
	// leaves the group makes it 2/2.
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targets[2]}}, func(ns *corev1.Namespace) {
		delete(ns.Labels, "group")
	})
	waitForSynced(t, src, "2/2")
}

// A pass that repairs a replica while the source cache trails cmsync's own status
// write meets the newer source with its status write (409); last-sync-time still moves
// to the repair's time, written by the pass that retries, though that pass changes
// nothing itself.
func TestLastSyncTimeOfARepairWhoseStatusWriteMetANewerSource(t *testing.T) {
	startControllerBehind(t, 2*time.Second)
	srcNS := newNamespace(t, "src", nil)
	targets := []string{newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)}
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(targets, ",")},
		map[string]string{"v": "1"})
	synced := waitForSynced(t, src, "2/2")
	first, err := time.Parse(time.RFC3339, synced.Annotations[v1alpha1.LastSyncTimeAnnotation])
	must(t, err)
	// A second later, and still before the status write's own event reaches the source
	// cache (2 s late): a replica deleted behind cmsync's back is put back.
	time.Sleep(time.Until(first.Add(1100 * time.Millisecond)))
	repaired := time.Now().Truncate(time.Second)
	must(t, k8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: targets[0], Name: "app"}}))
	waitForReplicasIn(t, src, targets...)
	eventually(t, timeout, "last-sync-time at the repair", func() error {
		cm, err := getConfigMap(srcNS, "app")
		if err != nil {
			return err
		}
		last, err := time.Parse(time.RFC3339, cm.Annotations[v1alpha1.LastSyncTimeAnnotation])
		if err != nil {
			return err
		}
		if last.Before(repaired) {
			return errorf("last-sync-time %s, before the repair at %s", last.Format(time.RFC3339), repaired.Format(time.RFC3339))
		}
		return nil
	})
}

// The same for a ConfigMapSync: a pass that reads the copy cmsync's own status write
// replaced, and finds the same outcome (its times aside), writes nothing.
func TestConfigMapSyncStatusIsNotWrittenAgainFromTheCopyItReplaced(t *testing.T) {
	running := startControllerBehind(t, 500*time.Millisecond)
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "stale", 3)
	plainConfigMap(t, srcNS, "app", map[string]string{"v": "1"})
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "app",
			ReplicaSpec:     v1alpha1.ReplicaSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": group}}},
		},
	)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "3/3")
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targets[0]}}, func(ns *corev1.Namespace) {
		ns.Labels["touched"] = "yes"
	})
	statusPath := "/apis/" + v1alpha1.GroupVersion.String() + "/configmapsyncs/" + sync.Name + "/status"
	consistently(t, 3*time.Second, "one status write, and one Synced Event", func() error {
		if got := running.WritesTo(http.MethodPatch, statusPath); got != 1 {
			return errorf("%d status writes onto the ConfigMapSync (refused ones included), want 1; last writes:\n%s", got, running.LastWrites())
		}
		return eventsOnceEach(t, sync, v1alpha1.ReasonSynced, 1)()
	})
}

// The same for a ConfigMapSync: a repair within the cache's lag moves
// status.lastSyncTime, though its status write met a newer ConfigMapSync.
func TestLastSyncTimeOfAConfigMapSyncRepairWhoseStatusWriteMetANewerObject(t *testing.T) {
	startControllerBehind(t, 2*time.Second)
	srcNS := newNamespace(t, "src", nil)
	targets := []string{newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)}
	plainConfigMap(t, srcNS, "app", map[string]string{"v": "1"})
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "app", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: targets}},
	)
	synced := waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "2/2")
	if synced.Status.LastSyncTime == nil {
		t.Fatal("no lastSyncTime after the fan-out")
	}
	first := synced.Status.LastSyncTime.Time
	time.Sleep(time.Until(first.Add(1100 * time.Millisecond)))
	repaired := time.Now().Truncate(time.Second)
	must(t, k8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: targets[0], Name: "app"}}))
	eventually(t, timeout, "lastSyncTime at the repair", func() error {
		got := &v1alpha1.ConfigMapSync{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(sync), got); err != nil {
			return err
		}
		if last := got.Status.LastSyncTime; last == nil || last.Time.Before(repaired) {
			return errorf("lastSyncTime %v, before the repair at %s", last, repaired.Format(time.RFC3339))
		}
		return nil
	})
}

// The same race for a ConfigMapSync: the pass queued by its replicas' events reads the
// ConfigMapSync without the Ready condition cmsync has just written; it does not record
// the Synced Event again.
func TestOneSyncedEventPerChangeWhileTheSyncCacheLags(t *testing.T) {
	startControllerBehind(t, 300*time.Millisecond)
	srcNS := newNamespace(t, "src", nil)
	_, targets := newGroup(t, "lag", 3)
	plainConfigMap(t, srcNS, "app", map[string]string{"v": "1"})
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "app", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: targets}},
	)
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "3/3")
	oneEvent := eventsOnceEach(t, sync, v1alpha1.ReasonSynced, 1)
	eventually(t, timeout, "a Synced Event", oneEvent)
	consistently(t, 3*time.Second, "one Synced Event", oneEvent)
}

// The same race for an invalid source: a namespace event queues a pass that reads the
// source without the Invalid status cmsync has just written; it does not record the
// Invalid Event again.
func TestOneInvalidEventPerProblemWhileTheSourceCacheLags(t *testing.T) {
	policy := defaultPolicy()
	policy.MaxReplicatedBytes = 10 << 10
	startControllerBehind(t, 300*time.Millisecond, withPolicy(policy))
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "lag", 3)
	src := newSource(t, srcNS, "big", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group},
		map[string]string{"k": strings.Repeat("x", 4<<10)})
	waitForStatus(t, src, v1alpha1.StatusInvalid)
	// A label the selector does not read: the namespace event queues a pass at once,
	// while the Invalid status is still on its way to the source cache.
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: targets[0]}}, func(ns *corev1.Namespace) {
		ns.Labels["touched"] = "yes"
	})
	oneEvent := eventsOnceEach(t, src, v1alpha1.ReasonInvalid, 1)
	eventually(t, timeout, "an Invalid Event", oneEvent)
	consistently(t, 3*time.Second, "one Invalid Event", oneEvent)
}

// eventsOnceEach checks that obj has want Events with reason, none of them repeated
// (an Event series).
func eventsOnceEach(t *testing.T, obj client.Object, reason string, want int) func() error {
	return func() error {
		events := eventsFor(t, obj, reason)
		for _, e := range events {
			if e.Series != nil {
				return fmt.Errorf("%s Event %q repeated %d times", reason, e.Note, e.Series.Count)
			}
		}
		if len(events) != want {
			return fmt.Errorf("%d %s Events, want %d", len(events), reason, want)
		}
		return nil
	}
}
