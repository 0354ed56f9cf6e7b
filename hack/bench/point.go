package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
)

// runPoint measures one point in detail (make bench).
func runPoint(c config) error {
	b, stop, err := startBench(c, controlplane.Options{})
	if err != nil {
		return err
	}
	defer stop()
	b.res = report.Result{Date: time.Now().UTC().Format(time.RFC3339), Machine: report.Machine(), Namespaces: c.namespaces, Unrelated: c.unrelated,
		Sources: c.sources, Memory: map[string]report.Memory{}, Ratios: map[string]float64{}}
	return b.run()
}

// run measures one point in detail: memory without and with unrelated ConfigMaps,
// LIMIT's and cmsync's rounds, IDLE and RESTART, the Secret and ObjectSync rounds and
// SCALE.
func (b *bench) run() error {
	ctx := context.Background()
	step("creating %d namespaces", b.c.namespaces)
	b.createNamespaces(ctx, b.c.namespaces)
	b.memoryWithoutUnrelated(ctx)
	b.createUnrelated(ctx)
	b.rounds(ctx)
	b.secretRounds(ctx)
	b.objectRounds(ctx)
	if b.c.sources > 0 {
		b.scale(ctx)
	}
	b.res.Ratios["fanOut/limitCreate"] = b.res.Cmsync.Create / b.res.Limit.Create
	b.res.Ratios["update/limitUpdate"] = b.res.Cmsync.Update / b.res.Limit.Update
	b.res.Ratios["cleanup/limitDelete"] = b.res.Cmsync.Delete / b.res.Limit.Delete
	report.PrintResult(b.res)
	return report.Save(b.c.out, "", b.res)
}

// memoryWithoutUnrelated reads cmsync's memory with U=0: the same fan-out, update and
// idle as with U unrelated ConfigMaps later, so the two readings differ only by U; and
// the same with --secrets=enabled and no Secret labelled: what turning Secrets on costs
// a cluster that does not use them (its Secrets are not cached: only labelled ones are).
func (b *bench) memoryWithoutUnrelated(ctx context.Context) {
	for _, run := range []struct{ name, source, flag string }{
		{"u0", "mem0", ""}, {"u0-secrets-enabled", "mem0s", "--secrets=enabled"},
	} {
		step("MEMORY with U=0 %s", run.flag)
		var flags []string
		if run.flag != "" {
			flags = append(flags, run.flag)
		}
		proc := b.startCmsync(flags...)
		b.fanOut(ctx, run.source, 1)
		b.update(ctx, run.source, 1)
		time.Sleep(5*time.Second + b.c.idle)
		b.res.Memory[run.name] = proc.Memory()
		if run.flag == "" {
			b.heapProfile(proc, run.name)
		}
		b.cleanup(ctx, run.source, 1)
		proc.Stop()
	}
}

// createUnrelated creates the U unrelated ConfigMaps, spread over the namespaces.
func (b *bench) createUnrelated(ctx context.Context) {
	step("creating %d unrelated ConfigMaps", b.c.unrelated)
	must(workload.Parallel(b.c.workers, b.c.unrelated, func(i int) error {
		_, err := b.cs.CoreV1().ConfigMaps(b.targets[i%len(b.targets)]).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%05d", i)}, Data: map[string]string{"v": b.payload}}, metav1.CreateOptions{})
		return err
	}))
}

// rounds runs LIMIT and cmsync in turns, round after round, so that both meet the same
// API server moods (a single round's ratio moves by tens of percent here); the last
// round's source stays for IDLE and RESTART.
func (b *bench) rounds(ctx context.Context) {
	proc := b.startCmsync()
	for r := range b.c.rounds {
		step("round %d of %d: LIMIT (a plain client, %d workers, no client-side throttle), then cmsync's FAN-OUT, UPDATE, CLEANUP",
			r+1, b.c.rounds, b.c.workers)
		limit := b.limit(ctx, 1, func(phase string) func() {
			return b.cpuProfiles(ctx, proc, fmt.Sprintf("limit-%s-r%02d", phase, r), phaseProfileSeconds)
		})
		b.res.LimitRounds = append(b.res.LimitRounds, limit.phases())
		b.res.LimitBreakdown = append(b.res.LimitBreakdown, b.breakdown(limit, b.isLimitWrite, nil))
		name := fmt.Sprintf("app-r%02d", r)
		var round windows
		round.create = b.profiledPhase(ctx, proc, fmt.Sprintf("fanout-r%02d", r), func() window { return b.fanOut(ctx, name, 1) })
		round.update = b.profiledPhase(ctx, proc, fmt.Sprintf("update-r%02d", r), func() window { return b.update(ctx, name, 1) })
		if r == b.c.rounds-1 {
			proc = b.idleAndRestart(proc)
			step("CLEANUP")
		}
		round.delete = b.profiledPhase(ctx, proc, fmt.Sprintf("cleanup-r%02d", r), func() window { return b.cleanup(ctx, name, 1) })
		b.res.CmsyncRounds = append(b.res.CmsyncRounds, round.phases())
		b.res.CmsyncBreakdown = append(b.res.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite, b.isOwnerWrite))
	}
	proc.Stop()
	b.res.Rounds = b.c.rounds
	b.res.Limit, b.res.Cmsync = report.Medians(b.res.LimitRounds), report.Medians(b.res.CmsyncRounds)
}

