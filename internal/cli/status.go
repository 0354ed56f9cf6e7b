package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// StatusRow is one source in `kubectl cmsync status`.
type StatusRow struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Copies names the source of a ConfigMapSync, SecretSync or ObjectSync: its kind,
	// namespace and name ("NetworkPolicy platform/default-deny").
	Copies string `json:"copies,omitempty"`
	// Status is Synced, Degraded or Invalid (for a ConfigMapSync, SecretSync or ObjectSync: its Ready
	// reason), Pending before cmsync reported, Deleting for a source being deleted, or
	// Unknown in the one row of a kind the user may not list (Name "-").
	Status string `json:"status"`
	// Synced is "<in sync>/<targets>".
	Synced string `json:"synced"`
	// LastSync is when a pass last changed a replica, RFC 3339; empty if never.
	LastSync string `json:"lastSync,omitempty"`
	Message  string `json:"message"`
}

// statusRows lists every source of both kinds and both forms, and every ObjectSync, in namespace (all when
// empty; a ConfigMapSync, SecretSync or ObjectSync is in the namespace of its source). Secrets are
// listed as metadata: their values are never read. A kind the user may not list is
// one row, Unknown, that names the permission missing.
func statusRows(ctx context.Context, c cluster, namespace string) ([]StatusRow, error) {
	var rows []StatusRow
	for _, kind := range []string{configMapKind, secretKind} {
		sources, err := c.labelledSources(ctx, kind, namespace)
		if apierrors.IsForbidden(err) {
			rows = append(rows, unknownRow(kind, mayList(kind, namespace), kind+"s labelled "+v1alpha1.ReplicateLabel+"="+
				v1alpha1.ReplicateLabelValue+inNamespace(namespace)))
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, src := range sources {
			rows = append(rows, annotatedRow(kind, &src))
		}
	}
	configMapSyncs, err := syncRows(ctx, c, desired.ConfigMapKind{}, namespace)
	if err != nil {
		return nil, err
	}
	secretSyncs, err := syncRows(ctx, c, desired.SecretKind{}, namespace)
	if err != nil {
		return nil, err
	}
	// Every ObjectSync, whichever kind it names: the rows come from their status alone.
	objectSyncs, err := syncRows(ctx, c, desired.ObjectKind{}, namespace)
	if err != nil {
		return nil, err
	}
	return slices.Concat(rows, configMapSyncs, secretSyncs, objectSyncs), nil
}

// annotatedRow is a source of the annotation form as its status annotations say, or
// as being deleted: cmsync then deletes its replicas and reports no more.
func annotatedRow(kind string, src *metav1.PartialObjectMetadata) StatusRow {
	a := src.Annotations
	row := StatusRow{
		Kind: kind, Namespace: src.Namespace, Name: src.Name,
		Status: orPending(a[v1alpha1.StatusAnnotation]), Synced: a[v1alpha1.SyncedAnnotation],
		LastSync: a[v1alpha1.LastSyncTimeAnnotation], Message: a[v1alpha1.MessageAnnotation],
	}
	if src.DeletionTimestamp != nil {
		row.Status, row.Message = statusDeleting, beingDeleted(src).Error()
	}
	return row
}

// statusDeleting is the status of a source being deleted.
const statusDeleting = "Deleting"

// unknownRow is the row of a kind the user may not list: what was not checked, and the
// permission missing.
func unknownRow(kind string, missing permission, unchecked string) StatusRow {
	return StatusRow{Kind: kind, Name: "-", Status: "Unknown", Message: fmt.Sprintf("not checked: %s (missing: %s)", unchecked, missing)}
}

func inNamespace(namespace string) string {
	if namespace == "" {
		return " in any namespace"
	}
	return " in namespace " + namespace
}

// syncRows are the rows of the explicit objects that name sources of kind, with their
// source in namespace (all when empty).
func syncRows[T desired.Object](ctx context.Context, c cluster, kind desired.Kind[T], namespace string) ([]StatusRow, error) {
	explicit := kind.NewSync().SyncSpec().Kind
	syncs, err := syncs(ctx, c, kind)
	if apierrors.IsForbidden(err) {
		return []StatusRow{unknownRow(explicit, mayList(explicit, ""), explicit+"s with their source"+inNamespace(namespace))}, nil
	}
	if err != nil {
		return nil, err
	}
	var rows []StatusRow
	for _, s := range syncs {
		if namespace != "" && s.SyncSpec().SourceNamespace != namespace {
			continue
		}
		status, spec := s.SyncStatus(), s.SyncSpec()
		row := StatusRow{Kind: explicit, Name: s.GetName(), Status: "Pending", Synced: status.Synced,
			Copies: spec.SourceKind + " " + spec.SourceNamespace + "/" + spec.SourceName}
		if ready := meta.FindStatusCondition(status.Conditions, v1alpha1.ConditionReady); ready != nil {
			row.Status, row.Message = ready.Reason, ready.Message
		}
		if status.LastSyncTime != nil {
			row.LastSync = status.LastSyncTime.UTC().Format(time.RFC3339)
		}
		if s.GetDeletionTimestamp() != nil {
			row.Status, row.Message = statusDeleting, "it is being deleted, so cmsync deletes its replicas"
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// orPending: a source cmsync has not reported on yet (just labelled, or cmsync not
// running).
func orPending(status string) string {
	if status == "" {
		return "Pending"
	}
	return status
}

// age says how long ago an RFC 3339 time was, as kubectl does; "-" when never.
func age(rfc3339 string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t))
}
