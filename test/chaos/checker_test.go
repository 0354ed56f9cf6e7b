//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The model checker's runs: histories drawn from a seed, run in fresh worlds under a
// fault each (faults_test.go), checked against the model (model_test.go).

// --- histories ---

// history is one burst of operations with at most one fault.
type history struct {
	Index int    `json:"index"`
	Fault string `json:"fault"`
	Ops   []mcOp `json:"ops"`
}

// chaosFigures is what `make chaos` writes to bench/results/chaos-*.json.
type chaosFigures struct {
	Seed                 uint64             `json:"seed"`
	From                 int                `json:"from,omitempty"` // index of the first history (CHAOS_FROM)
	Histories            int                `json:"histories"`
	Operations           int                `json:"operations"`
	OperationsByKind     map[string]int     `json:"operationsByKind"`
	Faults               map[string]int     `json:"faults"`
	Violations           int                `json:"violations"`
	WorstConvergeSeconds map[string]float64 `json:"worstConvergeSeconds"`
	// Fault figures: the old leader's writes after it was frozen or cut off (must be 0),
	// throttled writes answered 429, and the most write requests cmsync sent in one
	// second while throttled.
	StaleLeaderWrites     int `json:"staleLeaderWrites"`
	StaleLeaderRefused    int `json:"staleLeaderRequestsRefused"`
	Throttled429          int `json:"throttled429"`
	ThrottledMaxPerSecond int `json:"throttledMaxWritesPerSecond"`
	RelistsAfterExpiry    int `json:"relistsAfterWatchExpiry"`
	// SettlingWrites were sent after the cluster matched the model and before it went
	// quiet; IdleWrites, by a cmsync that did not go quiet (must be 0).
	SettlingWrites int      `json:"settlingWrites"`
	IdleWrites     int      `json:"idleWrites"`
	Failures       []string `json:"failures,omitempty"`
}

// generate draws history i of the run seeded by seed: the same seed and index give the
// same history.
func generate(seed uint64, i int, faults []string) history {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	excluded, barred := "", false
	w := newModelOnly(&excluded, &barred)
	h := history{Index: i, Fault: faults[i%len(faults)]}
	for range 4 + rng.IntN(8) {
		op := w.randomOp(rng, slices.Contains(breakableUnder, h.Fault))
		w.applyToModel(op)
		h.Ops = append(h.Ops, op)
	}
	return h
}

// newModelOnly is a world without objects, to draw a history's ops from its model.
func newModelOnly(excluded *string, barred *bool) *mcWorld {
	w := &mcWorld{prefix: "model", unmanaged: map[mcObject]string{}, excluded: excluded, sourcesBarred: barred}
	for i := range poolSize {
		w.pool = append(w.pool, &mcNamespace{name: fmt.Sprintf("model-n%d", i)})
	}
	w.sources = []*mcSource{{kind: kindConfigMap, name: "a"}, {kind: kindConfigMap, name: "b"}, {kind: kindSecret, name: "c"}}
	w.syncSource = &mcSource{kind: kindConfigMap, name: "d"}
	w.sync = &mcSync{name: "model"}
	return w
}

// applyToModel is apply's effect on the model alone, which is enough to draw the next
// op (replica ops and unmanaged objects are decided against the cluster when applied).
func (w *mcWorld) applyToModel(op mcOp) {
	switch op.Kind {
	case "create-source":
		w.sources[op.Slot].exists = true
	case "delete-source":
		w.sources[op.Slot].exists = false
	case "break-source", "reserve-source", "fix-source":
		w.sources[op.Slot].broken = op.Kind != "fix-source"
	case "create-sync":
		w.sync.exists = true
	case "delete-sync":
		w.sync.exists = false
	case "create-namespace":
		w.pool[op.Slot].exists = true
	case "delete-namespace":
		w.pool[op.Slot].deleted = true
	}
}

// --- the run ---

