//go:build e2e

// Package upgrade moves cmsync from its first release to the working tree and back, on
// a control plane of its own (test/harness): the first release's chart installed and
// its binary running as the chart's ServiceAccount, then helm upgrade to this chart
// and binary, then helm rollback. Every replica must stay where it is through both.
package upgrade

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
	"github.com/cmsync/cmsync/test/harness"
)

// firstRelease is the commit of cmsync's first release: the last before the tenant
// boundary, scoped mode and SecretSync (SPEC §9–§11). hack/first-release.sh builds
// its binary and chart from this repository's history.
const firstRelease = "d525595ce8671d271d211eed0dd74755cb8028ac"

// chartValues are the values of both releases: Secrets on, so that the first release
// replicates a Secret too.
var chartValues = []string{"secrets.enabled=true"}

// released is the first release's binary and chart.
var released struct{ binary, chart string }

func TestMain(m *testing.M) {
	harness.Main(m, harness.Suite{
		Name:        "upgrade",
		AuditUsers:  []string{harness.CmsyncUser},
		ChartValues: chartValues,
		Prepare: func() error {
			out, err := exec.Command("../../hack/first-release.sh", firstRelease).Output()
			if err != nil {
				return fmt.Errorf("building the first release %s: %w", firstRelease, err)
			}
			dir := strings.TrimSpace(string(out))
			released.binary, released.chart = filepath.Join(dir, "cmsync"), filepath.Join(dir, "chart")
			if _, err := os.Stat(released.binary); err != nil {
				return err
			}
			harness.Chart = released.chart // the suite installs the first release's chart
			return nil
		},
	})
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	consistently = testkit.Consistently
	must         = testkit.Must
)
