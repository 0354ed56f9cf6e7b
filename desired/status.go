package desired

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// maxMessageLength keeps the message annotation one readable line however many
// namespaces fail.
const maxMessageLength = 1024

// shownProblems is how many namespaces a message names before "and N more".
const shownProblems = 3

// Outcome is what a pass did, or could not do, in one target namespace.
type Outcome int

// The outcomes of one target namespace.
const (
	InSync Outcome = iota
	Created
	Updated
	Recreated
	Conflict
	Failed
)

// Wrote reports whether the outcome wrote a replica.
func (o Outcome) Wrote() bool { return o == Created || o == Updated || o == Recreated }

// Result is the outcome of one target namespace; Err explains Conflict and Failed.
type Result struct {
	Namespace string
	Outcome   Outcome
	Err       error
}

// Summary sums a pass up, once, for everything that reports on it: the status of the
// source or ConfigMapSync or SecretSync, the Events, the log and the metrics.
type Summary struct {
	// Targets is the number of target namespaces; Synced of them hold a replica equal
	// to the desired one, Conflicts are blocked by an object cmsync does not own for
	// this owner, Failures could not be written.
	Targets, Synced, Conflicts, Failures int
	// Written counts the replicas created, updated or replaced; Deleted those deleted
	// because they are no longer wanted.
	Written, Deleted int
	// State is Synced or Degraded; Message says why, in one bounded line.
	State, Message string
	// NotInSync are the results of the namespaces in conflict or failed, in target order.
	NotInSync []Result
	// Err joins the failures worth a retry: failed writes and failed deletes.
	Err error
}

// Changed reports whether the pass wrote or deleted a replica.
func (s Summary) Changed() bool { return s.Written > 0 || s.Deleted > 0 }

// Problem is why the source is not in sync, as an Event reason: "" when Synced,
// Conflict when only conflicts stand in the way, Failed when a write or delete failed.
func (s Summary) Problem() string {
	switch {
	case s.State != v1alpha1.StatusDegraded:
		return ""
	case s.Failures == 0 && s.Err == nil:
		return v1alpha1.ReasonConflict
	default:
		return v1alpha1.ReasonFailed
	}
}

// EventReason is the reason of the Event that reports the pass: Synced when every
// target is in sync, Conflict when a target is in conflict, else Failed.
func (s Summary) EventReason() string {
	switch {
	case s.State != v1alpha1.StatusDegraded:
		return v1alpha1.ReasonSynced
	case s.Conflicts > 0:
		return v1alpha1.ReasonConflict
	default:
		return v1alpha1.ReasonFailed
	}
}

// SyncedCount is the "<in sync>/<targets>" of the synced annotation.
func (s Summary) SyncedCount() string { return fmt.Sprintf("%d/%d", s.Synced, s.Targets) }

// Summarize sums up a pass over the targets. Every target must hold a replica equal to
// the desired one for Synced; a conflict, a failed write or a replica that could not be
// deleted makes the source Degraded. notice (Template.Notice) ends the message.
func Summarize(results []Result, deleted int, cleanupErr error, notice string) Summary {
	s := Summary{Targets: len(results), Deleted: deleted, State: v1alpha1.StatusSynced}
	var problems []string
	var failures []error
	for _, r := range results {
		switch r.Outcome {
		case Conflict:
			s.Conflicts++
			problems = append(problems, fmt.Sprintf("conflict in %s: %v", r.Namespace, r.Err))
		case Failed:
			s.Failures++
			problems = append(problems, fmt.Sprintf("failed in %s: %v", r.Namespace, r.Err))
			failures = append(failures, fmt.Errorf("%s: %w", r.Namespace, r.Err))
		default:
			s.Synced++
		}
		if r.Outcome.Wrote() {
			s.Written++
		}
		if r.Outcome == Conflict || r.Outcome == Failed {
			s.NotInSync = append(s.NotInSync, r)
		}
	}
	if cleanupErr != nil {
		problems = append(problems, OneLine(cleanupErr.Error()))
	}
	s.Err = errors.Join(append(failures, cleanupErr)...)
	switch {
	case len(problems) > 0:
		s.State = v1alpha1.StatusDegraded
		s.Message = summarize(problems)
	case len(results) == 0:
		s.Message = noTargets
	default:
		s.Message = fmt.Sprintf("in sync in %d %s", len(results), plural(len(results), "namespace", "namespaces"))
	}
	if notice != "" {
		s.Message = truncate(OneLine(s.Message + "; " + notice))
	}
	return s
}

