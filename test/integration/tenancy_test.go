package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator"
)

const tenantLabel = "tenant.example.com/name"

// withTenantLabel runs the controller with --tenant-label.
func withTenantLabel() controllerOption {
	return func(o *replicator.Options) { o.Policy.TenantLabel = tenantLabel }
}

// A kube-root-ca.crt that an earlier cmsync wrote with its markers (before names were
// reserved) is never changed or deleted: not when the source stops wanting it, not when
// the source is deleted.
func TestLeftoverReplicaOfAReservedNameIsNeverTouched(t *testing.T) {
	srcNS, first, second := newNamespace(t, "src", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	// Scoped to the test's namespaces, so that the passes counted below are of its
	// sources alone, not of other tests' left in the cluster.
	c := startController(t, withScope(srcNS, first, second))
	ctx := context.Background()
	src := newSource(t, srcNS, "ca", map[string]string{v1alpha1.TargetNamespacesAnnotation: first}, map[string]string{"ca.crt": "forged"})
	waitForReplicasIn(t, src, first)
	replica, err := getConfigMap(first, "ca")
	must(t, err)
	// The same markers on a kube-root-ca.crt in another namespace: what a source with
	// cmsync.io/target-name: kube-root-ca.crt left there.
	leftover := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: second, Name: v1alpha1.RootCAConfigMapName, Labels: replica.Labels, Annotations: replica.Annotations},
		Data:       replica.Data,
	}
	must(t, k8s.Create(ctx, leftover))
	owned := desired.AnnotationOwner("ConfigMap", client.ObjectKeyFromObject(src))
	if !owned.Owns(leftover) {
		t.Fatalf("the leftover does not carry the source's markers: %v %v", leftover.Labels, leftover.Annotations)
	}

	// Narrowed to nothing, then deleted: the first replica goes, the leftover stays.
	update(t, src, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = first + "-none" })
	waitForReplicasIn(t, src)
	must(t, k8s.Delete(ctx, src))
	consistently(t, 3*time.Second, "the leftover kube-root-ca.crt untouched", func() error {
		now, err := getConfigMap(second, v1alpha1.RootCAConfigMapName)
		if err != nil {
			return err
		}
		if now.ResourceVersion != leftover.ResourceVersion {
			return fmt.Errorf("changed: resourceVersion %s, was %s", now.ResourceVersion, leftover.ResourceVersion)
		}
		return nil
	})
	if n := c.WritesIn("DELETE", second) + c.WritesIn("PUT", second) + c.WritesIn("PATCH", second) + c.WritesIn("POST", second); n != 0 {
		t.Errorf("%d writes into %s: %s", n, second, c.LastWrites())
	}

	// Its edits are no replica's: they queue no pass of the source it names.
	passes := metricValue(t, c.Metrics, "cmsync_sync_duration_seconds", "")
	for i := range 5 {
		leftover.Labels["edit"] = fmt.Sprint(i)
		must(t, k8s.Update(ctx, leftover))
	}
	consistently(t, 2*time.Second, "no pass for the leftover's edits", func() error {
		if now := metricValue(t, c.Metrics, "cmsync_sync_duration_seconds", ""); now != passes {
			return fmt.Errorf("%v passes, %v before the edits", now, passes)
		}
		return nil
	})
}

// With the boundary on, a tenant's source in sync makes no write while idle, and a
// change of a namespace that moves nothing (a label the boundary does not read) makes
// none either: tenant and consent come from the namespace cache.
func TestTenantBoundaryIdleWritesNothing(t *testing.T) {
	c := startController(t, withTenantLabel())
	tenant := "t" + randomSuffix()
	srcNS := newNamespace(t, "ta", map[string]string{tenantLabel: tenant})
	mine := newNamespace(t, "ta", map[string]string{tenantLabel: tenant})
	other := newNamespace(t, "tb", map[string]string{tenantLabel: "other" + tenant})
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetNamespacesAnnotation: mine + "," + other}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, mine)
	synced := waitForSynced(t, src, "1/1")
	// The pass's Event follows its status write: counted from before it arrives, it
	// would be taken for a write of the idle cluster.
	waitForEvent(t, src, v1alpha1.ReasonSynced, "in sync")
	// Counted, not named: the other tenant's namespace is beyond the source's reach.
	if msg := synced.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "1 matched namespace is outside tenant") || strings.Contains(msg, other) {
		t.Errorf("message %q", msg)
	}
	// Writes of this test's source, replicas and Events: other tests' sources may still
	// be at work in theirs.
	ours := func() int {
		n := 0
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			n += c.WritesIn(method, srcNS, mine, other)
		}
		return n
	}
	settled := ours()
	update(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}, func(ns *corev1.Namespace) { ns.Labels["unrelated"] = "x" })
	consistently(t, 3*time.Second, "no writes", func() error {
		if n := ours() - settled; n != 0 {
			return fmt.Errorf("%d writes: %s", n, c.LastWrites())
		}
		return nil
	})

	// The namespace accepts the source's namespace: a replica; the acceptance removed:
	// gone.
	setAcceptFrom(t, other, "ta-*")
	waitForReplicasIn(t, src, mine, other)
	waitForSynced(t, src, "2/2")
	setAcceptFrom(t, other, "!"+srcNS+",ta-*")
	waitForReplicasIn(t, src, mine)
}

// The boundary binds a tenant's Secret sources as it binds its ConfigMaps, and does not
// bind a ConfigMapSync (an administrator's, cluster-scoped), which reaches another
// tenant's namespace from the same tenant namespace.
func TestTenantBoundaryBindsSecretsNotConfigMapSyncs(t *testing.T) {
	startController(t, withTenantLabel(), withSecrets())
	tenant := "t" + randomSuffix()
	srcNS := newNamespace(t, "ta", map[string]string{tenantLabel: tenant})
	mine := newNamespace(t, "ta", map[string]string{tenantLabel: tenant})
	other := newNamespace(t, "tb", map[string]string{tenantLabel: "other" + tenant})
	data := map[string][]byte{"password": []byte("s3cret")}
	secret := newSecretSource(t, srcNS, "db", corev1.SecretTypeOpaque, map[string]string{v1alpha1.TargetNamespacesAnnotation: mine + "," + other}, data)
	waitForSecretReplicas(t, secret, data, mine)
	got := waitForSourceStatus(t, secret, v1alpha1.StatusSynced, "1/1")
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "1 matched namespace is outside tenant") {
		t.Errorf("message %q", msg)
	}

	plainConfigMap(t, srcNS, "settings", map[string]string{"k": "v"})
	sync := newSync(
		t,
		v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "settings",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{mine, other}},
		},
	)
	waitForSyncReplicasIn(t, sync, mine, other)
}
