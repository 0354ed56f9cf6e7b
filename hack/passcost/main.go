// Command passcost measures what the requests a cmsync pass makes besides its replica
// writes cost the API server and etcd, against a replica write: the user's own write
// of the source, which starts the pass, the status annotations' merge patch and the
// Event. Each kind is sent 1,000 times by 16 workers, in turns over six rounds on one
// control plane set up as the bench's (controlplane.StartWith, auditing writes), and
// the API server's and etcd's CPU seconds (less their quiet use) are summed per kind.
// It tells how much of a small fan-out's gap to a plain client (make bench-sweep,
// N = 100) is the pass's own requests.
//
//	KUBEBUILDER_ASSETS="$(hack/control-plane-binaries.sh)" go run -C hack ./passcost
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// serverCPU is the CPU seconds of this process's kube-apiserver and etcd.
func serverCPU() float64 {
	total := 0.0
	procs, _ := procfs.AllProcs()
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == os.Getpid() && (st.Comm == "kube-apiserver" || st.Comm == "etcd") {
			total += st.CPUTime() // in clock ticks: 10 ms against the ~1.5 s a kind costs
		}
	}
	return total
}

// parallel calls fn for 0 to n-1 from 16 workers, as LIMIT and a cmsync pass write,
// and panics with the first error.
func parallel(n int, fn func(i int) error) {
	var first sync.Once
	var failed error
	workqueue.ParallelizeUntil(context.Background(), 16, n, func(i int) {
		if err := fn(i); err != nil {
			first.Do(func() { failed = err })
		}
	})
	must(failed)
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// n is how many of each request a round sends.
const n = 1000

func main() {
	work, err := os.MkdirTemp("", "cmsync-passcost-")
	must(err)
	defer func() { _ = os.RemoveAll(work) }() // best effort: a leftover is in the system temp dir
	env, err := controlplane.StartWith(controlplane.Options{AuditLog: filepath.Join(work, "audit.log")})
	must(err)
	defer func() { _ = env.Stop() }()
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttle, as the bench's LIMIT
	w := &world{ctx: context.Background(), md: metadata.NewForConfigOrDie(cfg), payload: strings.Repeat("x", 1024)}
	cfg.ContentType = runtime.ContentTypeProtobuf
	w.cs = kubernetes.NewForConfigOrDie(cfg)
	w.create()
	measure(w.requests())
}

// world is the namespace "m" with n replica-shaped ConfigMaps and n sources, and the
// clients that write them.
type world struct {
	ctx     context.Context //nolint:containedctx // the command's one context
	cs      *kubernetes.Clientset
	md      metadata.Interface
	payload string
	// sources holds each source's metadata as its last write left it: the status patch
	// is conditional on it, as cmsync's is (desired.StatusPatch). Each index is written
	// by one worker at a time.
	sources []metav1.Object
}

func (w *world) replica(i int, v string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%04d", i), Namespace: "m",
		Labels:      map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue, v1alpha1.ContentHashLabel: v},
		Annotations: map[string]string{v1alpha1.SourceAnnotation: "src/x"}}, Data: map[string]string{"v": w.payload + v}}
}

func (w *world) source(i int, v string) *corev1.ConfigMap {
	targets := make([]string, 0, 100)
	for t := range 100 {
		targets = append(targets, fmt.Sprintf("team-%03d", t))
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("s-%04d", i), Namespace: "m",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(targets, ",")},
		},
		Data: map[string]string{"v": w.payload + v},
	}
}

// create makes the namespace, the replicas and the sources.
func (w *world) create() {
	_, err := w.cs.CoreV1().Namespaces().Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "m"}}, metav1.CreateOptions{})
	must(err)
	w.sources = make([]metav1.Object, n)
	parallel(n, func(i int) error {
		_, err := w.cs.CoreV1().ConfigMaps("m").Create(w.ctx, w.replica(i, "0"), metav1.CreateOptions{FieldManager: v1alpha1.FieldManager})
		if err != nil {
			return err
		}
		created, err := w.cs.CoreV1().ConfigMaps("m").Create(w.ctx, w.source(i, "0"), metav1.CreateOptions{})
		w.sources[i] = created
		return err
	})
}

// request is one kind of request a pass makes, sent for object i in a round.
type request struct {
	name string
	fn   func(round, i int) error
}

// requests are the replica write and the pass's own requests: the user's source write,
// the status patch and the Event.
func (w *world) requests() []request {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	return []request{
		{"replica PUT", func(round, i int) error {
			_, err := w.cs.CoreV1().ConfigMaps("m").Update(w.ctx, w.replica(i, fmt.Sprint(round)), metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
			return err
		}},
		{"source PUT (the user's write)", func(round, i int) error {
			updated, err := w.cs.CoreV1().ConfigMaps("m").Update(w.ctx, w.source(i, fmt.Sprint(round)), metav1.UpdateOptions{})
			if err == nil {
				w.sources[i] = updated
			}
			return err
		}},
		{"status merge PATCH (metadata)", func(round, i int) error {
			status := desired.SourceStatus{State: v1alpha1.StatusSynced, Synced: "100/100", Message: fmt.Sprintf("all 100 targets in sync (round %d)", round)}
			patch := desired.StatusPatch(w.sources[i], status, true, time.Now().Add(time.Duration(round)*time.Second))
			patched, err := w.md.Resource(gvr).Namespace("m").
				Patch(w.ctx, w.sources[i].GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.FieldManager})
			if err == nil {
				w.sources[i] = patched
			}
			return err
		}},
		{"Event POST (events.k8s.io/v1)", func(round, i int) error {
			now := metav1.NowMicro()
			_, err := w.cs.EventsV1().Events("m").Create(w.ctx, &eventsv1.Event{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%04d.%d", i, round), Namespace: "m"},
				EventTime:  now, ReportingController: "cmsync.io/cmsync", ReportingInstance: "cmsync-x",
				Action: "Sync", Reason: "Synced", Type: "Normal", Note: "updated 100 replicas (100/100)",
				Regarding: corev1.ObjectReference{Kind: "ConfigMap", Namespace: "m", Name: fmt.Sprintf("s-%04d", i), APIVersion: "v1"},
			}, metav1.CreateOptions{})
			return err
		}},
	}
}

// measure sends each kind of request n times a round, the kinds in turn, for six
// rounds, and prints what each cost the API server and etcd beyond their quiet rate.
func measure(kinds []request) {
	sums := make([]float64, len(kinds))
	rounds := 6
	for round := 1; round <= rounds; round++ {
		for k := range kinds {
			kk := (k + round) % len(kinds)
			time.Sleep(500 * time.Millisecond)
			q0 := serverCPU()
			time.Sleep(1000 * time.Millisecond)
			before := serverCPU()
			quietRate := before - q0
			start := time.Now()
			parallel(n, func(i int) error { return kinds[kk].fn(round, i) })
			time.Sleep(1000 * time.Millisecond)
			used := serverCPU() - before - quietRate*time.Since(start).Seconds()
			sums[kk] += used
			fmt.Printf("round %d %-32s %.3f s\n", round, kinds[kk].name, used)
		}
	}
	for k := range kinds {
		fmt.Printf("MEAN %-32s %.3f s per 1,000 (%.2fx the replica PUT)\n", kinds[k].name, sums[k]/float64(rounds), sums[k]/sums[0])
	}
}
