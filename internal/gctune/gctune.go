// Package gctune sets the Go garbage collector's target from cmsync's live heap.
//
// Go's memory limit (GOMEMLIMIT, which the chart sets from the container's memory
// limit) only makes the collector work harder when the heap nears the limit; below it
// the heap still grows to twice the live heap. This package keeps the resident size
// near the live heap long before any limit, which is what holds 100,000 replicas under
// their memory target (make bench); no library does this.
package gctune

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// cmsync's heap is mostly its caches, which live long; passes make garbage in bursts.
// Go's default target (GOGC=100) lets the heap grow to twice the live heap, which at
// 100,000 replicas is a hundred MiB of room for garbage. A flat 25% keeps the resident
// size near the live heap there, but on a small heap it collects every few MiB and a
// burst of writes spends a third of its CPU collecting (make bench). So the target
// follows the live heap: at least gcHeadroom of room, and no less than gcMinPercent.
const (
	gcHeadroom    = 16 << 20
	gcMinPercent  = 25
	gcMaxPercent  = 100
	gcRetuneEvery = time.Second
)

// While cmsync allocates fast, the collector's work per allocated byte grows with the
// live heap over the room: a fan-out of 100 KiB objects (several copies of each pass
// through the heap: request, response, watch event) collected every few replicas with
// 16 MiB of room. So while more than burstRate is allocated per retune, the heap may
// grow to burstHeapGoal: a small heap gets room for the burst (cmsync's CPU for the
// phases of 1,000 replicas of 100 KiB fell by a quarter to a third, make bench-sweep),
// a heap near the goal gets none more. With a goal of 96 MiB the heap of 100,000
// replicas (about 55 MiB live) got room too, and its resident size after the burst came
// out 5-7 MiB higher; at 64 MiB a heap of more than 48 MiB live gets no more room in a
// burst than out of one. The releaser returns the room once the burst is over, and
// GOMEMLIMIT (the chart sets it from the container's limit) still bounds the heap.
const (
	burstRate     = 32 << 20
	burstHeapGoal = 64 << 20
)

// gcPercentFor is the GC target for a live heap of live bytes, in a burst of
// allocation or not.
func gcPercentFor(live uint64, burst bool) int {
	if live == 0 {
		return gcMaxPercent
	}
	percent := int(min(max(gcHeadroom*100/live, gcMinPercent), gcMaxPercent))
	if burst && live < burstHeapGoal {
		percent = max(percent, int((burstHeapGoal-live)*100/live))
	}
	return percent
}

// A start fills the caches from nothing: at 100,000 replicas the heap grows to its
// live size within seconds, while allocating ten times that in decoded watch events,
// and every collection on the way scans all that is already in. Until the caches have
// listed, the collector keeps Go's default room (twice the live heap): with one event
// per owner from the replica watch's initial list, cmsync's CPU for a restart at
// 100,000 replicas fell from 6.0 to 5.1 s, and its resident size after it did not grow
// (medians of six on the same replicas, make bench-restarts). The room is returned by
// the releaser once the start's work is over, as after any burst. It ends when the
// caches have listed, not at the first quiet seconds: a fan-out that follows a fresh
// start at once would otherwise run all along with that room, and stay larger after it.

// After a burst of work (a fan-out, a mass update, the first list of every replica)
// the heap keeps the pages the burst's garbage used. Go's background scavenger returns
// them to the system slowly, so a quiet cmsync stays at its burst's size for minutes
// (at 100,000 replicas, 15 MiB free and 30 MiB idle on top of the live heap, make
// bench-sweep). Once the work has stopped, one forced collection returns them.
const (
	quietAllocPerTick = 4 << 20  // allocation per retune below which cmsync is quiet
	quietTicks        = 3        // retunes in a row that quiet before releasing
	burstAlloc        = 64 << 20 // allocation since the last release that makes a burst
	minFreeToRelease  = 8 << 20  // reclaimable heap worth a forced collection
)

// releaser decides when to return a finished burst's memory.
type releaser struct {
	lastAllocs, allocsAtRelease uint64
	quiet                       int
}

// observe takes the bytes allocated so far and the heap's reclaimable bytes (see
// reclaimable), and reports whether to release memory now.
func (r *releaser) observe(allocs, reclaimableBytes uint64) bool {
	if allocs-r.lastAllocs < quietAllocPerTick {
		r.quiet++
	} else {
		r.quiet = 0
	}
	r.lastAllocs = allocs
	if r.quiet >= quietTicks && allocs-r.allocsAtRelease >= burstAlloc && reclaimableBytes >= minFreeToRelease {
		r.allocsAtRelease = allocs
		return true
	}
	return false
}

// Run sets the GC target from the live heap now and every gcRetuneEvery until ctx
// ends, and returns a finished burst's memory to the system. Until started is closed
// (the caches have listed) the target is Go's default. It is not used when GOGC is
// set: the user's choice stands.
func Run(ctx context.Context, started <-chan struct{}) {
	sample := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"},
	}
	current := -1
	var release releaser
	starting := started // nil once closed: a retune follows it at once, once
	for {
		if isClosed(starting) {
			starting = nil
		}
		metrics.Read(sample)
		allocs := uint64Of(sample[1].Value)
		// The releaser holds the allocation count of the last retune.
		burst := allocs-release.lastAllocs > burstRate
		if sample[0].Value.Kind() == metrics.KindUint64 {
			percent := gcMaxPercent
			if starting == nil {
				percent = gcPercentFor(sample[0].Value.Uint64(), burst)
			}
			if percent != current {
				debug.SetGCPercent(percent)
				current = percent
			}
		}
		// Unknown values count 0: nothing is released.
		if release.observe(allocs, reclaimable(uint64Of(sample[0].Value), uint64Of(sample[3].Value), uint64Of(sample[2].Value))) {
			debug.FreeOSMemory()
		}
		select {
		case <-ctx.Done():
			return
		case <-starting:
		case <-time.After(gcRetuneEvery):
		}
	}
}

// reclaimable is what a forced collection and release could return to the system: the
// heap's free pages and its dead objects (objects counts the heap's objects, live or
// not yet collected; live is the live heap at the last collection). A burst can end
// just before its next collection, with its garbage, up to the GC's room above the live
// heap, still among the objects and little free: by the free pages alone such a burst
// was never released.
func reclaimable(live, objects, free uint64) uint64 {
	if objects > live {
		return free + objects - live
	}
	return free
}

// uint64Of is a runtime metric's value; 0 when the runtime does not know it.
func uint64Of(v metrics.Value) uint64 {
	if v.Kind() == metrics.KindUint64 {
		return v.Uint64()
	}
	return 0
}

// isClosed reports whether c is closed; false for a nil channel.
func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}
