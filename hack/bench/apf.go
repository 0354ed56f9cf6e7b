package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

const (
	cmsyncUser    = "cmsync-bench"
	neighbourUser = "neighbour"
	tinyLevel     = "bench-one-seat"
)

// apfStorm measures the fan-out without throttling, then with cmsync and a neighbour
// in a priority level of one seat (each its own flow), with cmsync's default flags and
// with a client-side limit.
func apfStorm(c config) error {
	b, stop, err := startBench(c, controlplane.Options{})
	if err != nil {
		return err
	}
	defer stop()
	ctx := context.Background()
	res := report.APFResult{Date: time.Now().UTC().Format(time.RFC3339), Machine: report.Machine(), Namespaces: c.namespaces, Sources: c.sources}
	step("creating %d namespaces", c.namespaces)
	b.createNamespaces(ctx, c.namespaces)

	cmsyncKubeconfig, neighbour := b.apfUsers(ctx)
	adminKubeconfig := b.kubeconfig
	b.kubeconfig = cmsyncKubeconfig
	defer func() { b.kubeconfig = adminKubeconfig }()
	for i, run := range []report.APFRun{
		{Name: "not throttled"},
		{Name: "one seat", Throttled: true},
		{Name: "one seat, --kube-api-qps=100", Throttled: true, CmsyncArgs: "--kube-api-qps=100"},
	} {
		step("APF run %q: %d sources to %d namespaces", run.Name, c.sources, c.namespaces)
		if run.Throttled {
			b.throttle(ctx)
		}
		proc := b.startCmsync(strings.Fields(run.CmsyncArgs)...)
		prefix := fmt.Sprintf("apf-%d", i)
		done := make(chan struct{})
		latencies := make(chan neighbourFigures, 1)
		go func() { latencies <- neighbourWrites(ctx, neighbour, done) }()
		w := b.fanOut(ctx, prefix, c.sources)
		close(done)
		run.ConvergeSeconds = w.seconds()
		n := <-latencies
		run.NeighbourWrites, run.NeighbourErrors = len(n.latencies), n.errors
		if len(n.latencies) > 0 {
			slices.Sort(n.latencies)
			pick := func(q float64) float64 { return n.latencies[int(q*float64(len(n.latencies)-1))] }
			run.NeighbourP50Millis, run.NeighbourP99Millis, run.NeighbourMaxMillis = pick(0.5), pick(0.99), pick(1)
		}
		b.countStorm(&run, w)
		if run.Throttled {
			b.unthrottle(ctx)
		}
		b.cleanup(ctx, prefix, c.sources)
		proc.Stop()
		res.Runs = append(res.Runs, run)
		fmt.Printf("  converged in %.1fs; cmsync: %d writes, %d answered 429, at most %d in one second; "+
			"neighbour: %d writes, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d errors, %d answered 429\n",
			run.ConvergeSeconds, run.CmsyncWrites, run.CmsyncRejected, run.CmsyncMaxWritesInSecond,
			run.NeighbourWrites, run.NeighbourP50Millis, run.NeighbourP99Millis, run.NeighbourMaxMillis, run.NeighbourErrors, run.NeighbourRejected)
	}
	return report.Save(c.out, "apf-", res)
}

// apfUsers provisions cmsync's user and the neighbour's, neither exempt from flow
// control as the bench's administrator is, binds both to cluster-admin, and returns
// cmsync's kubeconfig file and a client of the neighbour.
func (b *bench) apfUsers(ctx context.Context) (string, *kubernetes.Clientset) {
	var neighbourCfg *rest.Config
	var cmsyncKubeconfig string
	for _, user := range []string{cmsyncUser, neighbourUser} {
		kubeconfig, cfg, err := b.env.AddUser(user)
		must(err)
		must1(b.cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "bench-" + user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
		}, metav1.CreateOptions{}))
		if user == cmsyncUser {
			cmsyncKubeconfig = filepath.Join(b.work, "kubeconfig-"+user)
			must(os.WriteFile(cmsyncKubeconfig, kubeconfig, 0o600))
		} else {
			neighbourCfg = rest.CopyConfig(cfg)
		}
	}
	neighbourCfg.QPS, neighbourCfg.Burst, neighbourCfg.UserAgent = -1, 0, neighbourUser
	neighbour, err := kubernetes.NewForConfig(neighbourCfg)
	must(err)
	must1(neighbour.CoreV1().ConfigMaps(workload.SourceNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: neighbourUser}},
		metav1.CreateOptions{}))
	return cmsyncKubeconfig, neighbour
}

// throttle puts cmsync's and the neighbour's requests in a priority level of one
// seat, one flow per user, with short queues: beyond what one seat and the queues
// hold, the API server answers 429. It waits until the API server applies it.
func (b *bench) throttle(ctx context.Context) {
	must(oneSeat.Apply(ctx, b.cs))
}

func (b *bench) unthrottle(ctx context.Context) {
	must(oneSeat.Remove(ctx, b.cs))
}

// oneSeat throttles every request of cmsync and of the neighbour.
var oneSeat = controlplane.Throttle{
	Name: tinyLevel, Users: []string{cmsyncUser, neighbourUser}, Queues: 16, HandSize: 2, QueueLength: 8,
	Rules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
		ClusterScope: true, Namespaces: []string{"*"}}},
	NonResource: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
}

type neighbourFigures struct {
	latencies []float64
	errors    int
}

// neighbourWrites updates the neighbour's ConfigMap every 50 ms until done, timing
// each update.
func neighbourWrites(ctx context.Context, cs *kubernetes.Clientset, done <-chan struct{}) neighbourFigures {
	var f neighbourFigures
	for i := 0; ; i++ {
		select {
		case <-done:
			return f
		case <-time.After(50 * time.Millisecond):
		}
		start := time.Now()
		_, err := cs.CoreV1().ConfigMaps(workload.SourceNamespace).Update(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: neighbourUser, Namespace: workload.SourceNamespace},
			Data:       map[string]string{"n": fmt.Sprint(i)},
		}, metav1.UpdateOptions{})
		if err != nil {
			f.errors++
		} else {
			f.latencies = append(f.latencies, float64(time.Since(start).Microseconds())/1000)
		}
	}
}

// countStorm reads the audit log of the fan-out's window: cmsync's and the
// neighbour's writes, and those answered 429.
func (b *bench) countStorm(run *report.APFRun, w window) {
	perSecond := map[int64]int{}
	b.auditedWrites(func(e measure.AuditEvent) {
		if e.Received.Before(w.start) || e.Received.After(w.end) {
			return
		}
		switch {
		case strings.HasPrefix(e.UserAgent, "cmsync"):
			run.CmsyncWrites++
			perSecond[e.Received.Unix()]++
			if e.ResponseStatus.Code == 429 {
				run.CmsyncRejected++
			}
		case strings.HasPrefix(e.UserAgent, neighbourUser) && e.ResponseStatus.Code == 429:
			run.NeighbourRejected++
		}
	})
	for _, n := range perSecond {
		run.CmsyncMaxWritesInSecond = max(run.CmsyncMaxWritesInSecond, n)
	}
}
