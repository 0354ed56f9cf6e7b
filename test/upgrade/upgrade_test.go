//go:build e2e

package upgrade

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// Namespaces of the scenario.
const (
	srcNS = "upgrade-src"
	aNS   = "upgrade-a"
	bNS   = "upgrade-b"
)

// From the first release to the working tree with helm upgrade, back with helm
// rollback, and up again: the replicas of an annotated ConfigMap, a ConfigMapSync and a
// labelled Secret stay in place throughout (none deleted or created anew: their uids
// stay; none written: their content did not change), the admission policy refuses a
// forged replica at every moment, and the sources say Synced after each step. After the
// upgrade, the SecretSync CRD applied as docs/upgrade.md says is served by the running
// cmsync, which started without it. At the end, a change of the sources reaches the
// replicas the first release made: the working tree's cmsync manages them.
func TestUpgradeAndRollbackKeepEveryReplica(t *testing.T) {
	first := harness.LaunchController(t, harness.Launch{Binary: released.binary}, "--secrets=enabled")
	arrange(t)
	replicas := snapshot(t)
	if len(replicas) != 6 {
		t.Fatalf("%d replicas, want 6: %v", len(replicas), replicas)
	}
	watching := watchReplicas(t)
	guard := guardProtection(t)

	current := upgrade(t, first)
	expectUntouched(t, "after the upgrade", replicas, watching)
	applyCRDs(t)
	checkSecretSyncServed(t)
	watching.reset() // the SecretSync's own replica came and went

	// Rollback: the chart, then the binary.
	out, err := harness.Helm("rollback", harness.Release, "1", "--namespace", harness.ReleaseNamespace, "--wait=false")
	must(t, err)
	t.Logf("helm rollback: %s", strings.TrimSpace(out))
	current.Stop()
	rolledBack := harness.LaunchController(t, harness.Launch{Binary: released.binary}, "--secrets=enabled")
	expectStatusSynced(t)
	expectUntouched(t, "after the rollback", replicas, watching)

	upgrade(t, rolledBack)
	expectUntouched(t, "after the upgrade again", replicas, watching)
	changeSources(t, "upgraded")

	if moments := guard.stop(); len(moments) > 0 {
		t.Errorf("moments without the admission policy's protection: %v", moments)
	}
}

// upgrade upgrades the chart (Helm leaves CRDs as they are), then the binary, as a
// Deployment's rollout does, and waits for the sources' status.
func upgrade(t *testing.T, running *harness.Controller) *harness.Controller {
	t.Helper()
	harness.Chart = "../../deploy/chart/cmsync"
	must(t, harness.HelmChart("upgrade", "", chartValues...))
	running.Stop()
	upgraded := harness.LaunchController(t, harness.Launch{}, "--secrets=enabled")
	expectStatusSynced(t)
	return upgraded
}

// arrange makes the three sources, each replicated into a and b, as the first release
// runs.
func arrange(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{srcNS, aNS, bNS} {
		must(t, harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	targets := map[string]string{v1alpha1.TargetNamespacesAnnotation: aNS + "," + bNS}
	labels := map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "settings", Labels: labels, Annotations: targets},
		Data: map[string]string{"mode": "first"}}))
	must(t, harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "creds", Labels: labels, Annotations: targets},
		StringData: map[string]string{"password": "first"}}))
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "ca"}, Data: map[string]string{"ca.crt": "first"}}))
	must(t, harness.K8s.Create(ctx, &v1alpha1.ConfigMapSync{
		ObjectMeta: metav1.ObjectMeta{Name: "upgrade-ca"},
		Spec: v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: srcNS,
			ConfigMapName:   "ca",
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: []string{aNS, bNS}},
		},
	}))
	expectStatusSynced(t)
}

