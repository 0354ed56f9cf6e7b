//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func waitForShapedReplicas(t *testing.T, source, name string, timeout time.Duration, want ...string) {
	t.Helper()
	eventually(t, timeout, "replicas "+name+" of "+source, func() error {
		if got := harness.ReplicasNamed(t, source, name); !sameSet(got, want) {
			return fmt.Errorf("in %v, want %v", got, want)
		}
		return nil
	})
}

func waitForData(t *testing.T, name string, data map[string]string, namespaces ...string) {
	t.Helper()
	eventually(t, 30*time.Second, "data of "+name, func() error {
		for _, ns := range namespaces {
			cm, err := harness.GetConfigMap(ns, name)
			if err != nil {
				return err
			}
			if !reflect.DeepEqual(cm.Data, data) {
				return fmt.Errorf("%s: %v, want %v", ns, cm.Data, data)
			}
		}
		return nil
	})
}

// The README's two examples of shaping the copy: the platform's ca-bundle reaches the
// teams as platform-ca, beside a ca-bundle of a team's own that stays untouched; a
// ConfigMap of twenty settings reaches a namespace with the two it needs. Then a
// rename while cmsync is stopped is carried out when it starts again.
func TestShapedCopies(t *testing.T) {
	c := harness.StartController(t)
	ctx := context.Background()
	platform, a, b := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "shape", nil), harness.NewNamespace(t, "shape", nil)
	harness.DeleteSourcesAtEnd(t, []string{platform})
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "ca-bundle"}, Data: map[string]string{"ca.crt": "the team's own"}}
	must(t, harness.K8s.Create(ctx, theirs))

	bundle := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "ca-bundle", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: a + "," + b, v1alpha1.TargetNameAnnotation: "platform-ca"}},
		Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----..."},
	}
	must(t, harness.K8s.Create(ctx, bundle))
	settings := map[string]string{}
	for i := range 18 {
		settings[fmt.Sprintf("setting-%02d", i)] = "x"
	}
	settings["log-level"], settings["feature-x"] = "debug", "on"
	app := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "app-settings", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: b, v1alpha1.KeysAnnotation: "log-level,feature-x"}},
		Data: settings,
	}
	must(t, harness.K8s.Create(ctx, app))

	waitForShapedReplicas(t, platform+"/ca-bundle", "platform-ca", 30*time.Second, a, b)
	waitForData(t, "platform-ca", bundle.Data, a, b)
	harness.WaitForAnnotation(t, platform, "ca-bundle", v1alpha1.SyncedAnnotation, "2/2")
	waitForData(t, "app-settings", map[string]string{"log-level": "debug", "feature-x": "on"}, b)
	harness.WaitForAnnotation(t, platform, "app-settings", v1alpha1.SyncedAnnotation, "1/1")
	if got, err := harness.GetConfigMap(a, "ca-bundle"); err != nil || got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the team's own ca-bundle changed: %v", err)
	}

	c.Local(t)
	c.Stop()
	must(t, harness.K8s.Patch(ctx, bundle, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cmsync.io/target-name":"shared-ca"}}}`))))
	must(t, harness.K8s.Patch(ctx, app, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cmsync.io/keys":"log-*"}}}`))))
	harness.StartController(t)
	waitForShapedReplicas(t, platform+"/ca-bundle", "shared-ca", 30*time.Second, a, b)
	waitForShapedReplicas(t, platform+"/ca-bundle", "platform-ca", 30*time.Second)
	waitForData(t, "app-settings", map[string]string{"log-level": "debug"}, b)
	if got, err := harness.GetConfigMap(a, "ca-bundle"); err != nil || got.ResourceVersion != theirs.ResourceVersion {
		t.Errorf("the team's own ca-bundle changed: %v", err)
	}
}

// A malformed target-name through the public interface: Invalid, a Warning Event, and
// the replicas untouched.
func TestInvalidTargetName(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	platform, a := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "shape", nil)
	harness.DeleteSourcesAtEnd(t, []string{platform})
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "app", Labels: map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: a}},
		Data: map[string]string{"k": "v"},
	}
	must(t, harness.K8s.Create(ctx, src))
	harness.WaitForAnnotation(t, platform, "app", v1alpha1.SyncedAnnotation, "1/1")
	replica, err := harness.GetConfigMap(a, "app")
	must(t, err)
	must(t, harness.K8s.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"cmsync.io/target-name":"App_Settings"}}}`))))
	got := harness.WaitForAnnotation(t, platform, "app", v1alpha1.StatusAnnotation, v1alpha1.StatusInvalid)
	if msg := got.Annotations[v1alpha1.MessageAnnotation]; !strings.HasPrefix(msg, `invalid target-name "App_Settings": not a valid name`) {
		t.Errorf("message %q", msg)
	}
	consistently(t, 3*time.Second, "replica untouched", func() error {
		now, err := harness.GetConfigMap(a, "app")
		if err != nil || now.ResourceVersion != replica.ResourceVersion {
			return fmt.Errorf("replica changed or gone: %v", err)
		}
		return nil
	})
}

// A kubernetes.io/tls Secret given to the teams as its CA only: an Opaque replica
// holding ca.crt, and the private key in no replica.
func TestSecretCopiedAsItsCA(t *testing.T) {
	harness.StartController(t, "--secrets=enabled")
	ctx := context.Background()
	platform, a := harness.NewNamespace(t, "platform", nil), harness.NewNamespace(t, "shape", nil)
	harness.DeleteSourcesAtEnd(t, []string{platform})
	key := "KEY-" + randomSuffix()
	must(t, harness.K8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: platform,
			Name:      "ingress-tls",
			Labels:    map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{
				v1alpha1.TargetNamespacesAnnotation: a,
				v1alpha1.TargetNameAnnotation:       "platform-ca",
				v1alpha1.KeysAnnotation:             "ca.crt",
			},
		},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CERT"), "tls.key": []byte(key)},
	}))
	status := waitForSecretAnnotation(t, platform, "ingress-tls", v1alpha1.SyncedAnnotation, "1/1")
	if msg := status.Annotations[v1alpha1.MessageAnnotation]; !strings.Contains(msg, "of type Opaque") || strings.Contains(msg, key) {
		t.Errorf("message %q", msg)
	}
	replica := &corev1.Secret{}
	must(t, harness.K8s.Get(ctx, client.ObjectKey{Namespace: a, Name: "platform-ca"}, replica))
	if replica.Type != corev1.SecretTypeOpaque || len(replica.Data) != 1 || string(replica.Data["ca.crt"]) != "CA" {
		t.Errorf("replica of type %s with %d keys", replica.Type, len(replica.Data))
	}
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: a, Name: "ingress-tls"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("a replica under the source's name: %v", err)
	}
}

// ConfigMapSync with targetName and keys: renamed, filtered replicas; deleting the
// ConfigMapSync deletes them, through cmsync's finalizer and, with cmsync stopped,
// through the garbage collector.
func TestConfigMapSyncShapedRoundTrip(t *testing.T) {
	c := harness.StartController(t)
	ctx := context.Background()
	src, a := harness.NewNamespace(t, "src", nil), harness.NewNamespace(t, "shape", nil)
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "settings"},
		Data: map[string]string{"log-level": "debug", "db-url": "postgres://db"}}))
	spec := v1alpha1.ConfigMapSyncSpec{
		SourceNamespace: src,
		ConfigMapName:   "settings",
		ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespace: a, TargetName: "app-settings", Keys: []string{"log-*"}},
	}
	first := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "shape-" + randomSuffix()}, Spec: spec}
	must(t, harness.K8s.Create(ctx, first))
	waitForData(t, "app-settings", map[string]string{"log-level": "debug"}, a)
	must(t, harness.K8s.Delete(ctx, first))
	waitForShapedReplicas(t, src+"/settings", "app-settings", 30*time.Second)

	second := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "shape-gc-" + randomSuffix()}, Spec: spec}
	harness.DeleteSourcesAtEnd(t, nil, second.Name)
	must(t, harness.K8s.Create(ctx, second))
	waitForData(t, "app-settings", map[string]string{"log-level": "debug"}, a)
	eventually(t, 10*time.Second, "finalizer set", func() error {
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(second), second))
		if len(second.Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	c.Local(t)
	c.Stop()
	must(t, harness.K8s.Patch(ctx, second, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	must(t, harness.K8s.Delete(ctx, second))
	waitForShapedReplicas(t, src+"/settings", "app-settings", 60*time.Second) // the garbage collector's work
}