// noTargets is the message of a pass with no target namespace.
const noTargets = "no namespace matches the targets"

// Within ends the message with what the tenant boundary kept out (Targets.Notice): a
// pass with no target then says that none is within reach, not that none matches.
func (s *Summary) Within(boundary string) {
	if boundary == "" {
		return
	}
	if rest, ok := strings.CutPrefix(s.Message, noTargets); ok && s.Targets == 0 {
		s.Message = "no target namespace within reach" + rest
	}
	s.Message = truncate(OneLine(s.Message + "; " + boundary))
}

// SourceStatus is what the status annotations of a source say.
type SourceStatus struct {
	State   string
	Synced  string
	Message string
}

// SourceStatus is the status annotations' view of the summary.
func (s Summary) SourceStatus() SourceStatus {
	return SourceStatus{State: s.State, Synced: s.SyncedCount(), Message: s.Message}
}

// InvalidStatus is the status of a source cmsync refuses to act on; synced keeps the
// count of the last pass, because nothing was changed.
func InvalidStatus(err error, previousSynced string) SourceStatus {
	if previousSynced == "" {
		previousSynced = "0/0"
	}
	return SourceStatus{State: v1alpha1.StatusInvalid, Synced: previousSynced, Message: truncate(OneLine(err.Error()))}
}

// StatusPatch returns the JSON merge patch that brings src's status annotations to
// status, or nil when they already say it. changed marks a pass that wrote or deleted a
// replica: only then does last-sync-time move. src is the cached object the pass read:
// the patch holds its UID and resourceVersion, so it fails (409) rather than land on a
// ConfigMap that replaced the source, or on one changed since — a patch of only the
// annotations that differ from a stale copy could leave the server with a status no
// pass computed.
func StatusPatch(src metav1.Object, status SourceStatus, changed bool, now time.Time) []byte {
	want := map[string]string{
		v1alpha1.StatusAnnotation:  status.State,
		v1alpha1.SyncedAnnotation:  status.Synced,
		v1alpha1.MessageAnnotation: status.Message,
	}
	if changed {
		want[v1alpha1.LastSyncTimeAnnotation] = now.UTC().Format(time.RFC3339)
	}
	current := src.GetAnnotations()
	annotations := map[string]any{}
	for k, v := range want {
		if cur, ok := current[k]; !ok || cur != v {
			annotations[k] = v
		}
	}
	if len(annotations) == 0 {
		return nil
	}
	return annotationsPatch(src.GetUID(), src.GetResourceVersion(), annotations)
}

