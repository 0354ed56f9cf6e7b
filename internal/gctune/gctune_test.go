package gctune

import (
	"slices"
	"testing"
)

func TestGCPercentFollowsTheLiveHeap(t *testing.T) {
	for _, tc := range []struct {
		live  uint64
		burst bool
		want  int
	}{
		{0, false, gcMaxPercent},
		{4 << 20, false, gcMaxPercent},   // a small heap: Go's default room
		{16 << 20, false, 100},           // exactly the headroom
		{32 << 20, false, 50},            // 16 MiB of room
		{64 << 20, false, 25},            // 16 MiB is 25%
		{512 << 20, false, gcMinPercent}, // a large heap: never less than the floor
		// In a burst the heap may grow to 64 MiB, but never gets less room than
		// without one.
		{0, true, gcMaxPercent},
		{16 << 20, true, 300},
		{32 << 20, true, 100},
		{48 << 20, true, 33},
		{60 << 20, true, 26},
		{64 << 20, true, 25},
		{512 << 20, true, gcMinPercent},
	} {
		if got := gcPercentFor(tc.live, tc.burst); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB, burst %v) = %d, want %d", tc.live>>20, tc.burst, got, tc.want)
		}
	}
}

func TestReleaseOnceABurstIsOver(t *testing.T) {
	var r releaser
	allocs := uint64(0)
	tick := func(alloc, free uint64) bool {
		allocs += alloc
		return r.observe(allocs, free)
	}
	// A burst: 200 MiB allocated over 4 retunes.
	for range 4 {
		if tick(50<<20, 30<<20) {
			t.Fatal("released during the burst")
		}
	}
	// Quiet: released on the third quiet retune, once.
	released := []bool{tick(1<<20, 30<<20), tick(1<<20, 30<<20), tick(1<<20, 30<<20), tick(1<<20, 30<<20), tick(0, 30<<20)}
	if want := []bool{false, false, true, false, false}; !slices.Equal(released, want) {
		t.Errorf("after the burst: released %v, want %v", released, want)
	}
	// Quiet for long with little allocated since: nothing more to release.
	for range 10 {
		if tick(1<<20, 30<<20) {
			t.Fatal("released again without a new burst")
		}
	}
	// A small burst (under burstAlloc since the release) is not worth a collection.
	tick(20<<20, 30<<20)
	for range 5 {
		if tick(0, 30<<20) {
			t.Fatal("released after a small burst")
		}
	}
	// A burst that left little free memory is not either.
	tick(100<<20, 1<<20)
	for range 5 {
		if tick(0, 1<<20) {
			t.Fatal("released with little free memory")
		}
	}
}

// A burst's garbage not yet collected when it ends is reclaimable as much as free pages.
func TestReclaimableCountsDeadObjects(t *testing.T) {
	for _, tc := range []struct{ live, objects, free, want uint64 }{
		{live: 55 << 20, objects: 71 << 20, free: 1 << 20, want: 17 << 20},  // a burst ended before its collection
		{live: 55 << 20, objects: 55 << 20, free: 15 << 20, want: 15 << 20}, // just collected
		{live: 55 << 20, objects: 50 << 20, free: 2 << 20, want: 2 << 20},   // objects freed since: no dead ones counted
		{live: 0, objects: 0, free: 0, want: 0},                             // unknown
	} {
		if got := reclaimable(tc.live, tc.objects, tc.free); got != tc.want {
			t.Errorf("reclaimable(live %d, objects %d, free %d MiB) = %d MiB, want %d", tc.live>>20, tc.objects>>20, tc.free>>20, got>>20, tc.want>>20)
		}
	}
	// Such a burst is released once quiet, where its free pages alone would not be.
	var r releaser
	r.observe(100<<20, 0)
	released := false
	for range quietTicks {
		released = r.observe(100<<20, reclaimable(55<<20, 71<<20, 1<<20)) || released
	}
	if !released {
		t.Error("a quiet heap with 16 MiB of dead objects was not released")
	}
}
