package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// SweepResult is the curve: cmsync against LIMIT as the namespaces, the sources and the
// object size grow.
type SweepResult struct {
	Date       string `json:"date"`
	Machine    string `json:"machine"`
	Rounds     int    `json:"rounds"`
	CmsyncArgs string `json:"cmsyncArgs,omitempty"`
	// CmsyncFirst is -sweep-cmsync-first: cmsync went first in the odd rounds.
	CmsyncFirst bool `json:"cmsyncFirst,omitempty"`
	// ControlPlanePerRound says each round ran on a control plane of its own; sweeps
	// before it ran a point's rounds on one.
	ControlPlanePerRound bool `json:"controlPlanePerRound"`
	// ServerGCBeforePhase is -server-gc-before-phase: the API server collected its
	// garbage before each phase; sweeps before it did not.
	ServerGCBeforePhase bool `json:"serverGCBeforePhase,omitempty"`
	// WarmUp is -sweep-warm-up: each round began with cmsync's warm-up (warmUp);
	// sweeps before it measured a cmsync started for the round.
	WarmUp bool    `json:"warmUp,omitempty"`
	Points []Point `json:"points"`
}

// Point is one point of the curve: Sources sources, each replicated to all Namespaces,
// with a value of SizeBytes. LIMIT makes the very same writes with a plain client: it
// creates, updates and deletes Sources objects of that size in every namespace.
type Point struct {
	Namespaces int `json:"namespaces"`
	Sources    int `json:"sources"`
	SizeBytes  int `json:"sizeBytes"`
	Replicas   int `json:"replicas"`
	Rounds     int `json:"rounds"`
	// Limit and Cmsync are the medians of the rounds' seconds (Update is the mass
	// change: every source changed at once); Ratios divides the two.
	Limit  Phases `json:"limit"`
	Cmsync Phases `json:"cmsync"`
	Ratios Phases `json:"ratios"`
	// CPU is the medians of the CPU seconds of each process in each phase.
	LimitCPU  map[string]map[string]float64 `json:"limitCPU"`
	CmsyncCPU map[string]map[string]float64 `json:"cmsyncCPU"`
	// ServerCPUPer1000 is kube-apiserver's and etcd's CPU seconds per 1,000 writes,
	// the median over the rounds of each phase.
	LimitServerCPUPer1000  Phases `json:"limitServerCPUPer1000Writes"`
	CmsyncServerCPUPer1000 Phases `json:"cmsyncServerCPUPer1000Writes"`
	// ServerCPUPer1000WithAftermath is the same from each phase's CPU with aftermath
	// (Split.CPUWithAftermath): the measure that counts the same work for both.
	LimitServerCPUPer1000WithAftermath  Phases `json:"limitServerCPUPer1000WritesWithAftermath"`
	CmsyncServerCPUPer1000WithAftermath Phases `json:"cmsyncServerCPUPer1000WritesWithAftermath"`
	// AftermathSeconds is how long after each phase its CPU with aftermath was read.
	AftermathSeconds float64 `json:"aftermathSeconds"`
	// Memory is cmsync's resident size with the point's replicas in place.
	Memory Memory `json:"memory"`
	// TerminatedWatchers counts the watches of ConfigMaps the API server closed
	// during the point because their client did not keep up
	// (apiserver_terminated_watchers_total); cmsync's watch then resumes.
	TerminatedWatchers int     `json:"terminatedWatchers"`
	Restart            Restart `json:"restart"`
	RoundFigures
	// LimitWatched is LIMIT's writes with a metadata-only watch of them open
	// (-sweep-limit-watched): medians, each round's, their breakdown, and the API
	// server's and etcd's CPU per 1,000 writes with each phase's aftermath.
	LimitWatched                              *Phases     `json:"limitWatched,omitempty"`
	LimitWatchedRounds                        []Phases    `json:"limitWatchedRounds,omitempty"`
	LimitWatchedBreakdown                     []Breakdown `json:"limitWatchedBreakdown,omitempty"`
	LimitWatchedServerCPUPer1000WithAftermath *Phases     `json:"limitWatchedServerCPUPer1000WritesWithAftermath,omitempty"`
}