// HasStatus reports whether annotations hold any of cmsync's status annotations.
func HasStatus(annotations map[string]string) bool {
	for _, k := range v1alpha1.StatusAnnotations() {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// ClearStatusPatch removes the status annotations from a ConfigMap that is no longer a
// source, or returns nil when it has none.
func ClearStatusPatch(uid string, current map[string]string) []byte {
	annotations := map[string]any{}
	for _, k := range v1alpha1.StatusAnnotations() {
		if _, ok := current[k]; ok {
			annotations[k] = nil
		}
	}
	if len(annotations) == 0 {
		return nil
	}
	return annotationsPatch(types.UID(uid), "", annotations)
}

// annotationsPatch is the JSON merge patch of annotations on the object with uid, and
// with resourceVersion when it is not empty.
func annotationsPatch(uid types.UID, resourceVersion string, annotations map[string]any) []byte {
	patch, metadata := patchOnUID(uid)
	if resourceVersion != "" {
		metadata["resourceVersion"] = resourceVersion
	}
	metadata["annotations"] = annotations
	// Strings and nulls only: Marshal cannot fail.
	out, _ := json.Marshal(patch)
	return out
}

func summarize(problems []string) string {
	return truncate(OneLine(firstFew(problems, "; ", "; ")))
}

// firstFew joins the first shownProblems items with sep, and says how many more there
// are after beforeMore.
func firstFew(items []string, sep, beforeMore string) string {
	if len(items) <= shownProblems {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s%sand %d more", strings.Join(items[:shownProblems], sep), beforeMore, len(items)-shownProblems)
}

// OneLine is s on one line, its runs of white space (an errors.Join's newlines among
// them) made one space: how a status message says several problems.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

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

// maxFailedNamespaces caps status.failedNamespaces of a ConfigMapSync or SecretSync; the counts and
// the condition message still cover every namespace.
const maxFailedNamespaces = 20

// SetSyncStatus writes the summary of a pass into a ConfigMapSync's or SecretSync's status. changed
// marks a change of replicas to report, at now: this pass's, or an earlier pass's whose
// status write did not land; only then does lastSyncTime move (as StatusPatch moves a
// source's last-sync-time). Conditions keep their
// lastTransitionTime while their status does not change, so an unchanged outcome
// leaves the status deep-equal to what it was.
func SetSyncStatus(status *v1alpha1.SyncStatus, generation int64, source string, s Summary, changed bool, now metav1.Time) {
	status.ObservedGeneration = generation
	status.Source = source
	status.TargetNamespaces = int32(s.Targets)
	status.SyncedNamespaces = int32(s.Synced)
	status.Synced = s.SyncedCount()
	status.FailedNamespaces = nil
	for _, r := range s.NotInSync[:min(len(s.NotInSync), maxFailedNamespaces)] {
		reason := v1alpha1.ReasonFailed
		if r.Outcome == Conflict {
			reason = v1alpha1.ReasonConflict
		}
		status.FailedNamespaces = append(
			status.FailedNamespaces,
			v1alpha1.FailedNamespace{Namespace: r.Namespace, Reason: reason, Message: truncate(OneLine(r.Err.Error()))},
		)
	}
	if changed {
		status.LastSyncTime = &now
	}
	ready := metav1.Condition{
		Type:               v1alpha1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             v1alpha1.ReasonSynced,
		Message:            s.Message,
		ObservedGeneration: generation,
	}
	if s.State == v1alpha1.StatusDegraded {
		ready.Status, ready.Reason = metav1.ConditionFalse, v1alpha1.ReasonDegraded
	}
	meta.SetStatusCondition(&status.Conditions, ready)
}

// SameSyncOutcome reports whether two statuses of a ConfigMapSync (or SecretSync) say the same but for
// when: the conditions' lastTransitionTime and lastSyncTime may differ. A pass that
// read an older copy than cmsync's own last status write computes those times from
// that copy (a transition anew, an older last sync), while the server has the write's.
func SameSyncOutcome(a, b v1alpha1.SyncStatus) bool {
	return equality.Semantic.DeepEqual(withoutTimes(a), withoutTimes(b))
}

func withoutTimes(status v1alpha1.SyncStatus) v1alpha1.SyncStatus {
	out := *status.DeepCopy()
	out.LastSyncTime = nil
	for i := range out.Conditions {
		out.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return out
}

// SetSyncProblem writes a status for a ConfigMapSync or SecretSync that cmsync cannot act on (reason
// Invalid, SourceNotFound, or Failed when its source could not be read); nothing was
// changed, so the counts describe the replicas as they are.
func SetSyncProblem(status *v1alpha1.SyncStatus, generation int64, source, reason string, err error, targets, synced int) {
	status.ObservedGeneration = generation
	status.Source = source
	status.TargetNamespaces = int32(targets)
	status.SyncedNamespaces = int32(synced)
	status.Synced = fmt.Sprintf("%d/%d", synced, targets)
	status.FailedNamespaces = nil
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason,
		Message: truncate(OneLine(err.Error())), ObservedGeneration: generation,
	})
}
