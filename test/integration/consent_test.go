package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Consent outranks a broken source: once a source is Invalid (here a bad
// cmsync.io/keys, then an unparsable target list), withdrawing a namespace's consent —
// its accept-from, its tenant, cmsync.io/ignore — still deletes the replica there; the
// replicas in namespaces that still admit the source are kept, as for any Invalid
// source.
func TestConsentOutranksAnInvalidSource(t *testing.T) {
	startController(t, withTenantLabel())
	tenant := "t" + randomSuffix()
	srcNS := newNamespace(t, "ca", map[string]string{tenantLabel: tenant})
	kept := newNamespace(t, "ca", map[string]string{tenantLabel: tenant})
	ignored := newNamespace(t, "ca", map[string]string{tenantLabel: tenant})
	moved := newNamespace(t, "ca", map[string]string{tenantLabel: tenant})
	accepting := newNamespace(t, "cb", map[string]string{tenantLabel: "other" + tenant})
	setAcceptFrom(t, accepting, srcNS)
	all := []string{kept, ignored, moved, accepting}
	src := newSource(t, srcNS, "settings", map[string]string{v1alpha1.TargetNamespacesAnnotation: strings.Join(all, ",")}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, all...)

	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.KeysAnnotation] = "[" })
	waitForStatus(t, src, v1alpha1.StatusInvalid)
	consistently(t, 2*time.Second, "an Invalid source keeps its replicas where they are admitted", func() error {
		if got := replicaNamespaces(t, src); !sameSet(got, all) {
			return errorf("replicas in %v", got)
		}
		return nil
	})

	setAcceptFrom(t, accepting, "somewhere-else")
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ignored}}, func(ns *corev1.Namespace) {
		ns.Labels[v1alpha1.IgnoreNamespaceLabel] = v1alpha1.IgnoreNamespaceLabelValue
	})
	// Unparsable targets now: the source cannot say which namespaces it names at all.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = "[" })
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moved}}, func(ns *corev1.Namespace) {
		ns.Labels[tenantLabel] = "other" + tenant
	})
	waitForReplicasIn(t, src, kept)
	if got := waitForStatus(t, src, v1alpha1.StatusInvalid); got.Annotations[v1alpha1.MessageAnnotation] == "" {
		t.Errorf("no message on the Invalid source")
	}
}

// The explicit form alike: a ConfigMapSync whose source is missing keeps its replicas
// only in namespaces that still admit them.
func TestConsentOutranksAMissingSource(t *testing.T) {
	startController(t)
	srcNS := newNamespace(t, "cs", nil)
	kept, ignored := newNamespace(t, "cs", nil), newNamespace(t, "cs", nil)
	source := plainConfigMap(t, srcNS, "settings", map[string]string{"k": "v"})
	sync := newSync(t, v1alpha1.ConfigMapSyncSpec{
		SourceNamespace: srcNS, ConfigMapName: "settings",
		ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{kept, ignored}},
	})
	waitForSyncReplicasIn(t, sync, kept, ignored)
	must(t, k8s.Delete(context.Background(), source))
	waitForReady(t, sync, metav1.ConditionFalse, v1alpha1.ReasonSourceNotFound)
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ignored}}, func(ns *corev1.Namespace) {
		ns.Labels[v1alpha1.IgnoreNamespaceLabel] = v1alpha1.IgnoreNamespaceLabelValue
	})
	waitForSyncReplicasIn(t, sync, kept)
}

// setAcceptFrom sets namespace's cmsync.io/accept-from.
func setAcceptFrom(t *testing.T, namespace, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, v1alpha1.AcceptFromAnnotation, value)
	must(
		t,
		k8s.Patch(
			context.Background(),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}},
			client.RawPatch(types.MergePatchType, []byte(patch)),
		),
	)
}