// sweepPoints lists the points: the namespaces with one 1 KiB source, then the
// sources and the sizes at -sweep-base-n namespaces, each point once.
func sweepPoints(c config) ([]Point, error) {
	var points []Point
	seen := map[[3]int]bool{}
	add := func(n, s, size int) {
		if key := [3]int{n, s, size}; !seen[key] {
			seen[key] = true
			points = append(points, Point{Namespaces: n, Sources: s, SizeBytes: size, Replicas: n * s})
		}
	}
	ns, err := intList(c.sweepN)
	if err != nil {
		return nil, fmt.Errorf("-sweep-n: %w", err)
	}
	sources, err := intList(c.sweepS)
	if err != nil {
		return nil, fmt.Errorf("-sweep-s: %w", err)
	}
	var sizes []int
	for _, field := range strings.Split(c.sweepSizes, ",") {
		q, err := resource.ParseQuantity(strings.TrimSpace(field))
		if err != nil || q.Value() < 2 {
			return nil, fmt.Errorf("-sweep-sizes: %q is not a size of at least 2 bytes", field)
		}
		sizes = append(sizes, int(q.Value()))
	}
	for _, n := range ns {
		add(n, 1, 1024)
	}
	for _, s := range sources {
		add(c.sweepBaseN, s, 1024)
	}
	for _, size := range sizes {
		add(c.sweepBaseN, 1, size)
	}
	return points, nil
}

func intList(list string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n < 1 || n > 10000 {
			return nil, fmt.Errorf("%q is not a count between 1 and 10000", field)
		}
		out = append(out, n)
	}
	return out, nil
}

