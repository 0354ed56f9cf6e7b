package replicacache

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
)

// samePointer tells whether two maps are one instance.
func samePointer(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sampleSource() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "platform", Name: "settings",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true", "team": "platform"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "*", "note": "n"},
		},
		Data:       map[string]string{"k": "v", "long": strings.Repeat("v", 1000)},
		BinaryData: map[string][]byte{"b": {1}},
	}
}

var owner = desired.AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "platform", Name: "settings"})

// managedByCmsync gives a replica the managedFields entry the API server records for
// cmsync's create, plus one of another manager.
func managedByCmsync(cm *corev1.ConfigMap) {
	cm.ManagedFields = []metav1.ManagedFieldsEntry{
		{
			Manager:    v1alpha1.FieldManager,
			Operation:  metav1.ManagedFieldsOperationUpdate,
			Time:       ptrNow(),
			FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(
				`{"f:data":{".":{},"f:k":{},"f:long":{}},"f:metadata":{"f:labels":{".":{},"f:team":{}},"f:annotations":{"f:note":{}}}}`,
			),
		},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:theirs":{}}}}`)},
	}
}

func ptrNow() *metav1.Time { now := metav1.Now(); return &now }

func TestReplicasOfOneOwnerShareTheirMaps(t *testing.T) {
	kind := desired.ConfigMapKind{}
	transform := transform(kind, newMapSharer())
	src := sampleSource()
	template := desired.NewTemplate(kind, src, desired.Shape{}, owner)
	compacted := func(ns string, edit func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := template.In(ns)
		managedByCmsync(cm)
		if edit != nil {
			edit(cm)
		}
		out, err := transform(cm)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*corev1.ConfigMap)
	}

	a, b := compacted("team-a", nil), compacted("team-b", nil)
	if !samePointer(a.Data, b.Data) || !samePointer(a.Labels, b.Labels) || !samePointer(a.Annotations, b.Annotations) ||
		&a.ManagedFields[0] != &b.ManagedFields[0] {
		t.Errorf("equal replicas of one owner do not share their maps")
	}
	if a.Namespace != "team-a" || b.Namespace != "team-b" || a.Data["k"] != "v" || a.Data["long"] == src.Data["long"] {
		t.Errorf("sharing changed what the replicas hold: %+v / %+v", a.ObjectMeta, a.Data)
	}
	if d := template.Diff(b); !d.InSync() {
		t.Errorf("a shared replica differs from the desired one: %+v", d)
	}

	// A replica that differs keeps its own content, and nothing of it leaks into the
	// others; the diff still sees the difference.
	tampered := compacted("team-c", func(cm *corev1.ConfigMap) { cm.Data["k"] = "tampered" })
	if samePointer(tampered.Data, a.Data) || a.Data["k"] != "v" || tampered.Data["k"] != "tampered" {
		t.Errorf("a different replica shares or spoils the others' data")
	}
	if d := template.Diff(tampered); !d.Content {
		t.Errorf("the tampered replica was not noticed")
	}

	// Another owner's replica never shares with this owner's.
	other := desired.NewTemplate(kind, src, desired.Shape{}, desired.AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "other", Name: "settings"})).
		In("team-a")
	out, _ := transform(other)
	if samePointer(out.(*corev1.ConfigMap).Data, a.Data) {
		t.Errorf("replicas of two owners share a map")
	}

	// Transforming a compacted object again changes nothing it holds.
	before := a.DeepCopy()
	again, _ := transform(a.DeepCopy())
	if !reflect.DeepEqual(before, again) {
		t.Errorf("the transform is not idempotent:\n%+v\n%+v", before, again)
	}
}

func TestCompactKeepsOnlyCmsyncsMetadataKeys(t *testing.T) {
	kind := desired.ConfigMapKind{}
	template := desired.NewTemplate(kind, sampleSource(), desired.Shape{}, owner)
	replica := template.In("team-a")
	managedByCmsync(replica)
	replica.Labels["theirs"] = "1"
	fullLabels, fullAnnotations := desired.MetadataKeysManagedBy(replica, v1alpha1.FieldManager)

	compact(kind, replica)
	if len(replica.ManagedFields) != 1 || replica.ManagedFields[0].Time != nil || strings.Contains(replica.ManagedFields[0].FieldsV1.GetRawString(), "f:data") {
		t.Fatalf("managedFields not reduced to one timeless entry of metadata keys: %+v", replica.ManagedFields)
	}
	labels, annotations := desired.MetadataKeysManagedBy(replica, v1alpha1.FieldManager)
	if !labels.Equal(fullLabels) || !annotations.Equal(fullAnnotations) {
		t.Errorf("keys cmsync owns changed: %v %v, want %v %v", labels, annotations, fullLabels, fullAnnotations)
	}
	if d := template.Diff(replica); !d.InSync() {
		t.Errorf("a compacted replica differs from the desired one: %+v", d)
	}
}

func TestOnlyEqualMapsAreShared(t *testing.T) {
	var text sharedMap[string]
	first := map[string]string{"a": "1", "b": "2"}
	text.adopt(first)
	if got := text.adopt(map[string]string{"b": "2", "a": "1"}); !samePointer(got, first) {
		t.Errorf("an equal map was not given the shared instance")
	}
	other := map[string]string{"a": "1", "b": "3"}
	if got := text.adopt(other); !samePointer(got, other) || !samePointer(text.m, other) {
		t.Errorf("a different map was given the shared instance, or did not become it")
	}
	var binary sharedMap[[]byte]
	bin := map[string][]byte{"k": {1, 2}}
	binary.adopt(bin)
	if got := binary.adopt(map[string][]byte{"k": {1, 2}}); !samePointer(got, bin) {
		t.Errorf("equal binary values were not shared")
	}
	if got := binary.adopt(map[string][]byte{"k": {1, 3}}); samePointer(got, bin) {
		t.Errorf("different binary values were shared")
	}
}