// expectStatusSynced waits until every source says Synced 2/2.
func expectStatusSynced(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 60*time.Second, "every source Synced 2/2", func() error {
		cm, s, sync := &corev1.ConfigMap{}, &corev1.Secret{}, &v1alpha1.ConfigMapSync{}
		for _, get := range []struct {
			key types.NamespacedName
			obj client.Object
		}{
			{types.NamespacedName{Namespace: srcNS, Name: "settings"}, cm},
			{types.NamespacedName{Namespace: srcNS, Name: "creds"}, s},
			{types.NamespacedName{Name: "upgrade-ca"}, sync},
		} {
			if err := harness.K8s.Get(ctx, get.key, get.obj); err != nil {
				return err
			}
		}
		for _, a := range []map[string]string{cm.Annotations, s.Annotations} {
			if a[v1alpha1.StatusAnnotation] != v1alpha1.StatusSynced || a[v1alpha1.SyncedAnnotation] != "2/2" {
				return fmt.Errorf("status %q %q: %q", a[v1alpha1.StatusAnnotation], a[v1alpha1.SyncedAnnotation], a[v1alpha1.MessageAnnotation])
			}
		}
		ready := meta.FindStatusCondition(sync.Status.Conditions, v1alpha1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionTrue || sync.Status.Synced != "2/2" || sync.Status.ObservedGeneration != sync.Generation {
			return fmt.Errorf("ConfigMapSync Ready %+v, synced %q", ready, sync.Status.Synced)
		}
		return nil
	})
}

// replica is what a replica is: its uid and its version.
type replica struct{ uid, version string }

// snapshot reads every replica in the cluster, by kind/namespace/name.
func snapshot(t *testing.T) map[string]replica {
	t.Helper()
	out := map[string]replica{}
	selector := client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}
	var cms corev1.ConfigMapList
	must(t, harness.K8s.List(context.Background(), &cms, selector))
	for _, cm := range cms.Items {
		out["ConfigMap/"+cm.Namespace+"/"+cm.Name] = replica{string(cm.UID), cm.ResourceVersion}
	}
	var secrets corev1.SecretList
	must(t, harness.K8s.List(context.Background(), &secrets, selector))
	for _, s := range secrets.Items {
		out["Secret/"+s.Namespace+"/"+s.Name] = replica{string(s.UID), s.ResourceVersion}
	}
	return out
}

// replicaEvents records every watch event of a replica.
type replicaEvents struct {
	mu     sync.Mutex
	events []string
}

func (r *replicaEvents) add(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *replicaEvents) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

func (r *replicaEvents) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// watchReplicas watches every replica from now on, until the test ends.
func watchReplicas(t *testing.T) *replicaEvents {
	t.Helper()
	recorded := &replicaEvents{}
	opts := metav1.ListOptions{LabelSelector: v1alpha1.ManagedByLabel + "=" + v1alpha1.ManagedByValue}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// Each watch starts at its list's version: it sees changes, not what exists.
	configMaps, err := harness.Clientset.CoreV1().ConfigMaps("").List(ctx, opts)
	must(t, err)
	secrets, err := harness.Clientset.CoreV1().Secrets("").List(ctx, opts)
	must(t, err)
	for kind, w := range map[string]func() (watch.Interface, error){
		"ConfigMap": func() (watch.Interface, error) {
			return harness.Clientset.CoreV1().ConfigMaps("").Watch(ctx, withVersion(opts, configMaps.ResourceVersion))
		},
		"Secret": func() (watch.Interface, error) {
			return harness.Clientset.CoreV1().Secrets("").Watch(ctx, withVersion(opts, secrets.ResourceVersion))
		},
	} {
		events, err := w()
		must(t, err)
		go func() {
			defer events.Stop()
			for e := range events.ResultChan() {
				if obj, err := meta.Accessor(e.Object); err == nil {
					recorded.add(
						fmt.Sprintf(
							"%s %s/%s/%s (uid %s, version %s)",
							e.Type,
							kind,
							obj.GetNamespace(),
							obj.GetName(),
							obj.GetUID(),
							obj.GetResourceVersion(),
						),
					)
				}
			}
		}()
	}
	return recorded
}

func withVersion(opts metav1.ListOptions, version string) metav1.ListOptions {
	opts.ResourceVersion = version
	return opts
}

// expectUntouched: for a while, the replicas are those of the snapshot, with the same
// uids and versions, and the watch saw no event of any replica.
func expectUntouched(t *testing.T, when string, before map[string]replica, watching *replicaEvents) {
	t.Helper()
	consistently(t, 5*time.Second, "every replica untouched "+when, func() error {
		if events := watching.seen(); len(events) > 0 {
			return fmt.Errorf("replica events: %v", events)
		}
		now := snapshot(t)
		var changed []string
		for key, r := range before {
			if now[key] != r {
				changed = append(changed, fmt.Sprintf("%s: %+v -> %+v", key, r, now[key]))
			}
		}
		for key := range now {
			if _, ok := before[key]; !ok {
				changed = append(changed, "new "+key)
			}
		}
		sort.Strings(changed)
		if len(changed) > 0 {
			return fmt.Errorf("replicas changed: %v", changed)
		}
		return nil
	})
}

