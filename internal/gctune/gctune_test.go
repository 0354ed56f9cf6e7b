package gctune

import "testing"

func TestGCPercentFollowsTheLiveHeap(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, gcMaxPercent},
		{4 << 20, gcMaxPercent},   // a small heap: Go's default room
		{16 << 20, 100},           // exactly the headroom
		{32 << 20, 50},            // 16 MiB of room
		{64 << 20, 25},            // 16 MiB is 25%
		{512 << 20, gcMinPercent}, // a large heap: never less than the floor
	} {
		if got := gcPercentFor(tc.live); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}
