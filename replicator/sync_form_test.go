package replicator

import (
	"strings"
	"testing"
)

func TestEventNoteFitsTheAPIServersLimit(t *testing.T) {
	for _, tc := range []struct {
		name, message, synced, want string
	}{
		{"short", "in sync in 2 namespaces", "2/2", "in sync in 2 namespaces (2/2)"},
		{"at the limit", strings.Repeat("m", maxEventNote-len(" (0/2)")), "0/2", strings.Repeat("m", maxEventNote-len(" (0/2)")) + " (0/2)"},
		{"over it", strings.Repeat("m", maxEventNote), "0/12", strings.Repeat("m", maxEventNote-len(" (0/12)...")) + "... (0/12)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := eventNote(tc.message, tc.synced)
			if got != tc.want || len(got) > maxEventNote {
				t.Errorf("eventNote(%d bytes, %q) = %d bytes %q..., want %d bytes", len(tc.message), tc.synced, len(got), got[:min(len(got), 20)], len(tc.want))
			}
		})
	}
}
