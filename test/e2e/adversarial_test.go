//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The adversarial suite: a tenant is a real user bound to the built-in edit role in its
// own namespaces (editorIn), the chart's admission policies are installed, and each
// scenario tries one attack of docs/threat-model.md and asserts the safe outcome. The
// memory attack is TestTenantCannotExhaustCmsyncMemory.

// A source without data whose copied annotation would write past
// --max-replicated-bytes across its targets is Invalid and writes nothing: the budget
// counts what is written, metadata included.
func TestTenantCannotWritePastTheBudgetWithMetadata(t *testing.T) {
	harness.StartController(t, "--max-replicated-bytes=100Ki")
	ctx := context.Background()
	suffix := randomSuffix()
	src := harness.NewNamespace(t, "budget-"+suffix, nil)
	for range 4 {
		harness.NewNamespace(t, "budget-"+suffix+"-t", nil)
	}
	harness.DeleteSourcesAtEnd(t, []string{src})
	tenant := editorIn(t, src)
	must(t, tenant.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: src, Name: "padded", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
		Annotations: map[string]string{
			v1alpha1.TargetNamespacesAnnotation: "budget-" + suffix + "-t-*",
			"padding":                           strings.Repeat("x", 30<<10),
		},
	}}))
	got := harness.WaitForAnnotation(t, src, "padded", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "--max-replicated-bytes") {
		t.Errorf("message %q does not name the budget", msg)
	}
	consistently(t, 3*time.Second, "no replica", func() error {
		if got := harness.ReplicasOf(t, src, "padded"); len(got) > 0 {
			return fmt.Errorf("replicas in %v", got)
		}
		return nil
	})
}

// A tenant cannot freeze a replica past revocation: after its source turns Invalid (a
// bad cmsync.io/keys), a neighbour that withdraws its accept-from, and a namespace of its
// own labelled cmsync.io/ignore=true, lose the replica all the same; the replica where
// the source is still admitted is kept.
func TestTenantCannotFreezeAReplicaPastRevocation(t *testing.T) {
	harness.StartController(t, "--tenant-label="+tenantLabel)
	ctx := context.Background()
	suffix := randomSuffix()
	prefix, tenantA, tenantB := "frz"+suffix, "a"+suffix, "b"+suffix
	inTenant := func(tenant string) map[string]string { return map[string]string{tenantLabel: tenant} }
	home, kept, ignored := harness.NewNamespace(
		t,
		prefix,
		inTenant(tenantA),
	), harness.NewNamespace(
		t,
		prefix,
		inTenant(tenantA),
	), harness.NewNamespace(
		t,
		prefix,
		inTenant(tenantA),
	)
	neighbour := harness.NewNamespace(t, prefix, inTenant(tenantB))
	harness.DeleteSourcesAtEnd(t, []string{home})
	acceptFrom(t, neighbour, home)
	tenant := editorIn(t, home)
	must(t, tenant.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-*"}},
		Data: map[string]string{"v": "1"},
	}))
	harness.WaitForReplicas(t, home, "app", 30*time.Second, kept, ignored, neighbour)

	// The tenant breaks its source on purpose.
	eventually(t, 10*time.Second, "the source broken", func() error {
		return tenant.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: home, Name: "app"}},
			client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cmsync.io/keys":"["}}}`)))
	})
	harness.WaitForAnnotation(t, home, "app", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)

	// The neighbour withdraws its consent; the tenant's own namespace asks for nothing.
	acceptFrom(t, neighbour, "")
	relabel(t, ignored, v1alpha1.IgnoreNamespaceLabel, v1alpha1.IgnoreNamespaceLabelValue)
	harness.WaitForReplicas(t, home, "app", 30*time.Second, kept)
}