// profiledPhase runs a phase of cmsync's with its CPU profiles (with -profile).
func (b *bench) profiledPhase(ctx context.Context, proc *workload.Process, name string, run func() window) window {
	profiled := b.cpuProfiles(ctx, proc, name, phaseProfileSeconds)
	defer profiled()
	return run()
}

// idleAndRestart counts cmsync's writes while idle with every replica in sync, reads
// its memory, and restarts it; it returns the restarted process.
func (b *bench) idleAndRestart(proc *workload.Process) *workload.Process {
	step("IDLE for %s", b.c.idle)
	time.Sleep(5 * time.Second) // let the passes our own writes triggered finish
	from := time.Now()
	time.Sleep(b.c.idle)
	b.res.IdleWrites = b.cmsyncWrites(from, time.Now())
	b.res.IdleSeconds = b.c.idle.Seconds()
	b.res.Memory["u"+strconv.Itoa(b.c.unrelated)] = proc.Memory()
	step("RESTART in sync")
	proc.Stop()
	proc, b.res.Restart = b.restart()
	return proc
}

// scale fans S sources out to every namespace: time, cmsync's CPU and memory, and a
// restart with all those replicas in sync.
func (b *bench) scale(ctx context.Context) {
	step("SCALE: %d sources to %d namespaces", b.c.sources, b.c.namespaces)
	proc := b.startCmsync()
	b.res.Scale.Replicas = b.c.sources * b.c.namespaces
	cpu := proc.CPUSeconds()
	b.res.Scale.FanOutSeconds = b.fanOut(ctx, "scale", b.c.sources).seconds()
	b.res.Scale.FanOutCPUSeconds = proc.CPUSeconds() - cpu
	time.Sleep(10 * time.Second)
	m := proc.Memory()
	b.heapProfile(proc, "scale")
	b.res.Scale.PeakMiB, b.res.Scale.SteadyMiB = m.PeakMiB, m.SteadyMiB
	proc.Stop()
	proc, b.res.Scale.Restart = b.restart()
	proc.Stop()
}

// secretRounds runs the rounds again with Secrets: LIMIT writes Secrets, cmsync runs
// with --secrets=enabled and replicates a Secret source; then an idle minute.
func (b *bench) secretRounds(ctx context.Context) {
	if b.c.secretRounds == 0 {
		return
	}
	b.kind = workload.Secrets{Clientset: b.cs}
	defer func() { b.kind = workload.ConfigMaps{Clientset: b.cs} }()
	res := &b.res.Secrets
	proc := b.startCmsync("--secrets=enabled")
	noProfile := func(string) func() { return func() {} }
	for r := range b.c.secretRounds {
		step("Secret round %d of %d: LIMIT, then cmsync's FAN-OUT, UPDATE, CLEANUP", r+1, b.c.secretRounds)
		limit := b.limit(ctx, 1, noProfile)
		res.LimitRounds = append(res.LimitRounds, limit.phases())
		res.LimitBreakdown = append(res.LimitBreakdown, b.breakdown(limit, b.isLimitWrite, nil))
		name := fmt.Sprintf("secret-r%02d", r)
		var round windows
		round.create = b.fanOut(ctx, name, 1)
		round.update = b.update(ctx, name, 1)
		round.delete = b.cleanup(ctx, name, 1)
		res.CmsyncRounds = append(res.CmsyncRounds, round.phases())
		res.CmsyncBreakdown = append(res.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite, b.isOwnerWrite))
	}
	step("Secret IDLE for %s", b.c.idle)
	b.fanOut(ctx, "secret-idle", 1)
	time.Sleep(5 * time.Second)
	from := time.Now()
	time.Sleep(b.c.idle)
	res.IdleWrites = b.cmsyncWrites(from, time.Now())
	b.cleanup(ctx, "secret-idle", 1)
	proc.Stop()
	res.Rounds = b.c.secretRounds
	res.Limit, res.Cmsync = report.Medians(res.LimitRounds), report.Medians(res.CmsyncRounds)
	b.res.Ratios["secret fanOut/limitCreate"] = res.Cmsync.Create / res.Limit.Create
	b.res.Ratios["secret update/limitUpdate"] = res.Cmsync.Update / res.Limit.Update
	b.res.Ratios["secret cleanup/limitDelete"] = res.Cmsync.Delete / res.Limit.Delete
}
