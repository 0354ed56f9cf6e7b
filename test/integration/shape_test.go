package integration

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// replicasNamed lists the namespaces holding a ConfigMap named name that is a replica
// of src made for its annotations.
func replicasNamed(t *testing.T, src *corev1.ConfigMap, name string) []string {
	t.Helper()
	var list corev1.ConfigMapList
	must(t, k8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	var namespaces []string
	for _, cm := range list.Items {
		if cm.Name == name && cm.Annotations[v1alpha1.SourceAnnotation] == src.Namespace+"/"+src.Name && len(cm.OwnerReferences) == 0 {
			namespaces = append(namespaces, cm.Namespace)
		}
	}
	return namespaces
}

// waitForReplicasNamed waits until the replicas of src named name are in exactly the
// namespaces given.
func waitForReplicasNamed(t *testing.T, src *corev1.ConfigMap, name string, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas "+name+" of "+src.Name, func() error {
		if got := replicasNamed(t, src, name); !sameSet(got, want) {
			return fmt.Errorf("replicas named %s in %v, want %v", name, got, want)
		}
		return nil
	})
}

// waitForContent waits until the ConfigMap namespace/name has exactly this data and
// binaryData.
func waitForContent(t *testing.T, namespace, name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	t.Helper()
	var got *corev1.ConfigMap
	eventually(t, timeout, "content of "+namespace+"/"+name, func() error {
		cm, err := getConfigMap(namespace, name)
		if err != nil {
			return err
		}
		if len(cm.Data)+len(data) > 0 && !reflect.DeepEqual(cm.Data, data) || len(cm.BinaryData)+len(binary) > 0 && !reflect.DeepEqual(cm.BinaryData, binary) {
			return fmt.Errorf("data %v binaryData %v, want %v %v", cm.Data, cm.BinaryData, data, binary)
		}
		got = cm
		return nil
	})
	return got
}

// target-name: the replicas take it; changing it moves them (new ones created, old
// ones deleted); removing it brings the source's own name back. An unmanaged ConfigMap
// of the source's name in a target namespace is never touched on the way.
func TestTargetNameMovesReplicas(t *testing.T) {
	startController(t)
	platform := newNamespace(t, "platform", nil)
	a, b := newNamespace(t, "team", nil), newNamespace(t, "team", nil)
	theirs := plainConfigMap(t, b, "ca-bundle", map[string]string{"theirs": "1"})
	src := newSource(t, platform, "ca-bundle", map[string]string{
		v1alpha1.TargetNamespacesAnnotation: a + "," + b,
		v1alpha1.TargetNameAnnotation:       "platform-ca",
	}, map[string]string{"ca.crt": "CA"})
	waitForReplicasNamed(t, src, "platform-ca", a, b)
	waitForSynced(t, src, "2/2")
	waitForReplicasNamed(t, src, "ca-bundle")

	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNameAnnotation] = "shared-ca" })
	waitForReplicasNamed(t, src, "shared-ca", a, b)
	waitForReplicasNamed(t, src, "platform-ca")
	waitForSynced(t, src, "2/2")

	// Back to the source's name: b holds someone else's ca-bundle, which stays theirs.
	update(t, src, func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.TargetNameAnnotation) })
	waitForReplicasNamed(t, src, "ca-bundle", a)
	waitForReplicasNamed(t, src, "shared-ca")
	waitForStatus(t, src, v1alpha1.StatusDegraded)
	waitForEvent(t, src, v1alpha1.ReasonConflict, "conflict in "+b)
	got, err := getConfigMap(b, "ca-bundle")
	must(t, err)
	if got.ResourceVersion != theirs.ResourceVersion || got.Data["theirs"] != "1" {
		t.Errorf("the unmanaged ConfigMap was modified: %+v", got)
	}
}

// A change of target-name or keys while the controller is down is carried out when it
// comes back: old-name replicas deleted, new ones created with only the kept keys.
func TestShapeChangedWhileStopped(t *testing.T) {
	running := startController(t)
	platform := newNamespace(t, "platform", nil)
	a, b := newNamespace(t, "team", nil), newNamespace(t, "team", nil)
	src := newSource(t, platform, "settings", map[string]string{
		v1alpha1.TargetNamespacesAnnotation: a + "," + b,
		v1alpha1.TargetNameAnnotation:       "old-name",
	}, map[string]string{"log-level": "info", "db-url": "postgres://db"})
	waitForReplicasNamed(t, src, "old-name", a, b)
	waitForSynced(t, src, "2/2")

	running.Stop()
	update(t, src, func(cm *corev1.ConfigMap) {
		cm.Annotations[v1alpha1.TargetNameAnnotation] = "new-name"
		cm.Annotations[v1alpha1.KeysAnnotation] = "log-*"
	})
	startController(t)
	waitForReplicasNamed(t, src, "new-name", a, b)
	waitForReplicasNamed(t, src, "old-name")
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "new-name", map[string]string{"log-level": "info"}, nil)
	}
	waitForSynced(t, src, "2/2")
}

