package replicator

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cmsync/cmsync/replicator/desired"
)

// sourceMetrics are cmsync's own Prometheus metrics, kept as totals over every source.
type sourceMetrics struct {
	replicas *prometheus.GaugeVec
	sources  prometheus.Gauge
	duration prometheus.Histogram

	mu        sync.Mutex
	bySource  map[string]replicaCounts
	lastTotal replicaCounts
}

// replicaCounts are the target namespaces of one source by state.
type replicaCounts struct{ synced, conflict, failed int }

// newMetrics registers cmsync's metrics with reg (controller-runtime's registry in the
// binary, so they are served on --metrics-bind-address with the built-in ones).
func newMetrics(reg prometheus.Registerer) *sourceMetrics {
	m := &sourceMetrics{
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_replicas",
			Help: "Target namespaces of all sources by replica state: synced, conflict (a ConfigMap cmsync does not own is in the way) " +
				"or failed (the last write failed).",
		}, []string{"state"}),
		sources: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cmsync_sources",
			Help: "Sources cmsync currently replicates: labelled ConfigMaps (including those whose annotations are invalid) and ConfigMapSyncs.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cmsync_sync_duration_seconds",
			Help:    "Duration of one reconcile pass over a source and all its target namespaces.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		bySource: map[string]replicaCounts{},
	}
	reg.MustRegister(m.replicas, m.sources, m.duration)
	for _, state := range []string{"synced", "conflict", "failed"} {
		m.replicas.WithLabelValues(state)
	}
	return m
}

// RecordSource sets the counts of one source, named by its owner's Key, from the
// summary of its last pass (the zero summary for a source that cannot be acted on).
func (m *sourceMetrics) RecordSource(source string, s desired.Summary) {
	counts := replicaCounts{synced: s.Synced, conflict: s.Conflicts, failed: s.Failures}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastTotal = m.lastTotal.minus(m.bySource[source]).plus(counts)
	m.bySource[source] = counts
	m.publish()
}

// ForgetSource drops a source that no longer exists or is no longer labelled, or a
// deleted ConfigMapSync.
func (m *sourceMetrics) ForgetSource(source string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastTotal = m.lastTotal.minus(m.bySource[source])
	delete(m.bySource, source)
	m.publish()
}

// ObserveSync records the duration of one pass.
func (m *sourceMetrics) ObserveSync(d time.Duration) { m.duration.Observe(d.Seconds()) }

func (m *sourceMetrics) publish() {
	m.sources.Set(float64(len(m.bySource)))
	m.replicas.WithLabelValues("synced").Set(float64(m.lastTotal.synced))
	m.replicas.WithLabelValues("conflict").Set(float64(m.lastTotal.conflict))
	m.replicas.WithLabelValues("failed").Set(float64(m.lastTotal.failed))
}

func (c replicaCounts) plus(o replicaCounts) replicaCounts {
	return replicaCounts{c.synced + o.synced, c.conflict + o.conflict, c.failed + o.failed}
}

func (c replicaCounts) minus(o replicaCounts) replicaCounts {
	return replicaCounts{c.synced - o.synced, c.conflict - o.conflict, c.failed - o.failed}
}
