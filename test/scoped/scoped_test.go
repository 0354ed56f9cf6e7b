//go:build e2e

package scoped

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
	"github.com/cmsync/cmsync/test/harness"
)

// listWatch starts cmsync as the chart renders it, its informers on LIST and WATCH (as
// against an API server without streaming lists), so that the audit sees it use both.
// On an existing cluster (make kind-e2e) the chart's Pods, installed in scoped mode,
// are cmsync.
func listWatch(t *testing.T) *harness.Controller {
	t.Helper()
	if harness.ExistingCluster {
		return harness.StartController(t)
	}
	return harness.StartControllerWithEnv(t, []string{"KUBE_FEATURE_WatchListClient=false"}, cmsyncArgs...)
}

func labelled(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "scoped-*"}}, Data: data}
}

// A source in a served namespace fans out to the served namespaces its glob matches,
// never to scoped-out; follows its changes; a labelled source outside is never read;
// deleting the source cleans up.
func TestScopedFanOut(t *testing.T) {
	listWatch(t)
	ctx := context.Background()
	src := labelled(srcNS, "app", map[string]string{"k": "v1"})
	must(t, harness.K8s.Create(ctx, src))
	must(t, harness.K8s.Create(ctx, labelled(elsewhere, "app", map[string]string{"k": "v1"})))
	harness.WaitForReplicas(t, srcNS, "app", 30*time.Second, aNS, bNS)
	harness.WaitForAnnotation(t, srcNS, "app", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)

	must(t, harness.K8s.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v2"}}`))))
	harness.WaitForValue(t, 30*time.Second, "app", "k", "v2", aNS, bNS)

	consistently(t, 3*time.Second, "the source outside untouched and copied nowhere", func() error {
		outside, err := harness.GetConfigMap(elsewhere, "app")
		if err != nil {
			return err
		}
		if _, ok := outside.Annotations[v1alpha1.StatusAnnotation]; ok {
			return fmt.Errorf("it got a status: %v", outside.Annotations)
		}
		if got := harness.ReplicasOf(t, elsewhere, "app"); len(got) > 0 {
			return fmt.Errorf("replicas in %v", got)
		}
		return nil
	})
	if _, err := harness.GetConfigMap(outNS, "app"); !apierrors.IsNotFound(err) {
		t.Errorf("%s, outside the scope, holds a replica (%v)", outNS, err)
	}
	must(t, harness.K8s.Delete(ctx, src))
	harness.WaitForReplicas(t, srcNS, "app", 30*time.Second)
}

// A restart with every replica in sync writes nothing (the audit log says).
func TestScopedRestartWritesNothing(t *testing.T) {
	harness.SkipOnExistingCluster(t)
	c := listWatch(t)
	ctx := context.Background()
	src := labelled(srcNS, "steady", map[string]string{"k": "v"})
	must(t, harness.K8s.Create(ctx, src))
	harness.WaitForReplicas(t, srcNS, "steady", 30*time.Second, aNS, bNS)
	harness.WaitForAnnotation(t, srcNS, "steady", v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	c.Stop()
	tail := harness.NewAuditTail(t)
	listWatch(t)
	time.Sleep(10 * time.Second)
	for _, r := range tail.Next(t) {
		if r.User.Username == harness.CmsyncUser && r.IsWrite() && r.ObjectRef != nil &&
			(r.ObjectRef.Resource == "configmaps" || r.ObjectRef.Resource == "secrets") {
			t.Errorf("a write after the restart: %s %s", r.Verb, r.RequestURI)
		}
	}
	must(t, harness.K8s.Delete(ctx, src))
	harness.WaitForReplicas(t, srcNS, "steady", 30*time.Second)
}

// Secrets in scoped mode: a labelled Secret is replicated within the served namespaces,
// renewed and cleaned up.
func TestScopedSecrets(t *testing.T) {
	listWatch(t)
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "db",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: aNS + "," + outNS}},
		Type: corev1.SecretTypeOpaque, StringData: map[string]string{"password": "one"}}
	must(t, harness.K8s.Create(ctx, secret))
	secretValueIs(t, aNS, "db", "one")
	must(t, harness.K8s.Patch(ctx, secret, client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"password":"two"}}`))))
	secretValueIs(t, aNS, "db", "two")
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: outNS, Name: "db"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("%s, outside the scope, holds the Secret (%v)", outNS, err)
	}
	must(t, harness.K8s.Delete(ctx, secret))
	eventually(t, 30*time.Second, "the Secret's replica deleted", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: aNS, Name: "db"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

func secretValueIs(t *testing.T, namespace, name, value string) {
	t.Helper()
	eventually(t, 30*time.Second, "Secret "+namespace+"/"+name+" holds the value", func() error {
		s := &corev1.Secret{}
		if err := harness.K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, s); err != nil {
			return err
		}
		if string(s.Data["password"]) != value {
			return fmt.Errorf("not the value yet")
		}
		return nil
	})
}

// A ConfigMapSync is limited to the served namespaces too: its destinations outside get
// nothing, and a source namespace outside makes it not Ready, saying why.
func TestScopedConfigMapSync(t *testing.T) {
	listWatch(t)
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "ca"}, Data: map[string]string{"k": "v"}}))
	sync := &v1alpha1.ConfigMapSync{
		ObjectMeta: metav1.ObjectMeta{Name: "scoped-ca"},
		Spec: v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "ca",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{bNS, outNS}},
		},
	}
	must(t, harness.K8s.Create(ctx, sync))
	harness.WaitForReplicas(t, srcNS, "ca", 30*time.Second, bNS)

	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "ca"}, Data: map[string]string{"k": "v"}}))
	unserved := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "unserved-ca"},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: elsewhere, ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: aNS}}}
	must(t, harness.K8s.Create(ctx, unserved))
	eventually(t, 30*time.Second, "the ConfigMapSync of an unserved namespace not Ready, saying why", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(unserved), unserved))
		ready := meta.FindStatusCondition(unserved.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "--namespaces") {
			return fmt.Errorf("Ready %+v", ready)
		}
		return nil
	})
	must(t, harness.K8s.Delete(ctx, unserved))
	must(t, harness.K8s.Delete(ctx, sync))
	harness.WaitForReplicas(t, srcNS, "ca", 30*time.Second)
}

// A SecretSync is limited the same way: its unlabelled source fans out to the served
// destinations alone, and a source namespace outside makes it not Ready.
func TestScopedSecretSync(t *testing.T) {
	listWatch(t)
	ctx := context.Background()
	must(
		t,
		harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "db"}, StringData: map[string]string{"password": "p"}}),
	)
	sync := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "scoped-db"},
		Spec: v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "db", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{aNS, outNS}}}}
	must(t, harness.K8s.Create(ctx, sync))
	secretValueIs(t, aNS, "db", "p")
	eventually(t, 30*time.Second, "the SecretSync Ready in its served target alone", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(sync), sync))
		if ready := meta.FindStatusCondition(
			sync.Status.Conditions,
			v1alpha1.ConditionReady,
		); ready == nil || ready.Status != metav1.ConditionTrue ||
			sync.Status.Synced != "1/1" {
			return fmt.Errorf("Ready %+v, synced %q", ready, sync.Status.Synced)
		}
		return nil
	})
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: outNS, Name: "db"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a replica outside the served namespaces: %v", err)
	}

	unserved := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "unserved-db"},
		Spec: v1alpha1.SecretSyncSpec{SourceNamespace: elsewhere, SecretName: "db", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: aNS}}}
	must(t, harness.K8s.Create(ctx, unserved))
	eventually(t, 30*time.Second, "the SecretSync of an unserved namespace not Ready, saying why", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(unserved), unserved))
		ready := meta.FindStatusCondition(unserved.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "--namespaces") {
			return fmt.Errorf("Ready %+v", ready)
		}
		return nil
	})
	must(t, harness.K8s.Delete(ctx, unserved))
	must(t, harness.K8s.Delete(ctx, sync))
	eventually(t, 30*time.Second, "the replica deleted with its SecretSync", func() error {
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: aNS, Name: "db"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// The admission policy guards replicas in the served namespaces alone: an edit of a
// replica there is refused; a look-alike in an unserved namespace is cmsync's business
// no more, and is admitted.
func TestScopedAdmission(t *testing.T) {
	listWatch(t)
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, labelled(srcNS, "guarded", map[string]string{"k": "v"})))
	harness.WaitForReplicas(t, srcNS, "guarded", 30*time.Second, aNS, bNS)
	replica, err := harness.GetConfigMap(aNS, "guarded")
	must(t, err)
	replica.Data["k"] = "edited"
	if err := harness.K8s.Update(ctx, replica); !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("an edit of a replica in a served namespace was not refused: %v", err)
	}
	lookalike := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: outNS, Name: "lookalike",
		Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}}}
	must(t, harness.K8s.Create(ctx, lookalike))
	must(t, harness.K8s.Delete(ctx, lookalike))
	must(t, harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "guarded"}}))
	harness.WaitForReplicas(t, srcNS, "guarded", 30*time.Second)
}

// kubectl cmsync reads the scope from the chart's Deployment: explain says why a
// namespace the glob matches outside the scope gets nothing.
func TestScopedExplain(t *testing.T) {
	listWatch(t)
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, labelled(srcNS, "explained", map[string]string{"k": "v"})))
	harness.WaitForReplicas(t, srcNS, "explained", 30*time.Second, aNS, bNS)
	var e cli.Explanation
	harness.PluginJSON(t, &e, "explain", srcNS+"/explained", "--all")
	rules := map[string]string{}
	for _, r := range e.Rows {
		rules[r.Namespace] = fmt.Sprintf("%v %s", r.Wanted, r.Rule)
	}
	if want := "false outside the namespaces cmsync serves (its --namespaces)"; !strings.HasPrefix(rules[outNS], want) {
		t.Errorf("explain %s: %q, want %q", outNS, rules[outNS], want)
	}
	if want := `true matched by the glob "scoped-*"`; rules[aNS] != want {
		t.Errorf("explain %s: %q, want %q", aNS, rules[aNS], want)
	}
	must(t, harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "explained"}}))
	harness.WaitForReplicas(t, srcNS, "explained", 30*time.Second)
}

// A listed namespace created after the install: helm upgrade gives it its Role, and
// cmsync, which left it out at its start, serves it within its 30 s recheck.
func TestScopedNamespaceCreatedLater(t *testing.T) {
	harness.SkipOnExistingCluster(t) // its helm upgrade is of the local chart
	listWatch(t)
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, labelled(srcNS, "later", map[string]string{"k": "v"})))
	harness.WaitForReplicas(t, srcNS, "later", 30*time.Second, aNS, bNS)
	must(t, harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: laterNS}}))
	must(t, harness.HelmChart("upgrade", "", chartValues...))
	harness.WaitForReplicas(t, srcNS, "later", 90*time.Second, aNS, bNS, laterNS)
	must(t, harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "later"}}))
	harness.WaitForReplicas(t, srcNS, "later", 30*time.Second)
}