// A malformed target-name or keys makes the source Invalid, with the annotation named
// in the message and an Event, and changes nothing: the replicas stay as they were.
func TestInvalidShapeChangesNothing(t *testing.T) {
	running := startController(t)
	platform := newNamespace(t, "platform", nil)
	a := newNamespace(t, "team", nil)
	src := newSource(t, platform, "settings", map[string]string{
		v1alpha1.TargetNamespacesAnnotation: a,
		v1alpha1.KeysAnnotation:             "log-*",
	}, map[string]string{"log-level": "info", "db-url": "postgres://db"})
	before := waitForContent(t, a, "settings", map[string]string{"log-level": "info"}, nil)
	waitForSynced(t, src, "1/1")

	for _, tc := range []struct{ key, value, message string }{
		{v1alpha1.TargetNameAnnotation, "Platform_CA", `invalid target-name "Platform_CA": not a valid name`},
		{v1alpha1.TargetNameAnnotation, "", `invalid target-name "": the name is empty`},
		{v1alpha1.KeysAnnotation, "log-[", `invalid keys "log-[": entry "log-[": malformed glob`},
		{v1alpha1.KeysAnnotation, "a/b", `invalid keys "a/b": entry "a/b": character '/'`},
		{v1alpha1.KeysAnnotation, "log-*,", `invalid keys "log-*,": entry "": empty key`},
	} {
		update(t, src, func(cm *corev1.ConfigMap) {
			cm.Annotations[tc.key] = tc.value
			cm.Data["db-url"] = "postgres://other-" + randomSuffix() // a content change must not reach the replica either
		})
		invalid := waitForStatus(t, src, v1alpha1.StatusInvalid)
		if msg := invalid.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, tc.message) {
			t.Errorf("message %q, want it to contain %q", msg, tc.message)
		}
		if invalid.Annotations[v1alpha1.SyncedAnnotation] != "1/1" {
			t.Errorf("synced %q, want the last pass's 1/1 kept", invalid.Annotations[v1alpha1.SyncedAnnotation])
		}
		waitForEvent(t, src, v1alpha1.ReasonInvalid, tc.message)
		if n := notSynced(t, running.Metrics, "ConfigMap", v1alpha1.ReasonInvalid); n < 1 {
			t.Errorf("cmsync_sources_not_synced{reason=Invalid} = %v while a source is Invalid", n)
		}
		consistently(t, time.Second, "the replica stays as it was", func() error {
			got, err := getConfigMap(a, "settings")
			if err != nil {
				return err
			}
			if got.ResourceVersion != before.ResourceVersion {
				return errorf("replica changed: %v", got.Data)
			}
			return nil
		})
		// Mend it, so the next case starts from a valid source.
		update(t, src, func(cm *corev1.ConfigMap) {
			delete(cm.Annotations, v1alpha1.TargetNameAnnotation)
			cm.Annotations[v1alpha1.KeysAnnotation] = "log-*"
		})
		waitForSynced(t, src, "1/1")
	}
}

