package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/hack/bench/measure"
	"github.com/cmsync/cmsync/hack/bench/report"
	"github.com/cmsync/cmsync/hack/bench/workload"
)

// limit times a plain client creating, updating and deleting perNamespace objects in
// each namespace: the very writes of perNamespace sources' fan-out, update and cleanup.
// Each object is what cmsync's replica of a bench source is: the same data keys and
// values, and as many labels and annotations of the same sizes (under keys of the
// bench's own, which cmsync's caches never select), because the API server's cost of
// a write grows with the fields it tracks; an update changes "v" as the sources' do,
// and with it a 40-character label, as a replica's content-hash label changes.
func (b *bench) limit(ctx context.Context, perNamespace int, profile func(phase string) (wait func())) windows {
	return b.limitNamed(ctx, limitName, perNamespace, profile)
}

// limitName and limitWatchedName name LIMIT's objects, and those of LIMIT watched
// (-sweep-limit-watched): name-000, name-001, …
const (
	limitName        = "limit"
	limitWatchedName = "limitw"
)

// limitNamed is limit with the objects named name-000, name-001, ….
func (b *bench) limitNamed(ctx context.Context, name string, perNamespace int, profile func(phase string) (wait func())) windows {
	var p windows
	n := perNamespace * len(b.targets)
	shaped := func(i int, v string) workload.Object {
		return workload.ReplicaShaped(b.targets[i%len(b.targets)], fmt.Sprintf("%s-%03d", name, i/len(b.targets)), v1alpha1.ManagedByValue, v, b.payload)
	}
	wait := profile("create")
	p.create = b.timed(func() error {
		return workload.Parallel(b.c.workers, n, func(i int) error {
			return workload.RetryServerErrors(func() error { return b.kind.Create(ctx, shaped(i, "1")) }, apierrors.IsAlreadyExists)
		})
	})
	wait()
	wait = profile("update")
	p.update = b.timed(func() error {
		return workload.Parallel(b.c.workers, n, func(i int) error {
			return workload.RetryServerErrors(func() error { return b.kind.Update(ctx, shaped(i, "2")) }, nil)
		})
	})
	wait()
	wait = profile("delete")
	p.delete = b.timed(func() error {
		return workload.Parallel(b.c.workers, n, func(i int) error {
			o := shaped(i, "")
			return workload.RetryServerErrors(func() error { return b.kind.Delete(ctx, o.Namespace, o.Name) }, apierrors.IsNotFound)
		})
	})
	wait()
	return p
}

// fanOut creates count sources named prefix-i and times until cmsync has written every
// replica (the API server's audit log says when each write completed), then checks
// that every replica exists with the right content.
func (b *bench) fanOut(ctx context.Context, prefix string, count int) window {
	want := count * len(b.targets)
	return b.replicaPhase(prefix, want, want, "1", writeVerbs, func() error {
		return workload.Parallel(b.c.workers, count, func(i int) error {
			return b.kind.Create(ctx, workload.Source(fmt.Sprintf("%s-%03d", prefix, i), b.payload))
		})
	})
}

// update changes the sources prefix-000 to prefix-<count-1> at once (a mass change, as
// a CA rotation is) and times until cmsync has rewritten every replica, then checks them.
func (b *bench) update(ctx context.Context, prefix string, count int) window {
	want := count * len(b.targets)
	return b.replicaPhase(prefix, want, want, "2", rewriteVerbs, func() error {
		return workload.Parallel(b.c.workers, count, func(i int) error {
			src := workload.Source(fmt.Sprintf("%s-%03d", prefix, i), b.payload)
			src.Data["v"] = "2"
			return b.kind.Update(ctx, src)
		})
	})
}

// cleanup deletes the sources prefix-000 to prefix-<count-1> and times until cmsync has
// deleted every replica, then checks that none is left.
func (b *bench) cleanup(ctx context.Context, prefix string, count int) window {
	return b.replicaPhase(prefix, count*len(b.targets), 0, "", []string{verbDelete}, func() error {
		return workload.Parallel(b.c.workers, count, func(i int) error {
			return b.kind.Delete(ctx, workload.SourceNamespace, fmt.Sprintf("%s-%03d", prefix, i))
		})
	})
}

// replicaPhase times the user's write until cmsync has made writes writes (of verbs)
// to replicas named prefix*, then checks that left replicas named prefix* exist, each
// with "v" equal to value.
func (b *bench) replicaPhase(prefix string, writes, left int, value string, verbs []string, user func() error) window {
	check := func() error { return b.replicasAre(context.Background(), prefix, left, value) }
	w := b.timedUntilWritten(prefix, writes, verbs, user, check)
	must(check())
	return w
}

// unsureAfter is how long the audit log must stay quiet, with every replica's write
// logged and some of them answered with a server error, before the bench reads the
// replicas to learn whether those writes landed.
const unsureAfter = 2 * time.Second

