//go:build e2e

package harness

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// Ptr is a pointer to v.
func Ptr[T any](v T) *T { return &v }

// DeleteSourcesAtEnd deletes, when the test ends, every source in the given namespaces
// and the named ConfigMapSyncs, so that later scenarios count only their own sources.
func DeleteSourcesAtEnd(t *testing.T, namespaces []string, syncs ...string) {
	t.Cleanup(func() {
		ctx := context.Background()
		labelled := client.MatchingLabels{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}
		for _, ns := range namespaces {
			_ = K8s.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), labelled)
			_ = K8s.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns), labelled)
		}
		for _, name := range syncs {
			_ = K8s.Delete(ctx, &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
}

// NewNamespace creates a namespace named prefix-<random> with labels.
func NewNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + testkit.RandomSuffix(), Labels: labels}}
	testkit.Must(t, K8s.Create(context.Background(), ns))
	return ns.Name
}

// GetConfigMap reads a ConfigMap as the administrator.
func GetConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, K8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, cm)
}

// ReplicasOf lists, by the API, the namespaces holding a replica of namespace/name
// under the source's own name.
func ReplicasOf(t *testing.T, namespace, name string) []string {
	t.Helper()
	return ReplicasNamed(t, namespace+"/"+name, name)
}

// ReplicasNamed lists, by the API, the namespaces holding a ConfigMap named name that
// is a replica of source ("<namespace>/<name>").
func ReplicasNamed(t *testing.T, source, name string) []string {
	t.Helper()
	var list corev1.ConfigMapList
	testkit.Must(t, K8s.List(context.Background(), &list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}))
	var out []string
	for _, cm := range list.Items {
		if cm.Name == name && cm.Annotations[v1alpha1.SourceAnnotation] == source {
			out = append(out, cm.Namespace)
		}
	}
	return out
}

// WaitForReplicas waits until the replicas of namespace/name are in exactly want.
func WaitForReplicas(t *testing.T, namespace, name string, timeout time.Duration, want ...string) {
	t.Helper()
	testkit.Eventually(t, timeout, "replicas of "+namespace+"/"+name, func() error {
		if got := ReplicasOf(t, namespace, name); !testkit.SameSet(got, want) {
			return fmt.Errorf("%d replicas in %v, want %d", len(got), TruncateList(got), len(want))
		}
		return nil
	})
}

// WaitForValue waits until the ConfigMap name in every namespace has data[key] = value.
func WaitForValue(t *testing.T, timeout time.Duration, name, key, value string, namespaces ...string) {
	t.Helper()
	testkit.Eventually(t, timeout, fmt.Sprintf("%s=%q in %d replicas of %s", key, value, len(namespaces), name), func() error {
		for _, ns := range namespaces {
			r, err := GetConfigMap(ns, name)
			if err != nil {
				return err
			}
			if r.Data[key] != value {
				return fmt.Errorf("%s: %s=%q", ns, key, r.Data[key])
			}
		}
		return nil
	})
}

// TruncateList is l cut to its first ten entries, for a message.
func TruncateList(l []string) []string {
	if len(l) > 10 {
		return append(l[:10:10], "...")
	}
	return l
}

// WaitForAnnotation waits until the ConfigMap has the annotation key = value, and
// returns it.
func WaitForAnnotation(t *testing.T, namespace, name, key, value string) *corev1.ConfigMap {
	t.Helper()
	var got *corev1.ConfigMap
	testkit.Eventually(t, 30*time.Second, fmt.Sprintf("%s=%s on %s/%s", key, value, namespace, name), func() error {
		cm, err := GetConfigMap(namespace, name)
		if err != nil {
			return err
		}
		if cm.Annotations[key] != value {
			return fmt.Errorf("%s=%q (message %q)", key, cm.Annotations[key], cm.Annotations[v1alpha1.MessageAnnotation])
		}
		got = cm
		return nil
	})
	return got
}
