package desired

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func TestStatusOf(t *testing.T) {
	notOurs := errors.New("a ConfigMap not managed by cmsync exists")
	tests := []struct {
		name        string
		results     []Result
		cleanupErr  error
		wantState   string
		wantSynced  string
		wantMessage string
	}{
		{name: "no targets", wantState: "Synced", wantSynced: "0/0", wantMessage: "no namespace matches the targets"},
		{name: "all in sync", results: []Result{{Namespace: "a", Outcome: Created}, {Namespace: "b", Outcome: InSync}},
			wantState: "Synced", wantSynced: "2/2", wantMessage: "in sync in 2 namespaces"},
		{name: "conflict", results: []Result{{Namespace: "a"}, {Namespace: "team-b", Outcome: Conflict, Err: notOurs}},
			wantState: "Degraded", wantSynced: "1/2", wantMessage: "conflict in team-b: a ConfigMap not managed by cmsync exists"},
		{name: "failure", results: []Result{{Namespace: "a", Outcome: Failed, Err: errors.New("quota\nexceeded")}},
			wantState: "Degraded", wantSynced: "0/1", wantMessage: "failed in a: quota exceeded"},
		{name: "cleanup failure", results: []Result{{Namespace: "a"}}, cleanupErr: errors.New("deleting replica in b: forbidden"),
			wantState: "Degraded", wantSynced: "1/1", wantMessage: "deleting replica in b: forbidden"},
		{name: "many problems", results: []Result{
			{Namespace: "a", Outcome: Conflict, Err: notOurs}, {Namespace: "b", Outcome: Conflict, Err: notOurs},
			{Namespace: "c", Outcome: Conflict, Err: notOurs}, {Namespace: "d", Outcome: Conflict, Err: notOurs},
			{Namespace: "e", Outcome: Conflict, Err: notOurs}},
			wantState: "Degraded", wantSynced: "0/5", wantMessage: "; and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.results, 0, tt.cleanupErr, "").SourceStatus()
			if got.State != tt.wantState || got.Synced != tt.wantSynced || !strings.Contains(got.Message, tt.wantMessage) {
				t.Errorf("got %+v", got)
			}
		})
	}
}

func TestInvalidStatusIsOneBoundedLine(t *testing.T) {
	got := InvalidStatus(errors.New("a\nb "+strings.Repeat("x", 5000)), "")
	if got.State != v1alpha1.StatusInvalid || got.Synced != "0/0" || strings.Contains(got.Message, "\n") || len(got.Message) > maxMessageLength {
		t.Errorf("got %+v", got)
	}
	if InvalidStatus(errors.New("x"), "3/3").Synced != "3/3" {
		t.Errorf("an invalid source keeps the count of its last pass")
	}
}

func TestStatusPatch(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	status := SourceStatus{State: "Synced", Synced: "1/1", Message: "in sync in 1 namespace"}
	current := map[string]string{
		v1alpha1.StatusAnnotation: "Synced", v1alpha1.SyncedAnnotation: "1/1",
		v1alpha1.MessageAnnotation: "in sync in 1 namespace", v1alpha1.LastSyncTimeAnnotation: "2026-01-01T00:00:00Z",
	}
	src := &metav1.ObjectMeta{UID: "u", ResourceVersion: "7", Annotations: current}
	if p := StatusPatch(src, status, false, now); p != nil {
		t.Errorf("an unchanged status must not be written, got %s", p)
	}
	var patch struct {
		Metadata struct {
			UID             string            `json:"uid"`
			ResourceVersion string            `json:"resourceVersion"`
			Annotations     map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(StatusPatch(src, status, true, now), &patch); err != nil {
		t.Fatal(err)
	}
	if patch.Metadata.ResourceVersion != "7" {
		t.Errorf("the patch must hold the resourceVersion it was computed from (a stale copy's patch must fail): %+v", patch)
	}
	if patch.Metadata.UID != "u" || len(patch.Metadata.Annotations) != 1 ||
		patch.Metadata.Annotations[v1alpha1.LastSyncTimeAnnotation] != "2026-11-22T10:00:00Z" {
		t.Errorf("a pass that changed replicas moves only last-sync-time: %+v", patch)
	}
	if p := ClearStatusPatch("u", map[string]string{"other": "x"}); p != nil {
		t.Errorf("nothing to clear, got %s", p)
	}
	if p := string(ClearStatusPatch("u", current)); !strings.Contains(p, `"cmsync.io/status":null`) {
		t.Errorf("clear patch %s", p)
	}
}
