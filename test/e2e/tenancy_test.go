//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
)

// tenantLabel is the label the tenancy scenarios run cmsync with, as a Capsule
// cluster would.
const tenantLabel = "capsule.clastix.io/tenant"

// A tenant's source, written by a user with the edit role in one namespace, reaches
// only its own tenant's namespaces and those that accept its namespace; a platform
// source (a namespace of no tenant) reaches every tenant; accept-from lets exactly the
// named neighbours in, its removal deletes their replicas, a malformed one accepts
// nothing and says so; namespaces relabelled while cmsync is stopped are set right
// after the restart; a source's namespace moved to another tenant takes its replicas
// along.
func TestTenantBoundary(t *testing.T) {
	c := harness.StartController(t, "--tenant-label="+tenantLabel)
	ctx := context.Background()
	suffix := randomSuffix()
	prefix, tenantA, tenantB := "ten"+suffix, "a"+suffix, "b"+suffix
	inTenant := func(tenant string) map[string]string { return map[string]string{tenantLabel: tenant} }
	a1, a2 := harness.NewNamespace(t, prefix, inTenant(tenantA)), harness.NewNamespace(t, prefix, inTenant(tenantA))
	b1, b2 := harness.NewNamespace(t, prefix, inTenant(tenantB)), harness.NewNamespace(t, prefix, inTenant(tenantB))
	platform := harness.NewNamespace(t, prefix, nil)
	harness.DeleteSourcesAtEnd(t, []string{a1, platform})
	tenant := editorIn(t, a1)

	// The tenant asks for every namespace of the cluster.
	must(t, tenant.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: a1, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-*"}},
		Data: map[string]string{"v": "1"},
	}))
	harness.WaitForReplicas(t, a1, "app", 30*time.Second, a2)
	src := harness.WaitForAnnotation(t, a1, "app", v1alpha1.SyncedAnnotation, "1/1")
	if msg := src.Annotations[v1alpha1.MessageAnnotation]; !strings.HasSuffix(
		msg,
		fmt.Sprintf(
			`3 matched namespaces are outside tenant %q and not accepting from %s`,
			tenantA,
			a1,
		),
	) {
		t.Errorf("message %q does not end by saying what the boundary kept out", msg)
	}
	explainBoundary(t, a1, prefix, tenantA, tenantB, a2, b1, b2, platform)

	// The platform's source reaches every tenant.
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "ca", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-*"}},
		Data: map[string]string{"ca.crt": "platform"},
	}))
	harness.WaitForReplicas(t, platform, "ca", 30*time.Second, a1, a2, b1, b2)

	// b1 accepts a1: exactly a1's source comes in; without the annotation it goes.
	acceptFrom(t, b1, a1)
	harness.WaitForReplicas(t, a1, "app", 30*time.Second, a2, b1)
	harness.WaitForAnnotation(t, a1, "app", v1alpha1.SyncedAnnotation, "2/2")
	acceptFrom(t, b2, "x-*,"+platform)
	consistently(t, 3*time.Second, "no replica in a namespace accepting others", func() error {
		if got := harness.ReplicasOf(t, a1, "app"); !sameSet(got, []string{a2, b1}) {
			return fmt.Errorf("replicas in %v", got)
		}
		return nil
	})
	acceptFrom(t, b1, "")
	harness.WaitForReplicas(t, a1, "app", 30*time.Second, a2)

	// A malformed accept-from accepts nothing, and both the source and the log say so.
	acceptFrom(t, b2, a1+",[x")
	eventually(t, 30*time.Second, "the message names the malformed accept-from", func() error {
		cm, err := harness.GetConfigMap(a1, "app")
		if err != nil {
			return err
		}
		if msg := cm.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(
			msg,
			"1 of them has a cmsync.io/accept-from that cannot be parsed and accepts nothing",
		) ||
			strings.Contains(msg, b2) {
			return fmt.Errorf("message %q", msg)
		}
		return nil
	})
	if got := harness.ReplicasOf(t, a1, "app"); !sameSet(got, []string{a2}) {
		t.Errorf("replicas in %v, want only %s", got, a2)
	}
	eventually(t, 10*time.Second, "the log names the namespace and the error", func() error {
		logged, err := os.ReadFile(c.LogPath)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(logged), "\n") {
			if strings.Contains(line, "accept-from cannot be parsed") && strings.Contains(line, b2) && strings.Contains(line, "malformed glob") {
				return nil
			}
		}
		return fmt.Errorf("no log line names %s and the error", b2)
	})

	// Stopped, b2 moves into tenant A and a2 into tenant B: after the restart the
	// replicas follow.
	c.Stop()
	relabel(t, b2, tenantLabel, tenantA)
	relabel(t, a2, tenantLabel, tenantB)
	c = harness.StartController(t, "--tenant-label="+tenantLabel)
	harness.WaitForReplicas(t, a1, "app", 60*time.Second, b2)

	// The source's own namespace moves to tenant B: it now reaches a2 and b1.
	relabel(t, a1, tenantLabel, tenantB)
	harness.WaitForReplicas(t, a1, "app", 30*time.Second, a2, b1)
	// The platform's source never moved.
	if got := harness.ReplicasOf(t, platform, "ca"); !sameSet(got, []string{a1, a2, b1, b2}) {
		t.Errorf("the platform's replicas moved: %v", got)
	}
}