// TestModelChecker runs CHAOS_HISTORIES random histories (default 12; make chaos: 200)
// of CHAOS_SEED (default 1), each with one fault of the list in turn (one in the list is
// no fault), against two leader-elected cmsync processes, and checks the model's
// invariants after each. CHAOS_THROTTLE is how long the throttling fault lasts (default
// 10s; make chaos: 1m); CHAOS_FAULTS restricts the faults to a comma list of
// faultNames; CHAOS_FROM (default 0) is the index of the first history, so that
// CHAOS_FROM=i CHAOS_HISTORIES=1 replays history i alone. With CHAOS_OUT it writes its
// figures there.
func TestModelChecker(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	seed, _ := strconv.ParseUint(envOr("CHAOS_SEED", "1"), 10, 64)
	n, _ := strconv.Atoi(envOr("CHAOS_HISTORIES", "12"))
	from, _ := strconv.Atoi(envOr("CHAOS_FROM", "0"))
	throttleFor, err := time.ParseDuration(envOr("CHAOS_THROTTLE", "10s"))
	must(t, err)
	faults := faultNames
	if only := os.Getenv("CHAOS_FAULTS"); only != "" {
		faults = strings.Split(only, ",")
		for _, f := range faults {
			if !slices.Contains(faultNames, f) {
				t.Fatalf("CHAOS_FAULTS: unknown fault %q (known: %s)", f, strings.Join(faultNames, ","))
			}
		}
	}
	must(t, createStandbyIdentity())

	figures := chaosFigures{Seed: seed, From: from, OperationsByKind: map[string]int{}, Faults: map[string]int{}, WorstConvergeSeconds: map[string]float64{}}
	// The figures of the histories played are kept even when the run stops early (a
	// harness failure), so that a long run is not lost.
	defer writeChaosFigures(t, &figures)
	harness.WithoutProtection(t, func() {
		mc := newModelChecker(t, throttleFor, &figures)
		defer mc.stopAll()
		for i := from; i < from+n; i++ {
			h := generate(seed, i, faults)
			violations, converge := mc.run(h, fmt.Sprintf("history %d", i))
			figures.Histories++
			figures.Operations += len(h.Ops)
			for _, op := range h.Ops {
				figures.OperationsByKind[op.Kind]++
			}
			figures.Faults[h.Fault]++
			figures.WorstConvergeSeconds[h.Fault] = max(figures.WorstConvergeSeconds[h.Fault], converge.Seconds())
			if len(violations) == 0 {
				continue
			}
			figures.Violations += len(violations)
			shortest := mc.shrink(h)
			report := fmt.Sprintf("CHAOS_SEED=%d history %d (fault %s; CHAOS_FROM=%d CHAOS_HISTORIES=1 replays it) violates:\n  %s\n"+
				"shortest failing prefix (%d of %d ops, fault %s):\n  %s",
				seed, i, h.Fault, i, strings.Join(violations, "\n  "), len(shortest.Ops), len(h.Ops), shortest.Fault, opsText(shortest.Ops))
			figures.Failures = append(figures.Failures, report)
			t.Error(report)
		}
	})
	if figures.StaleLeaderWrites > 0 || figures.IdleWrites > 0 {
		t.Errorf("stale leader writes %d, idle writes %d: both must be 0", figures.StaleLeaderWrites, figures.IdleWrites)
	}
}

// writeChaosFigures logs the figures and, with CHAOS_OUT, writes them there.
func writeChaosFigures(t *testing.T, figures *chaosFigures) {
	data, _ := json.MarshalIndent(figures, "", "  ")
	t.Logf("model checker: %s", data)
	if dir := os.Getenv("CHAOS_OUT"); dir != "" {
		err := os.MkdirAll(dir, 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("chaos-%s.json", time.Now().UTC().Format("20060102-150405"))), data, 0o644)
		}
		if err != nil {
			t.Errorf("writing the figures: %v", err)
		}
	}
}

func opsText(ops []mcOp) string {
	lines := make([]string, len(ops))
	for i, op := range ops {
		lines[i] = op.String()
	}
	return strings.Join(lines, "\n  ")
}

