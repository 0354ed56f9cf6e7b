//go:build e2e

package e2e

import (
	"context"
	"fmt"
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

	const perNamespace, size = 125, 1_000_000
	flood := func(namespace string) {
		tenant := editorIn(t, namespace)
		var wg sync.WaitGroup
		errs := make(chan error, perNamespace)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < perNamespace; i += 4 {
					errs <- tenant.Create(context.Background(), &corev1.ConfigMap{
						ObjectMeta: metav1.ObjectMeta{
							Namespace: namespace, Name: fmt.Sprintf("blob-%03d", i),
							Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
							// A target that does not exist: each is a source, read by its passes.
							Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "nowhere-" + suffix},
						},
						Data: map[string]string{"blob": strings.Repeat(string(rune('a'+i%26)), size)},
					})
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, err)
		}
	}
	flood(forbidden)
	flood(hostile)

	// cmsync has seen every one: each carries the status it decided.
	eventually(t, 3*time.Minute, "every labelled ConfigMap marked", func() error {
		for ns, want := range map[string]string{forbidden: v1alpha1.StatusInvalid, hostile: v1alpha1.StatusSynced} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
			must(t, harness.K8s.List(context.Background(), list, client.InNamespace(ns)))
			marked := 0
			for _, cm := range list.Items {
				if cm.Annotations[v1alpha1.StatusAnnotation] == want {
					marked++
				}
			}
			if marked != perNamespace {
				return fmt.Errorf("%d of %d in %s are %s", marked, perNamespace, ns, want)
			}
		}
		return nil
	})

	// Another tenant's source still replicates.
	must(t, harness.K8s.Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: victimSrc, Name: "settings",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: victimDst},
		},
		Data: map[string]string{"k": "v"},
	}))
	harness.WaitForReplicas(t, victimSrc, "settings", 30*time.Second, victimDst)

	if c.HasExited() {
		t.Fatalf("cmsync exited")
	}
	_, peak := residentBytes(t, c.Pid())
	labelled := int64(2 * perNamespace * size)
	t.Logf("resident memory: %d MiB at the start, peak %d MiB, after %d MiB labelled", baseline>>20, peak>>20, labelled>>20)
	if peak >= chartMemoryLimit {
		t.Errorf("peak resident memory %d MiB reaches the chart's limit of %d MiB", peak>>20, chartMemoryLimit>>20)
	}
	if grown := peak - baseline; grown > labelled/2 {
		t.Errorf("memory grew by %d MiB with %d MiB labelled: it grows with what a tenant labels", grown>>20, labelled>>20)
	}
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
