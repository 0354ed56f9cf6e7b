package replicator

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cmsync/cmsync/desired"
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
	// notSynced counts, by kind and reason, the sources not in sync.
	notSyncedByKind map[string]map[string]int
}

// sourceCounts are the last counts of one source, of a kind, and why it is not in
// sync ("" when it is).
type sourceCounts struct {
	kind string
	replicaCounts
	reason string
}

// replicaCounts are target namespaces by state (and, in a kind's total, its sources).
type replicaCounts struct{ sources, synced, conflict, failed int }

// kindLabel names the kind of the sources and replicas a series counts.
const kindLabel = "kind"

// notSyncedReasons are the values of cmsync_sources_not_synced's reason label.
var notSyncedReasons = desired.ReasonsGiven(desired.NotSyncedMetric)

// MetricNames are the names of cmsync's own metrics, as newMetrics registers them.
func MetricNames() []string {
	reg := prometheus.NewRegistry()
	newMetrics(reg, desired.ConfigMapKind{}.Name())
	families, _ := reg.Gather()
	names := make([]string, 0, len(families))
	for _, f := range families {
		names = append(names, f.GetName())
	}
	return names
}

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
			Help: "Sources cmsync currently replicates, by kind: labelled objects (including those whose annotations are invalid), ConfigMapSyncs and SecretSyncs.",
		}, []string{kindLabel}),
		notSynced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "cmsync_sources_not_synced",
			Help: "Sources whose last pass did not leave every target in sync, by kind and reason: " +
				"Conflict or Failed (Degraded; Failed also when a ConfigMapSync's or SecretSync's source could not be read), " +
				"Invalid (nothing was changed), SourceNotFound (a ConfigMapSync's or SecretSync's source is missing).",
		}, []string{kindLabel, "reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "cmsync_sync_duration_seconds",
			Help:    "Duration of one reconcile pass over a source and all its target namespaces.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		bySource:        map[string]sourceCounts{},
		byKind:          map[string]replicaCounts{},
		notSyncedByKind: map[string]map[string]int{},
	}
	reg.MustRegister(m.replicas, m.sources, m.notSynced, m.duration)
	for _, kind := range kinds {
		m.byKind[kind] = replicaCounts{}
		m.notSyncedByKind[kind] = map[string]int{}
		m.publish(kind)
	}
	return m
}

// RecordSource sets the counts of owner's source from the summary of its last pass.
func (m *sourceMetrics) RecordSource(owner desired.Owner, s desired.Summary) {
	m.set(owner, &sourceCounts{replicaCounts: replicaCounts{sources: 1, synced: s.Synced, conflict: s.Conflicts, failed: s.Failures}, reason: s.Problem()})
}

// RecordProblem counts owner's source as one that cannot be acted on, for reason
// (Invalid, SourceNotFound, or Failed: a ConfigMapSync's or SecretSync's source could not be read).
func (m *sourceMetrics) RecordProblem(owner desired.Owner, reason string) {
	m.set(owner, &sourceCounts{replicaCounts: replicaCounts{sources: 1}, reason: reason})
}

// ForgetSource drops a source that no longer exists or is no longer labelled, or a
// deleted ConfigMapSync or SecretSync.
func (m *sourceMetrics) ForgetSource(owner desired.Owner) { m.set(owner, nil) }

// set replaces the counts of owner's source (nil: forget it) in its kind's total.
func (m *sourceMetrics) set(owner desired.Owner, counts *sourceCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := owner.Key()
	if previous, ok := m.bySource[key]; ok {
		// Its last counts leave the total of the kind they were counted in: an
		// ObjectSync may have named another kind then.
		m.byKind[previous.kind] = m.byKind[previous.kind].minus(previous.replicaCounts)
		if previous.reason != "" {
			m.notSyncedByKind[previous.kind][previous.reason]--
		}
		delete(m.bySource, key)
		m.publish(previous.kind)
	}
	if counts == nil {
		return
	}
	if m.notSyncedByKind[owner.Kind] == nil {
		// A kind first met here: an ObjectSync may name any kind, enabled or not.
		m.notSyncedByKind[owner.Kind] = map[string]int{}
	}
	counts.kind = owner.Kind
	m.bySource[key] = *counts
	m.byKind[owner.Kind] = m.byKind[owner.Kind].plus(counts.replicaCounts)
	if counts.reason != "" {
		m.notSyncedByKind[owner.Kind][counts.reason]++
	}
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
		m.notSynced.WithLabelValues(kind, reason).Set(float64(m.notSyncedByKind[kind][reason]))
	}
}

func (c replicaCounts) plus(o replicaCounts) replicaCounts {
	return replicaCounts{c.sources + o.sources, c.synced + o.synced, c.conflict + o.conflict, c.failed + o.failed}
}

func (c replicaCounts) minus(o replicaCounts) replicaCounts {
	return replicaCounts{c.sources - o.sources, c.synced - o.synced, c.conflict - o.conflict, c.failed - o.failed}
}