// shrink finds the shortest prefix of h's ops that still fails, with h's fault and
// then without it, each in a fresh world.
func (mc *modelChecker) shrink(h history) history {
	for k := 1; k < len(h.Ops); k++ {
		for _, fault := range []string{"none", h.Fault} {
			prefix := history{Index: h.Index, Fault: fault, Ops: h.Ops[:k]}
			if v, _ := mc.run(prefix, fmt.Sprintf("shrinking history %d to %d ops, fault %s", h.Index, k, fault)); len(v) > 0 {
				return prefix
			}
		}
	}
	return h
}

// flagChanges are what the "restart-with-flags" fault does in turn: --exclude-namespaces
// gains a glob of the pool's n4 of every world, loses it again; --source-namespaces
// leaves the worlds' source namespaces out (every source and the ConfigMapSync turn
// Invalid and keep their replicas), lets them in again.
var flagChanges = []struct {
	excluded string
	barred   bool
}{{"mc-*-n4", false}, {"", false}, {"", true}, {"", false}}

// breakableUnder are the faults under which a history may break a source's
// annotations: breaking needs the cluster converged first, which a partition, a
// throttled API server or stopped processes would hold up.
var breakableUnder = []string{"none", "kill-leader", "etcd-restart", "apiserver-restart"}

// faultNames are the faults in the order histories take them.
var faultNames = []string{
	"none",
	"kill-leader",
	"frozen-leader",
	"partition",
	"throttled",
	"etcd-restart",
	"apiserver-restart",
	"watch-expired",
	"restart-with-flags",
}

// modelChecker runs histories against two cmsync processes.
type modelChecker struct {
	t             *testing.T
	throttleFor   time.Duration
	figures       *chaosFigures
	procs         []*mcProcess
	excluded      string
	sourcesBarred bool
	flagChanges   int
	// world is the history being run.
	world *mcWorld
	// stormNS and stormTargets are the throttled fault's source namespace and targets.
	stormNS      string
	stormTargets []string
}

// mcProcess is one cmsync process: its identity, the relay it reaches the API server
// through, and the running controller.
type mcProcess struct {
	user       string
	kubeconfig string
	proxy      *partitionProxy
	// link, with CHAOS_PARTITION=netns, is the network namespace the process runs in;
	// a partition then drops its route instead of cutting the relay.
	link *netnsLink
	c    *harness.Controller
}

// partition cuts the process off from the API server, and heal joins it again.
func (p *mcProcess) partition(t *testing.T) {
	if p.link != nil {
		must(t, p.link.cut())
		return
	}
	p.proxy.partition()
}

func (p *mcProcess) heal(t *testing.T) {
	if p.link != nil {
		// Healing what is not cut finds the routes there ("File exists"): nothing to do.
		if err := p.link.heal(); err != nil && strings.Count(err.Error(), "File exists") != 2 {
			t.Fatal(err)
		}
		return
	}
	p.proxy.heal()
}

func newModelChecker(t *testing.T, throttleFor time.Duration, figures *chaosFigures) *modelChecker {
	mc := &modelChecker{t: t, throttleFor: throttleFor, figures: figures}
	standby, err := harness.ServiceAccountKubeconfig(standbyServiceAccount)
	must(t, err)
	byRoute := partitionByRoute(t)
	for i, p := range []struct{ user, kubeconfig string }{{harness.CmsyncUser, harness.CmsyncKubeconfig}, {standbyUser, standby}} {
		process := &mcProcess{user: p.user}
		listen := "127.0.0.1"
		if byRoute {
			process.link = newNetnsLink(t, i)
			listen = process.link.hostIP
		}
		process.proxy = startPartitionProxy(t, listen, apiServerAddr())
		process.kubeconfig = kubeconfigVia(t, p.kubeconfig, process.proxy)
		mc.procs = append(mc.procs, process)
	}
	for _, p := range mc.procs {
		mc.start(p)
	}
	return mc
}