// timedUntilWritten times fn and stops the clock when the audit log shows that
// cmsync's successful writes of the given verbs reached want distinct replicas named
// prefix*: at the API server's completion of the last one, as LIMIT's clock stops at
// its last response. No watch of the bench's own adds work to the API server while
// cmsync writes; the caller then reads the result once. Nor does the bench spend CPU
// the API server could use: while cmsync writes, it only picks out the lines that may
// be its writes, and parses them once there are enough of them to make up want. Doing
// both as each line came cost it 0.1 ms of CPU per write of cmsync's, a third of what
// LIMIT's client spends on its writes (perf, 1,000 namespaces), on the same two cores.
//
// A write answered with a server error may still have landed: under a 900 KiB cleanup
// etcd answered one delete "request timed out" after deleting the replica, and cmsync,
// whose cache then showed it gone, had nothing left to retry. Once every replica's
// write is logged and the log has stayed quiet for unsureAfter, the bench asks landed
// whether the replicas are as wanted, and stops the clock at the last logged write if
// so; if not, cmsync has a write to retry and the bench keeps waiting.
func (b *bench) timedUntilWritten(prefix string, want int, verbs []string, fn func() error, landed func() error) window {
	tail := b.openAudit(true, []byte(`"userAgent":"cmsync`), []byte(`"name":"`+prefix))
	defer tail.Close()
	seen := &replicaWrites{b: b, prefix: prefix, verbs: verbs, written: map[string]bool{}, unsure: map[string]bool{}}
	w := b.timed(func() error {
		if err := fn(); err != nil {
			return err
		}
		return seen.waitFor(tail, want, landed)
	})
	w.end = seen.last
	return w
}

// replicaWrites follows, in the audit log, cmsync's writes of one phase's replicas
// (named with prefix, by one of verbs): those done, those answered with a server error
// (unsure), and the lines read but not parsed yet (pending).
type replicaWrites struct {
	b               *bench
	prefix          string
	verbs           []string
	written, unsure map[string]bool
	pending         [][]byte
	// lastEvent is when the log last showed one of these writes; last is the
	// completion time of the last one counted.
	lastEvent, last time.Time
}

// waitFor reads the log until want replicas are written, or, once every write is
// logged and the log has stayed quiet for unsureAfter, until landed says the replicas
// are as wanted; at most 30 minutes.
func (s *replicaWrites) waitFor(tail *measure.AuditTail, want int, landed func() error) error {
	s.lastEvent = time.Now()
	deadline := s.lastEvent.Add(30 * time.Minute)
	for len(s.written) < want {
		s.read(tail, want)
		if len(s.unsure) > 0 && len(s.written)+len(s.unsure) >= want && time.Since(s.lastEvent) > unsureAfter {
			err := landed()
			step("%d of cmsync's writes of %s were answered with a server error; the replicas read as wanted: %v", len(s.unsure), s.prefix, err == nil)
			if err == nil {
				return nil
			}
			s.lastEvent = time.Now()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cmsync wrote %d of %d replicas of %s in 30 minutes", len(s.written), want, s.prefix)
		}
		time.Sleep(auditPoll)
	}
	return nil
}

// read picks out the new lines that may be the writes, and parses them once there are
// enough to make up want.
func (s *replicaWrites) read(tail *measure.AuditTail, want int) {
	tail.Lines(func(line []byte) {
		if measure.HasVerb(line, s.verbs) {
			s.pending = append(s.pending, bytes.Clone(line))
			s.lastEvent = time.Now()
		}
	})
	if len(s.written)+len(s.unsure)+len(s.pending) < want {
		return
	}
	for _, line := range s.pending {
		if e, ok := measure.ParseAudit(line); ok {
			s.check(e)
		}
	}
	s.pending = s.pending[:0]
}

// check counts one logged write of a replica, done or answered with a server error.
func (s *replicaWrites) check(e measure.AuditEvent) {
	key := e.ObjectRef.Namespace + "/" + e.ObjectRef.Name
	if !s.b.isCmsyncReplicaWrite(e) || !strings.HasPrefix(e.ObjectRef.Name, s.prefix) || !slices.Contains(s.verbs, e.Verb) || s.written[key] {
		return
	}
	s.lastEvent = time.Now()
	switch {
	case measure.Landed(e):
		s.written[key] = true
		delete(s.unsure, key)
	case e.ResponseStatus.Code >= 500:
		s.unsure[key] = true
	default:
		return
	}
	if e.Completed.After(s.last) {
		s.last = e.Completed
	}
}

// auditPoll is how often timedUntilWritten reads the audit log while cmsync writes. The
// clock stops at the completion time the log gives, so the poll only decides when the
// bench notices; each wake-up of the bench costs CPU on the cores the API server
// needs (at 5 ms, about a third of the bench's CPU in cmsync's phases went to the Go
// scheduler's wake-ups).
const auditPoll = 20 * time.Millisecond

