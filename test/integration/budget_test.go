package integration

import (
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// A source whose replicas would write more than --max-replicated-bytes across its
// targets is Invalid before any write, with its size, its target count and the budget
// in the message; the replicas it already has are kept. The ConfigMapSync form alike.
func TestWriteBudget(t *testing.T) {
	policy := defaultPolicy()
	policy.MaxReplicatedBytes = 10 << 10
	startController(t, withPolicy(policy))
	srcNS := newNamespace(t, "src", nil)
	a, b, c := newNamespace(t, "dst", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	data := map[string]string{"k": strings.Repeat("x", 4<<10-1)} // 4 KiB with its key
	src := newSource(t, srcNS, "big", map[string]string{v1alpha1.TargetNamespacesAnnotation: a + "," + b}, data)
	waitForReplicasIn(t, src, a, b)
	waitForSynced(t, src, "2/2")
	before, err := getConfigMap(a, "big")
	must(t, err)

	update(t, src, func(cm *corev1.ConfigMap) {
		cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = a + "," + b + "," + c
	})
	invalid := waitForStatus(t, src, v1alpha1.StatusInvalid)
	want := regexp.MustCompile(
		`^the replicas would write 12\.\d+Ki \(4\.\d+Ki, data and metadata, in each of 3 target namespaces\), over the controller's --max-replicated-bytes of 10Ki`,
	)
	if msg := invalid.Annotations[v1alpha1.MessageAnnotation]; !want.MatchString(msg) {
		t.Errorf("message %q, want it to match %q", msg, want)
	}
	waitForEvent(t, src, v1alpha1.ReasonInvalid, "--max-replicated-bytes")
	consistently(t, 2*time.Second, "existing replicas kept, no new one", func() error {
		if got := replicaNamespaces(t, src); !sameSet(got, []string{a, b}) {
			return errorf("replicas in %v", got)
		}
		now, err := getConfigMap(a, "big")
		if err != nil || now.ResourceVersion != before.ResourceVersion {
			return errorf("replica in %s changed: %v", a, err)
		}
		return nil
	})

	plainConfigMap(t, srcNS, "big-plain", data)
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "big-plain",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{a, b, c}},
		},
	)
	got := waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonInvalid)
	if ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(ready.Message, "--max-replicated-bytes of 10Ki") {
		t.Errorf("Ready message %q", ready.Message)
	}
	if n := len(replicasOfSync(t, sync)); n != 0 {
		t.Errorf("%d replicas written for a ConfigMapSync over budget", n)
	}
}

// The budget counts what a replica holds, not only its data: a source without data
// whose copied annotation would write past the budget is Invalid, and writes nothing.
func TestWriteBudgetCountsCopiedMetadata(t *testing.T) {
	policy := defaultPolicy()
	policy.MaxReplicatedBytes = 100 << 10
	startController(t, withPolicy(policy))
	srcNS := newNamespace(t, "src", nil)
	group, targets := newGroup(t, "meta", 4)
	src := newSource(t, srcNS, "padded", map[string]string{
		v1alpha1.TargetSelectorAnnotation: "group=" + group,
		"padding":                         strings.Repeat("x", 30<<10),
	}, nil)
	invalid := waitForStatus(t, src, v1alpha1.StatusInvalid)
	if msg := invalid.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "in each of 4 target namespaces") {
		t.Errorf("message %q", msg)
	}
	consistently(t, 2*time.Second, "no replica written", func() error {
		if got := replicaNamespaces(t, src); len(got) != 0 {
			return errorf("replicas in %v", got)
		}
		return nil
	})
	// Stripping the annotation brings the source under its budget.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.StripMetadataAnnotation] = "padding" })
	waitForReplicasIn(t, src, targets...)
	waitForSynced(t, src, "4/4")
}