// start runs p's process with the policy of the moment and a short lease (6s), so a
// takeover happens within seconds.
func (mc *modelChecker) start(p *mcProcess) {
	// Two processes of one identity would leave one untracked, perhaps holding the
	// lease. (A fault's ops once restarted the killed leader through converge, and the
	// fault then started it a second time; faults now restart through restartExited.)
	if p.c != nil && !p.c.HasExited() {
		mc.t.Fatalf("harness error: %s started again while its process (pid %d) runs", p.user, p.c.Pid())
	}
	exclude, sources := "kube-system,kube-public,kube-node-lease", "*"
	if mc.excluded != "" {
		exclude += "," + mc.excluded
	}
	if mc.sourcesBarred {
		sources = "mc-storm-*" // every namespace of the model checker's but the worlds' source namespaces
	}
	args := []string{"--kubeconfig=" + p.kubeconfig, "--leader-elect=true", "--secrets=enabled",
		"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s",
		"--exclude-namespaces=" + exclude, "--source-namespaces=" + sources, "--tenant-label=" + tenantLabel}
	if p.link == nil {
		p.c = harness.StartController(mc.t, args...)
		return
	}
	metrics, health := p.link.endpoints()
	p.c = harness.LaunchController(mc.t, harness.Launch{Netns: p.link.name, MetricsAddr: metrics, HealthAddr: health}, args...)
}

func (mc *modelChecker) stopAll() {
	for _, p := range mc.procs {
		p.heal(mc.t)
		if p.c.HasExited() {
			continue
		}
		p.c.Thaw(mc.t)
		p.c.Stop()
	}
}

// leader waits for the process holding the lease.
func (mc *modelChecker) leader() *mcProcess {
	var leader *mcProcess
	eventually(mc.t, 60*time.Second, "a leader", func() error {
		for _, p := range mc.procs {
			if !p.c.HasExited() && leads(p.c) {
				leader = p
				return nil
			}
		}
		return fmt.Errorf("no process leads")
	})
	return leader
}

func (mc *modelChecker) other(p *mcProcess) *mcProcess {
	if mc.procs[0] == p {
		return mc.procs[1]
	}
	return mc.procs[0]
}

// restartExited starts again a process that exited, as its Deployment would: cmsync
// exits when it loses the lease, e.g. when the API server is away for longer than the
// renew deadline.
func (mc *modelChecker) restartExited() {
	for _, p := range mc.procs {
		if p.c.HasExited() {
			mc.start(p)
		}
	}
}

// run plays h in a fresh world and returns the violated invariants and how long the
// cluster took to converge after the last op (and the fault's end).
func (mc *modelChecker) run(h history, what string) ([]string, time.Duration) {
	t := mc.t
	t.Logf("%s: fault %s, %d ops", what, h.Fault, len(h.Ops))
	w := newWorld(t, &mc.excluded, &mc.sourcesBarred)
	w.syncSource.exists, w.syncSource.value = true, "d0"
	must(t, harness.K8s.Create(context.Background(), w.sourceObject(w.syncSource)))
	var violations []string
	ops := func(from, to int) {
		for _, op := range h.Ops[from:to] {
			if op.Kind == "break-source" || op.Kind == "reserve-source" {
				// What an Invalid source keeps is what it had: known once converged.
				for _, v := range mc.converge(w) {
					violations = append(violations, "before "+op.String()+": "+v)
				}
			}
			w.apply(t, op)
		}
	}
	mc.world = w
	half := len(h.Ops) / 2
	violations = append(violations, mc.inject(h.Fault, ops, half, len(h.Ops))...)

	start := time.Now()
	last := mc.converge(w)
	converge := time.Since(start)
	violations = append(violations, last...)
	if len(last) == 0 {
		violations = append(violations, mc.idle(w)...)
	}
	// Cleanup is part of the contract: the world's replicas go with its sources.
	w.remove(t)
	var leftovers []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		mc.restartExited()
		leftovers = w.violations(t)
		if len(leftovers) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, v := range leftovers {
		violations = append(violations, "after removing every source: "+v)
	}
	if len(violations) > 0 {
		t.Logf("%s: %d violations after %s:\n  %s", what, len(violations), converge.Round(time.Millisecond), strings.Join(violations, "\n  "))
	}
	return violations, converge
}

