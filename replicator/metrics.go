package replicator

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are cmsync's own Prometheus metrics, kept as totals over every source.
type Metrics struct {
	replicas *prometheus.GaugeVec
	sources  prometheus.Gauge
	duration prometheus.Histogram

	mu        sync.Mutex
	bySource  map[string]ReplicaCounts
	lastTotal ReplicaCounts
}

// ReplicaCounts are the target namespaces of one source by state.
type ReplicaCounts struct{ Synced, Conflict, Failed int }

// NewMetrics registers cmsync's metrics with reg (controller-runtime's registry in the
// binary, so they are served on --metrics-bind-address with the built-in ones).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_replicas",
			Help: "Target namespaces of all sources by replica state: synced, conflict (a ConfigMap cmsync does not own is in the way) or failed (the last write failed).",
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
		bySource: map[string]ReplicaCounts{},
	}
	reg.MustRegister(m.replicas, m.sources, m.duration)
	for _, state := range []string{"synced", "conflict", "failed"} {
		m.replicas.WithLabelValues(state)
	}
	return m
}

// RecordSource sets the counts of one source, named by its owner's Key.
func (m *Metrics) RecordSource(source string, counts ReplicaCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastTotal = m.lastTotal.minus(m.bySource[source]).plus(counts)
	m.bySource[source] = counts
	m.publish()
}

// ForgetSource drops a source that no longer exists or is no longer labelled, or a
// deleted ConfigMapSync.
func (m *Metrics) ForgetSource(source string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastTotal = m.lastTotal.minus(m.bySource[source])
	delete(m.bySource, source)
	m.publish()
}

// ObserveSync records the duration of one pass.
func (m *Metrics) ObserveSync(d time.Duration) { m.duration.Observe(d.Seconds()) }

func (m *Metrics) publish() {
	m.sources.Set(float64(len(m.bySource)))
	m.replicas.WithLabelValues("synced").Set(float64(m.lastTotal.Synced))
	m.replicas.WithLabelValues("conflict").Set(float64(m.lastTotal.Conflict))
	m.replicas.WithLabelValues("failed").Set(float64(m.lastTotal.Failed))
}

// CountReplicas counts a pass's results by state.
func CountReplicas(results []NamespaceResult) ReplicaCounts {
	var c ReplicaCounts
	for _, r := range results {
		switch r.Outcome {
		case Conflict:
			c.Conflict++
		case Failed:
			c.Failed++
		default:
			c.Synced++
		}
	}
	return c
}

func (c ReplicaCounts) plus(o ReplicaCounts) ReplicaCounts {
	return ReplicaCounts{c.Synced + o.Synced, c.Conflict + o.Conflict, c.Failed + o.Failed}
}

func (c ReplicaCounts) minus(o ReplicaCounts) ReplicaCounts {
	return ReplicaCounts{c.Synced - o.Synced, c.Conflict - o.Conflict, c.Failed - o.Failed}
}
