package replicator

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// samePointer tells whether two maps are one instance.
func samePointer(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestReplicasOfOneOwnerShareTheirMaps(t *testing.T) {
	transform := compactReplica(newMapSharer())
	src := sampleSource()
	src.Data["long"] = strings.Repeat("v", 10*digestThreshold)
	owner := AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "settings"})
	compact := func(ns string, edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := DesiredReplica(src, ns, nil, owner)
		if edit != nil {
			edit(cm)
		}
		out, err := transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.ConfigMap)
	}

	a, b := compact("team-a", nil), compact("team-b", nil)
	if !samePointer(a.Data, b.Data) || !samePointer(a.Labels, b.Labels) || !samePointer(a.Annotations, b.Annotations) {
		t.Errorf("equal replicas of one owner do not share their maps")
	}
	if a.Namespace != "team-a" || b.Namespace != "team-b" || a.Data["k"] != "v" || a.Data["long"] == src.Data["long"] {
		t.Errorf("sharing changed what the replicas hold: %+v / %+v", a.ObjectMeta, a.Data)
	}
	desiredB := DesiredReplica(src, "team-b", nil, owner)
	if d := DiffReplica(desiredB, b); !d.InSync() {
		t.Errorf("a shared replica differs from the desired one: %+v", d)
	}

	// A replica that differs keeps its own content, and nothing of it leaks into the
	// others; the diff still sees the difference.
	tampered := compact("team-c", func(cm *corev1.ConfigMap) { cm.Data["k"] = "tampered" })
	if samePointer(tampered.Data, a.Data) || a.Data["k"] != "v" || tampered.Data["k"] != "tampered" {
		t.Errorf("a different replica shares or spoils the others' data")
	}
	if d := DiffReplica(DesiredReplica(src, "team-c", nil, owner), tampered); !d.Content {
		t.Errorf("the tampered replica was not noticed")
	}

	// Another owner's replica never shares with this owner's.
	other := DesiredReplica(src, "team-a", nil, AnnotationOwner(types.NamespacedName{Namespace: "other", Name: "settings"}))
	out, _ := transform(other)
	if samePointer(out.(*corev1.ConfigMap).Data, a.Data) {
		t.Errorf("replicas of two owners share a map")
	}

	// Transforming a compacted object again changes nothing.
	before := a.DeepCopy()
	again, _ := transform(a)
	if again.(*corev1.ConfigMap) != a || !reflect.DeepEqual(before, a) {
		t.Errorf("the transform is not idempotent")
	}
}

func TestEncodeMapIsUnambiguous(t *testing.T) {
	pairs := [][2]map[string]string{
		{{"a": "bc"}, {"ab": "c"}},
		{{"a": "", "b": ""}, {"a": "1:b0:"}},
		{{"k": "\x00"}, {"k": "", "\x01": ""}},
	}
	for _, p := range pairs {
		if encodeMap(p[0]) == encodeMap(p[1]) {
			t.Errorf("%q and %q encode alike", p[0], p[1])
		}
	}
	if encodeMap(map[string]string{"a": "1", "b": "2"}) != encodeMap(map[string]string{"b": "2", "a": "1"}) {
		t.Errorf("equal maps encode differently")
	}
}