// converge waits until the cluster matches the model, for up to 90 s, restarting
// processes that exited; it returns what still differs.
func (mc *modelChecker) converge(w *mcWorld) []string {
	start := time.Now()
	for {
		mc.restartExited()
		last := w.violations(mc.t)
		if len(last) == 0 || time.Since(start) > 90*time.Second {
			return last
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// idle proves that the converged cluster goes quiet and stays right: within
// settleFor of matching the model, a 2 s window passes with no write from cmsync — no
// replica, status or Event; only the leader election's Lease and its Events — and the
// model still matches after it. Writes before that window (a replica rewritten once
// after a fault, when a watch event was lost with an etcd restart) are counted, not
// failed; a cmsync that keeps writing fails.
func (mc *modelChecker) idle(w *mcWorld) []string {
	deadline := time.Now().Add(settleFor)
	var last []string
	for time.Now().Before(deadline) {
		tail := harness.NewAuditTail(mc.t)
		time.Sleep(2 * time.Second)
		last = nil
		for _, e := range tail.Next(mc.t) {
			if isCmsync(e.User.Username) && e.IsWrite() && e.ObjectRef != nil && !isLeaderElection(e) {
				last = append(last, fmt.Sprintf("%s %s %s/%s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name))
			}
		}
		if len(last) == 0 {
			return w.violations(mc.t)
		}
		mc.figures.SettlingWrites += len(last)
	}
	mc.figures.IdleWrites += len(last)
	return []string{fmt.Sprintf("still writing %s after matching the model: %d writes in the last 2 s: %s",
		settleFor, len(last), strings.Join(harness.TruncateList(last), ", "))}
}

// settleFor bounds how long a converged cluster may take to go quiet.
const settleFor = 20 * time.Second

// isLeaderElection tells the Lease and the Events about it apart from cmsync's work.
func isLeaderElection(e harness.AuditRecord) bool {
	return e.ObjectRef.Resource == "leases" ||
		(e.ObjectRef.Resource == "events" && e.ObjectRef.Namespace == harness.ReleaseNamespace && strings.HasPrefix(e.ObjectRef.Name, "cmsync.io."))
}

// inject runs the ops (ops(0, half) then ops(half, all)) under the fault, and returns
// what the fault's own checks found wrong.
func (mc *modelChecker) inject(fault string, ops func(from, to int), half, all int) []string {
	t := mc.t
	switch fault {
	case "none":
		ops(0, all)
	case "kill-leader":
		// SIGKILL at a random moment of the burst: no cleanup, no lease release.
		leader := mc.leader()
		ops(0, half)
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
		leader.c.Kill()
		ops(half, all) // a break-source op converges, and so may restart it already
		mc.restartExited()
	case "frozen-leader":
		// The leader freezes with work decided and not done, for longer than the lease;
		// the other takes over and works; the old one wakes up and must not write. The
		// takeover needs the other process running: one that exited is started first.
		mc.restartExited()
		leader := mc.leader()
		tail := harness.NewAuditTail(t)
		ops(0, half)
		leader.c.Freeze(t)
		ops(half, all)
		mc.waitForLeader(mc.other(leader))
		taken := time.Now()
		time.Sleep(2 * time.Second) // the new leader works
		leader.c.Thaw(t)
		v := mc.expectNoWritesFrom(leader, taken, tail)
		mc.restartExited()
		return v
	case "partition":
		// The leader is cut off from the API server for longer than the lease while
		// users change things; the other takes over; no double writer after it heals.
		mc.restartExited()
		leader := mc.leader()
		tail := harness.NewAuditTail(t)
		leader.partition(t)
		ops(0, all)
		mc.waitForLeader(mc.other(leader))
		taken := time.Now()
		time.Sleep(2 * time.Second)
		leader.heal(t)
		v := mc.expectNoWritesFrom(leader, taken, tail)
		mc.restartExited()
		return v
	case "throttled":
		return mc.throttled(ops, all)
	case "etcd-restart":
		ops(0, half)
		restartEtcd(t, time.Second)
		ops(half, all)
	case "apiserver-restart":
		ops(0, half)
		restartKubeAPIServer(t)
		ops(half, all)
	case "watch-expired":
		// Both processes are cut off while users change things and the API server
		// restarts: its new watch cache begins after every resourceVersion cmsync has
		// seen, so cmsync's watches resume with 410 Gone and it must list again.
		for _, p := range mc.procs {
			p.partition(t)
		}
		ops(0, all)
		restartKubeAPIServer(t)
		tail := harness.NewAuditTail(t)
		for _, p := range mc.procs {
			p.heal(t)
		}
		mc.restartExited()
		mc.leader()
		relists := 0
		eventually(t, 60*time.Second, "cmsync lists again after its watches expired", func() error {
			for _, e := range tail.Next(t) {
				if isCmsync(e.User.Username) && (e.Verb == "list" || strings.Contains(e.RequestURI, "sendInitialEvents=true")) {
					relists++
				}
			}
			if relists == 0 {
				return fmt.Errorf("no list yet")
			}
			return nil
		})
		mc.figures.RelistsAfterExpiry += relists
	case "restart-with-flags":
		// The flags change while both processes are down, between two halves of the
		// burst; what sources turning Invalid keep is known once the first half has
		// converged.
		change := flagChanges[mc.flagChanges%len(flagChanges)]
		mc.flagChanges++
		ops(0, half)
		v := mc.converge(mc.world)
		for _, p := range mc.procs {
			p.c.Stop()
		}
		mc.excluded = change.excluded
		// Newly excluded namespaces no longer admit anything, not even an Invalid
		// source's replicas.
		mc.world.dropUnadmitted()
		if change.barred && !mc.sourcesBarred {
			mc.world.bar()
		} else if !change.barred && mc.sourcesBarred {
			mc.world.unbar()
		}
		mc.sourcesBarred = change.barred
		ops(half, all) // a break-source op converges, and so may start them already
		mc.restartExited()
		for i := range v {
			v[i] = "before the restart with new flags: " + v[i]
		}
		return v
	default:
		t.Fatalf("unknown fault %s", fault)
	}
	return nil
}

// throttled runs the ops while the API server's flow control answers most of cmsync's
// writes 429 for mc.throttleFor; cmsync must neither stall nor loop hot.
func (mc *modelChecker) throttled(ops func(from, to int), all int) []string {
	t := mc.t
	ctx := context.Background()
	stormNS, stormTargets := mc.stormNamespaces()
	storm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: stormNS, Name: "storm-" + randomSuffix(),
		Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: stormNS + "-*"}},
		Data: map[string]string{"v": "storm"}}
	tail := harness.NewAuditTail(t)
	throttle(t)
	must(t, harness.K8s.Create(ctx, storm)) // a fan-out that one seat cannot carry
	ops(0, all)
	time.Sleep(mc.throttleFor)
	unthrottle(t)
	var out []string
	if !waitUntilOK(90*time.Second, func() bool { return len(harness.ReplicasOf(t, stormNS, storm.Name)) == len(stormTargets) }) {
		out = append(out, fmt.Sprintf("throttled: the storm's fan-out did not complete after the throttling ended: %d of %d replicas",
			len(harness.ReplicasOf(t, stormNS, storm.Name)), len(stormTargets)))
	}
	must(t, harness.K8s.Delete(ctx, storm))
	if !waitUntilOK(90*time.Second, func() bool { return len(harness.ReplicasOf(t, stormNS, storm.Name)) == 0 }) {
		out = append(out, "throttled: the storm's replicas stayed after its source was deleted")
	}
	perSecond := map[int64]int{}
	rejected := 0
	for _, e := range tail.Next(t) {
		if !isCmsync(e.User.Username) || !e.IsWrite() {
			continue
		}
		perSecond[e.Received.Unix()]++
		if e.Code() == 429 {
			rejected++
		}
	}
	most := 0
	for _, n := range perSecond {
		most = max(most, n)
	}
	mc.figures.Throttled429 += rejected
	mc.figures.ThrottledMaxPerSecond = max(mc.figures.ThrottledMaxPerSecond, most)
	t.Logf("throttled for %s: %d writes answered 429, at most %d write requests in one second", mc.throttleFor, rejected, most)
	// A bounded rate: cmsync's workers bound its requests in flight (4 sources x 16
	// writers), and client-go waits the Retry-After of each 429; a hot loop would send
	// thousands a second.
	if most > maxThrottledWritesPerSecond {
		out = append(out, fmt.Sprintf("throttled: %d write requests in one second (more than %d: a hot loop)", most, maxThrottledWritesPerSecond))
	}
	if rejected == 0 {
		out = append(out, "throttled: no write was answered 429, so the fault did not happen")
	}
	return out
}

// stormNamespaces makes, once, the namespaces the throttled fault fans out to.
func (mc *modelChecker) stormNamespaces() (string, []string) {
	if mc.stormNS == "" {
		mc.stormNS = harness.NewNamespace(mc.t, "mc-storm", nil)
		for i := range stormSize {
			mc.stormTargets = append(mc.stormTargets, mc.stormNS+"-"+strconv.Itoa(i))
			must(mc.t, harness.K8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mc.stormTargets[i]}}))
		}
	}
	return mc.stormNS, mc.stormTargets
}