// Two sources renamed onto the same name in one namespace: the first keeps it, the
// other reports the conflict and never overwrites it; when the first lets go, the
// other takes the name. A renamed replica never overwrites an unmanaged object either.
func TestRenamedReplicaConflicts(t *testing.T) {
	running := startController(t)
	platform := newNamespace(t, "platform", nil)
	shared := newNamespace(t, "team", nil)
	first := newSource(t, platform, "first", map[string]string{
		v1alpha1.TargetNamespacesAnnotation: shared, v1alpha1.TargetNameAnnotation: "common",
	}, map[string]string{"from": "first"})
	waitForSynced(t, first, "1/1")
	second := newSource(t, platform, "second", map[string]string{
		v1alpha1.TargetNamespacesAnnotation: shared, v1alpha1.TargetNameAnnotation: "common",
	}, map[string]string{"from": "second"})
	degraded := waitForStatus(t, second, v1alpha1.StatusDegraded)
	want := fmt.Sprintf("conflict in %s: a replica of %s/first made for its annotations exists", shared, platform)
	if msg := degraded.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, want) {
		t.Errorf("message %q, want %q", msg, want)
	}
	if degraded.Annotations[v1alpha1.SyncedAnnotation] != "0/1" {
		t.Errorf("synced %q, want 0/1", degraded.Annotations[v1alpha1.SyncedAnnotation])
	}
	waitForEvent(t, second, v1alpha1.ReasonConflict, want)
	if n := notSynced(t, running.Metrics, "ConfigMap", v1alpha1.ReasonConflict); n < 1 {
		t.Errorf("cmsync_sources_not_synced{reason=Conflict} = %v while a source is in conflict", n)
	}
	consistently(t, 2*time.Second, "the first keeps the name", func() error {
		cm, err := getConfigMap(shared, "common")
		if err != nil {
			return err
		}
		if cm.Data["from"] != "first" || cm.Annotations[v1alpha1.SourceAnnotation] != platform+"/first" {
			return errorf("common now holds %v %v", cm.Data, cm.Annotations)
		}
		return nil
	})

	// The first moves away: its replica is deleted, and the second takes the name.
	update(t, first, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNameAnnotation] = "first-only" })
	waitForReplicasNamed(t, first, "first-only", shared)
	waitForReplicasNamed(t, second, "common", shared)
	waitForContent(t, shared, "common", map[string]string{"from": "second"}, nil)
	waitForSynced(t, second, "1/1")
	waitForSynced(t, first, "1/1")

	// A renamed replica meets an unmanaged ConfigMap of its name.
	theirs := plainConfigMap(t, shared, "taken", map[string]string{"theirs": "1"})
	update(t, second, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNameAnnotation] = "taken" })
	degraded = waitForStatus(t, second, v1alpha1.StatusDegraded)
	if msg := degraded.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "a ConfigMap not managed by cmsync exists") {
		t.Errorf("message %q", msg)
	}
	// The old-name replica is still deleted: it is no longer wanted under that name.
	waitForReplicasNamed(t, second, "common")
	got, err := getConfigMap(shared, "taken")
	must(t, err)
	if got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the unmanaged ConfigMap was modified: %+v", got)
	}
}

// keys: only matching keys of data and binaryData are copied; a key someone adds to a
// replica is removed; narrowing removes keys, widening adds them; a list that matches
// nothing gives empty replicas and says so; and once in sync, nothing is written.
func TestKeysFilterNarrowedAndWidened(t *testing.T) {
	running := startController(t)
	platform := newNamespace(t, "platform", nil)
	a, b := newNamespace(t, "team", nil), newNamespace(t, "team", nil)
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: platform, Name: "app",
			Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{
				v1alpha1.TargetNamespacesAnnotation: a + "," + b,
				v1alpha1.KeysAnnotation:             "log-*, *.png",
			},
		},
		Data:       map[string]string{"log-level": "debug", "log-format": "json", "db-url": "postgres://db", "feature.a": "on"},
		BinaryData: map[string][]byte{"logo.png": {1, 2}, "blob.bin": {3}},
	}
	must(t, k8s.Create(context.Background(), src))
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "app", map[string]string{"log-level": "debug", "log-format": "json"}, map[string][]byte{"logo.png": {1, 2}})
	}
	waitForSynced(t, src, "2/2")

	// Someone adds a filtered-out key and a key of their own to a replica.
	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = a, "app"
	update(t, replica, func(cm *corev1.ConfigMap) {
		cm.Data["db-url"] = "postgres://leaked"
		cm.Data["added"] = "by hand"
		cm.BinaryData["blob.bin"] = []byte{3}
	})
	waitForContent(t, a, "app", map[string]string{"log-level": "debug", "log-format": "json"}, map[string][]byte{"logo.png": {1, 2}})

	// Narrowed: binaryData keys go.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.KeysAnnotation] = "log-level" })
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "app", map[string]string{"log-level": "debug"}, nil)
	}
	// Widened to everything but one key.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.KeysAnnotation] = "!db-url" })
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "app", map[string]string{"log-level": "debug", "log-format": "json", "feature.a": "on"},
			map[string][]byte{"logo.png": {1, 2}, "blob.bin": {3}})
	}
	synced := waitForSynced(t, src, "2/2")
	if msg := synced.Annotations[v1alpha1.MessageAnnotation]; msg != "in sync in 2 namespaces" {
		t.Errorf("message %q", msg)
	}
	time.Sleep(2 * time.Second) // let the passes triggered by our own writes finish
	assertNoWrites(t, running, src, waitForSynced(t, src, "2/2").ResourceVersion, 3*time.Second)

	// A list that matches no key: replicas with no data, valid, and said.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.KeysAnnotation] = "nothing-*" })
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "app", nil, nil)
	}
	eventually(t, timeout, "the message says no key matched", func() error {
		cm, err := getConfigMap(platform, "app")
		if err != nil {
			return err
		}
		want := `in sync in 2 namespaces; keys "nothing-*" match no key of the source: the replicas have no data`
		if cm.Annotations[v1alpha1.StatusAnnotation] != v1alpha1.StatusSynced || cm.Annotations[v1alpha1.MessageAnnotation] != want {
			return errorf("status %q message %q, want Synced %q", cm.Annotations[v1alpha1.StatusAnnotation], cm.Annotations[v1alpha1.MessageAnnotation], want)
		}
		return nil
	})

	// Removing the annotation copies every key again.
	update(t, src, func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.KeysAnnotation) })
	waitForContent(t, b, "app", src.Data, src.BinaryData)
}