// sweep measures every point, saves the JSON and draws the plots.
func sweep(c config) error {
	points, err := sweepPoints(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	res := SweepResult{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(),
		Rounds: c.sweepRounds, CmsyncArgs: c.cmsyncArgs, CmsyncFirst: c.sweepCmsyncFirst,
		ControlPlanePerRound: true, ServerGCBeforePhase: c.serverGCBeforePhase, WarmUp: c.sweepWarmUp,
	}
	path := filepath.Join(c.out, "sweep-"+time.Now().UTC().Format("20060102-150405")+".json")
	for i, p := range points {
		step("SWEEP point %d of %d: %d namespaces, %d sources of %d bytes", i+1, len(points), p.Namespaces, p.Sources, p.SizeBytes)
		if err := measurePoint(c, &p); err != nil {
			return err
		}
		res.Points = append(res.Points, p)
		printPoint(p)
		// Saved after every point: a point that fails loses only itself.
		if err := writeJSON(path, res); err != nil {
			return err
		}
	}
	fmt.Println("results:", path)
	return drawSweep(path, c.plotDir)
}

// measurePoint runs the point's rounds, each on a control plane of its own, and takes
// their medians. On one control plane a round's figures depended on the rounds before
// it: etcd's CPU for the very same 1,000 writes of 900 KiB ranged from 5 to 22 s with
// the history it held, and whoever took the fourth phase on a fresh etcd paid the most,
// LIMIT or cmsync (bench/results/sweep-20261126-010136.json and -021942.json). On a
// fresh control plane every round starts alike, and the writers take turns going first.
func measurePoint(c config, p *Point) error {
	p.Rounds = c.roundsOf(*p)
	for r := range p.Rounds {
		// Old revisions of large objects count against etcd's quota until compacted
		// (the API server compacts every 5 minutes): 900 KiB × 1,000 namespaces
		// written six times in a round is 5 GiB.
		b, stop, err := startBench(c, controlplane.Options{EtcdQuotaBytes: 16 << 30})
		if err != nil {
			return err
		}
		b.measureRound(p, r)
		stop()
	}
	p.summarize()
	return nil
}

// roundsOf is the point's rounds: -sweep-rounds, or -sweep-short-rounds at a point of
// fewer than shortPointReplicas replicas; fewer when a point's rounds would write more
// than maxBytesPerPoint. (What the API server's memory needs at such points is the
// pause after each phase: bigPhaseBytes.)
func (c config) roundsOf(p Point) int {
	rounds := c.sweepRounds
	if p.Replicas < shortPointReplicas {
		rounds = max(rounds, c.sweepShortRounds)
	}
	perRound := 6 * p.SizeBytes * p.Replicas // LIMIT's and cmsync's create, update, delete
	return max(1, min(rounds, maxBytesPerPoint/perRound))
}

// shortPointReplicas: a phase of fewer writes lasts at most a few seconds on 2 cores,
// where the same writes vary from run to run by more than the gap being measured: one
// round's ratio to LIMIT spread from 0.7 to 1.6× at such points, and the very same
// 1,000 updates written the same way cost the API server and etcd 1.6 to 3.4 s of CPU
// from one round to the next (-write-styles). Such points run more rounds, which cost
// little there.
const shortPointReplicas = 5000

// maxBytesPerPoint bounds what a point's rounds write, and so the sweep's length: two
// rounds at 900 KiB × 1,000 namespaces (about ten minutes each, most of it the pauses of
// watchCacheHistory), so that LIMIT and cmsync each go first once.
const maxBytesPerPoint = 12 << 30

// A point whose phase writes more than bigPhaseBytes pauses watchCacheHistory after
// each phase. The API server keeps every version of the last 75 s in its watch cache:
// back to back, the phases of 900 KiB × 1,000 namespaces held several gigabytes of
// versions at once and took kube-apiserver past 16 GB. Phase times do not include the
// pause.
//
// The first bigPhaseAftermath of the pause is the phase's aftermath (window.
// cpuWithAftermath). After the last answer of a 900 KiB phase the API server decodes
// etcd's watch events for seconds more: profiled over 20 s from each phase's start,
// cmsync's phases came out 0.97×, 1.13× and 0.93× of LIMIT's in API server CPU where
// the one-second aftermath had said 1.42×, 0.73× and 1.40×, each cutting into that
// backlog at a different point (bench/results/sweep-20261125-233118.json).
const (
	bigPhaseBytes     = 256 << 20
	watchCacheHistory = 80 * time.Second
	bigPhaseAftermath = 20 * time.Second
)

// phaseSettle is the pause before every phase, LIMIT's and cmsync's alike. Back to
// back, a phase's window also took in the work the phase before it left to the API
// server (garbage collection, watch dispatch): profiled with 3 s between phases, the API
// server's samples for cmsync's phases at 1,000 namespaces were 1.00–1.05× LIMIT's
// where the windows of back-to-back runs had said 1.24–1.30×
// (bench/results/sweep-20261125-065709.json).
const phaseSettle = 2 * time.Second

// sweepProfileSeconds is the length of the sweep's CPU profiles of a phase: long
// enough to sample a point's steady writing (at 100 sources a phase lasts minutes).
const sweepProfileSeconds = 20

// measureRound runs round r of the point on b's fresh control plane: LIMIT's creates,
// updates and deletes, and cmsync's fan-out, mass update and cleanup of the same
// writes. In the last round, with every replica in place, it reads cmsync's memory and
// restarts it.
func (b *bench) measureRound(p *Point, r int) {
	ctx := context.Background()
	step("round %d of %d: creating %d namespaces on a fresh control plane", r+1, p.Rounds, p.Namespaces)
	b.createNamespaces(ctx, p.Namespaces)
	b.payload = strings.Repeat("x", p.SizeBytes)
	round := &sweepRound{b: b, p: p, r: r, ctx: ctx, bigPhases: p.SizeBytes*p.Replicas > bigPhaseBytes}
	if round.bigPhases {
		b.aftermath = max(b.c.aftermath, bigPhaseAftermath)
	}
	round.shortPhases = p.Replicas < shortPointReplicas && !round.bigPhases
	p.AftermathSeconds = b.aftermath.Seconds()
	terminated := b.apiMetric(`apiserver_terminated_watchers_total{group="",resource="configmaps"}`)
	defer func() {
		p.TerminatedWatchers += b.apiMetric(`apiserver_terminated_watchers_total{group="",resource="configmaps"}`) - terminated
	}()
	round.proc = b.startCmsync()
	defer func() { round.proc.stop() }() // the restarted process after the last round's restarts
	if b.c.sweepWarmUp {
		b.warmUp(ctx, fmt.Sprintf("w-r%02d", r))
		round.pause() // at a point of big objects, the warm-up's versions leave the watch cache first
	}
	round.writersInTurn()
}

// sweepRound is one round of a sweep's point: its writers' phases on one control plane.
type sweepRound struct {
	b    *bench
	p    *Point
	r    int
	ctx  context.Context //nolint:containedctx // one round's context, for its phases
	proc *process
	// bigPhases: a phase writes more than bigPhaseBytes, and the round pauses after
	// each (pause); shortPhases: its phases are too short for one profile each.
	bigPhases, shortPhases bool
}

// pause waits, after a phase of big objects, for the API server's watch cache to let
// the phase's versions go.
func (s *sweepRound) pause() {
	if !s.bigPhases {
		return
	}
	step("pausing %s more: the API server's watch cache lets the last phase's versions go", watchCacheHistory-s.b.aftermath)
	time.Sleep(watchCacheHistory - s.b.aftermath)
}

// profiled starts a phase's profiles (with -profile), LIMIT's and cmsync's alike: the
// first round's for sweepProfileSeconds; at a point of short phases every round's for
// phaseProfileSeconds, since one such phase gives too few samples (go tool pprof adds
// up the rounds' files).
func (s *sweepRound) profiled(phase string) func() {
	p := s.p
	name := fmt.Sprintf("sweep-n%d-s%d-z%d-%s", p.Namespaces, p.Sources, p.SizeBytes, phase)
	switch {
	case s.shortPhases:
		return s.b.cpuProfiles(s.ctx, s.proc, fmt.Sprintf("%s-r%02d", name, s.r), phaseProfileSeconds)
	case s.r == 0:
		return s.b.cpuProfiles(s.ctx, s.proc, name, sweepProfileSeconds)
	}
	return func() {}
}

// phaseDone starts a phase after phaseSettle, with its profiles; what it returns waits
// for them, then pauses as a big phase needs. Every writer's phases go through it.
func (s *sweepRound) phaseDone(name string) func() {
	time.Sleep(phaseSettle)
	wait := s.profiled(name)
	return func() { wait(); s.pause() }
}

func (s *sweepRound) phase(name string, run func() window) window {
	done := s.phaseDone(name)
	defer done()
	return run()
}

func (s *sweepRound) runLimit() {
	limit := s.b.limit(s.ctx, s.p.Sources, func(name string) func() { return s.phaseDone("limit-" + name) })
	s.p.LimitRounds = append(s.p.LimitRounds, limit.phases())
	s.p.LimitBreakdown = append(s.p.LimitBreakdown, s.b.breakdown(limit, s.b.isLimitWrite))
}

func (s *sweepRound) runLimitWatched() {
	b, p := s.b, s.p
	stopWatch, err := b.watchMetadata(s.ctx, "bench.limit/managed-by="+v1alpha1.ManagedByValue)
	must(err)
	limit := b.limitNamed(s.ctx, limitWatchedName, p.Sources, func(name string) func() { return s.phaseDone(limitWatchedName + "-" + name) })
	stopWatch()
	p.LimitWatchedRounds = append(p.LimitWatchedRounds, limit.phases())
	p.LimitWatchedBreakdown = append(p.LimitWatchedBreakdown,
		b.breakdown(limit, func(e auditEvent) bool { return b.isWriteOf(limitWatchedName, e) }))
}

// runCmsync runs cmsync's fan-out, mass update and cleanup; in the last round, between
// the fan-out and the update, it reads cmsync's memory and restarts it.
func (s *sweepRound) runCmsync() {
	b, p, ctx := s.b, s.p, s.ctx
	name := fmt.Sprintf("p-r%02d", s.r)
	var round windows
	round.create = s.phase("fanout", func() window { return b.fanOut(ctx, name, p.Sources) })
	if s.r == p.Rounds-1 {
		// Let the heap settle after the burst: at 100 sources cmsync still works
		// through the fan-out's watch events for seconds after its last write,
		// and only then returns the burst's memory (10 s was sometimes too short).
		time.Sleep(min(b.c.idle, 30*time.Second))
		p.Memory = s.proc.memory()
		b.heapProfile(s.proc, fmt.Sprintf("sweep-n%d-s%d-z%d", p.Namespaces, p.Sources, p.SizeBytes))
		s.proc, p.Restart = b.restartsVerified(s.proc, p.Replicas)
	}
	round.update = s.phase("update", func() window { return b.update(ctx, name, p.Sources) })
	round.delete = s.phase("cleanup", func() window { return b.cleanup(ctx, name, p.Sources) })
	p.CmsyncRounds = append(p.CmsyncRounds, round.phases())
	p.CmsyncBreakdown = append(p.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite))
}