// Without --tenant-label, accept-from changes nothing: every matched namespace gets its
// replica, whatever its labels say.
func TestNoTenantLabelNoBoundary(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	suffix := randomSuffix()
	prefix := "nten" + suffix
	a := harness.NewNamespace(t, prefix, map[string]string{tenantLabel: "a" + suffix})
	b := harness.NewNamespace(t, prefix, map[string]string{tenantLabel: "b" + suffix})
	acceptFrom(t, b, "nobody")
	harness.DeleteSourcesAtEnd(t, []string{a})
	must(t, editorIn(t, a).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-*"}},
	}))
	harness.WaitForReplicas(t, a, "app", 30*time.Second, b)
	src := harness.WaitForAnnotation(t, a, "app", v1alpha1.SyncedAnnotation, "1/1")
	if msg := src.Annotations[v1alpha1.MessageAnnotation]; msg != "in sync in 1 namespace" {
		t.Errorf("message %q", msg)
	}
}

// A tenant cannot plant a kube-root-ca.crt (nor an object of a configured reserved name)
// through cmsync: the source is Invalid, naming the name; the write is warned about at
// once; nothing is written; and the namespaces created meanwhile hold the cluster's
// own CA, published by kube-controller-manager, untouched. The same for a source that
// is itself named like a reserved name, and for a ConfigMapSync.
func TestReservedNamesAreNeverWritten(t *testing.T) {
	harness.StartController(t, "--reserved-names=istio-ca-root-cert")
	ctx := context.Background()
	prefix := "rca" + randomSuffix()
	src := harness.NewNamespace(t, prefix+"-src", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	cfg := editorConfigIn(t, src)
	tenant, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)
	warnings := &warningCollector{}
	cfg.WarningHandler = warnings
	warned, err := client.New(cfg, client.Options{Scheme: harness.K8s.Scheme()})
	must(t, err)

	forged := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: src,
			Name:      "forged-ca",
			Labels:    map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{
				v1alpha1.TargetNamespacesAnnotation: prefix + "-new-*",
				v1alpha1.TargetNameAnnotation:       v1alpha1.RootCAConfigMapName,
			},
		},
		Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----\nforged\n-----END CERTIFICATE-----\n"},
	}
	must(t, warned.Create(ctx, forged))
	if got := warnings.take(); !strings.Contains(got, "the replicas would be named kube-root-ca.crt, a reserved name") {
		t.Errorf("no warning at write time: %q", got)
	}
	invalid := harness.WaitForAnnotation(t, src, "forged-ca", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)
	if msg := invalid.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "kube-root-ca.crt, a reserved name") {
		t.Errorf("message %q does not name the reserved name", msg)
	}

	// New namespaces the source matches get the cluster's CA, and keep it.
	clusterCA := rootCAOf(t, "default")
	created := make([]string, 0, 4)
	for range 4 {
		created = append(created, harness.NewNamespace(t, prefix+"-new", nil))
	}
	for _, ns := range created {
		eventually(t, 60*time.Second, "the cluster's CA published in "+ns, func() error {
			return holdsClusterCA(ns, clusterCA)
		})
	}
	consistently(t, 3*time.Second, "the published CAs untouched", func() error {
		for _, ns := range created {
			if err := holdsClusterCA(ns, clusterCA); err != nil {
				return err
			}
		}
		return nil
	})

	// A source named like a reserved name: the tenant's own kube-root-ca.crt labelled as
	// a source, and a configured reserved name; a target-name of a configured one.
	must(t, tenant.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: v1alpha1.RootCAConfigMapName}},
		client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"},"annotations":{%q:%q}}}`,
			v1alpha1.ReplicateLabel, v1alpha1.TargetNamespacesAnnotation, prefix+"-new-*")))))
	must(t, tenant.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "istio-ca-root-cert", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-new-*"}},
	}))
	must(t, tenant.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "mesh", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: prefix + "-new-*", v1alpha1.TargetNameAnnotation: "istio-ca-root-cert"}},
	}))
	reservedOf := map[string]string{
		v1alpha1.RootCAConfigMapName: v1alpha1.RootCAConfigMapName, "istio-ca-root-cert": "istio-ca-root-cert", "mesh": "istio-ca-root-cert",
	}
	for name, reserved := range reservedOf {
		cm := harness.WaitForAnnotation(t, src, name, v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)
		if msg := cm.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, reserved+", a reserved name") {
			t.Errorf("%s: message %q does not name %s", name, msg, reserved)
		}
	}
	for _, ns := range created {
		if err := holdsClusterCA(ns, clusterCA); err != nil {
			t.Error(err)
		}
		if _, err := harness.GetConfigMap(ns, "istio-ca-root-cert"); !apierrors.IsNotFound(err) {
			t.Errorf("%s: istio-ca-root-cert written: %v", ns, err)
		}
	}

	// A ConfigMapSync is refused the same way.
	sync := &v1alpha1.ConfigMapSync{
		ObjectMeta: metav1.ObjectMeta{Name: "rca-" + randomSuffix()},
		Spec: v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: src,
			ConfigMapName:   "forged-ca",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{prefix + "-new-*"}, TargetName: v1alpha1.RootCAConfigMapName},
		},
	}
	must(t, harness.K8s.Create(ctx, sync))
	t.Cleanup(func() { _ = harness.K8s.Delete(context.Background(), sync) })
	eventually(t, 30*time.Second, "the ConfigMapSync Invalid", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(sync), sync))
		ready := meta.FindStatusCondition(sync.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != v1alpha1.ReasonInvalid ||
			!strings.Contains(ready.Message, "kube-root-ca.crt, a reserved name") {
			return fmt.Errorf("ready %+v", ready)
		}
		return nil
	})
	for _, ns := range created {
		if err := holdsClusterCA(ns, clusterCA); err != nil {
			t.Error(err)
		}
	}
}