// An immutable source's replicas are recreated when the kept keys change: an immutable
// replica cannot change in place.
func TestKeysChangeRecreatesImmutableReplicas(t *testing.T) {
	startController(t)
	platform := newNamespace(t, "platform", nil)
	a := newNamespace(t, "team", nil)
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: platform, Name: "frozen",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: a, v1alpha1.KeysAnnotation: "a"},
		},
		Data:      map[string]string{"a": "1", "b": "2"},
		Immutable: ptr(true),
	}
	must(t, k8s.Create(context.Background(), src))
	first := waitForContent(t, a, "frozen", map[string]string{"a": "1"}, nil)
	if first.Immutable == nil || !*first.Immutable {
		t.Fatalf("replica not immutable")
	}
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.KeysAnnotation] = "a,b" })
	second := waitForContent(t, a, "frozen", map[string]string{"a": "1", "b": "2"}, nil)
	if second.UID == first.UID || second.Immutable == nil || !*second.Immutable {
		t.Errorf("the immutable replica was not recreated (UID %s -> %s)", first.UID, second.UID)
	}
	waitForSynced(t, src, "1/1")
}

// A cert-manager style kubernetes.io/tls Secret copied as only its CA, under a name of
// its own: the replicas hold ca.crt alone, as an Opaque Secret (a tls Secret must hold
// tls.crt and tls.key), and the status says so. The key never reaches a replica.
func TestSecretFilteredToItsCA(t *testing.T) {
	startController(t, withSecrets())
	platform := newNamespace(t, "platform", nil)
	a, b := newNamespace(t, "team", nil), newNamespace(t, "team", nil)
	src := newSecretSource(t, platform, "ca-bundle", corev1.SecretTypeTLS, map[string]string{
		v1alpha1.TargetNamespacesAnnotation: a + "," + b,
		v1alpha1.TargetNameAnnotation:       "platform-ca",
		v1alpha1.KeysAnnotation:             "ca.crt",
	}, map[string][]byte{"ca.crt": []byte("CA-1"), "tls.crt": []byte("CERT-1"), "tls.key": []byte("KEY-1")})
	waitForShapedSecrets(t, src, "platform-ca", corev1.SecretTypeOpaque, map[string][]byte{"ca.crt": []byte("CA-1")}, a, b)
	status := waitForSourceStatus(t, src, v1alpha1.StatusSynced, "2/2")
	if msg := status.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(
		msg,
		"the replicas are of type Opaque: type kubernetes.io/tls needs tls.crt and tls.key",
	) {
		t.Errorf("message %q", msg)
	}

	// Renewal reaches the CA in the replicas.
	update(t, src, func(s *corev1.Secret) { s.Data["ca.crt"], s.Data["tls.key"] = []byte("CA-2"), []byte("KEY-2") })
	waitForShapedSecrets(t, src, "platform-ca", corev1.SecretTypeOpaque, map[string][]byte{"ca.crt": []byte("CA-2")}, a, b)

	// Everything but the CA: a valid tls Secret, so the type is kept, and the replicas
	// of the other type are recreated.
	update(t, src, func(s *corev1.Secret) { s.Annotations[v1alpha1.KeysAnnotation] = "!ca.crt" })
	waitForShapedSecrets(t, src, "platform-ca", corev1.SecretTypeTLS,
		map[string][]byte{"tls.crt": []byte("CERT-1"), "tls.key": []byte("KEY-2")}, a, b)
	waitForSourceStatus(t, src, v1alpha1.StatusSynced, "2/2")
}

