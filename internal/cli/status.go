package cli

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// StatusRow is one source in `kubectl cmsync status`.
type StatusRow struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Status is Synced, Degraded or Invalid (for a ConfigMapSync: its Ready reason).
	Status string `json:"status"`
	// Synced is "<in sync>/<targets>".
	Synced string `json:"synced"`
	// LastSync is when a pass last changed a replica, RFC 3339; empty if never.
	LastSync string `json:"lastSync,omitempty"`
	Message  string `json:"message"`
}

// statusRows lists every source of both kinds and both forms, in namespace (all when
// empty; a ConfigMapSync is in the namespace of its source). Secrets are listed as
// metadata: their values are never read.
func statusRows(ctx context.Context, c cluster, namespace string) ([]StatusRow, error) {
	var rows []StatusRow
	for _, kind := range []string{configMapKind, secretKind} {
		sources, err := c.labelledSources(ctx, kind, namespace)
		if kind == secretKind && apierrors.IsForbidden(err) {
			// Someone who may not list Secrets still gets every other source.
			rows = append(rows, StatusRow{Kind: kind, Name: "-", Status: "Unknown", Message: "you may not list Secrets here: " + err.Error()})
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, src := range sources {
			a := src.Annotations
			rows = append(rows, StatusRow{
				Kind: kind, Namespace: src.Namespace, Name: src.Name,
				Status: orPending(a[v1alpha1.StatusAnnotation]), Synced: a[v1alpha1.SyncedAnnotation],
				LastSync: a[v1alpha1.LastSyncTimeAnnotation], Message: a[v1alpha1.MessageAnnotation],
			})
		}
	}
	syncs, err := c.syncs(ctx)
	if apierrors.IsForbidden(err) {
		return append(rows, StatusRow{Kind: v1alpha1.ConfigMapSyncKind, Name: "-", Status: "Unknown",
			Message: "you may not list ConfigMapSyncs: " + err.Error()}), nil
	}
	if err != nil {
		return nil, err
	}
	for _, s := range syncs {
		if namespace != "" && s.Spec.SourceNamespace != namespace {
			continue
		}
		row := StatusRow{Kind: v1alpha1.ConfigMapSyncKind, Name: s.Name, Status: "Pending", Synced: s.Status.Synced}
		if ready := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady); ready != nil {
			row.Status, row.Message = ready.Reason, ready.Message
		}
		if s.Status.LastSyncTime != nil {
			row.LastSync = s.Status.LastSyncTime.UTC().Format(time.RFC3339)
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
