package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// The replica store keeps, of an object labelled as a replica whose metadata is more
// than cmsync writes, only cmsync's markers (desired.CompactOversized): here a replica
// that someone else gave 80 KiB of labels, and the replicas of a source of 8,000 keys,
// whose managedFields name every key. Both stay replicas: idle, cmsync writes nothing to
// them (no pass mistakes the compacted metadata for drift), and an edit of their content
// is still repaired, now found by reading the replica whole.
func TestReplicasWithOversizedMetadataAreKeptAndRepaired(t *testing.T) {
	c := startController(t)
	srcNS, target := newNamespace(t, "src", nil), newNamespace(t, "dst", nil)
	manyKeys := map[string]string{}
	for i := range 8000 {
		manyKeys[fmt.Sprintf("key-%05d", i)] = "v"
	}
	labelled := newSource(t, srcNS, "labelled", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, map[string]string{"k": "v"})
	keyed := newSource(t, srcNS, "keyed", map[string]string{v1alpha1.TargetNamespacesAnnotation: target}, manyKeys)
	waitForSynced(t, labelled, "1/1")
	waitForSynced(t, keyed, "1/1")

	replica := &corev1.ConfigMap{}
	replica.Namespace, replica.Name = target, "labelled"
	update(t, replica, func(cm *corev1.ConfigMap) {
		for i := range desired.MaxReplicaMetadataBytes/64 + 256 {
			key := fmt.Sprintf("added-%06d", i)
			cm.Labels[key] = strings.Repeat("x", 64-len(key))
		}
	})

	since := c.Writes()
	consistently(t, 5*time.Second, "idle with oversized replicas", func() error {
		if w := c.Writes() - since; w != 0 {
			return errorf("%d writes; last writes:\n%s", w, c.LastWrites())
		}
		return nil
	})

	// A pass over replicas their metadata cannot judge reads each whole once; the passes
	// after it, while neither replica nor source changed, read none of them again.
	reads := func() int {
		n := 0
		for _, r := range c.RequestsAbout("configmaps") {
			if strings.HasPrefix(r, "GET ") && strings.HasPrefix(r, "GET /api/v1/namespaces/"+target+"/configmaps/") {
				n++
			}
		}
		return n
	}
	touch := func(value string) {
		ns := &corev1.Namespace{}
		must(t, k8s.Get(context.Background(), client.ObjectKey{Name: target}, ns))
		ns.Labels["touched"] = value
		must(t, k8s.Update(context.Background(), ns))
	}
	touch("1")
	time.Sleep(3 * time.Second)
	before := reads()
	touch("2")
	touch("3")
	time.Sleep(3 * time.Second)
	if n := reads() - before; n != 0 {
		t.Errorf("passes over unchanged replicas read them whole %d times", n)
	}

	for name, want := range map[string]map[string]string{"labelled": {"k": "v"}, "keyed": manyKeys} {
		r := &corev1.ConfigMap{}
		r.Namespace, r.Name = target, name
		update(t, r, func(cm *corev1.ConfigMap) { cm.Data["key-00001"], cm.Data["k"] = "edited", "edited" })
		eventually(t, timeout, name+": edited content restored", func() error {
			got, err := getConfigMap(target, name)
			if err != nil {
				return err
			}
			return expectEqualContent(got, want, nil, nil, nil)
		})
	}
	got, err := getConfigMap(target, "labelled")
	must(t, err)
	if len(got.Labels) < desired.MaxReplicaMetadataBytes/64 {
		t.Errorf("the labels others added to the replica were removed: %d labels left", len(got.Labels))
	}
	waitForSynced(t, labelled, "1/1")
	waitForSynced(t, keyed, "1/1")
}