// writersInTurn runs the writers in turn. On a fresh etcd the same writes cost it more
// or less with their place in the round (measurePoint), so LIMIT goes first in rounds
// 1, 3, …, cmsync in rounds 2, 4, …; the other way round with -sweep-cmsync-first.
// With LIMIT watched, each of the three goes first, second and third in turn.
func (s *sweepRound) writersInTurn() {
	p, r := s.p, s.r
	if s.b.c.sweepLimitWatched {
		writers := []struct {
			name string
			run  func()
		}{{"LIMIT", s.runLimit}, {"LIMIT watched", s.runLimitWatched}, {"cmsync", s.runCmsync}}
		order := make([]string, 0, len(writers))
		for i := range writers {
			order = append(order, writers[(r+i)%len(writers)].name)
		}
		step("round %d of %d: %s (%d writes each)", r+1, p.Rounds, strings.Join(order, ", then "), p.Replicas)
		for i := range writers {
			writers[(r+i)%len(writers)].run()
		}
		return
	}
	if limitFirst := r%2 == 0; limitFirst != s.b.c.sweepCmsyncFirst {
		step("round %d of %d: LIMIT, then cmsync's FAN-OUT, MASS UPDATE, CLEANUP (%d writes each)", r+1, p.Rounds, p.Replicas)
		s.runLimit()
		s.runCmsync()
	} else {
		step("round %d of %d: cmsync's FAN-OUT, MASS UPDATE, CLEANUP, then LIMIT (%d writes each)", r+1, p.Rounds, p.Replicas)
		s.runCmsync()
		s.runLimit()
	}
}