// explainBoundary checks that kubectl cmsync, told the controller's --tenant-label,
// names the boundary for each namespace the tenant's source a1/app matches, and that
// its preview lists the namespaces kept out.
func explainBoundary(t *testing.T, a1, prefix, tenantA, tenantB, a2, b1, b2, platform string) {
	t.Helper()
	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", a1+"/app", "--all", "--tenant-label="+tenantLabel)
	outside := fmt.Sprintf("outside tenant %q of the source's namespace", tenantA)
	want := map[string]string{
		a2:       `matched by the glob "` + prefix + `-*"`,
		b1:       fmt.Sprintf("%s (it is in tenant %q); it does not accept from %s (no cmsync.io/accept-from)", outside, tenantB, a1),
		b2:       fmt.Sprintf("%s (it is in tenant %q); it does not accept from %s (no cmsync.io/accept-from)", outside, tenantB, a1),
		platform: fmt.Sprintf("%s (it has no %s label); it does not accept from %s (no cmsync.io/accept-from)", outside, tenantLabel, a1),
	}
	for _, row := range e.Rows {
		if rule, ok := want[row.Namespace]; ok {
			if row.Rule != rule || row.Wanted != (row.Namespace == a2) {
				t.Errorf("explain %s: wanted %v, rule %q; want %q", row.Namespace, row.Wanted, row.Rule, rule)
			}
			delete(want, row.Namespace)
		}
	}
	if len(want) > 0 {
		t.Errorf("explain has no row for %v", want)
	}
	var p cli.Preview
	harness.PluginJSON(t, &p, "preview", a1+"/app", "--set-annotation", v1alpha1.TargetNamespacesAnnotation+"="+prefix+"-*", "--tenant-label="+tenantLabel)
	kept := make([]string, 0, len(p.Outside))
	for _, c := range p.Outside {
		kept = append(kept, c.Namespace)
	}
	if !sameSet(kept, []string{b1, b2, platform}) || p.Kept != 1 || len(p.Gain)+len(p.Lose) != 0 {
		t.Errorf("preview: outside %v, kept %d, gain %v, lose %v", kept, p.Kept, p.Gain, p.Lose)
	}
}

