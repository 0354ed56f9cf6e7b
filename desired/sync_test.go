package desired

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func TestParseSyncTargets(t *testing.T) {
	namespaces := []Namespace{
		{Name: "platform"}, {Name: "team-a"}, {Name: "team-b", Labels: map[string]string{"env": "prod"}},
		{Name: "team-legacy", Labels: map[string]string{"env": "prod"}}, {Name: "web", Labels: map[string]string{"env": "prod"}},
	}
	spec := func(mutate func(*v1alpha1.ConfigMapSyncSpec)) v1alpha1.ConfigMapSyncSpec {
		s := v1alpha1.ConfigMapSyncSpec{SourceNamespace: "platform", ConfigMapName: "ca"}
		mutate(&s)
		return s
	}
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	tests := []struct {
		name    string
		spec    v1alpha1.ConfigMapSyncSpec
		want    []string
		wantErr string
	}{
		{name: "tutorial form", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) { s.DestinationNamespace = "team-a" }), want: []string{"team-a"}},
		{name: "union of all three minus exclusions", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) {
			s.DestinationNamespace = "team-a"
			s.DestinationNamespaces = []string{"team-*", "!team-legacy"}
			s.NamespaceSelector = prod
		}), want: []string{"team-a", "team-b", "web"}},
		{name: "empty selector selects all", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) { s.NamespaceSelector = &metav1.LabelSelector{} }),
			want: []string{"team-a", "team-b", "team-legacy", "web"}},
		{name: "nothing", spec: spec(func(*v1alpha1.ConfigMapSyncSpec) {}), wantErr: "no targets"},
		{name: "only exclusions", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) { s.DestinationNamespaces = []string{"!a"} }), wantErr: "no targets"},
		{name: "malformed glob", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) { s.DestinationNamespaces = []string{"ok", "team-[a"} }),
			wantErr: `spec.destinationNamespaces[1] "team-[a": malformed glob`},
		{name: "bad destinationNamespace", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) { s.DestinationNamespace = "Team" }),
			wantErr: "spec.destinationNamespace"},
		{name: "bad operator", spec: spec(func(s *v1alpha1.ConfigMapSyncSpec) {
			s.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
		}), wantErr: "spec.namespaceSelector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			targets, err := ParseSyncTargets(tt.spec.SyncSpec())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := TargetNamespaces(targets, Unbound("platform"), namespaces, Policy{}).Namespaces; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSetSyncStatus(t *testing.T) {
	now := metav1.Now()
	var status v1alpha1.SyncStatus
	results := []Result{
		{Namespace: "a", Outcome: Created},
		{Namespace: "b", Outcome: Conflict, Err: errors.New("a ConfigMap not managed by cmsync exists")},
		{Namespace: "c", Outcome: Failed, Err: errors.New("quota")},
	}
	first := Summarize(results, 1, nil, "")
	SetSyncStatus(&status, 3, "platform/ca", first, first.Changed(), now)
	ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
	if status.ObservedGeneration != 3 || status.TargetNamespaces != 3 || status.SyncedNamespaces != 1 || status.Synced != "1/3" ||
		status.Source != "platform/ca" || status.LastSyncTime == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonDegraded {
		t.Fatalf("status %+v", status)
	}
	want := []v1alpha1.FailedNamespace{
		{Namespace: "b", Reason: "Conflict", Message: "a ConfigMap not managed by cmsync exists"},
		{Namespace: "c", Reason: "Failed", Message: "quota"},
	}
	if !reflect.DeepEqual(status.FailedNamespaces, want) {
		t.Errorf("failedNamespaces %+v", status.FailedNamespaces)
	}

	// An unchanged outcome leaves the status deep-equal, so it is not rewritten.
	before := status.DeepCopy()
	results[0].Outcome = InSync // the next pass finds the replica it wrote
	again := Summarize(results, 0, nil, "")
	SetSyncStatus(&status, 3, "platform/ca", again, again.Changed(), metav1.Now())
	if !reflect.DeepEqual(*before, status) {
		t.Errorf("status changed without a change:\n%+v\n%+v", *before, status)
	}

	many := make([]Result, 0, 50)
	for range 50 {
		many = append(many, Result{Namespace: "x", Outcome: Failed, Err: errors.New("e")})
	}
	failing := Summarize(many, 0, nil, "")
	SetSyncStatus(&status, 4, "platform/ca", failing, failing.Changed(), now)
	if len(status.FailedNamespaces) != maxFailedNamespaces || status.TargetNamespaces != 50 {
		t.Errorf("failedNamespaces not capped: %d", len(status.FailedNamespaces))
	}

	SetSyncProblem(&status, 5, "platform/ca", v1alpha1.ReasonSourceNotFound, errors.New("source ConfigMap platform/ca not found"), 2, 1)
	ready = meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady)
	if ready.Reason != v1alpha1.ReasonSourceNotFound || status.Synced != "1/2" || status.FailedNamespaces != nil {
		t.Errorf("problem status %+v", status)
	}
}

// Two statuses that differ only in when (a condition's lastTransitionTime, lastSyncTime)
// say the same outcome; any other field tells them apart.
func TestSameSyncOutcome(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 27, 10, 0, s, 0, time.UTC)) }
	status := func(synced string, transition, lastSync metav1.Time) v1alpha1.SyncStatus {
		return v1alpha1.SyncStatus{
			ObservedGeneration: 2, Source: "platform/ca", TargetNamespaces: 3, SyncedNamespaces: 3, Synced: synced,
			LastSyncTime: &lastSync,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSynced,
				Message: "in sync", ObservedGeneration: 2, LastTransitionTime: transition}},
		}
	}
	written := status("3/3", at(1), at(1))
	if !SameSyncOutcome(written, status("3/3", at(5), at(0))) {
		t.Error("statuses that differ only in their times differ")
	}
	noLastSync := status("3/3", at(5), at(0))
	noLastSync.LastSyncTime = nil
	if !SameSyncOutcome(written, noLastSync) {
		t.Error("a status without lastSyncTime differs from one with it")
	}
	if SameSyncOutcome(written, status("2/3", at(1), at(1))) {
		t.Error("statuses of other counts are the same")
	}
	degraded := status("3/3", at(1), at(1))
	degraded.Conditions[0].Status, degraded.Conditions[0].Reason = metav1.ConditionFalse, v1alpha1.ReasonDegraded
	if SameSyncOutcome(written, degraded) {
		t.Error("statuses of other conditions are the same")
	}
	if written.LastSyncTime == nil || written.Conditions[0].LastTransitionTime.IsZero() {
		t.Error("the comparison changed what it compared")
	}
}