// replicasAre reports an error unless exactly want replicas named prefix* exist, each
// with "v" equal to value.
func (b *bench) replicasAre(ctx context.Context, prefix string, want int, value string) error {
	values, err := b.kind.ManagedValues(ctx)
	if err != nil {
		return err
	}
	found, right := 0, 0
	for key, v := range values {
		if _, name, _ := strings.Cut(key, "/"); strings.HasPrefix(name, prefix) {
			found++
			if v == value {
				right++
			}
		}
	}
	if found != want || right != want {
		return fmt.Errorf("after cmsync's last write: %d replicas of %s, %d with v=%q; want %d", found, prefix, right, value, want)
	}
	return nil
}

// isLimitWrite picks the plain client's writes of the LIMIT phases.
func (b *bench) isLimitWrite(e measure.AuditEvent) bool { return b.isWriteOf(limitName, e) }

// isWriteOf picks the plain client's writes of the objects limitNamed names name-….
func (b *bench) isWriteOf(name string, e measure.AuditEvent) bool {
	return e.ObjectRef.Resource == b.kind.Resource() && strings.HasPrefix(e.ObjectRef.Name, name+"-")
}

// isOwnerWrite picks the writes to the owners of cmsync's replicas: to the sources in
// their namespace (the bench's, and cmsync's status annotations) and to ObjectSyncs
// (the bench's, and cmsync's status and finalizer).
func (b *bench) isOwnerWrite(e measure.AuditEvent) bool {
	return e.ObjectRef.Resource == "objectsyncs" ||
		e.ObjectRef.Resource == b.kind.Resource() && e.ObjectRef.Namespace == workload.SourceNamespace
}

// isCmsyncReplicaWrite picks cmsync's writes to replicas (not its status patches of
// the source).
func (b *bench) isCmsyncReplicaWrite(e measure.AuditEvent) bool {
	return strings.HasPrefix(e.UserAgent, "cmsync") && e.ObjectRef.Resource == b.kind.Resource() && e.ObjectRef.Namespace != workload.SourceNamespace
}

// breakdown splits each phase of a round by the audit log's timestamps of the writes
// that pick chooses. For cmsync's rounds (owner set), it also places the writes to the
// owner: the user's write that starts the phase (the source, or the ObjectSync) and
// cmsync's own (its status, its finalizer).
func (b *bench) breakdown(w windows, pick, owner func(measure.AuditEvent) bool) report.Breakdown {
	phases := []window{w.create, w.update, w.delete}
	spans := make([]span, len(phases))
	var owners [][]measure.AuditEvent
	if owner != nil {
		owners = make([][]measure.AuditEvent, len(phases))
	}
	b.auditedWrites(func(e measure.AuditEvent) {
		for i, p := range phases {
			switch {
			case pick(e) && !e.Received.Before(p.start) && !e.Received.After(p.end):
				spans[i].add(e)
			case owners != nil && owner(e) && !e.Received.Before(p.start) && !e.Received.After(p.end.Add(b.c.aftermath)):
				// cmsync's status follows its last replica write, after the clock stopped.
				owners[i] = append(owners[i], e)
			}
		}
	})
	splits := make([]report.Split, len(phases))
	for i := range phases {
		splits[i] = spans[i].split(phases[i])
		if owners != nil {
			spans[i].placeOwnerWrites(&splits[i], phases[i], owners[i])
		}
	}
	return report.Breakdown{Create: splits[0], Update: splits[1], Delete: splits[2]}
}

// span is what the audit log says of one phase's replica writes.
type span struct {
	first, last  time.Time
	writes       int
	serverErrors int
	busy         time.Duration
}

func (s *span) add(e measure.AuditEvent) {
	if s.writes == 0 || e.Received.Before(s.first) {
		s.first = e.Received
	}
	if e.Completed.After(s.last) {
		s.last = e.Completed
	}
	s.writes++
	s.busy += e.Completed.Sub(e.Received)
	if e.ResponseStatus.Code >= 500 {
		s.serverErrors++
	}
}

// split is the phase p as the span s of its writes divides it.
func (s *span) split(p window) report.Split {
	if s.writes == 0 {
		return report.Split{CPU: p.cpu, CPUWithAftermath: p.cpuWithAftermath, Requests: p.requests, ServerAllocatedMiB: p.serverAllocatedMiB}
	}
	writing := s.last.Sub(s.first)
	return report.Split{BeforeFirstWrite: s.first.Sub(p.start).Seconds(), Writing: writing.Seconds(),
		AfterLastWrite: p.end.Sub(s.last).Seconds(), Writes: s.writes,
		LatencyMillis: float64(s.busy.Milliseconds()) / float64(s.writes), InFlight: s.busy.Seconds() / max(writing.Seconds(), 1e-9),
		ServerErrors: s.serverErrors, CPU: p.cpu, CPUWithAftermath: p.cpuWithAftermath, Requests: p.requests,
		ServerAllocatedMiB: p.serverAllocatedMiB}
}

