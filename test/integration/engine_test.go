package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator"
)

// The engine's update is a whole-object write conditional on the resourceVersion it
// compared, falling back to a merge patch when the replica changed in between. Both
// must bring cmsync's keys in line and keep what others added; a replica already in
// line when the update conflicts is left alone.
func TestEngineUpdateKeepsOthersKeys(t *testing.T) {
	ctx := context.Background()
	srcNS, target := newNamespace(t, "eng-src", nil), newNamespace(t, "eng-dst", nil)
	source := &corev1.ConfigMap{}
	source.Namespace, source.Name = srcNS, "settings"
	source.Labels = map[string]string{v1alpha1.ReplicateLabel: "true", "tier": "one"}
	source.Data = map[string]string{"k": "v1"}
	kind := desired.ConfigMapKind{}
	owner := desired.AnnotationOwner(kind.Name(), types.NamespacedName{Namespace: srcNS, Name: "settings"})
	replica := func() *corev1.ConfigMap { return desired.NewTemplate(kind, source, desired.Shape{}, owner).In(target) }
	// The store's watch is not started, so it holds nothing: every pass is handed the
	// replica it compares.
	engine := replicator.NewEngine(kind, newReplicaStore(t, kind, 0, restConfig), 1)
	sync := func(existing *corev1.ConfigMap) desired.Outcome {
		t.Helper()
		plan := replicator.Plan[*corev1.ConfigMap]{Targets: []string{target}, Template: desired.NewTemplate(kind, source, desired.Shape{}, owner)}
		results := engine.SyncTargets(ctx, owner, plan, map[string]*metav1.PartialObjectMetadata{target: meta.AsPartialObjectMetadata(existing)})
		if results[0].Err != nil {
			t.Fatalf("sync: %v", results[0].Err)
		}
		return results[0].Outcome
	}
	read := func() *corev1.ConfigMap {
		t.Helper()
		cm, err := getConfigMap(target, "settings")
		must(t, err)
		return cm
	}

	must(t, k8s.Create(ctx, replica(), client.FieldOwner(v1alpha1.FieldManager)))
	// Someone adds a label, an annotation and a finalizer to the replica.
	update(t, read(), func(cm *corev1.ConfigMap) {
		cm.Labels["added-by-user"] = "yes"
		cm.Annotations = map[string]string{v1alpha1.SourceAnnotation: cm.Annotations[v1alpha1.SourceAnnotation], "user-note": "n"}
		cm.Finalizers = []string{"example.com/hold"}
	})
	t.Cleanup(func() {
		update(t, read(), func(cm *corev1.ConfigMap) { cm.Finalizers = nil })
	})

	check := func(path string, wantData string, wantTier bool) {
		t.Helper()
		cm := read()
		if cm.Data["k"] != wantData || cm.Labels["added-by-user"] != "yes" || cm.Annotations["user-note"] != "n" ||
			len(cm.Finalizers) != 1 || (cm.Labels["tier"] == "one") != wantTier {
			t.Errorf("%s: replica data %v labels %v annotations %v finalizers %v", path, cm.Data, cm.Labels, cm.Annotations, cm.Finalizers)
		}
		for k := range cm.Annotations {
			if strings.HasPrefix(k, v1alpha1.Prefix) && k != v1alpha1.SourceAnnotation {
				t.Errorf("%s: the replica carries %s", path, k)
			}
		}
	}

	// The whole-object update, from the replica as it is.
	source.Data = map[string]string{"k": "v2"}
	if got := sync(read()); got != desired.Updated {
		t.Fatalf("outcome %v, want Updated", got)
	}
	check("update", "v2", true)

	// The fallback: the engine compares a copy the replica has moved on from (its
	// resourceVersion is stale), so the whole-object update conflicts.
	stale := read()
	update(t, read(), func(cm *corev1.ConfigMap) { cm.Annotations["user-note-2"] = "m" })
	source.Data = map[string]string{"k": "v3"}
	delete(source.Labels, "tier") // cmsync's label, now stale
	if got := sync(stale); got != desired.Updated {
		t.Fatalf("outcome %v, want Updated", got)
	}
	check("fallback", "v3", false)
	if read().Annotations["user-note-2"] != "m" {
		t.Error("fallback: the edit made after the compared copy was lost")
	}

	// A copy cmsync's own later write has moved on from (the replica cache has not
	// seen that write yet): the replica is in line, and is not written again.
	before := read()
	source.Data = map[string]string{"k": "v4"}
	if got := sync(read()); got != desired.Updated {
		t.Fatalf("outcome %v, want Updated", got)
	}
	written := read()
	if got := sync(before); got != desired.InSync {
		t.Errorf("outcome %v from a copy behind cmsync's own write, want InSync", got)
	}
	if now := read(); now.ResourceVersion != written.ResourceVersion {
		t.Errorf("the replica was written again: resourceVersion %s, then %s", written.ResourceVersion, now.ResourceVersion)
	}
	check("behind", "v4", false)
}
