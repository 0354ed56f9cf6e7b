//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// chartMemoryLimit is the chart's default memory limit (deploy/chart/cmsync/values.yaml),
// which the chart also gives Go as GOMEMLIMIT.
const chartMemoryLimit = 256 << 20

// A tenant with edit in two namespaces labels cmsync.io/replicate=true on 250 ConfigMaps
// of 1 MB each — half where sources may not live (--source-namespaces), half where
// they may. cmsync, run as the chart runs it (GOMEMLIMIT at the chart's limit), keeps
// its memory under the chart's limit, grows by far less than the bytes labelled, marks
// every one of them (Invalid, or Synced), and goes on replicating another tenant's
// source.
func TestTenantCannotExhaustCmsyncMemory(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	suffix := randomSuffix()
	forbidden := harness.NewNamespace(t, "forbidden-"+suffix, nil)
	hostile := harness.NewNamespace(t, "hostile-"+suffix, nil)
	victimSrc, victimDst := harness.NewNamespace(t, "victim-"+suffix, nil), harness.NewNamespace(t, "victim-"+suffix, nil)
	harness.DeleteSourcesAtEnd(t, []string{forbidden, hostile, victimSrc})
	c := harness.StartControllerWithEnv(t, []string{fmt.Sprintf("GOMEMLIMIT=%d", chartMemoryLimit)},
		"--source-namespaces=hostile-"+suffix+"-*,victim-"+suffix+"-*")
	time.Sleep(3 * time.Second) // settle after the start's lists
	baseline, _ := residentBytes(t, c.Pid())

	const size = 1_000_000
	blob := func(namespace string, i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: fmt.Sprintf("blob-%03d", i),
				Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
				// A target that does not exist: each is a source, read by its passes.
				Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "nowhere-" + suffix},
			},
			Data: map[string]string{"blob": strings.Repeat(string(rune('a'+i%26)), size)},
		}
	}
	createAll(t, editorIn(t, forbidden), func(i int) *corev1.ConfigMap { return blob(forbidden, i) })
	createAll(t, editorIn(t, hostile), func(i int) *corev1.ConfigMap { return blob(hostile, i) })

	// cmsync has seen every one: each carries the status it decided.
	waitUntilMarked(t, map[string]string{forbidden: v1alpha1.StatusInvalid, hostile: v1alpha1.StatusSynced})
	assertStillReplicates(t, c, victimSrc, victimDst, 30*time.Second)
	peak := assertPeakUnderTheChartsLimit(t, c)
	labelled := int64(2 * perNamespace * size)
	t.Logf("resident memory: %d MiB at the start, peak %d MiB, after %d MiB labelled", baseline>>20, peak>>20, labelled>>20)
	if grown := peak - baseline; grown > labelled/2 {
		t.Errorf("memory grew by %d MiB with %d MiB labelled: it grows with what a tenant labels", grown>>20, labelled>>20)
	}
}

// A tenant with edit in two namespaces makes 250 sources whose replicas, one each in
// the tenant's other namespace, would carry much metadata: half with 1 MB of labels
// (the API server bounds each label, not their number), half with 30,000 keys of data,
// which a replica's managedFields name once more (0.4 MB). The first are Invalid (a replica
// carries at most 64 KiB of labels and annotations) and write nothing; the second are
// replicated, and the replica store keeps of each only cmsync's markers. cmsync's
// memory stays far below the bytes labelled, and another tenant's source replicates.
func TestTenantCannotExhaustCmsyncMemoryThroughReplicasMetadata(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	suffix := randomSuffix()
	labelled, keyed := harness.NewNamespace(t, "labelled-"+suffix, nil), harness.NewNamespace(t, "keyed-"+suffix, nil)
	victimSrc, victimDst := harness.NewNamespace(t, "victim-"+suffix, nil), harness.NewNamespace(t, "victim-"+suffix, nil)
	harness.DeleteSourcesAtEnd(t, []string{labelled, keyed, victimSrc})
	c := harness.StartControllerWithEnv(t, []string{fmt.Sprintf("GOMEMLIMIT=%d", chartMemoryLimit)}, "--profiling")
	time.Sleep(3 * time.Second) // settle after the start's lists
	baseline := liveHeap(t, c)

	const labels, keys = 8000, 30000
	source := func(namespace, target string, i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: fmt.Sprintf("%s-%03d", namespace, i),
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: target},
		}}
	}
	withLabels := func(i int) *corev1.ConfigMap {
		cm := source(labelled, keyed, i)
		for l := range labels {
			cm.Labels[fmt.Sprintf("%s-%03d-%05d", strings.Repeat("k", 50), i, l)] = strings.Repeat("v", 63)
		}
		return cm
	}
	withKeys := func(i int) *corev1.ConfigMap {
		cm := source(keyed, labelled, i)
		cm.Data = make(map[string]string, keys)
		for k := range keys {
			cm.Data[fmt.Sprintf("k%03d-%05d", i, k)] = "v"
		}
		return cm
	}
	createAll(t, editorIn(t, labelled), withLabels)
	createAll(t, editorIn(t, keyed), withKeys)

	waitUntilMarked(t, map[string]string{labelled: v1alpha1.StatusInvalid, keyed: v1alpha1.StatusSynced})
	src := &corev1.ConfigMap{}
	must(t, harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: labelled, Name: labelled + "-000"}, src))
	if msg := src.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "over cmsync's limit of 64Ki per replica") {
		t.Errorf("a source of 1 MB of labels says %q", msg)
	}
	// The API server takes seconds for each pass over objects of 1 MB on a small host:
	// another tenant's source waits for the passes queued before it.
	assertStillReplicates(t, c, victimSrc, victimDst, 3*time.Minute)
	peak := assertPeakUnderTheChartsLimit(t, c)
	// What cmsync holds: the sources' content cache (32 MiB) and what is in flight, not
	// the replicas' labels and managedFields (159 MiB here, per replica).
	sent, held := int64(perNamespace*(labels*(63+63)+keys*11)), liveHeap(t, c)-baseline
	t.Logf("live heap %d MiB more than at the start (peak resident %d MiB), after %d MiB labelled", held>>20, peak>>20, sent>>20)
	if held > 64<<20 {
		t.Errorf("cmsync holds %d MiB more than at the start, with %d MiB labelled: it keeps what a tenant labels", held>>20, sent>>20)
	}
}

