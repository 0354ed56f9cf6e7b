package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Two sources of the same name in different namespaces target the same namespace: the
// first keeps it; the second reports the conflict, naming the first; neither flaps.
func TestSameNameFromTwoNamespaces(t *testing.T) {
	running := startController(t)
	nsA, nsB, target := newNamespace(t, "a", nil), newNamespace(t, "b", nil), newNamespace(t, "dst", nil)
	first := newSource(t, nsA, "settings", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"from": "a"})
	waitForReplicasIn(t, first, target)
	second := newSource(t, nsB, "settings", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"from": "b"})
	got := waitForStatus(t, second, v1alpha1.StatusDegraded)
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "conflict in "+target) || !strings.Contains(msg, nsA+"/settings") {
		t.Errorf("message %q does not name the namespace and the other source", msg)
	}
	waitForSynced(t, first, "1/1")
	time.Sleep(2 * time.Second)
	before := running.Writes()
	consistently(t, 4*time.Second, "no flapping", func() error {
		r, err := getConfigMap(target, "settings")
		if err != nil || r.Data["from"] != "a" {
			return errorf("replica %v %v", r.Data, err)
		}
		if w := running.Writes() - before; w != 0 {
			return errorf("%d writes", w)
		}
		return nil
	})
	// The first source goes: the second takes the namespace.
	must(t, k8s.Delete(context.Background(), first))
	waitForReplicasIn(t, second, target)
	waitForSynced(t, second, "1/1")
}

// A ConfigMapSync naming namespaces that do not exist: a missing source namespace is
// SourceNotFound; a missing destination is no target until it is created.
func TestConfigMapSyncNamingMissingNamespaces(t *testing.T) {
	startController(t)
	missing := "missing-" + randomSuffix()
	noSource := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: missing, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: "default"}},
	)
	waitForReady(t, noSource, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound)

	srcNS := newNamespace(t, "src", nil)
	plainConfigMap(t, srcNS, "x", map[string]string{"k": "v"})
	later := "later-" + randomSuffix()
	sync := newSync(t, v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "x", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: later}})
	got := waitForReady(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced)
	if got.Status.Synced != "0/0" {
		t.Errorf("synced %q before the destination exists", got.Status.Synced)
	}
	newNamespaceNamed(t, later)
	waitForSyncReplicasIn(t, sync, later)
}
