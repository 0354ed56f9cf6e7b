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

// gcPercentFor is the GC target for a live heap of live bytes.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return gcMaxPercent
	}
	return int(min(max(gcHeadroom*100/live, gcMinPercent), gcMaxPercent))
}

// Run sets the GC target from the live heap now and every gcRetuneEvery until ctx
// ends. It is not used when GOGC is set: the user's choice stands.
func Run(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := -1
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			if percent := gcPercentFor(sample[0].Value.Uint64()); percent != current {
				debug.SetGCPercent(percent)
				current = percent
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(gcRetuneEvery):
		}
	}
}