// perNamespace is how many ConfigMaps a tenant labels in each of its namespaces.
const perNamespace = 125

// createAll creates perNamespace objects as tenant, four at a time.
func createAll(t *testing.T, tenant client.Client, object func(i int) *corev1.ConfigMap) {
	t.Helper()
	n := perNamespace
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				errs <- tenant.Create(context.Background(), object(i))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
}

// waitUntilMarked waits until the perNamespace labelled ConfigMaps of each namespace
// carry the status wanted there.
func waitUntilMarked(t *testing.T, want map[string]string) {
	t.Helper()
	eventually(t, 3*time.Minute, "every labelled ConfigMap marked", func() error {
		for ns, status := range want {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
			must(t, harness.K8s.List(context.Background(), list, client.InNamespace(ns), client.HasLabels{v1alpha1.ReplicateLabel}))
			marked := 0
			for _, cm := range list.Items {
				if cm.Annotations[v1alpha1.StatusAnnotation] == status {
					marked++
				}
			}
			if marked != perNamespace {
				return fmt.Errorf("%d of %d in %s are %s", marked, perNamespace, ns, status)
			}
		}
		return nil
	})
}

// assertStillReplicates checks that another tenant's source still replicates (within
// wait) and that cmsync is running.
func assertStillReplicates(t *testing.T, c *harness.Controller, victimSrc, victimDst string, wait time.Duration) {
	t.Helper()
	must(t, harness.K8s.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: victimSrc, Name: "settings",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: victimDst},
		},
		Data: map[string]string{"k": "v"},
	}))
	start := time.Now()
	harness.WaitForReplicas(t, victimSrc, "settings", wait, victimDst)
	t.Logf("another tenant's source replicated in %v", time.Since(start).Round(time.Second))
	if c.HasExited() {
		t.Fatalf("cmsync exited")
	}
}

// assertPeakUnderTheChartsLimit checks that cmsync's resident memory never reached the
// chart's limit, and returns its peak.
func assertPeakUnderTheChartsLimit(t *testing.T, c *harness.Controller) int64 {
	t.Helper()
	_, peak := residentBytes(t, c.Pid())
	if peak >= chartMemoryLimit {
		t.Errorf("peak resident memory %d MiB reaches the chart's limit of %d MiB", peak>>20, chartMemoryLimit>>20)
	}
	return peak
}

// liveHeap is the bytes of cmsync's heap that a collection leaves: what it holds. The
// process must serve profiles (--profiling): asking for a heap profile with gc=1
// collects first.
func liveHeap(t *testing.T, c *harness.Controller) int64 {
	t.Helper()
	resp, err := http.Get("http://" + c.MetricsAddr + "/debug/pprof/heap?gc=1")
	must(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return int64(c.Metric(t, "go_memstats_heap_alloc_bytes"))
}

// residentBytes reads the resident size of process pid now (VmRSS) and at its peak
// (VmHWM).
func residentBytes(t *testing.T, pid int) (now, peak int64) {
	t.Helper()
	proc, err := procfs.NewProc(pid)
	must(t, err)
	status, err := proc.NewStatus()
	must(t, err)
	return int64(status.VmRSS), int64(status.VmHWM)
}
