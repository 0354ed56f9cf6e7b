//go:build e2e

// Package e2e drives the real cmsync binary, as a separate process, against a real
// control plane (test/harness) only through the public interface of
// docs/reference.md: the scenarios, the chart, the plugin, the metrics and alerts,
// and at the end the least-privilege audit of the chart's RBAC. The model checker
// and the fault injectors are test/chaos.
package e2e

import (
	"testing"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
	"github.com/cmsync/cmsync/test/harness"
)

// plainKubeconfig authenticates as plainServiceAccount, bound to the chart's
// ClusterRole as rendered with secrets.enabled=false.
var plainKubeconfig string

func TestMain(m *testing.M) {
	harness.Main(m, harness.Suite{
		Name:       "e2e",
		AuditUsers: []string{harness.CmsyncUser, plainUser},
		// Secrets on, and the ObjectSync kinds listed, so the chart grants the Secret and
		// the kinds' verbs the scenarios use (the least-privilege audit at the end checks
		// each of them is used).
		ChartValues: []string{"secrets.enabled=true", objectSyncChartValue},
		Before: func() error {
			if err := createPlainIdentity(); err != nil {
				return err
			}
			var err error
			plainKubeconfig, err = harness.ServiceAccountKubeconfig(plainServiceAccount)
			return err
		},
		After: func() error {
			if !harness.FullRun() {
				return nil
			}
			return harness.CheckLeastPrivilege("e2e")
		},
	})
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	consistently = testkit.Consistently
	sameSet      = testkit.SameSet
	randomSuffix = testkit.RandomSuffix
	must         = testkit.Must
)
