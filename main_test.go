package main

import "testing"

func TestClientRateLimit(t *testing.T) {
	for _, tc := range []struct {
		qps       float64
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{0, 2000, -1, 0},  // the default: no client-side limit (client-go's 0 would be 5/s)
		{-3, 2000, -1, 0}, // negative, as client-go reads it: none
		{50, 10, 50, 10},  // a positive limit is kept with its burst
		{0.5, 1, 0.5, 1},  // fractions are client-go's too
		{500, 2000, 500, 2000},
	} {
		qps, burst := clientRateLimit(tc.qps, tc.burst)
		if qps != tc.wantQPS || burst != tc.wantBurst {
			t.Errorf("clientRateLimit(%v, %d) = %v, %d; want %v, %d", tc.qps, tc.burst, qps, burst, tc.wantQPS, tc.wantBurst)
		}
	}
}
