//go:build e2e

package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// ProtectBinding is the chart's binding of the policy that protects replicas (release
// "cmsync", as the suites install it).
const ProtectBinding = "cmsync-protect-replicas"

// WithoutProtection runs fn with the protecting binding removed, the documented
// break-glass, and puts the binding back; both wait until the API server acts on the
// change (a server-side dry run of a forged replica is the probe).
func WithoutProtection(t *testing.T, fn func()) {
	t.Helper()
	ctx := context.Background()
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
	testkit.Must(t, K8s.Get(ctx, client.ObjectKey{Name: ProtectBinding}, binding))
	testkit.Must(t, K8s.Delete(ctx, binding))
	restore := binding.DeepCopy()
	restore.ResourceVersion, restore.UID, restore.CreationTimestamp, restore.ManagedFields = "", "", metav1.Time{}, nil
	defer func() {
		testkit.Must(t, K8s.Create(ctx, restore))
		WaitForProtection(t, true)
	}()
	WaitForProtection(t, false)
	fn()
}

// WaitForProtection waits until a forged replica is refused (on) or admitted (off).
func WaitForProtection(t *testing.T, on bool) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("protection %v", on), func() error { return ExpectProtection(on) })
}

// probeNamespace is where ExpectProtection tries its forged replica: one the chart's
// admission policy covers (Suite.ProbeNamespace).
var probeNamespace = "default"

// ExpectProtection says whether the API server refuses a forged replica (on) or admits
// it (off), with a server-side dry run that writes nothing.
func ExpectProtection(on bool) error {
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: "protection-probe",
		Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}}}
	err := K8s.Create(context.Background(), probe, client.DryRunAll)
	if refused := apierrors.IsForbidden(err); refused != on {
		return fmt.Errorf("dry-run create of a forged replica: %v", err)
	}
	return nil
}