// changeSources changes the annotated ConfigMap, the labelled Secret and the
// ConfigMapSync's source: each change reaches the replicas.
func changeSources(t *testing.T, value string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range []string{"settings", "ca"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: name}}
		key := "mode"
		if name == "ca" {
			key = "ca.crt"
		}
		must(t, harness.K8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"`+key+`":"`+value+`"}}`))))
		harness.WaitForValue(t, 30*time.Second, name, key, value, aNS, bNS)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "creds"}}
	must(t, harness.K8s.Patch(ctx, secret, client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"password":"`+value+`"}}`))))
	eventually(t, 30*time.Second, "the Secret's replicas follow", func() error {
		for _, ns := range []string{aNS, bNS} {
			s := &corev1.Secret{}
			if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "creds"}, s); err != nil {
				return err
			}
			if string(s.Data["password"]) != value || s.Labels[v1alpha1.ContentHashLabel] == "" {
				return fmt.Errorf("replica in %s: not the new value, or no content-hash label yet", ns)
			}
		}
		return nil
	})
}

// applyCRDs applies the working tree's CRDs as docs/upgrade.md tells users to after a
// helm upgrade: a server-side apply that takes the fields Helm wrote at the install
// (kubectl apply --server-side --force-conflicts).
func applyCRDs(t *testing.T) {
	t.Helper()
	files, err := filepath.Glob("../../deploy/crds/*.yaml")
	must(t, err)
	for _, file := range files {
		raw, err := os.ReadFile(file)
		must(t, err)
		crd := &unstructured.Unstructured{}
		must(t, yaml.Unmarshal(raw, &crd.Object))
		applied, err := crd.MarshalJSON()
		must(t, err)
		must(t, harness.K8s.Patch(context.Background(), crd, client.RawPatch(types.ApplyPatchType, applied),
			client.FieldOwner("kubectl"), client.ForceOwnership))
	}
}

// checkSecretSyncServed: a SecretSync made once its CRD is applied gets its replica
// from the running cmsync (which started without the CRD), and is deleted with it.
func checkSecretSyncServed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	must(t, harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: srcNS, Name: "operator-written"},
		StringData: map[string]string{"k": "v"}}))
	ssync := &v1alpha1.SecretSync{ObjectMeta: metav1.ObjectMeta{Name: "upgrade-ssync"},
		Spec: v1alpha1.SecretSyncSpec{SourceNamespace: srcNS, SecretName: "operator-written", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: aNS}}}
	eventually(t, 30*time.Second, "the SecretSync CRD served", func() error { return harness.K8s.Create(ctx, ssync) })
	eventually(t, 90*time.Second, "the SecretSync's replica", func() error {
		return harness.K8s.Get(ctx, client.ObjectKey{Namespace: aNS, Name: "operator-written"}, &corev1.Secret{})
	})
	// The first release knows no SecretSync: it is deleted before the rollback, with its
	// replica.
	must(t, harness.K8s.Delete(ctx, ssync))
	eventually(t, 30*time.Second, "the SecretSync gone with its replica", func() error {
		err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: aNS, Name: "operator-written"}, &corev1.Secret{})
		if err == nil {
			return fmt.Errorf("the replica is still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// protectionGuard probes the admission policy every 100 ms until stopped.
type protectionGuard struct {
	once    sync.Once
	done    chan struct{}
	ended   sync.WaitGroup
	mu      sync.Mutex
	missing []string
}

func guardProtection(t *testing.T) *protectionGuard {
	t.Helper()
	g := &protectionGuard{done: make(chan struct{})}
	g.ended.Add(1)
	go func() {
		defer g.ended.Done()
		for {
			select {
			case <-g.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if err := harness.ExpectProtection(true); err != nil {
				g.mu.Lock()
				g.missing = append(g.missing, time.Now().Format(time.RFC3339Nano)+": "+err.Error())
				g.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { g.stop() })
	return g
}

// stop ends the probing and returns the moments the policy did not refuse.
func (g *protectionGuard) stop() []string {
	g.once.Do(func() { close(g.done) })
	g.ended.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.missing
}
