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
