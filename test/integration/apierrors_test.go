package integration

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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

	refuseReplicaWrites(t, mark, admissionregistrationv1.Create, admissionregistrationv1.Update)

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

	allowReplicaWrites(t, mark)
	must(t, k8s.Delete(ctx, quota))
	eventually(t, 60*time.Second, "replicas once the causes are gone", func() error {
		if got := replicaNamespaces(t, src); !sameSet(got, []string{fine, refused, full}) {
			return errorf("replicas in %v", got)
		}
		return nil
	})
	waitForSynced(t, src, "3/3")
}

// A replica whose update is refused (the namespace accepts cmsync's creates, not its
// updates) is not counted in sync: the source is Degraded naming the namespace, with a
// Failed Event, and the replica catches up once the refusal is gone.
func TestRefusedUpdateIsReportedAsFailed(t *testing.T) {
	startController(t)
	mark := "refuse-" + randomSuffix()
	srcNS, fine := newNamespace(t, "src", nil), newNamespace(t, "fine", nil)
	refused := newNamespace(t, "refused", map[string]string{"policy": mark})
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: fine + "," + refused}, map[string]string{"k": "1"})
	waitForSynced(t, src, "2/2")

	refuseReplicaWrites(t, mark, admissionregistrationv1.Update)
	update(t, src, func(cm *corev1.ConfigMap) { cm.Data["k"] = "2" })
	waitForContent(t, fine, "app", map[string]string{"k": "2"}, nil)
	eventually(t, timeout, "the refused update reported", func() error {
		cm, err := getConfigMap(srcNS, "app")
		if err != nil {
			return err
		}
		a := cm.Annotations
		if a[v1alpha1.StatusAnnotation] != v1alpha1.StatusDegraded || a[v1alpha1.SyncedAnnotation] != "1/2" ||
			!strings.Contains(a[v1alpha1.MessageAnnotation], "failed in "+refused) ||
			!strings.Contains(a[v1alpha1.MessageAnnotation], "not accepted in this namespace") {
			return errorf("status %q synced %q message %q", a[v1alpha1.StatusAnnotation], a[v1alpha1.SyncedAnnotation], a[v1alpha1.MessageAnnotation])
		}
		return nil
	})
	waitForEvent(t, src, v1alpha1.ReasonFailed, refused)
	if replica, err := getConfigMap(refused, "app"); err != nil || replica.Data["k"] != "1" {
		t.Errorf("refused replica: %v, %v", replica.Data, err)
	}

	allowReplicaWrites(t, mark)
	waitForContent(t, refused, "app", map[string]string{"k": "2"}, nil)
	waitForSynced(t, src, "2/2")
}

// refuseReplicaWrites makes the API server refuse cmsync's writes of the given
// operations (Update among them) to ConfigMaps in namespaces labelled policy=<mark> (a
// ValidatingAdmissionPolicy and its binding, named mark), and waits until it does.
func refuseReplicaWrites(t *testing.T, mark string, operations ...admissionregistrationv1.OperationType) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: mark},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: operations,
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
	// In force once an update giving a ConfigMap cmsync's label is refused.
	probeNS := newNamespace(t, "probe", map[string]string{"policy": mark})
	eventually(t, timeout, "the policy is in force", func() error {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "probe-" + randomSuffix()}}
		if err := k8s.Create(ctx, probe); err != nil {
			return err
		}
		probe.Labels = map[string]string{v1alpha1.ManagedByLabel: "cmsync"}
		if err := k8s.Update(ctx, probe); err == nil {
			return errorf("write accepted")
		}
		return nil
	})
}

// allowReplicaWrites removes what refuseReplicaWrites(mark) set up.
func allowReplicaWrites(t *testing.T, mark string) {
	t.Helper()
	ctx := context.Background()
	must(t, k8s.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: mark}}))
	must(t, k8s.Delete(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: mark}}))
}

// A ConfigMapSync whose source the API server will not let cmsync read (RBAC allows no
// list there): the reconcile fails at once, not after a wait with a guess, and the API
// server's reason is in the log, in the Ready condition (Failed, 0/1) and in a Failed
// Event; nothing is written; and once the read is allowed, the replicas appear.
func TestUnreadableSourceIsReportedWithTheAPIServersReason(t *testing.T) {
	running := startController(t)
	srcNS, dst := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	plainConfigMap(t, srcNS, "settings", map[string]string{"k": "v"})
	running.Refuse(func(req *http.Request) bool {
		return req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/namespaces/"+srcNS+"/configmaps")
	})
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{SourceNamespace: srcNS, ConfigMapName: "settings", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: dst}},
	)

	// The API server's words, after client-go's "failed to list *v1.ConfigMap: ".
	want := regexp.MustCompile(`reading source ConfigMap ` + srcNS + `/settings: .*configmaps is forbidden`)
	eventually(t, timeout, "the refusal in the log", func() error {
		if !want.MatchString(running.Logs()) {
			return errorf("no %q in the log", want)
		}
		return nil
	})
	failed := waitForReadyCount(t, sync, metav1.ConditionFalse, v1alpha1.ReasonFailed, "0/1")
	if ready := meta.FindStatusCondition(failed.Status.Conditions, v1alpha1.ConditionReady); !want.MatchString(ready.Message) {
		t.Errorf("Ready's message %q does not give the API server's reason (%q)", ready.Message, want)
	}
	waitForEvent(t, sync, v1alpha1.ReasonFailed, "configmaps is forbidden")
	if got := replicasOfSync(t, sync); len(got) != 0 {
		t.Errorf("replicas in %v of a source cmsync cannot read", got)
	}

	running.Allow()
	waitForReadyCount(t, sync, metav1.ConditionTrue, v1alpha1.ReasonSynced, "1/1")
	waitForSyncReplicasIn(t, sync, dst)
}
