package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Deleting, unlabelling, removing the annotations of or narrowing a source deletes
// exactly its replicas; another source's replicas in the same namespaces stay.
func TestCleanupIsExact(t *testing.T) {
	startController(t)
	srcNS := newNamespace(t, "src", nil)
	a, b, c := newNamespace(t, "dst", nil), newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	all := a + "," + b + "," + c
	bystander := newSource(t, srcNS, "bystander", map[string]string{v1alpha1.TargetNamespacesAnnotation: all}, map[string]string{"k": "v"})
	deleted := newSource(t, srcNS, "deleted", map[string]string{v1alpha1.TargetNamespacesAnnotation: all}, nil)
	unlabelled := newSource(t, srcNS, "unlabelled", map[string]string{v1alpha1.TargetNamespacesAnnotation: all}, nil)
	unannotated := newSource(t, srcNS, "unannotated", map[string]string{v1alpha1.TargetNamespacesAnnotation: all}, nil)
	narrowed := newSource(t, srcNS, "narrowed", map[string]string{v1alpha1.TargetNamespacesAnnotation: all}, nil)
	for _, src := range []*corev1.ConfigMap{bystander, deleted, unlabelled, unannotated, narrowed} {
		waitForReplicasIn(t, src, a, b, c)
	}

	must(t, k8s.Delete(context.Background(), deleted))
	update(t, unlabelled, func(cm *corev1.ConfigMap) { delete(cm.Labels, v1alpha1.ReplicateLabel) })
	update(t, unannotated, func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.TargetNamespacesAnnotation) })
	update(t, narrowed, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = a })

	waitForReplicasIn(t, deleted)
	waitForReplicasIn(t, unlabelled)
	waitForReplicasIn(t, unannotated)
	waitForReplicasIn(t, narrowed, a)
	waitForSynced(t, narrowed, "1/1")
	waitForSynced(t, unannotated, "0/0")
	eventually(t, timeout, "status annotations removed from the unlabelled ConfigMap", func() error {
		cm, err := getConfigMap(srcNS, "unlabelled")
		if err != nil {
			return err
		}
		for _, k := range []string{v1alpha1.StatusAnnotation, v1alpha1.SyncedAnnotation, v1alpha1.MessageAnnotation, v1alpha1.LastSyncTimeAnnotation} {
			if _, ok := cm.Annotations[k]; ok {
				return errorf("%s still there", k)
			}
		}
		return nil
	})
	consistently(t, 2*time.Second, "the bystander keeps its replicas", func() error {
		if got := replicaNamespaces(t, bystander); !sameSet(got, []string{a, b, c}) {
			return errorf("bystander replicas in %v", got)
		}
		return nil
	})
}

// Cleanup is restart-safe: what happened while the controller was down is cleaned up
// when it comes back.
func TestCleanupAfterRestart(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	a, b := newNamespace(t, "dst", nil), newNamespace(t, "dst", nil)
	both := a + "," + b
	deleted := newSource(t, srcNS, "deleted", map[string]string{v1alpha1.TargetNamespacesAnnotation: both}, nil)
	unlabelled := newSource(t, srcNS, "unlabelled", map[string]string{v1alpha1.TargetNamespacesAnnotation: both}, nil)
	unannotated := newSource(t, srcNS, "unannotated", map[string]string{v1alpha1.TargetNamespacesAnnotation: both}, nil)
	narrowed := newSource(t, srcNS, "narrowed", map[string]string{v1alpha1.TargetNamespacesAnnotation: both}, nil)
	relabelled := newSource(t, srcNS, "relabelled", map[string]string{v1alpha1.TargetSelectorAnnotation: "restart-test=" + srcNS}, nil)
	selected := newNamespace(t, "sel", map[string]string{"restart-test": srcNS})
	for _, src := range []*corev1.ConfigMap{deleted, unlabelled, unannotated, narrowed} {
		waitForReplicasIn(t, src, a, b)
	}
	waitForReplicasIn(t, relabelled, selected)

	running.Stop()
	must(t, k8s.Delete(context.Background(), deleted))
	update(t, unlabelled, func(cm *corev1.ConfigMap) { delete(cm.Labels, v1alpha1.ReplicateLabel) })
	update(t, unannotated, func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.TargetNamespacesAnnotation) })
	update(t, narrowed, func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = b })
	ns := &corev1.Namespace{}
	ns.Name = selected
	update(t, ns, func(n *corev1.Namespace) { delete(n.Labels, "restart-test") })

	startController(t)
	waitForReplicasIn(t, deleted)
	waitForReplicasIn(t, unlabelled)
	waitForReplicasIn(t, unannotated)
	waitForReplicasIn(t, narrowed, b)
	waitForReplicasIn(t, relabelled)
}

// A source unlabelled while no cmsync runs is in no cache when one starts, and one
// without replicas raises no replica event either: the start of a term looks for such
// former sources and takes their status off, and changes nothing else of theirs.
func TestStatusOfASourceUnlabelledWhileDownComesOff(t *testing.T) {
	running := startController(t)
	srcNS := newNamespace(t, "src", nil)
	noTargets := newSource(t, srcNS, "no-targets", map[string]string{v1alpha1.TargetNamespacesAnnotation: "nowhere-" + srcNS}, nil)
	invalid := newSource(t, srcNS, "invalid", map[string]string{v1alpha1.TargetSelectorAnnotation: "not a selector!"}, nil)
	waitForStatus(t, noTargets, v1alpha1.StatusSynced)
	waitForStatus(t, invalid, v1alpha1.StatusInvalid)

	running.Stop()
	for _, src := range []*corev1.ConfigMap{noTargets, invalid} {
		update(t, src, func(cm *corev1.ConfigMap) {
			delete(cm.Labels, v1alpha1.ReplicateLabel)
			cm.Annotations["theirs"] = "kept"
		})
	}

	startController(t)
	for _, src := range []*corev1.ConfigMap{noTargets, invalid} {
		eventually(t, timeout, "status annotations of "+src.Name+" removed", func() error {
			got := &corev1.ConfigMap{}
			if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(src), got); err != nil {
				return err
			}
			for _, k := range []string{v1alpha1.StatusAnnotation, v1alpha1.SyncedAnnotation, v1alpha1.MessageAnnotation, v1alpha1.LastSyncTimeAnnotation} {
				if _, ok := got.Annotations[k]; ok {
					return errorf("%s still there: %v", k, got.Annotations)
				}
			}
			targets := got.Annotations[v1alpha1.TargetNamespacesAnnotation] + got.Annotations[v1alpha1.TargetSelectorAnnotation]
			if got.Annotations["theirs"] != "kept" || targets == "" {
				return errorf("other annotations changed: %v", got.Annotations)
			}
			return nil
		})
	}
}
