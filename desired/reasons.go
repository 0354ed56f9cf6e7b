package desired

import "github.com/cmsync/cmsync/api/v1alpha1"

// Given names a place where cmsync gives reasons.
type Given uint8

// The places where cmsync gives reasons.
const (
	// SourceEvent is the reason of an Event on an annotated source.
	SourceEvent Given = 1 << iota
	// SyncEvent is the reason of an Event on a ConfigMapSync or SecretSync.
	SyncEvent
	// ReadyCondition is the reason of a ConfigMapSync's or SecretSync's Ready condition.
	ReadyCondition
	// FailedNamespace is the reason of an entry of its status.failedNamespaces.
	FailedNamespace
	// NotSyncedMetric is the reason label of cmsync_sources_not_synced.
	NotSyncedMetric
)

// Reason is one reason cmsync gives, and where it gives it.
type Reason struct {
	Name  string
	Given Given
}

// Reasons is every reason cmsync gives and where, declared once: the metrics take their
// label values from it, the functions that choose a reason are tested against it, and
// docs/reference.md#reasons is checked against it. A new reason is a constant in
// api/v1alpha1/keys.go and a row here.
var Reasons = []Reason{
	{v1alpha1.ReasonSynced, SourceEvent | SyncEvent | ReadyCondition},
	// A Degraded pass's Event says Conflict or Failed instead (Summary.EventReason).
	{v1alpha1.ReasonDegraded, ReadyCondition},
	{v1alpha1.ReasonConflict, SourceEvent | SyncEvent | FailedNamespace | NotSyncedMetric},
	// Also the Ready reason of an explicit object whose source could not be read
	// (SourceUnreadable).
	{v1alpha1.ReasonFailed, SourceEvent | SyncEvent | ReadyCondition | FailedNamespace | NotSyncedMetric},
	{v1alpha1.ReasonInvalid, SourceEvent | SyncEvent | ReadyCondition | NotSyncedMetric},
	// Only the explicit form names a source that may be missing.
	{v1alpha1.ReasonSourceNotFound, SyncEvent | ReadyCondition | NotSyncedMetric},
}

// ReasonsGiven returns the names of the reasons given at where, in the table's order.
func ReasonsGiven(where Given) []string {
	var names []string
	for _, r := range Reasons {
		if r.Given&where != 0 {
			names = append(names, r.Name)
		}
	}
	return names
}

// Problem is why an owner cannot be acted on: nothing is created because of it, and its
// replicas stay only where the namespaces still admit them.
type Problem struct {
	Reason string
	Err    error
}

func (p *Problem) Error() string { return p.Err.Error() }
func (p *Problem) Unwrap() error { return p.Err }

// Retried tells whether a pass that met the problem is tried again with backoff: a
// source that could not be read (Failed) raises no event when it can be. Invalid and
// SourceNotFound end with an edit, which wakes the owner.
func (p *Problem) Retried() bool { return p.Reason == v1alpha1.ReasonFailed }

// InvalidInput is the problem of annotations or a spec cmsync cannot act on.
func InvalidInput(err error) *Problem { return &Problem{v1alpha1.ReasonInvalid, err} }

// SourceNotFound is the problem of a ConfigMapSync or SecretSync whose source does not
// exist.
func SourceNotFound(err error) *Problem { return &Problem{v1alpha1.ReasonSourceNotFound, err} }

// SourceUnreadable is the problem of a ConfigMapSync or SecretSync whose source the API
// server did not give.
func SourceUnreadable(err error) *Problem { return &Problem{v1alpha1.ReasonFailed, err} }
