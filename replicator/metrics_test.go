package replicator

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// A source moves between reasons and back to in sync; each pass replaces its counts.
func TestSourcesNotSyncedFollowEachSource(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry(), "ConfigMap")
	a := desired.AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "p", Name: "a"})
	b := desired.AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "p", Name: "b"})
	count := func(reason string) float64 {
		return testutil.ToFloat64(m.notSynced.WithLabelValues("ConfigMap", reason))
	}
	expect := func(step string, conflict, failed, invalid, sources float64) {
		t.Helper()
		got := []float64{count(v1alpha1.ReasonConflict), count(v1alpha1.ReasonFailed), count(v1alpha1.ReasonInvalid),
			testutil.ToFloat64(m.sources.WithLabelValues("ConfigMap"))}
		if want := []float64{conflict, failed, invalid, sources}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
			t.Errorf("%s: conflict, failed, invalid, sources = %v, want %v", step, got, want)
		}
	}
	degraded := desired.Summary{State: v1alpha1.StatusDegraded, Targets: 2, Synced: 1, Conflicts: 1}
	m.RecordSource(a, degraded)
	m.RecordSource(b, degraded)
	expect("two in conflict", 2, 0, 0, 2)
	m.RecordProblem(a, v1alpha1.ReasonInvalid)
	expect("one turned Invalid", 1, 0, 1, 2)
	m.RecordSource(a, desired.Summary{State: v1alpha1.StatusSynced, Targets: 2, Synced: 2})
	expect("one in sync", 1, 0, 0, 2)
	m.ForgetSource(b)
	expect("the other gone", 0, 0, 0, 1)
}

// An ObjectSync that names another kind moves its counts to that kind's series, and a
// kind first met (one an ObjectSync names without it being enabled) gets series of its
// own.
func TestAnObjectSyncsCountsFollowItsKind(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry(), "ConfigMap", "NetworkPolicy")
	sync := &v1alpha1.ObjectSync{Spec: v1alpha1.ObjectSyncSpec{Source: v1alpha1.ObjectSource{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}}}
	sync.UID = "uid"
	m.RecordSource(desired.SyncOwner(sync), desired.Summary{State: v1alpha1.StatusSynced, Targets: 3, Synced: 3})
	sync.Spec.Source = v1alpha1.ObjectSource{APIVersion: "v1", Kind: "LimitRange"}
	m.RecordProblem(desired.SyncOwner(sync), v1alpha1.ReasonInvalid)
	for kind, want := range map[string][2]float64{"NetworkPolicy": {0, 0}, "LimitRange": {1, 1}} {
		got := [2]float64{testutil.ToFloat64(m.sources.WithLabelValues(kind)), testutil.ToFloat64(m.notSynced.WithLabelValues(kind, v1alpha1.ReasonInvalid))}
		if got != want {
			t.Errorf("%s: sources, invalid = %v, want %v", kind, got, want)
		}
	}
	if synced := testutil.ToFloat64(m.replicas.WithLabelValues("NetworkPolicy", "synced")); synced != 0 {
		t.Errorf("NetworkPolicy replicas synced = %v, want 0", synced)
	}
	m.ForgetSource(desired.SyncOwner(sync))
	if n := testutil.ToFloat64(m.sources.WithLabelValues("LimitRange")); n != 0 {
		t.Errorf("LimitRange sources after the ObjectSync was deleted = %v", n)
	}
}