// stormSize is how many namespaces the throttled fault's fan-out reaches.
const stormSize = 60

// waitUntilOK polls ok until it holds or the timeout passes.
func waitUntilOK(timeout time.Duration, ok func() bool) bool {
	return harness.WaitUntil(timeout, func() error {
		if !ok() {
			return fmt.Errorf("not yet")
		}
		return nil
	}) == nil
}

// maxThrottledWritesPerSecond bounds cmsync's write requests while every one is
// answered 429 at once: 64 in flight, each retried after the server's Retry-After of
// at least one second.
const maxThrottledWritesPerSecond = 200

func (mc *modelChecker) waitForLeader(p *mcProcess) {
	eventually(mc.t, 60*time.Second, "the other process leads", func() error {
		if !leads(p.c) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// expectNoWritesFrom checks the audit log (read from tail) for effective writes of the old
// leader's identity received after taken — when the test saw the other process lead,
// so after the lease changed hands — for long enough that the old leader's in-flight
// work has been tried: it must have stepped down (exited) without one.
func (mc *modelChecker) expectNoWritesFrom(old *mcProcess, taken time.Time, tail *harness.AuditTail) []string {
	t := mc.t
	deadline := time.Now().Add(15 * time.Second)
	var stale []string
	for {
		for _, e := range tail.Next(t) {
			if e.User.Username != old.user || !e.IsWrite() || !e.Received.After(taken) {
				continue
			}
			what := e.Verb
			if e.ObjectRef != nil {
				what += " " + e.ObjectRef.Resource + " " + e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
			}
			// A request the API server refused changed nothing: one whose body the
			// fence cut off after its headers had gone out is answered 500, unnamed.
			if e.Code() >= 300 {
				mc.figures.StaleLeaderRefused++
				t.Logf("the old leader's request after the takeover, refused: %s (answered %d)", what, e.Code())
				continue
			}
			stale = append(stale, fmt.Sprintf("%s (answered %d)", what, e.Code()))
		}
		if old.c.HasExited() || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	mc.figures.StaleLeaderWrites += len(stale)
	var out []string
	if len(stale) > 0 {
		out = append(out, fmt.Sprintf("the old leader (%s) wrote after losing the lease: %s", old.user, strings.Join(harness.TruncateList(stale), "; ")))
	}
	if !old.c.HasExited() && leads(old.c) {
		out = append(out, "the old leader still leads after its lease was taken")
	}
	return out
}

// leads tells whether the process holds the lease; a frozen or gone process does not
// answer and does not lead.
func leads(c *harness.Controller) bool {
	if c.HasExited() {
		return false
	}
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + c.MetricsAddr + "/metrics")
	if err != nil {
		return false
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "leader_election_master_status") && strings.HasSuffix(line, " 1") {
			return true
		}
	}
	return false
}
