package replicator

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cmsync/cmsync/replicator/desired"
)

// sourceMetrics are cmsync's own Prometheus metrics, kept as totals by kind over every
// source.
type sourceMetrics struct {
	replicas *prometheus.GaugeVec
	sources  *prometheus.GaugeVec
	duration prometheus.Histogram

	mu       sync.Mutex
	bySource map[string]sourceCounts
	byKind   map[string]replicaCounts
}

// sourceCounts are the last counts of one source, of a kind.
type sourceCounts struct {
	kind string
	replicaCounts
}

// replicaCounts are target namespaces by state (and, in a kind's total, its sources).
type replicaCounts struct{ sources, synced, conflict, failed int }

// newMetrics registers cmsync's metrics with reg (controller-runtime's registry in the
// binary, so they are served on --metrics-bind-address with the built-in ones), with
// series for each of the kinds cmsync replicates.
func newMetrics(reg prometheus.Registerer, kinds ...string) *sourceMetrics {
	m := &sourceMetrics{
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_replicas",
			Help: "Target namespaces of all sources of a kind by replica state: synced, conflict (an object cmsync does not own is in the way) " +
				"or failed (the last write failed).",
		}, []string{"kind", "state"}),
		sources: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_sources",
			Help: "Sources cmsync currently replicates, by kind: labelled objects (including those whose annotations are invalid) and ConfigMapSyncs.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cmsync_sync_duration_seconds",
			Help:    "Duration of one reconcile pass over a source and all its target namespaces.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		bySource: map[string]sourceCounts{},
		byKind:   map[string]replicaCounts{},
	}
	reg.MustRegister(m.replicas, m.sources, m.duration)
	for _, kind := range kinds {
		m.byKind[kind] = replicaCounts{}
		m.publish(kind)
	}
	return m
}

// RecordSource sets the counts of owner's source from the summary of its last pass
// (the zero summary for a source that cannot be acted on).
func (m *sourceMetrics) RecordSource(owner desired.Owner, s desired.Summary) {
	m.set(owner, &replicaCounts{sources: 1, synced: s.Synced, conflict: s.Conflicts, failed: s.Failures})
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
}

func (c replicaCounts) plus(o replicaCounts) replicaCounts {
	return replicaCounts{c.sources + o.sources, c.synced + o.synced, c.conflict + o.conflict, c.failed + o.failed}
}

func (c replicaCounts) minus(o replicaCounts) replicaCounts {
	return replicaCounts{c.sources - o.sources, c.synced - o.synced, c.conflict - o.conflict, c.failed - o.failed}
}
