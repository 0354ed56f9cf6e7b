package replicator

import (
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
)

// sourceMetrics are cmsync's own Prometheus metrics, kept as totals by kind over every
// source.
type sourceMetrics struct {
	replicas  *prometheus.GaugeVec
	sources   *prometheus.GaugeVec
	notSynced *prometheus.GaugeVec
	duration  prometheus.Histogram

	mu       sync.Mutex
	bySource map[string]sourceCounts
	byKind   map[string]replicaCounts
}

// sourceCounts are the last counts of one source, of a kind.
type sourceCounts struct {
	kind string
	replicaCounts
}

// replicaCounts are target namespaces by state, and sources; in a kind's total, the
// sources not in sync by reason too.
type replicaCounts struct {
	sources, synced, conflict, failed int
	notSynced                         map[string]int
}

// kindLabel names the kind of the sources and replicas a series counts.
const kindLabel = "kind"

// notSyncedReasons are the values of cmsync_sources_not_synced's reason label.
var notSyncedReasons = []string{v1alpha1.ReasonConflict, v1alpha1.ReasonFailed, v1alpha1.ReasonInvalid, v1alpha1.ReasonSourceNotFound}

// newMetrics registers cmsync's metrics with reg (controller-runtime's registry in the
// binary, so they are served on --metrics-bind-address with the built-in ones), with
// series for each of the kinds cmsync replicates.
func newMetrics(reg prometheus.Registerer, kinds ...string) *sourceMetrics {
	m := &sourceMetrics{
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_replicas",
			Help: "Target namespaces of all sources of a kind by replica state: synced, conflict (an object cmsync does not own is in the way) " +
				"or failed (the last write failed).",
		}, []string{kindLabel, "state"}),
		sources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_sources",
			Help: "Sources cmsync currently replicates, by kind: labelled objects (including those whose annotations are invalid) and ConfigMapSyncs.",
		}, []string{kindLabel}),
		notSynced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_sources_not_synced",
			Help: "Sources whose last pass did not leave every target in sync, by kind and reason: Conflict or Failed (Degraded), " +
				"Invalid (nothing was changed), SourceNotFound (a ConfigMapSync's source is missing).",
		}, []string{kindLabel, "reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cmsync_sync_duration_seconds",
			Help:    "Duration of one reconcile pass over a source and all its target namespaces.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		bySource: map[string]sourceCounts{},
		byKind:   map[string]replicaCounts{},
	}
	reg.MustRegister(m.replicas, m.sources, m.notSynced, m.duration)
	for _, kind := range kinds {
		m.byKind[kind] = replicaCounts{}
		m.publish(kind)
	}
	return m
}

// RecordSource sets the counts of owner's source from the summary of its last pass.
func (m *sourceMetrics) RecordSource(owner desired.Owner, s desired.Summary) {
	m.set(owner, &replicaCounts{sources: 1, synced: s.Synced, conflict: s.Conflicts, failed: s.Failures, notSynced: problem(s.Problem())})
}

// RecordProblem counts owner's source as one that cannot be acted on, for reason
// (Invalid, SourceNotFound).
func (m *sourceMetrics) RecordProblem(owner desired.Owner, reason string) {
	m.set(owner, &replicaCounts{sources: 1, notSynced: problem(reason)})
}

func problem(reason string) map[string]int {
	if reason == "" {
		return nil
	}
	return map[string]int{reason: 1}
}

// ForgetSource drops a source that no longer exists or is no longer labelled, or a
// deleted ConfigMapSync.
func (m *sourceMetrics) ForgetSource(owner desired.Owner) { m.set(owner, nil) }

// set replaces the counts of owner's source (nil: forget it) in its kind's total.
func (m *sourceMetrics) set(owner desired.Owner, counts *replicaCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := owner.Key()
	total := m.byKind[owner.Kind].minus(m.bySource[key].replicaCounts)
	if counts == nil {
		delete(m.bySource, key)
	} else {
		total = total.plus(*counts)
		m.bySource[key] = sourceCounts{kind: owner.Kind, replicaCounts: *counts}
	}
	m.byKind[owner.Kind] = total
	m.publish(owner.Kind)
}

// ObserveSync records the duration of one pass.
func (m *sourceMetrics) ObserveSync(d time.Duration) { m.duration.Observe(d.Seconds()) }

func (m *sourceMetrics) publish(kind string) {
	total := m.byKind[kind]
	m.sources.WithLabelValues(kind).Set(float64(total.sources))
	m.replicas.WithLabelValues(kind, "synced").Set(float64(total.synced))
	m.replicas.WithLabelValues(kind, "conflict").Set(float64(total.conflict))
	m.replicas.WithLabelValues(kind, "failed").Set(float64(total.failed))
	for _, reason := range notSyncedReasons {
		m.notSynced.WithLabelValues(kind, reason).Set(float64(total.notSynced[reason]))
	}
}

func (c replicaCounts) plus(o replicaCounts) replicaCounts { return c.add(o, 1) }

func (c replicaCounts) minus(o replicaCounts) replicaCounts { return c.add(o, -1) }

// add returns c plus sign times o, with a map of its own.
func (c replicaCounts) add(o replicaCounts, sign int) replicaCounts {
	out := replicaCounts{
		sources: c.sources + sign*o.sources, synced: c.synced + sign*o.synced,
		conflict: c.conflict + sign*o.conflict, failed: c.failed + sign*o.failed,
		notSynced: maps.Clone(c.notSynced),
	}
	for reason, n := range o.notSynced {
		if out.notSynced == nil {
			out.notSynced = map[string]int{}
		}
		out.notSynced[reason] += sign * n
	}
	return out
}