// waitForShapedSecrets waits until src has replicas named name in exactly the
// namespaces want, of type typ and with exactly data.
func waitForShapedSecrets(t *testing.T, src *corev1.Secret, name string, typ corev1.SecretType, data map[string][]byte, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas of Secret "+src.Name, func() error {
		var got []string
		for ns, r := range secretReplicas(t, src) {
			if r.Name != name || r.Type != typ || !sameData(r.Data, data) {
				return fmt.Errorf("replica %s/%s of type %s with keys %v", ns, r.Name, r.Type, len(r.Data))
			}
			got = append(got, ns)
		}
		if !sameSet(got, want) {
			return fmt.Errorf("replicas in %v, want %v", got, want)
		}
		return nil
	})
}

// ConfigMapSync's spec.targetName and spec.keys: the schema refuses only what is over
// its bounds or repeated (a bad name or glob is reported Invalid, as the annotations'
// are: TestConfigMapSyncWithABadShapeIsReportedInvalid); a malformed glob makes it
// Ready=False Invalid and changes nothing; a new targetName moves the replicas; deleting
// the ConfigMapSync deletes the renamed replicas.
func TestConfigMapSyncTargetNameAndKeys(t *testing.T) {
	startController(t)
	platform := newNamespace(t, "platform", nil)
	a, b := newNamespace(t, "team", nil), newNamespace(t, "team", nil)
	plainConfigMap(t, platform, "settings", map[string]string{"log-level": "debug", "db-url": "postgres://db"})

	for _, bad := range []v1alpha1.ConfigMapSyncSpec{
		{ReplicaSpec: v1alpha1.ReplicaSpec{TargetName: strings.Repeat("a", 254)}},
		{ReplicaSpec: v1alpha1.ReplicaSpec{Keys: []string{strings.Repeat("k", 255)}}},
		{ReplicaSpec: v1alpha1.ReplicaSpec{Keys: []string{"a", "a"}}},
	} {
		bad.SourceNamespace, bad.ConfigMapName, bad.DestinationNamespace = platform, "settings", a
		sync := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "bad-" + randomSuffix()}, Spec: bad}
		if err := k8s.Create(context.Background(), sync); !apierrors.IsInvalid(err) {
			t.Errorf("spec %+v: got %v, want the schema to refuse it", bad, err)
		}
	}

	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: platform,
			ConfigMapName:   "settings",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{a, b}, TargetName: "app-settings", Keys: []string{"log-*"}},
		},
	)
	waitForSyncReplicasIn(t, sync, a, b)
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "app-settings", map[string]string{"log-level": "debug"}, nil)
	}
	waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)

	// A malformed glob: Invalid, nothing changed.
	before, err := getConfigMap(a, "app-settings")
	must(t, err)
	update(t, sync, func(s *v1alpha1.ConfigMapSync) { s.Spec.Keys = []string{"log-[a"}; s.Spec.TargetName = "elsewhere" })
	invalid := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
	if c := meta.FindStatusCondition(invalid.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "spec.keys[0]: malformed glob") {
		t.Errorf("message %q", c.Message)
	}
	consistently(t, time.Second, "nothing changed", func() error {
		got, err := getConfigMap(a, "app-settings")
		if err != nil {
			return err
		}
		if got.ResourceVersion != before.ResourceVersion {
			return errorf("replica changed")
		}
		if _, err := getConfigMap(a, "elsewhere"); !apierrors.IsNotFound(err) {
			return errorf("a replica under the new name: %v", err)
		}
		return nil
	})

	// Valid again, under the new name: the old-name replicas go.
	update(t, sync, func(s *v1alpha1.ConfigMapSync) { s.Spec.Keys = []string{"!log-*"} })
	for _, ns := range []string{a, b} {
		waitForContent(t, ns, "elsewhere", map[string]string{"db-url": "postgres://db"}, nil)
		eventually(t, timeout, "old-name replica deleted", func() error {
			if _, err := getConfigMap(ns, "app-settings"); !apierrors.IsNotFound(err) {
				return errorf("app-settings in %s: %v", ns, err)
			}
			return nil
		})
	}
	waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)

	must(t, k8s.Delete(context.Background(), sync))
	waitForSyncReplicasIn(t, sync)
	for _, ns := range []string{a, b} {
		if _, err := getConfigMap(ns, "elsewhere"); !apierrors.IsNotFound(err) {
			t.Errorf("renamed replica in %s left after the ConfigMapSync was deleted: %v", ns, err)
		}
	}
}