// summarize takes the medians of the point's rounds and their ratios.
func (p *Point) summarize() {
	p.Limit, p.Cmsync = medians(p.LimitRounds), medians(p.CmsyncRounds)
	p.Ratios = Phases{Create: p.Cmsync.Create / p.Limit.Create, Update: p.Cmsync.Update / p.Limit.Update, Delete: p.Cmsync.Delete / p.Limit.Delete}
	p.LimitCPU, p.CmsyncCPU = cpuMedians(p.LimitBreakdown), cpuMedians(p.CmsyncBreakdown)
	atEnd := func(s Split) map[string]float64 { return s.CPU }
	withAftermath := func(s Split) map[string]float64 { return s.CPUWithAftermath }
	p.LimitServerCPUPer1000 = serverCPUPer1000(p.LimitBreakdown, p.Replicas, atEnd)
	p.CmsyncServerCPUPer1000 = serverCPUPer1000(p.CmsyncBreakdown, p.Replicas, atEnd)
	p.LimitServerCPUPer1000WithAftermath = serverCPUPer1000(p.LimitBreakdown, p.Replicas, withAftermath)
	p.CmsyncServerCPUPer1000WithAftermath = serverCPUPer1000(p.CmsyncBreakdown, p.Replicas, withAftermath)
	if len(p.LimitWatchedRounds) > 0 {
		watched := medians(p.LimitWatchedRounds)
		cpu := serverCPUPer1000(p.LimitWatchedBreakdown, p.Replicas, withAftermath)
		p.LimitWatched, p.LimitWatchedServerCPUPer1000WithAftermath = &watched, &cpu
	}
}

// watchMetadata opens a metadata-only watch of the bench's kind of objects matching
// selector, as cmsync's replica cache watches its replicas, and drains it as a
// reflector does, until the function it returns is called.
func (b *bench) watchMetadata(ctx context.Context, selector string) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := metadata.NewForConfigOrDie(b.env.Config).Resource(corev1.SchemeGroupVersion.WithResource(b.kind.resource())).
		Namespace("").Watch(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		cancel()
		return nil, err
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range w.ResultChan() { // drained as a cache's reflector drains it
		}
	}()
	return func() {
		w.Stop()
		cancel()
		<-drained
	}, nil
}

// warmUpTargets is how many namespaces warmUp's source names: a pass of a phase of
// N = 100, which runs every path of a pass (create, update, delete, the status patch,
// the Event) and grows the heap to a burst's size.
const warmUpTargets = 100

// warmUp has cmsync, just started, fan the source name out to the first warmUpTargets
// namespaces, update it and delete it, waiting each time until the replicas are as
// they should be. LIMIT's client is the bench, a process that has already created
// the round's namespaces; a cmsync started for the round would otherwise run its
// writers' code, grow its heap and fault in its pages for the first time inside the
// first measured phase, which a cmsync that has been running does not. The fresh
// control plane, too, serves its first writes of the kind here rather than in
// whichever writer's phase comes first. Its writes are named apart (name), so no
// phase counts them.
func (b *bench) warmUp(ctx context.Context, name string) {
	k := min(len(b.targets), warmUpTargets)
	step("warm-up: cmsync fans %s out to %d namespaces, updates it and deletes it", name, k)
	src := b.source(name)
	src.Annotations["cmsync.io/target-namespaces"] = strings.Join(b.targets[:k], ",")
	until := func(want int, value string) {
		var last error
		err := utilwait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			last = b.replicasAre(ctx, name, want, value)
			return last == nil, nil
		})
		if err != nil {
			must(fmt.Errorf("warm-up: %w (%w)", last, err))
		}
	}
	must(b.kind.create(ctx, src))
	until(k, "1")
	src.data["v"] = "2"
	must(b.kind.update(ctx, src))
	until(k, "2")
	must(b.kind.delete(ctx, sourceNamespace, name))
	until(0, "")
}

// createNamespaces creates the n target namespaces bench-0000… and the sources'
// namespace.
func (b *bench) createNamespaces(ctx context.Context, n int) {
	for i := range n {
		b.targets = append(b.targets, fmt.Sprintf("bench-%04d", i))
	}
	must(parallel(b.c.workers, len(b.targets), func(i int) error {
		_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.targets[i]}}, metav1.CreateOptions{})
		return err
	}))
	must1(b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sourceNamespace}}, metav1.CreateOptions{}))
}

// phaseSplits names the phases of a Breakdown.
var phaseSplits = []struct {
	name string
	get  func(Breakdown) Split
}{
	{"create", func(b Breakdown) Split { return b.Create }},
	{"update", func(b Breakdown) Split { return b.Update }},
	{"delete", func(b Breakdown) Split { return b.Delete }},
}

