package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// cmsync watches replicas' metadata only: whether a replica is in sync comes from its
// content-hash label and the ownership its managedFields record. Every edit that
// leaves no trace but in managedFields must still be repaired.
func TestDriftSeenOnlyInManagedFieldsIsRepaired(t *testing.T) {
	startController(t)
	srcNS, target := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"k": "v", "k2": "v2"})
	waitForReplicasIn(t, src, target)
	waitForSynced(t, src, "1/1")
	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = target, "app"
	restored := func(what string) {
		t.Helper()
		eventually(t, timeout, what, func() error {
			r, err := getConfigMap(target, "app")
			if err != nil {
				return err
			}
			if r.Labels[v1alpha1.ContentHashLabel] == "" {
				return errorf("content-hash label missing: %v", r.Labels)
			}
			return expectEqualContent(r, map[string]string{"k": "v", "k2": "v2"}, nil, nil, nil)
		})
	}

	// A key deleted: its field leaves every manager, nobody else owns content.
	update(t, replica, func(cm *corev1.ConfigMap) { delete(cm.Data, "k2") })
	restored("deleted key restored")

	// The content-hash label set to another value, with the content unchanged.
	update(t, replica, func(cm *corev1.ConfigMap) { cm.Labels[v1alpha1.ContentHashLabel] = "0000" })
	eventually(t, timeout, "content-hash label restored", func() error {
		r, err := getConfigMap(target, "app")
		if err != nil {
			return err
		}
		if r.Labels[v1alpha1.ContentHashLabel] == "0000" {
			return errorf("content-hash label still edited")
		}
		return nil
	})
	restored("content intact after a label edit")

	// A value changed and the hash label made to match nothing, by a server-side apply
	// that forces its way in.
	apply := corev1ac.ConfigMap("app", target).WithData(map[string]string{"k": "applied"})
	must(t, k8s.Apply(context.Background(), apply, client.FieldOwner("someone-else"), client.ForceOwnership))
	restored("applied value restored")

	// managedFields stripped, and a value changed in the same write: cmsync owns nothing
	// any more, so the metadata cannot tell.
	strip := []byte(`{"metadata":{"managedFields":[{}]},"data":{"k":"stripped"}}`)
	must(t, k8s.Patch(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "app"}},
		client.RawPatch(types.MergePatchType, strip)))
	restored("value changed with managedFields stripped restored")
	waitForSynced(t, src, "1/1")
}

// A replica written before replicas carried a content-hash label (a release before
// it) is left as it is while its content is in sync: a restart writes nothing to it
// (an upgrade rewrote every replica once). It gets the label with its next change of
// content.
func TestReplicaWithoutContentHashIsLeftUntilItsContentChanges(t *testing.T) {
	srcNS, target := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"k": "v"})
	running := startController(t)
	waitForReplicasIn(t, src, target)
	waitForSynced(t, src, "1/1")
	running.Stop()

	// As the former version wrote it: the same replica, without the label.
	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = target, "app"
	must(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(replica), replica))
	delete(replica.Labels, v1alpha1.ContentHashLabel)
	must(t, k8s.Update(context.Background(), replica, client.FieldOwner(v1alpha1.FieldManager)))

	restarted := startController(t)
	synced, err := getConfigMap(srcNS, "app")
	must(t, err)
	assertNoWrites(t, restarted, synced, synced.ResourceVersion, 5*time.Second)
	if n := restarted.Writes(); n != 0 {
		t.Errorf("%d writes since the restart:\n%s", n, restarted.LastWrites())
	}
	if r, err := getConfigMap(target, "app"); err != nil || r.ResourceVersion != replica.ResourceVersion {
		t.Errorf("the replica was written after the restart: %v", err)
	}

	update(t, src, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v2"} })
	eventually(t, timeout, "new content, with its content-hash label", func() error {
		r, err := getConfigMap(target, "app")
		if err != nil {
			return err
		}
		if r.Labels[v1alpha1.ContentHashLabel] == "" {
			return errorf("no content-hash label: %v", r.Labels)
		}
		return expectEqualContent(r, map[string]string{"k": "v2"}, nil, nil, nil)
	})
}

// Replicas that only cmsync wrote are compared from the replica cache's metadata: a
// change of the source reads no replica from the API server. (At the fan-out a pass may
// meet a replica its cache has not seen yet: that create ends in AlreadyExists and one
// read, by design.)
func TestSourceChangesReadNoReplica(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "reads", 5)
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, targets...)
	waitForSynced(t, src, "5/5")
	time.Sleep(time.Second) // the passes the fan-out's own events raise
	readsBefore, sourceReadsBefore := len(running.ObjectReadsIn(targets...)), len(running.ObjectReadsIn(srcNS))
	update(t, src, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v2", "new": "n"} })
	for _, ns := range targets {
		waitForContent(t, ns, "app", map[string]string{"k": "v2", "new": "n"}, nil)
	}
	update(t, src, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"k": "v3"} })
	for _, ns := range targets {
		waitForContent(t, ns, "app", map[string]string{"k": "v3"}, nil)
	}
	waitForSynced(t, src, "5/5")
	// Other tests' replicas may be read (one whose content someone else wrote is read
	// on every pass); this source's never.
	if reads := running.ObjectReadsIn(targets...)[readsBefore:]; len(reads) != 0 {
		t.Errorf("reads of single objects %v; the replica cache's metadata should have told", reads)
	}
	// The source is read whole once for each of its two changes: the manager's cache
	// holds its metadata only, and the passes that cmsync's own status writes queue
	// read nothing (the held source follows those writes).
	if reads := running.ObjectReadsIn(srcNS)[sourceReadsBefore:]; len(reads) != 2 {
		t.Errorf("%d reads of the source for two changes of it: %v", len(reads), reads)
	}
}
