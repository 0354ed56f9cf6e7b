//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/cli"
)

// A cluster that another replicator served, stopped: a push source of each peer with
// the copies it made, and a pull target of kubernetes-replicator, each with the exact
// metadata the peer's release writes (the sources are cited in
// internal/migrate/migrate_test.go: kubernetes-replicator's ReplicateObjectTo and
// resourceAddedReplicateFrom, reflector's ResourceMirror, config-syncer's
// syncerLabels and syncerAnnotations). kubectl cmsync migrate previews and writes
// nothing; --apply, under the chart's admission policy, makes cmsync's form of each
// source and takes over every tied copy in place: a watch on every copy sees no DELETE,
// each keeps its uid, and cmsync then follows, repairs and cleans them up as its own.
// The plugin runs as the cluster administrator, who may create ConfigMapSyncs: the
// policy lets only such a user take a copy over (adversarial_admission_test.go has the
// others tried).
func TestMigrateTakesOverThePeersCopiesInPlace(t *testing.T) {
	harness.StartController(t, "--secrets=enabled")
	ctx := context.Background()
	s := randomSuffix()
	selected := map[string]string{"peer-migrate": s}
	src, a, b := harness.NewNamespace(t, "peer-src", nil), harness.NewNamespace(t, "peer-a", selected), harness.NewNamespace(t, "peer-b", selected)
	copies := arrangePeers(t, src, a, b, "peer-migrate="+s)
	harness.DeleteSourcesAtEnd(t, []string{src}, src+".mittwald-ca.pulled")
	watching := watchCopies(t, a, b)

	var preview cli.Migration
	harness.PluginJSON(t, &preview, "migrate")
	taken := map[string]bool{}
	for _, m := range preview.Moves {
		if m.Source.Namespace != src {
			continue
		}
		if m.Refused != "" {
			t.Errorf("%s %s refused: %s", m.Kind, m.Source, m.Refused)
		}
		for _, c := range m.TakeOver {
			taken[c.Namespace+"/"+c.Name] = true
		}
	}
	if len(taken) != len(copies) {
		t.Fatalf("the preview takes over %v, want every one of the %d copies", taken, len(copies))
	}
	expectUnchanged(t, copies)
	t.Logf("kubectl cmsync migrate:\n%s", harness.Plugin(t, "migrate"))

	// The admission policy lets a copy that a peer's markers tie to a source become its
	// replica, and no other object.
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "plain-" + s}, Data: map[string]string{"k": "v"}}
	must(t, harness.K8s.Create(ctx, plain))
	forged := []byte(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"cmsync"},"annotations":{"cmsync.io/source":"` + src + `/mittwald-ca"}}}`)
	expectRefused(t, "a take-over of an object no peer made", harness.K8s.Patch(ctx, plain, client.RawPatch(types.MergePatchType, forged)),
		"only cmsync writes objects labelled app.kubernetes.io/managed-by=cmsync")

	harness.PluginJSON(t, &preview, "migrate", "--apply")
	for _, c := range copies {
		now := c.DeepCopyObject().(client.Object)
		must(t, harness.K8s.Get(ctx, client.ObjectKeyFromObject(c), now))
		if now.GetUID() != c.GetUID() || now.GetLabels()[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
			t.Errorf("%s/%s: uid %s -> %s, labels %v", c.GetNamespace(), c.GetName(), c.GetUID(), now.GetUID(), now.GetLabels())
		}
	}
	for _, name := range []string{"mittwald-ca", "reflected"} {
		harness.WaitForAnnotation(t, src, name, v1alpha1.StatusAnnotation, v1alpha1.StatusSynced)
	}

	// cmsync repairs the copies it took over, and follows the sources into them.
	harness.WithoutProtection(t, func() {
		must(t, harness.K8s.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: b, Name: "reflected"}},
			client.RawPatch(types.MergePatchType, []byte(`{"data":{"ca.crt":"tampered"}}`))))
	})
	harness.WaitForValue(t, 30*time.Second, "reflected", "ca.crt", "pem", b)
	must(t, harness.K8s.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "mittwald-ca"}},
		client.RawPatch(types.MergePatchType, []byte(`{"data":{"ca.crt":"rotated"}}`))))
	harness.WaitForValue(t, 30*time.Second, "mittwald-ca", "ca.crt", "rotated", a, b)
	harness.WaitForValue(t, 30*time.Second, "pulled", "ca.crt", "rotated", a)
	if events := watching.deletes(); len(events) > 0 {
		t.Errorf("copies deleted during the migration: %v", events)
	}
	for _, c := range copies {
		now := c.DeepCopyObject().(client.Object)
		if err := harness.K8s.Get(ctx, client.ObjectKeyFromObject(c), now); err != nil || now.GetUID() != c.GetUID() {
			t.Errorf("%s/%s: %v, uid %s -> %s", c.GetNamespace(), c.GetName(), err, c.GetUID(), now.GetUID())
		}
	}

	// And cleans them up as its own.
	must(t, harness.K8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "reflected"}}))
	harness.WaitForReplicas(t, src, "reflected", 30*time.Second)
}

// arrangePeers makes the peers' sources in src and their copies in a and b (which
// selector selects), as their releases leave them, and returns the copies.
func arrangePeers(t *testing.T, src, a, b, selector string) []client.Object {
	t.Helper()
	ctx := context.Background()
	data := map[string]string{"ca.crt": "pem"}
	mittwald := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "mittwald-ca", Labels: map[string]string{"team": "platform"},
		Annotations: map[string]string{
			"replicator.v1.mittwald.de/replicate-to": a + "," + b, "replicator.v1.mittwald.de/replication-allowed": "true",
			"replicator.v1.mittwald.de/replication-allowed-namespaces": a,
		}}, Data: data}
	reflected := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "reflected", Annotations: map[string]string{
		"reflector.v1.k8s.emberstack.com/reflection-allowed": "true", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true",
		"reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces": a + "," + b,
	}}, Data: data}
	kubed := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "kubed-pull", Annotations: map[string]string{"kubed.appscode.com/sync": selector}},
		StringData: map[string]string{"token": "t"},
	}
	for _, obj := range []client.Object{mittwald, reflected, kubed} {
		must(t, harness.K8s.Create(ctx, obj))
	}
	mv, rv := mittwald.ResourceVersion, reflected.ResourceVersion
	copies := make([]client.Object, 0, 7)
	for _, ns := range []string{a, b} {
		copies = append(copies,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mittwald-ca", Labels: map[string]string{"team": "platform"},
				Annotations: map[string]string{
					"replicator.v1.mittwald.de/replicated-at": "2026-11-28T10:00:00Z", "replicator.v1.mittwald.de/replicated-from-version": mv,
					"replicator.v1.mittwald.de/replicated-keys": "ca.crt",
				}}, Data: data},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reflected", Annotations: map[string]string{
				"reflector.v1.k8s.emberstack.com/auto-reflects": "True", "reflector.v1.k8s.emberstack.com/reflects": src + "/reflected",
				"reflector.v1.k8s.emberstack.com/reflected-version": rv, "reflector.v1.k8s.emberstack.com/reflected-at": "2026-11-28T10:00:00.0000000+00:00",
			}}, Data: data},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Namespace: ns,
				Name:      "kubed-pull",
				Labels: map[string]string{
					"kubed.appscode.com/origin.name":      "kubed-pull",
					"kubed.appscode.com/origin.namespace": src,
					"kubed.appscode.com/origin.cluster":   "",
				},
				Annotations: map[string]string{
					"kubed.appscode.com/origin": fmt.Sprintf(`{"kind":"Secret","namespace":%q,"name":"kubed-pull","apiVersion":"v1"}`, src),
				},
			},
				StringData: map[string]string{"token": "t"}},
		)
	}
	// kubernetes-replicator's pull form: a ConfigMap of another name that names its source.
	copies = append(copies, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: a, Name: "pulled", Annotations: map[string]string{
		"replicator.v1.mittwald.de/replicate-from": src + "/mittwald-ca", "replicator.v1.mittwald.de/replicated-at": "2026-11-28T10:00:00Z",
		"replicator.v1.mittwald.de/replicated-from-version": mv, "replicator.v1.mittwald.de/replicated-keys": "ca.crt",
	}}, Data: data})
	for _, c := range copies {
		must(t, harness.K8s.Create(ctx, c))
	}
	return copies
}

// expectUnchanged: the preview wrote nothing.
func expectUnchanged(t *testing.T, objects []client.Object) {
	t.Helper()
	for _, obj := range objects {
		now := obj.DeepCopyObject().(client.Object)
		must(t, harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(obj), now))
		if now.GetResourceVersion() != obj.GetResourceVersion() {
			t.Errorf("the preview wrote %s/%s", obj.GetNamespace(), obj.GetName())
		}
	}
}

// copyWatch records the DELETE events of ConfigMaps and Secrets in the namespaces.
type copyWatch struct {
	mu      sync.Mutex
	deleted []string
}

func (w *copyWatch) deletes() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.deleted...)
}

func watchCopies(t *testing.T, namespaces ...string) *copyWatch {
	t.Helper()
	w := &copyWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, ns := range namespaces {
		for _, start := range []func() (watch.Interface, error){
			func() (watch.Interface, error) {
				return harness.Clientset.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{})
			},
			func() (watch.Interface, error) {
				return harness.Clientset.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{})
			},
		} {
			events, err := start()
			must(t, err)
			go func() {
				for e := range events.ResultChan() {
					if obj, ok := e.Object.(client.Object); ok && e.Type == watch.Deleted {
						w.mu.Lock()
						w.deleted = append(w.deleted, obj.GetNamespace()+"/"+obj.GetName())
						w.mu.Unlock()
					}
				}
			}()
		}
	}
	return w
}
