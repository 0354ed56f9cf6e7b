package main

import (
	"context"
	"fmt"
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
	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// sweepPoints lists the points: the namespaces with one 1 KiB source, then the
// sources and the sizes at -sweep-base-n namespaces, each point once.
func sweepPoints(c config) ([]report.Point, error) {
	var points []report.Point
	seen := map[[3]int]bool{}
	add := func(n, s, size int) {
		if key := [3]int{n, s, size}; !seen[key] {
			seen[key] = true
			points = append(points, report.Point{Namespaces: n, Sources: s, SizeBytes: size, Replicas: n * s})
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
	res := report.SweepResult{
		Date: time.Now().UTC().Format(time.RFC3339), Machine: report.Machine(),
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
		report.PrintPoint(p)
		// Saved after every point: a point that fails loses only itself.
		if err := report.WriteJSON(path, res); err != nil {
			return err
		}
	}
	fmt.Println("results:", path)
	return report.DrawSweep(path, c.plotDir)
}

// measurePoint runs the point's rounds, each on a control plane of its own, and takes
// their medians. On one control plane a round's figures depended on the rounds before
// it: etcd's CPU for the very same 1,000 writes of 900 KiB ranged from 5 to 22 s with
// the history it held, and whoever took the fourth phase on a fresh etcd paid the most,
// LIMIT or cmsync (bench/results/sweep-20261126-010136.json and -021942.json). On a
// fresh control plane every round starts alike, and the writers take turns going first.
func measurePoint(c config, p *report.Point) error {
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
	p.Summarize()
	return nil
}

// roundsOf is the point's rounds: -sweep-rounds, or -sweep-short-rounds at a point of
// fewer than shortPointReplicas replicas; fewer when a point's rounds would write more
// than maxBytesPerPoint. (What the API server's memory needs at such points is the
// pause after each phase: bigPhaseBytes.)
func (c config) roundsOf(p report.Point) int {
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
// from one round to the next (make bench BENCH_CMD=styles). Such points run more
// rounds, which cost little there.
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
func (b *bench) measureRound(p *report.Point, r int) {
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
	defer func() { round.proc.Stop() }() // the restarted process after the last round's restarts
	if b.c.sweepWarmUp {
		b.warmUp(ctx, fmt.Sprintf("w-r%02d", r))
		round.pause() // at a point of big objects, the warm-up's versions leave the watch cache first
	}
	round.writersInTurn()
}

// sweepRound is one round of a sweep's point: its writers' phases on one control plane.
type sweepRound struct {
	b    *bench
	p    *report.Point
	r    int
	ctx  context.Context //nolint:containedctx // one round's context, for its phases
	proc *workload.Process
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
	s.p.LimitBreakdown = append(s.p.LimitBreakdown, s.b.breakdown(limit, s.b.isLimitWrite, nil))
}

func (s *sweepRound) runLimitWatched() {
	s.b.limitWatched(s.ctx, s.p.Sources, &s.p.LimitWatchedFigures,
		func(name string) func() { return s.phaseDone(limitWatchedName + "-" + name) })
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
		p.Memory = s.proc.Memory()
		b.heapProfile(s.proc, fmt.Sprintf("sweep-n%d-s%d-z%d", p.Namespaces, p.Sources, p.SizeBytes))
		s.proc, p.Restart = b.restartsVerified(s.proc, p.Replicas)
	}
	round.update = s.phase("update", func() window { return b.update(ctx, name, p.Sources) })
	round.delete = s.phase("cleanup", func() window { return b.cleanup(ctx, name, p.Sources) })
	p.CmsyncRounds = append(p.CmsyncRounds, round.phases())
	p.CmsyncBreakdown = append(p.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite, b.isOwnerWrite))
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

// limitManagedBy selects LIMIT's objects, as cmsync's replica store selects its replicas.
const limitManagedBy = "bench.limit/managed-by=" + v1alpha1.ManagedByValue

// limitWatched runs LIMIT's writes again (objects named limitWatchedName-…) with a
// metadata-only watch of them open, and adds the round's figures to into.
func (b *bench) limitWatched(ctx context.Context, perNamespace int, into *report.LimitWatchedFigures, profile func(phase string) (wait func())) {
	stopWatch, err := b.watchMetadata(ctx, limitManagedBy)
	must(err)
	limit := b.limitNamed(ctx, limitWatchedName, perNamespace, profile)
	stopWatch()
	into.LimitWatchedRounds = append(into.LimitWatchedRounds, limit.phases())
	into.LimitWatchedBreakdown = append(into.LimitWatchedBreakdown,
		b.breakdown(limit, func(e measure.AuditEvent) bool { return b.isWriteOf(limitWatchedName, e) }, nil))
}

// watchMetadata opens a metadata-only watch of the bench's kind of objects matching
// selector, as cmsync's replica store watches its replicas, and drains it as a
// reflector does, until the function it returns is called.
func (b *bench) watchMetadata(ctx context.Context, selector string) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	w, err := metadata.NewForConfigOrDie(b.env.Config).Resource(b.kind.GroupVersion().WithResource(b.kind.Resource())).
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
	src := workload.Source(name, b.payload)
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
	must(b.kind.Create(ctx, src))
	until(k, "1")
	src.Data["v"] = "2"
	must(b.kind.Update(ctx, src))
	until(k, "2")
	must(b.kind.Delete(ctx, workload.SourceNamespace, name))
	until(0, "")
}

// createNamespaces creates the n target namespaces bench-0000… and the sources'
// namespace.
func (b *bench) createNamespaces(ctx context.Context, n int) {
	for i := range n {
		b.targets = append(b.targets, fmt.Sprintf("bench-%04d", i))
	}
	must(workload.Parallel(b.c.workers, len(b.targets), func(i int) error {
		_, err := b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.targets[i]}}, metav1.CreateOptions{})
		return err
	}))
	must1(b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workload.SourceNamespace}}, metav1.CreateOptions{}))
}
