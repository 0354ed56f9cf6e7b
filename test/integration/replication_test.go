package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Names, globs, "!" exclusions and a selector combine as a union; replicas carry the
// source's content, its labels and annotations minus cmsync's keys, and the markers.
func TestReplicatesToNamesGlobsExclusionsAndSelector(t *testing.T) {
	startController(t)
	ctx := context.Background()
	base := namespaceSet(t, "src", "team-a", "team-b", "team-legacy", "shared", "none")
	prod := newNamespace(t, base+"-sel", map[string]string{"env": "prod"})
	_ = newNamespace(t, base+"-stage", map[string]string{"env": "stage"})

	src := &corev1.ConfigMap{}
	src.Namespace, src.Name = base+"-src", "settings"
	src.Labels = map[string]string{v1alpha1.ReplicateLabel: "true", "team": "platform"}
	src.Annotations = map[string]string{
		v1alpha1.TargetNamespacesAnnotation: base + "-team-*, " + base + "-shared,!" + base + "-team-legacy",
		v1alpha1.TargetSelectorAnnotation:   "env=prod",
		"note":                              "copied",
		v1alpha1.LastAppliedAnnotation:      "{}",
	}
	src.Data = map[string]string{"log-level": "debug"}
	src.BinaryData = map[string][]byte{"blob": {0, 1, 2}}
	must(t, k8s.Create(ctx, src))

	want := []string{base + "-team-a", base + "-team-b", base + "-shared", prod}
	waitForReplicasIn(t, src, want...)
	got := waitForSynced(t, src, "4/4")
	if got.Annotations[v1alpha1.LastSyncTimeAnnotation] == "" {
		t.Errorf("no last-sync-time on a source whose replicas were created")
	}
	for _, ns := range want {
		replica, err := getConfigMap(ns, "settings")
		must(t, err)
		if replica.Data["log-level"] != "debug" || string(replica.BinaryData["blob"]) != "\x00\x01\x02" {
			t.Errorf("%s: content %v %v", ns, replica.Data, replica.BinaryData)
		}
		if replica.Labels[v1alpha1.ManagedByLabel] != "cmsync" || replica.Annotations[v1alpha1.SourceAnnotation] != src.Namespace+"/settings" {
			t.Errorf("%s: markers missing: labels %v annotations %v", ns, replica.Labels, replica.Annotations)
		}
		if replica.Labels["team"] != "platform" || replica.Annotations["note"] != "copied" {
			t.Errorf("%s: source metadata not copied: labels %v annotations %v", ns, replica.Labels, replica.Annotations)
		}
		for k := range replica.Labels {
			if k == v1alpha1.ReplicateLabel {
				t.Errorf("%s: replica carries the replicate label: it would become a source", ns)
			}
		}
		for _, k := range []string{
			v1alpha1.TargetNamespacesAnnotation, v1alpha1.TargetSelectorAnnotation, v1alpha1.StatusAnnotation, v1alpha1.LastAppliedAnnotation,
		} {
			if _, ok := replica.Annotations[k]; ok {
				t.Errorf("%s: replica carries %s", ns, k)
			}
		}
	}
	waitForEvent(t, src, v1alpha1.ReasonSynced, "4/4")
}

// A namespace created later or relabelled into the selector gets its replica; one
// relabelled out or labelled cmsync.io/ignore=true loses it.
func TestFollowsNamespaceLifecycle(t *testing.T) {
	startController(t)
	srcNS := newNamespace(t, "src", nil)
	group := "g" + randomSuffix()
	first := newNamespace(t, "first", map[string]string{"group": group})
	src := newSource(t, srcNS, "app", map[string]string{v1alpha1.TargetSelectorAnnotation: "group=" + group}, map[string]string{"k": "v"})
	waitForReplicasIn(t, src, first)

	later := newNamespace(t, "later", map[string]string{"group": group})
	waitForReplicasIn(t, src, first, later)

	relabelled := newNamespace(t, "relabelled", nil)
	ns := &corev1.Namespace{}
	ns.Name = relabelled
	update(t, ns, func(n *corev1.Namespace) { n.Labels = map[string]string{"group": group} })
	waitForReplicasIn(t, src, first, later, relabelled)
	waitForSynced(t, src, "3/3")

	update(t, ns, func(n *corev1.Namespace) { delete(n.Labels, "group") })
	waitForReplicasIn(t, src, first, later)

	ignored := &corev1.Namespace{}
	ignored.Name = later
	update(t, ignored, func(n *corev1.Namespace) { n.Labels[v1alpha1.IgnoreNamespaceLabel] = "true" })
	waitForReplicasIn(t, src, first)
	waitForSynced(t, src, "1/1")
}