// placeOwnerWrites sets when the user's write to the owner completed (the last one
// received before cmsync's first replica write), how many writes cmsync made to the
// owner before its first replica write, and when its first write to the owner after
// its last replica write (the status) completed.
func (s *span) placeOwnerWrites(split *report.Split, p window, owner []measure.AuditEvent) {
	if s.writes == 0 {
		return
	}
	for _, e := range owner {
		byCmsync := strings.HasPrefix(e.UserAgent, "cmsync")
		switch {
		case !byCmsync && e.Received.Before(s.first):
			split.SourceWritten = max(split.SourceWritten, e.Completed.Sub(p.start).Seconds())
		case byCmsync && e.Completed.Before(s.first):
			split.OwnerWritesBeforeFirstWrite++
		case byCmsync && !e.Completed.Before(s.last):
			after := e.Completed.Sub(s.last).Seconds()
			if split.StatusAfterLastWrite == 0 || after < split.StatusAfterLastWrite {
				split.StatusAfterLastWrite = after
			}
		}
	}
}

// window is when a timed phase started and when its clock stopped, and the CPU
// seconds each process of the bench used in between, and with the phase's aftermath.
type window struct {
	start, end       time.Time
	cpu              map[string]float64
	cpuWithAftermath map[string]float64
	requests         map[string]int
	// serverAllocatedMiB is what the API server allocated over the span of requests.
	serverAllocatedMiB float64
}

func (w window) seconds() float64 { return w.end.Sub(w.start).Seconds() }

// windows are the create, update and delete phases of one round.
type windows struct{ create, update, delete window }

func (w windows) phases() report.Phases {
	return report.Phases{Create: w.create.seconds(), Update: w.update.seconds(), Delete: w.delete.seconds()}
}

// timed runs fn as a phase and returns its window. The window's CPU is read at the
// clock's stop, and again b.aftermath later, less what each process used in a quiet
// window of -aftermath just before the start, scaled to b.aftermath. The first alone
// may not be the same measure for LIMIT and cmsync: LIMIT's phase ends at its last
// answer, cmsync's when the bench has read from the audit log that its last write
// completed, so cmsync's window can take in work the API server does after answering
// (its watch cache decoding each write's event from etcd and sending it to its
// watchers) that LIMIT's leaves out. The default second covers that work for 1 KiB
// objects; for 900 KiB ones the API server decodes etcd's watch events for seconds
// after the last answer, and measureRound gives such phases a longer aftermath.
//
// With -server-gc-before-phase (the default) the API server first runs a full garbage
// collection. One collection of its heap costs it about as much CPU as a hundred
// writes, and each round starts a control plane of its own and runs the same sequence,
// so whether a collection fell in a short phase's window repeated from round to round
// rather than being a fair draw, and moved when the sequence changed: the
// 100-namespace cleanup came out 1.53x and 0.97x of LIMIT's in two runs of the same
// binary (sweep-20261127-172957-n100-limit-watched.json, -175329-n100-profiled.json),
// the difference being in how many rounds a hundred milliseconds of the API server's
// CPU appeared. After a collection, a phase's window holds one only when its own
// allocations bring the next, so each writer's phases pay for collections as they
// cause them.
func (b *bench) timed(fn func() error) window {
	aftermath := b.aftermath
	if b.c.serverGCBeforePhase {
		b.collectServerGarbage()
	}
	// The reads of the API server's /metrics are outside both CPU windows.
	requestsBefore, allocatedBefore := b.serverCounters()
	quietFrom := measure.ProcessCPU()
	time.Sleep(b.c.aftermath)
	before := measure.ProcessCPU()
	start := time.Now()
	must(fn())
	w := window{start: start, end: time.Now(), cpu: measure.ProcessCPU()}
	time.Sleep(aftermath)
	after := measure.ProcessCPU()
	var allocated float64
	w.requests, allocated = b.serverCounters()
	w.serverAllocatedMiB = (allocated - allocatedBefore) / (1 << 20)
	w.cpuWithAftermath = map[string]float64{}
	quietScale := aftermath.Seconds() / b.c.aftermath.Seconds()
	for name, seconds := range w.cpu {
		w.cpu[name] = seconds - before[name]
		quiet := (before[name] - quietFrom[name]) * quietScale
		w.cpuWithAftermath[name] = after[name] - before[name] - quiet
	}
	for name, n := range w.requests {
		if w.requests[name] = n - requestsBefore[name]; w.requests[name] == 0 {
			delete(w.requests, name)
		}
	}
	return w
}
