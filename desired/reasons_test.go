package desired

import (
	"errors"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// TestReasonsAreTheTable checks both ways that the functions choosing a reason give, at
// each place, exactly the reasons the table (Reasons) declares there: every outcome of
// a pass (Summarize) and every problem an owner can have, through EventReason, Problem,
// SetSyncStatus and SetSyncProblem.
func TestReasonsAreTheTable(t *testing.T) {
	boom := errors.New("boom")
	passes := map[string]Summary{
		"no targets": Summarize(nil, 0, nil, ""),
		"in sync":    Summarize([]Result{{Namespace: "a", Outcome: Created}, {Namespace: "b", Outcome: InSync}}, 1, nil, ""),
		"conflict":   Summarize([]Result{{Namespace: "a", Outcome: Conflict, Err: boom}}, 0, nil, ""),
		"failure":    Summarize([]Result{{Namespace: "a", Outcome: Failed, Err: boom}}, 0, nil, ""),
		"both": Summarize([]Result{
			{Namespace: "a", Outcome: Conflict, Err: boom}, {Namespace: "b", Outcome: Failed, Err: boom},
		}, 0, nil, ""),
		"cleanup failed": Summarize([]Result{{Namespace: "a", Outcome: InSync}}, 0, boom, ""),
	}
	// The annotation form's only problem is Invalid input; the explicit form's are all.
	annotationProblems := []*Problem{InvalidInput(boom)}
	syncProblems := []*Problem{InvalidInput(boom), SourceNotFound(boom), SourceUnreadable(boom)}

	gives := map[Given]map[string]bool{}
	give := func(where Given, reason string) {
		if reason == "" {
			return
		}
		if gives[where] == nil {
			gives[where] = map[string]bool{}
		}
		gives[where][reason] = true
	}
	for _, pass := range passes {
		give(SourceEvent, pass.EventReason())
		give(SyncEvent, pass.EventReason())
		give(NotSyncedMetric, pass.Problem())
		var status v1alpha1.SyncStatus
		SetSyncStatus(&status, 1, "ns/src", pass, false, metav1.Now())
		give(ReadyCondition, meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady).Reason)
		for _, failed := range status.FailedNamespaces {
			give(FailedNamespace, failed.Reason)
		}
	}
	for _, p := range annotationProblems {
		give(SourceEvent, p.Reason)
		give(NotSyncedMetric, p.Reason)
	}
	for _, p := range syncProblems {
		give(SyncEvent, p.Reason)
		give(NotSyncedMetric, p.Reason)
		var status v1alpha1.SyncStatus
		SetSyncProblem(&status, 1, "ns/src", p.Reason, p, 0, 0)
		give(ReadyCondition, meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady).Reason)
	}
	for where, name := range map[Given]string{
		SourceEvent: "source Event", SyncEvent: "explicit Event", ReadyCondition: "Ready",
		FailedNamespace: "failedNamespaces", NotSyncedMetric: "cmsync_sources_not_synced",
	} {
		var got []string
		for reason := range gives[where] {
			got = append(got, reason)
		}
		want := ReasonsGiven(where)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the code gives %v; Reasons declares %v", name, got, want)
		}
	}
}

// TestProblemRetried: only a source that could not be read is retried with backoff.
func TestProblemRetried(t *testing.T) {
	for _, tc := range []struct {
		p    *Problem
		want bool
	}{
		{InvalidInput(errors.New("x")), false},
		{SourceNotFound(errors.New("x")), false},
		{SourceUnreadable(errors.New("x")), true},
	} {
		if got := tc.p.Retried(); got != tc.want {
			t.Errorf("%s: Retried() = %v, want %v", tc.p.Reason, got, tc.want)
		}
	}
}
