package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// A namespace that refuses cmsync's writes (a ValidatingAdmissionPolicy) and one whose
// ConfigMap quota is used up: the source is Degraded naming each namespace with the
// API's message, the other namespaces stay in sync, retries back off, and once the
// causes are gone the replicas appear.
func TestRefusedWritesDegradeOnlyTheirNamespaces(t *testing.T) {
	running := startController(t)
	ctx := context.Background()
	mark := "refuse-" + randomSuffix()
	srcNS, fine := newNamespace(t, "src", nil), newNamespace(t, "fine", nil)
	refused := newNamespace(t, "refused", map[string]string{"policy": mark})
	full := newNamespace(t, "full", nil)

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: mark},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{
				{
					Expression: `!has(object.metadata.labels) || !('app.kubernetes.io/managed-by' in object.metadata.labels) || ` +
						`object.metadata.labels['app.kubernetes.io/managed-by'] != 'cmsync'`,
					Message: "replicated ConfigMaps are not accepted in this namespace",
				},
			},
		},
	}
	must(t, k8s.Create(ctx, policy))
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: mark},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        mark,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"policy": mark}}},
		},
	}
	must(t, k8s.Create(ctx, binding))
	eventually(t, timeout, "the policy is in force", func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: refused, Name: "probe-" + randomSuffix(),
			Labels: map[string]string{v1alpha1.ManagedByLabel: "cmsync"}}}
		if err := k8s.Create(ctx, probe); err == nil {
			_ = k8s.Delete(ctx, probe)
			return errorf("write accepted")
		}
		return nil
	})

	// A quota of one ConfigMap, used up (no quota controller runs here, so its usage is
	// set by hand, as the controller would).
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: full, Name: "configmaps"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("1")}}}
	must(t, k8s.Create(ctx, quota))
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{"count/configmaps": resource.MustParse("1")}}
	must(t, k8s.Status().Update(ctx, quota))

	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: fine + "," + refused + "," + full}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, fine)
	eventually(t, timeout, "both refusals reported", func() error {
		cm, err := getConfigMap(srcNS, "app")
		if err != nil {
			return err
		}
		msg := cm.Annotations[v1alpha1.MessageAnnotation]
		if cm.Annotations[v1alpha1.StatusAnnotation] != v1alpha1.StatusDegraded || cm.Annotations[v1alpha1.SyncedAnnotation] != "1/3" ||
			!strings.Contains(msg, "failed in "+refused) || !strings.Contains(msg, "not accepted in this namespace") ||
			!strings.Contains(msg, "failed in "+full) || !strings.Contains(msg, "exceeded quota") {
			return errorf("status %q synced %q message %q", cm.Annotations[v1alpha1.StatusAnnotation], cm.Annotations[v1alpha1.SyncedAnnotation], msg)
		}
		return nil
	})
	waitForEvent(t, src, v1alpha1.ReasonFailed, refused)

	// Retries back off: over 15 s, a handful of attempts, not a hot loop.
	before := running.Writes()
	time.Sleep(15 * time.Second)
	attempts := running.Writes() - before
	t.Logf("%d write requests in 15 s while two namespaces refuse writes", attempts)
	if attempts > 24 {
		t.Errorf("%d write requests in 15 s while two namespaces refuse writes: no backoff", attempts)
	}

	must(t, k8s.Delete(ctx, binding))
	must(t, k8s.Delete(ctx, policy))
	must(t, k8s.Delete(ctx, quota))
	eventually(t, 60*time.Second, "replicas once the causes are gone", func() error {
		if got := replicaNamespaces(t, src); !sameSet(got, []string{fine, refused, full}) {
			return errorf("replicas in %v", got)
		}
		return nil
	})
	waitForSynced(t, src, "3/3")
}