// rootCAOf reads the CA kube-controller-manager published in namespace.
func rootCAOf(t *testing.T, namespace string) string {
	t.Helper()
	var ca string
	eventually(t, 60*time.Second, "kube-root-ca.crt in "+namespace, func() error {
		cm, err := harness.GetConfigMap(namespace, v1alpha1.RootCAConfigMapName)
		if err != nil {
			return err
		}
		ca = cm.Data["ca.crt"]
		return nil
	})
	return ca
}

// holdsClusterCA checks that namespace's kube-root-ca.crt is the cluster's and carries
// no mark of cmsync.
func holdsClusterCA(namespace, clusterCA string) error {
	cm, err := harness.GetConfigMap(namespace, v1alpha1.RootCAConfigMapName)
	if err != nil {
		return err
	}
	if cm.Data["ca.crt"] != clusterCA || len(cm.Data) != 1 {
		return fmt.Errorf("%s: kube-root-ca.crt is not the cluster's CA: %q", namespace, cm.Data)
	}
	if cm.Labels[v1alpha1.ManagedByLabel] != "" || cm.Annotations[v1alpha1.SourceAnnotation] != "" {
		return fmt.Errorf("%s: kube-root-ca.crt carries cmsync's markers: %v %v", namespace, cm.Labels, cm.Annotations)
	}
	return nil
}

// acceptFrom sets (or, with value "", removes) a namespace's cmsync.io/accept-from, as
// its administrator.
func acceptFrom(t *testing.T, namespace, value string) {
	t.Helper()
	patchNamespaceMetadata(t, namespace, "annotations", v1alpha1.AcceptFromAnnotation, value)
}

// relabel sets a label of a namespace, as its administrator.
func relabel(t *testing.T, namespace, key, value string) {
	t.Helper()
	patchNamespaceMetadata(t, namespace, "labels", key, value)
}

// patchNamespaceMetadata sets (or, with value "", removes) one label or annotation
// (field) of a namespace.
func patchNamespaceMetadata(t *testing.T, namespace, field, key, value string) {
	t.Helper()
	patch := harness.MustJSON(map[string]any{"metadata": map[string]any{field: map[string]any{key: harness.LabelValue(value)}}})
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	must(t, harness.K8s.Patch(context.Background(), ns, client.RawPatch(types.MergePatchType, patch)))
}
