//go:build e2e

// Package chaos is the model checker (make chaos; make test runs a slice of it): random
// histories of user changes against two leader-elected cmsync processes, each with one
// fault in turn (SIGKILL, a frozen leader, a partition, throttling, etcd and
// kube-apiserver restarts, watch expiry, new flags), checked against a model of
// docs/reference.md; and the fault injectors it uses, on the control plane of
// test/harness.
package chaos

import (
	"testing"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
	"github.com/cmsync/cmsync/test/harness"
)

func TestMain(m *testing.M) {
	harness.Main(m, harness.Suite{
		Name:        "chaos",
		AuditUsers:  []string{harness.CmsyncUser, standbyUser},
		ChartValues: []string{"secrets.enabled=true"},
	})
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	randomSuffix = testkit.RandomSuffix
	must         = testkit.Must
)
