//go:build e2e

// Package scoped runs cmsync in scoped mode (--namespaces; the chart's
// scope.namespaces) on a control plane of its own (test/harness): cmsync runs as the
// chart's ServiceAccount, bound only by what the chart renders in scoped mode (a Role
// in each listed namespace, a ClusterRole that reads namespaces and cmsync's own
// resources). At the end, the least-privilege audit, and the API server's audit log
// read for any request about ConfigMaps or Secrets outside the listed namespaces or
// across all of them.
package scoped

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
	"github.com/cmsync/cmsync/test/harness"
)

// The namespaces: listed are served (later does not exist at the install: it has no
// Role until the chart is upgraded after its creation); out matches the sources' glob
// but is not listed; elsewhere holds a labelled source cmsync must never read.
const (
	srcNS     = "scoped-src"
	aNS       = "scoped-a"
	bNS       = "scoped-b"
	laterNS   = "scoped-later"
	outNS     = "scoped-out"
	elsewhere = "unlisted-src"
)

var listed = []string{srcNS, aNS, bNS, laterNS}

// chartValues install the chart in scoped mode, with Secrets and NetworkPolicies for
// ObjectSync. Metrics are plain HTTP here: the grants of secure metrics (TokenReview,
// SubjectAccessReview) are the same in both modes, and the end-to-end suite proves them
// used.
var chartValues = []string{"secrets.enabled=true", "metrics.secure=false", "scope.namespaces={" + strings.Join(listed, ",") + "}",
	"objectSync.kinds={" + objectKind + "}"}

// cmsyncArgs are the flags the chart renders for these values, for the local process.
var cmsyncArgs = []string{"--secrets=enabled", "--leader-elect=true", "--namespaces=" + strings.Join(listed, ",")}

func TestMain(m *testing.M) {
	harness.Main(m, harness.Suite{
		Name:        "scoped",
		AuditUsers:  []string{harness.CmsyncUser},
		ChartValues: chartValues,
		// The admission policy covers the served namespaces alone.
		ProbeNamespace: srcNS,
		Prepare: func() error {
			for _, ns := range []string{srcNS, aNS, bNS, outNS, elsewhere} {
				if err := harness.K8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
					return err
				}
			}
			return nil
		},
		After: func() error {
			if !harness.FullRun() {
				return nil
			}
			if err := harness.CheckLeastPrivilege("scoped"); err != nil {
				return err
			}
			return requestsStayedInScope()
		},
	})
}

// requestsStayedInScope reads the audit log: every request of cmsync's about
// ConfigMaps or Secrets named one of the listed namespaces.
func requestsStayedInScope() error {
	var outside []string
	err := harness.EachAuditRecord(func(r harness.AuditRecord) {
		if r.User.Username != harness.CmsyncUser || r.ObjectRef == nil || r.ObjectRef.APIGroup != "" {
			return
		}
		if r.ObjectRef.Resource != "configmaps" && r.ObjectRef.Resource != "secrets" {
			return
		}
		if !slices.Contains(listed, r.ObjectRef.Namespace) && len(outside) < 10 {
			outside = append(outside, r.Verb+" "+r.RequestURI)
		}
	})
	if err != nil {
		return err
	}
	if len(outside) > 0 {
		return fmt.Errorf("cmsync's requests about ConfigMaps or Secrets outside its namespaces (or across all):\n  %s", strings.Join(outside, "\n  "))
	}
	return nil
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	consistently = testkit.Consistently
	must         = testkit.Must
)
