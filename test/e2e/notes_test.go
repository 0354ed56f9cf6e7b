//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cmsync/cmsync/test/harness"
)

// The install notes of a scoped release print the memory docs/support.md#sizing asks
// for its namespaces: 64 MiB and 0.3 MiB per namespace served, 0.6 with Secrets
// (TestChartMemoryHoldsWhatWasMeasured holds that rule against the measurements).
func TestInstallNotesEstimateMemory(t *testing.T) {
	for _, tc := range []struct {
		namespaces int
		secrets    bool
		want       string
	}{
		{1000, false, "364Mi"},
		{100, true, "124Mi"},
	} {
		names := make([]string, tc.namespaces)
		for i := range names {
			names[i] = fmt.Sprintf("team-%d", i)
		}
		out, err := harness.Helm("install", "notes", "../../deploy/chart/cmsync", "--dry-run", "--namespace", "cmsync-notes",
			"--set", "scope.namespaces="+strings.Join(names, `\,`), "--set", fmt.Sprintf("secrets.enabled=%t", tc.secrets))
		if err != nil {
			t.Fatalf("helm install --dry-run: %v\n%s", err, out)
		}
		want := fmt.Sprintf("Memory: for %d namespaces, give cmsync a limit of at least %s", tc.namespaces, tc.want)
		if !strings.Contains(strings.Join(strings.Fields(out), " "), want) {
			_, notes, _ := strings.Cut(out, "NOTES:")
			t.Errorf("%d namespaces, secrets %t: the notes do not say %q:\n%s", tc.namespaces, tc.secrets, want, notes)
		}
	}
}
