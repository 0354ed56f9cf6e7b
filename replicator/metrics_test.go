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
