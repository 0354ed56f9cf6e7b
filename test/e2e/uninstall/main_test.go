//go:build e2e

// Package uninstall follows docs/uninstall.md on a control plane of its own
// (test/harness): the chart installed by helm, cmsync run as its ServiceAccount, copies
// of both forms and both kinds made; then each section of the page run as written, by
// kubectl and helm, and the cluster checked for anything of cmsync left. Each test
// uninstalls the release, so the suite has a control plane of its own, and it never
// runs on an existing cluster (make kind-e2e), whose release the other suites use.
package uninstall

import (
	"fmt"
	"os"
	"testing"

	"github.com/cmsync/cmsync/test/harness"
)

// chartValues install the chart with Secrets, so that both kinds have copies to leave.
var chartValues = []string{"secrets.enabled=true"}

func TestMain(m *testing.M) {
	if harness.ExistingCluster {
		fmt.Println("uninstall: skipped on an existing cluster (it uninstalls the release the other suites use)")
		os.Exit(0)
	}
	harness.Chart = "../../../deploy/chart/cmsync" // the working tree's, from this package's directory
	harness.Main(m, harness.Suite{
		Name:        "uninstall",
		AuditUsers:  []string{harness.CmsyncUser},
		ChartValues: chartValues,
	})
}
