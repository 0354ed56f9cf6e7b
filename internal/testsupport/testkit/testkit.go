// Package testkit holds the waiting and comparing helpers that cmsync's integration and
// end-to-end tests share.
package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"
)

// poll is how often Eventually and Consistently look.
const poll = 100 * time.Millisecond

// Eventually retries check until it returns nil, and fails the test when the timeout
// passes first.
func Eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(poll)
	}
}

// Consistently fails the test as soon as check returns an error within the duration.
func Consistently(t *testing.T, duration time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(poll)
	}
}

// SameSet reports whether a and b hold the same strings, in any order.
func SameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x] == 0 {
			return false
		}
		seen[x]--
	}
	return true
}

// RandomSuffix returns 8 random hex characters, for names no other test uses.
func RandomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Must fails the test on an error.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
