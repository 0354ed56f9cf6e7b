//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/cmsync/cmsync/test/harness"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// helm install, upgrade with changed values, and uninstall against the real API server.
// This control plane has no kubelet or scheduler, so the Deployment's Pods never run
// here: this shows that the API server accepts every object of the chart and that
// helm's life cycle leaves nothing behind but the CRD, which helm keeps by design.
func TestHelmInstallUpgradeUninstall(t *testing.T) {
	const release, namespace = "lifecycle", "cmsync-lifecycle"
	chart := "../../deploy/chart/cmsync"
	if out, err := harness.Helm("install", release, chart, "--namespace", namespace, "--create-namespace"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	ctx := context.Background()
	deploy := &appsv1.Deployment{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: namespace, Name: release + "-cmsync"}, deploy))
	args := strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--leader-elect=true") || !strings.Contains(args, "--zap-log-level=info") {
		t.Errorf("installed args: %s", args)
	}

	// The admission policies and their bindings are there by default. This release's
	// policy lets only its own ServiceAccount write replicas, so it is switched off at once.
	policies := func() int {
		var vaps admissionv1.ValidatingAdmissionPolicyList
		var bindings admissionv1.ValidatingAdmissionPolicyBindingList
		must(t, harness.K8s.List(ctx, &vaps, client.MatchingLabels{"app.kubernetes.io/instance": release}))
		must(t, harness.K8s.List(ctx, &bindings, client.MatchingLabels{"app.kubernetes.io/instance": release}))
		return len(vaps.Items) + len(bindings.Items)
	}
	if n := policies(); n != 4 {
		t.Errorf("%d admission policies and bindings after install, want 2 of each", n)
	}
	for _, name := range []string{release + "-cmsync-protect-replicas", release + "-cmsync-check-sources"} {
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
		if err := harness.K8s.Get(ctx, client.ObjectKey{Name: name}, binding); err != nil || binding.Spec.PolicyName != name {
			t.Errorf("binding %s: %v", name, err)
		}
	}

	if out, err := harness.Helm("upgrade", release, chart, "--namespace", namespace, "--set", "admission.enabled=false",
		"--set", "replicaCount=2", "--set", "controller.logLevel=debug", "--set", "controller.sourceNamespaces=platform-*"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if n := policies(); n != 0 {
		t.Errorf("%d admission policies and bindings left after admission.enabled=false", n)
	}
	must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(deploy), deploy))
	args = strings.Join(deploy.Spec.Template.Spec.Containers[0].Args, " ")
	if *deploy.Spec.Replicas != 2 || !strings.Contains(args, "--zap-log-level=debug") || !strings.Contains(args, "--source-namespaces=platform-*") {
		t.Errorf("upgraded: replicas %d, args %s", *deploy.Spec.Replicas, args)
	}
	if out, err := harness.Helm("upgrade", release, chart, "--namespace", namespace, "--set", "controller.configMapSync=sometimes"); err == nil {
		t.Errorf("values.schema.json accepted configMapSync=sometimes:\n%s", out)
	}

	// On again, so that uninstall is shown to remove the policies too.
	if out, err := harness.Helm("upgrade", release, chart, "--namespace", namespace, "--reuse-values", "--set", "admission.enabled=true"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	if n := policies(); n != 4 {
		t.Errorf("%d admission policies and bindings after admission.enabled=true, want 4", n)
	}
	if out, err := harness.Helm("uninstall", release, "--namespace", namespace, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	selector := client.MatchingLabels{"app.kubernetes.io/instance": release}
	leftovers := []struct {
		kind string
		list client.ObjectList
	}{
		{"Deployment", &appsv1.DeploymentList{}}, {"ServiceAccount", &corev1.ServiceAccountList{}},
		{"Service", &corev1.ServiceList{}}, {"ClusterRole", &rbacv1.ClusterRoleList{}},
		{"ClusterRoleBinding", &rbacv1.ClusterRoleBindingList{}}, {"Role", &rbacv1.RoleList{}}, {"RoleBinding", &rbacv1.RoleBindingList{}},
		{"ValidatingAdmissionPolicy", &admissionv1.ValidatingAdmissionPolicyList{}},
		{"ValidatingAdmissionPolicyBinding", &admissionv1.ValidatingAdmissionPolicyBindingList{}},
	}
	for _, l := range leftovers {
		must(t, harness.K8s.List(ctx, l.list, selector))
		if n := meta.LenList(l.list); n != 0 {
			t.Errorf("%d %s left after uninstall", n, l.kind)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := harness.K8s.Get(ctx, client.ObjectKey{Name: "configmapsyncs.cmsync.io"}, crd); err != nil {
		t.Errorf("the CRD should stay (helm keeps CRDs): %v", err)
	}
}