// cpuMedians are the medians of each process's CPU seconds, by phase.
func cpuMedians(rounds []Breakdown) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	for _, ph := range phaseSplits {
		out[ph.name] = medianSplit(rounds, ph.get).CPU
	}
	return out
}

// serverCPUPer1000 is the median over the rounds of kube-apiserver's and etcd's CPU
// seconds per 1,000 writes, by phase, from the CPU figures cpuOf picks.
func serverCPUPer1000(rounds []Breakdown, writes int, cpuOf func(Split) map[string]float64) Phases {
	per := func(get func(Breakdown) Split) float64 {
		return medianOf(rounds, func(b Breakdown) float64 {
			cpu := cpuOf(get(b))
			return (cpu["kube-apiserver"] + cpu["etcd"]) / float64(writes) * 1000
		})
	}
	return Phases{Create: per(phaseSplits[0].get), Update: per(phaseSplits[1].get), Delete: per(phaseSplits[2].get)}
}

// RestartPoint is what -restarts-only measures at one count of sources.
type RestartPoint struct {
	Namespaces int     `json:"namespaces"`
	Sources    int     `json:"sources"`
	Replicas   int     `json:"replicas"`
	FanOut     float64 `json:"fanOutSeconds"`
	Memory     Memory  `json:"memory"`
	Restart    Restart `json:"restart"`
}

// RestartsResult is the file -restarts-only writes.
type RestartsResult struct {
	Date       string         `json:"date"`
	Machine    string         `json:"machine"`
	CmsyncArgs string         `json:"cmsyncArgs,omitempty"`
	Points     []RestartPoint `json:"points"`
}

// restartsOnly measures a sweep point's memory and restarts without the rounds around
// them: for each count of -sweep-s, on a control plane of its own, cmsync fans out that
// many sources to -sweep-base-n namespaces and is restarted as the sweep restarts it.
// The point's memory and restarts follow the same fan-out in the sweep, so the figures
// compare; a change to the start can be tried in minutes.
func restartsOnly(c config) error {
	counts, err := intList(c.sweepS)
	if err != nil {
		return fmt.Errorf("-sweep-s: %w", err)
	}
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	res := RestartsResult{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), CmsyncArgs: c.cmsyncArgs}
	path := filepath.Join(c.out, "restarts-"+time.Now().UTC().Format("20060102-150405")+".json")
	for _, sources := range counts {
		p := RestartPoint{Namespaces: c.sweepBaseN, Sources: sources, Replicas: c.sweepBaseN * sources}
		b, stop, err := startBench(c, controlplane.Options{})
		if err != nil {
			return err
		}
		step("RESTARTS ONLY: %d sources to %d namespaces", sources, p.Namespaces)
		b.createNamespaces(context.Background(), p.Namespaces)
		proc := b.startCmsync() // the bench's payload is 1 KiB
		p.FanOut = b.fanOut(context.Background(), "p", sources).seconds()
		time.Sleep(min(c.idle, 30*time.Second)) // as the sweep lets the heap settle
		p.Memory = proc.memory()
		proc, p.Restart = b.restartsVerified(proc, p.Replicas)
		proc.stop()
		if c.profile != "" {
			// With the profiles, the logs of each start: when its caches had listed,
			// when its workers started.
			logs, _ := filepath.Glob(filepath.Join(b.work, "cmsync-*.log"))
			for _, log := range logs {
				data, err := os.ReadFile(log)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(c.profile, fmt.Sprintf("restarts-s%d-%s", sources, filepath.Base(log))), data, 0o644); err != nil {
					return err
				}
			}
		}
		stop()
		fmt.Printf("%d replicas: fan-out %.2fs, resident %.1f MiB, restart: ready %.2fs, verified %.2fs (of %v), CPU %.2fs (of %v), "+
			"resident after %.1f MiB (of %v), %d writes\n",
			p.Replicas, p.FanOut, p.Memory.SteadyMiB, p.Restart.ReadySeconds, p.Restart.VerifiedSeconds, p.Restart.VerifiedRounds,
			p.Restart.CPUSeconds, p.Restart.CPURounds, p.Restart.ResidentMiB, p.Restart.ResidentRounds, p.Restart.Writes)
		res.Points = append(res.Points, p)
		if err := writeJSON(path, res); err != nil {
			return err
		}
	}
	fmt.Println("results:", path)
	return nil
}

