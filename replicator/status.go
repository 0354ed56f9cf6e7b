package replicator

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// maxMessageLength keeps the message annotation one readable line however many
// namespaces fail.
const maxMessageLength = 1024

// shownProblems is how many namespaces a message names before "and N more".
const shownProblems = 3

// SourceStatus is what the status annotations of a source say.
type SourceStatus struct {
	State   string
	Synced  string
	Message string
}

// StatusOf sums up a pass over the targets. Every target must hold a replica equal to
// the desired one for Synced; a conflict, a failed write or a replica that could not be
// deleted makes the source Degraded.
func StatusOf(results []NamespaceResult, cleanupErr error) SourceStatus {
	synced := 0
	var problems []string
	for _, r := range results {
		switch r.Outcome {
		case Conflict:
			problems = append(problems, fmt.Sprintf("conflict in %s: %v", r.Namespace, r.Err))
		case Failed:
			problems = append(problems, fmt.Sprintf("failed in %s: %v", r.Namespace, r.Err))
		default:
			synced++
		}
	}
	if cleanupErr != nil {
		problems = append(problems, oneLine(cleanupErr.Error()))
	}
	status := SourceStatus{State: v1alpha1.StatusSynced, Synced: fmt.Sprintf("%d/%d", synced, len(results))}
	switch {
	case len(problems) > 0:
		status.State = v1alpha1.StatusDegraded
		status.Message = summarize(problems)
	case len(results) == 0:
		status.Message = "no namespace matches the targets"
	default:
		status.Message = fmt.Sprintf("in sync in %d %s", len(results), plural(len(results), "namespace", "namespaces"))
	}
	return status
}

// InvalidStatus is the status of a source cmsync refuses to act on; synced keeps the
// count of the last pass, because nothing was changed.
func InvalidStatus(err error, previousSynced string) SourceStatus {
	if previousSynced == "" {
		previousSynced = "0/0"
	}
	return SourceStatus{State: v1alpha1.StatusInvalid, Synced: previousSynced, Message: truncate(oneLine(err.Error()))}
}

// StatusPatch returns the JSON merge patch that brings a source's status annotations to
// status, or nil when they already say it. changed marks a pass that wrote or deleted a
// replica: only then does last-sync-time move. The UID makes the patch fail rather than
// land on a ConfigMap that replaced the source.
func StatusPatch(uid string, current map[string]string, status SourceStatus, changed bool, now time.Time) []byte {
	want := map[string]string{
		v1alpha1.StatusAnnotation:  status.State,
		v1alpha1.SyncedAnnotation:  status.Synced,
		v1alpha1.MessageAnnotation: status.Message,
	}
	if changed {
		want[v1alpha1.LastSyncTimeAnnotation] = now.UTC().Format(time.RFC3339)
	}
	annotations := map[string]any{}
	for k, v := range want {
		if cur, ok := current[k]; !ok || cur != v {
			annotations[k] = v
		}
	}
	if len(annotations) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": annotations}})
	return patch
}

// ClearStatusPatch removes the status annotations from a ConfigMap that is no longer a
// source, or returns nil when it has none.
func ClearStatusPatch(uid string, current map[string]string) []byte {
	annotations := map[string]any{}
	for _, k := range []string{v1alpha1.StatusAnnotation, v1alpha1.SyncedAnnotation, v1alpha1.MessageAnnotation, v1alpha1.LastSyncTimeAnnotation} {
		if _, ok := current[k]; ok {
			annotations[k] = nil
		}
	}
	if len(annotations) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": annotations}})
	return patch
}

func summarize(problems []string) string {
	shown := problems
	if len(shown) > shownProblems {
		shown = shown[:shownProblems]
	}
	msg := strings.Join(shown, "; ")
	if rest := len(problems) - len(shown); rest > 0 {
		msg += fmt.Sprintf("; and %d more", rest)
	}
	return truncate(oneLine(msg))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func truncate(s string) string {
	if len(s) <= maxMessageLength {
		return s
	}
	return s[:maxMessageLength-3] + "..."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// maxFailedNamespaces caps status.failedNamespaces of a ConfigMapSync; the counts and
// the condition message still cover every namespace.
const maxFailedNamespaces = 20

// SetSyncStatus writes the outcome of a pass into a ConfigMapSync's status. changed marks
// a pass that wrote or deleted a replica: only then does lastSyncTime move. Conditions
// keep their lastTransitionTime while their status does not change, so an unchanged
// outcome leaves the status deep-equal to what it was.
func SetSyncStatus(status *v1alpha1.ConfigMapSyncStatus, generation int64, source string, results []NamespaceResult, cleanupErr error, changed bool, now metav1.Time) {
	summary := StatusOf(results, cleanupErr)
	counts := CountReplicas(results)
	status.ObservedGeneration = generation
	status.Source = source
	status.TargetNamespaces = int32(len(results))
	status.SyncedNamespaces = int32(counts.Synced)
	status.Synced = summary.Synced
	status.FailedNamespaces = nil
	for _, r := range results {
		if len(status.FailedNamespaces) == maxFailedNamespaces {
			break
		}
		switch r.Outcome {
		case Conflict:
			status.FailedNamespaces = append(status.FailedNamespaces, v1alpha1.FailedNamespace{Namespace: r.Namespace, Reason: v1alpha1.ReasonConflict, Message: truncate(oneLine(r.Err.Error()))})
		case Failed:
			status.FailedNamespaces = append(status.FailedNamespaces, v1alpha1.FailedNamespace{Namespace: r.Namespace, Reason: v1alpha1.ReasonFailed, Message: truncate(oneLine(r.Err.Error()))})
		}
	}
	if changed {
		status.LastSyncTime = &now
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonSynced, Message: summary.Message, ObservedGeneration: generation}
	if summary.State == v1alpha1.StatusDegraded {
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonDegraded
	}
	meta.SetStatusCondition(&status.Conditions, ready)
}

// SetSyncProblem writes a status for a ConfigMapSync that cmsync cannot act on (reason
// Invalid or SourceNotFound); nothing was changed, so the counts describe the replicas
// as they are.
func SetSyncProblem(status *v1alpha1.ConfigMapSyncStatus, generation int64, source, reason string, err error, targets, synced int) {
	status.ObservedGeneration = generation
	status.Source = source
	status.TargetNamespaces = int32(targets)
	status.SyncedNamespaces = int32(synced)
	status.Synced = fmt.Sprintf("%d/%d", synced, targets)
	status.FailedNamespaces = nil
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason,
		Message: truncate(oneLine(err.Error())), ObservedGeneration: generation,
	})
}
