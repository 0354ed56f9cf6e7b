package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
)

// objectKindsFlag enables ObjectSync for the NetworkPolicy the ObjectSync rounds copy.
const objectKindsFlag = "--object-kinds=" + workload.PolicyKind

// objectRounds runs the rounds again with ObjectSync: LIMIT writes NetworkPolicies of
// a replica's shape; cmsync, run with --object-kinds naming NetworkPolicy, fans a
// source NetworkPolicy out when its ObjectSync is created, follows the source's
// change, and deletes the replicas when the ObjectSync is deleted. Then its idle
// writes, memory and a restart with one policy in every namespace.
func (b *bench) objectRounds(ctx context.Context) {
	if b.c.objectRounds == 0 {
		return
	}
	b.kind = workload.NetworkPolicies{Clientset: b.cs}
	defer func() { b.kind = workload.ConfigMaps{Clientset: b.cs} }()
	syncs := b.syncClient()
	res := &b.res.ObjectSync
	proc := b.startCmsync(objectKindsFlag)
	noProfile := func(string) func() { return func() {} }
	for r := range b.c.objectRounds {
		step("ObjectSync round %d of %d: LIMIT (NetworkPolicies), then cmsync's FAN-OUT, UPDATE, CLEANUP", r+1, b.c.objectRounds)
		limit := b.limit(ctx, 1, noProfile)
		res.LimitRounds = append(res.LimitRounds, limit.phases())
		res.LimitBreakdown = append(res.LimitBreakdown, b.breakdown(limit, b.isLimitWrite, nil))
		if b.c.objectLimitWatched {
			step("ObjectSync round %d of %d: LIMIT watched (NetworkPolicies)", r+1, b.c.objectRounds)
			b.limitWatched(ctx, 1, &res.LimitWatchedFigures, noProfile)
		}
		name := fmt.Sprintf("policy-r%02d", r)
		var round windows
		round.create = b.objectFanOut(ctx, syncs, name)
		round.update = b.objectUpdate(ctx, name)
		round.delete = b.objectCleanup(ctx, syncs, name)
		res.CmsyncRounds = append(res.CmsyncRounds, round.phases())
		res.CmsyncBreakdown = append(res.CmsyncBreakdown, b.breakdown(round, b.isCmsyncReplicaWrite, b.isOwnerWrite))
	}
	proc = b.objectIdleAndRestart(ctx, syncs, proc)
	proc.Stop()
	res.Rounds = b.c.objectRounds
	res.Limit, res.Cmsync = report.Medians(res.LimitRounds), report.Medians(res.CmsyncRounds)
	b.res.Ratios["objectsync fanOut/limitCreate"] = res.Cmsync.Create / res.Limit.Create
	b.res.Ratios["objectsync update/limitUpdate"] = res.Cmsync.Update / res.Limit.Update
	b.res.Ratios["objectsync cleanup/limitDelete"] = res.Cmsync.Delete / res.Limit.Delete
	if len(res.LimitWatchedRounds) > 0 {
		watched := report.Medians(res.LimitWatchedRounds)
		res.LimitWatched = &watched
		b.res.Ratios["objectsync limitWatched delete/limitDelete"] = watched.Delete / res.Limit.Delete
		b.res.Ratios["objectsync cleanup/limitWatchedDelete"] = res.Cmsync.Delete / watched.Delete
	}
}

// objectIdleAndRestart fans one policy out, counts cmsync's writes while idle, reads
// its memory, restarts it and counts the restart's writes, then deletes the policy's
// ObjectSync; it returns the restarted process.
func (b *bench) objectIdleAndRestart(ctx context.Context, syncs client.Client, proc *workload.Process) *workload.Process {
	res := &b.res.ObjectSync
	step("ObjectSync IDLE for %s", b.c.idle)
	b.objectFanOut(ctx, syncs, "policy-idle")
	time.Sleep(5 * time.Second) // let the passes the fan-out's own writes triggered finish
	from := time.Now()
	time.Sleep(b.c.idle)
	res.IdleWrites = b.cmsyncWrites(from, time.Now())
	res.Memory = proc.Memory()
	step("ObjectSync RESTART in sync")
	proc.Stop()
	proc, res.Restart = b.restart(objectKindsFlag)
	b.objectCleanup(ctx, syncs, "policy-idle")
	return proc
}

// objectFanOut creates the source policy name, then times the creation of its
// ObjectSync until cmsync has written every replica, and checks them.
func (b *bench) objectFanOut(ctx context.Context, syncs client.Client, name string) window {
	must(b.kind.Create(ctx, workload.PolicySource(name)))
	n := len(b.targets)
	return b.replicaPhase(name, n, n, "1", writeVerbs, func() error { return syncs.Create(ctx, workload.ObjectSyncOf(name)) })
}

// objectUpdate changes the source policy name and times until cmsync has rewritten
// every replica, then checks them.
func (b *bench) objectUpdate(ctx context.Context, name string) window {
	n := len(b.targets)
	return b.replicaPhase(name, n, n, "2", rewriteVerbs, func() error {
		src := workload.PolicySource(name)
		src.Data["v"] = "2"
		return b.kind.Update(ctx, src)
	})
}

// objectCleanup deletes the ObjectSync name and times until cmsync has deleted every
// replica, checks that none is left, then deletes the source policy.
func (b *bench) objectCleanup(ctx context.Context, syncs client.Client, name string) window {
	w := b.replicaPhase(name, len(b.targets), 0, "", []string{verbDelete}, func() error {
		return workload.DeleteObjectSync(ctx, syncs, name)
	})
	must(b.kind.Delete(ctx, workload.SourceNamespace, name))
	return w
}

// syncClient is a client of the bench's own for ObjectSyncs.
func (b *bench) syncClient() client.Client {
	scheme := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	must(v1alpha1.AddToScheme(scheme))
	cfg := rest.CopyConfig(b.env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	must(err)
	return c
}