// restartsVerified stops proc and restarts cmsync as many times as -sweep-restarts
// with each environment of -sweep-restart-variants (recorded apart), then with none,
// and reports the medians of those (writes summed: any is a fault). The default
// restarts come last, so the process the point goes on with runs as the others did.
func (b *bench) restartsVerified(proc *process, replicas int) (*process, Restart) {
	var res Restart
	for env := range strings.SplitSeq(b.c.restartVariants, ";") {
		if env = strings.TrimSpace(env); env == "" {
			continue
		}
		var variant []Restart
		proc, variant = b.restarts(proc, replicas, env)
		if res.Variants == nil {
			res.Variants, res.VariantsCPUSeconds, res.VariantsResidentMiB = map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
		}
		for _, r := range variant {
			res.Variants[env] = append(res.Variants[env], r.VerifiedSeconds)
			res.VariantsCPUSeconds[env] = append(res.VariantsCPUSeconds[env], r.CPUSeconds)
			res.VariantsResidentMiB[env] = append(res.VariantsResidentMiB[env], r.ResidentMiB)
		}
		fmt.Printf("  restart with %s: verified %v, CPU %v s, resident %v MiB\n",
			env, res.Variants[env], res.VariantsCPUSeconds[env], res.VariantsResidentMiB[env])
	}
	proc, rounds := b.restarts(proc, replicas, "")
	res.ReadySeconds = medianOf(rounds, func(r Restart) float64 { return r.ReadySeconds })
	res.VerifiedSeconds = medianOf(rounds, func(r Restart) float64 { return r.VerifiedSeconds })
	res.ResidentMiB = medianOf(rounds, func(r Restart) float64 { return r.ResidentMiB })
	res.CPUSeconds = medianOf(rounds, func(r Restart) float64 { return r.CPUSeconds })
	for _, r := range rounds {
		res.VerifiedRounds = append(res.VerifiedRounds, r.VerifiedSeconds)
		res.CPURounds = append(res.CPURounds, r.CPUSeconds)
		res.ResidentRounds = append(res.ResidentRounds, r.ResidentMiB)
		res.Writes += r.Writes
	}
	return proc, res
}

// restarts stops proc and restarts cmsync -sweep-restarts times, with env added to its
// environment.
func (b *bench) restarts(proc *process, replicas int, env string) (*process, []Restart) {
	n := max(1, b.c.sweepRestarts)
	rounds := make([]Restart, n)
	for i := range rounds {
		step("RESTART %d of %d with %d replicas in sync %s", i+1, n, replicas, env)
		proc.stop()
		proc, rounds[i] = b.restartVerified(replicas, env)
	}
	return proc, rounds
}

// restartVerified starts cmsync, with env added to its environment, with every replica
// in place and reports when it was ready, when it had verified every replica (its
// cmsync_replicas{state="synced"} gauges, set after a source's pass compared each of
// its replicas with the source, add up to replicas; read every 100 ms, as reading
// cmsync's metrics costs it CPU), and the writes it made until 20 s after the start (or
// -idle, if shorter).
func (b *bench) restartVerified(replicas int, env string) (*process, Restart) {
	start := time.Now()
	proc := b.startCmsyncWith(env)
	res := Restart{ReadySeconds: time.Since(start).Seconds()}
	profiled := b.cpuProfiles(context.Background(), proc, fmt.Sprintf("restart-%d", replicas), restartProfileSeconds)
	defer profiled()
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if syncedReplicas(proc) == replicas {
			res.VerifiedSeconds = time.Since(start).Seconds()
			res.CPUSeconds = proc.cpuSeconds()
			break
		}
		if time.Now().After(deadline) {
			must(fmt.Errorf("after a restart cmsync verified %d of %d replicas in 10 minutes", syncedReplicas(proc), replicas))
		}
	}
	time.Sleep(time.Until(start.Add(min(b.c.idle, 20*time.Second))))
	res.Writes = b.cmsyncWrites(start, time.Now())
	res.ResidentMiB = proc.memory().SteadyMiB
	return proc, res
}

// restartProfileSeconds is the length of a restart's CPU profiles: the whole of a
// restart at 100,000 replicas, which takes about 5 s on 2 cores.
const restartProfileSeconds = 8

// apiMetric reads the value of one series of the API server's metrics (the full
// line up to the value: name and labels); 0 when absent.
func (b *bench) apiMetric(series string) int {
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	must(err)
	for _, line := range strings.Split(string(raw), "\n") {
		if value, ok := sampleOf(line, series); ok {
			return int(value)
		}
	}
	return 0
}

// sampleOf is the value of a line of Prometheus' text format if the line is series's
// sample (the series with its labels, exactly as exposed).
func sampleOf(line, series string) (float64, bool) {
	value, ok := strings.CutPrefix(line, series+" ")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(value, 64)
	return n, err == nil
}

// syncedReplicas reads the sum of cmsync's cmsync_replicas{state="synced"} gauges. It
// asks for the metrics uncompressed: Go's client asks for gzip by default, and
// compressing the answer to a read every 100 ms took 3% of cmsync's CPU in a profiled
// restart at 100,000 replicas: a cost of the bench's reading (a Prometheus reads every
// 15-30 s), not of cmsync's start.
func syncedReplicas(p *process) int {
	req, err := http.NewRequest(http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	must(err)
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	total := 0
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "cmsync_replicas{") && strings.Contains(line, `state="synced"`) {
			_, value, _ := strings.Cut(line, "} ")
			n, _ := strconv.ParseFloat(value, 64)
			total += int(n)
		}
	}
	return total
}

func printPoint(p Point) {
	fmt.Printf("\nN=%d S=%d size=%d (%d replicas): cmsync / LIMIT (ratio), medians\n", p.Namespaces, p.Sources, p.SizeBytes, p.Replicas)
	fmt.Printf("  fan-out      %8.2fs %8.2fs (%.2fx)\n", p.Cmsync.Create, p.Limit.Create, p.Ratios.Create)
	fmt.Printf("  mass update  %8.2fs %8.2fs (%.2fx)\n", p.Cmsync.Update, p.Limit.Update, p.Ratios.Update)
	fmt.Printf("  cleanup      %8.2fs %8.2fs (%.2fx)\n", p.Cmsync.Delete, p.Limit.Delete, p.Ratios.Delete)
	fmt.Printf("  API server + etcd CPU s per 1,000 writes: create %.2f/%.2f update %.2f/%.2f delete %.2f/%.2f\n",
		p.CmsyncServerCPUPer1000.Create, p.LimitServerCPUPer1000.Create, p.CmsyncServerCPUPer1000.Update,
		p.LimitServerCPUPer1000.Update, p.CmsyncServerCPUPer1000.Delete, p.LimitServerCPUPer1000.Delete)
	a, l := p.CmsyncServerCPUPer1000WithAftermath, p.LimitServerCPUPer1000WithAftermath
	fmt.Printf("    with each phase's aftermath: create %.2f/%.2f (%.2fx) update %.2f/%.2f (%.2fx) delete %.2f/%.2f (%.2fx)\n",
		a.Create, l.Create, a.Create/l.Create, a.Update, l.Update, a.Update/l.Update, a.Delete, l.Delete, a.Delete/l.Delete)
	if w := p.LimitWatched; w != nil {
		c := p.LimitWatchedServerCPUPer1000WithAftermath
		fmt.Printf("  LIMIT watched %7.2fs %8.2fs %8.2fs (cmsync / LIMIT watched %.2fx %.2fx %.2fx; CPU with aftermath %.2f %.2f %.2f: %.2fx %.2fx %.2fx)\n",
			w.Create, w.Update, w.Delete, p.Cmsync.Create/w.Create, p.Cmsync.Update/w.Update, p.Cmsync.Delete/w.Delete,
			c.Create, c.Update, c.Delete, a.Create/c.Create, a.Update/c.Update, a.Delete/c.Delete)
	}
	for _, ph := range phaseSplits {
		fmt.Printf("  CPU %-6s cmsync phase %s   LIMIT phase %s\n", ph.name, cpuList(p.CmsyncCPU[ph.name]), cpuList(p.LimitCPU[ph.name]))
	}
	fmt.Printf("  API server allocated MiB per phase, medians:")
	for _, ph := range phaseSplits {
		allocated := func(rounds []Breakdown) float64 {
			return medianOf(rounds, func(b Breakdown) float64 { return ph.get(b).ServerAllocatedMiB })
		}
		fmt.Printf(" %s %.1f/%.1f", ph.name, allocated(p.CmsyncBreakdown), allocated(p.LimitBreakdown))
	}
	fmt.Println()
	fmt.Printf("  memory steady %.1f MiB (%.1f anonymous, %.1f of the binary's file; peak %.1f)\n",
		p.Memory.SteadyMiB, p.Memory.AnonMiB, p.Memory.FileMiB, p.Memory.PeakMiB)
	fmt.Printf("  restart: ready %.2fs, verified %.2fs (of %v), %d writes\n",
		p.Restart.ReadySeconds, p.Restart.VerifiedSeconds, p.Restart.VerifiedRounds, p.Restart.Writes)
	fmt.Printf("  watches of ConfigMaps the API server closed for falling behind: %d\n", p.TerminatedWatchers)
	serverErrors := func(rounds []Breakdown) (n int) {
		for _, r := range rounds {
			n += r.Create.ServerErrors + r.Update.ServerErrors + r.Delete.ServerErrors
		}
		return n
	}
	fmt.Printf("  writes answered with a server error: cmsync %d, LIMIT %d\n\n", serverErrors(p.CmsyncBreakdown), serverErrors(p.LimitBreakdown))
}
