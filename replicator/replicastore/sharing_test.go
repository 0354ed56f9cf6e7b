package replicastore

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
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
			FieldsV1: metav1.NewFieldsV1(`{"f:binaryData":{".":{},"f:b":{}},"f:data":{".":{},"f:k":{},"f:long":{}},` +
				`"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:cmsync.io/content-hash":{},"f:cmsync.io/source-id":{},"f:team":{}},` +
				`"f:annotations":{".":{},"f:cmsync.io/source":{},"f:note":{}}}}`),
		},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:theirs":{}}}}`)},
	}
}

func ptrNow() *metav1.Time { now := metav1.Now(); return &now }

// metadataOf is a replica as the store's watch delivers it: metadata only.
func metadataOf(cm *corev1.ConfigMap) *metav1.PartialObjectMetadata {
	return meta.AsPartialObjectMetadata(cm.DeepCopy())
}

func TestReplicasOfOneOwnerShareTheirMaps(t *testing.T) {
	kind := desired.ConfigMapKind{}
	transform := transform(kind, newMapSharer())
	src := sampleSource()
	template := desired.NewTemplate(kind, src, desired.Shape{}, owner)
	compacted := func(ns string, edit func(*corev1.ConfigMap)) *metav1.PartialObjectMetadata {
		cm := template.In(ns)
		managedByCmsync(cm)
		if edit != nil {
			edit(cm)
		}
		out, err := transform(metadataOf(cm))
		if err != nil {
			t.Fatal(err)
		}
		return out.(*metav1.PartialObjectMetadata)
	}

	a, b := compacted("team-a", nil), compacted("team-b", nil)
	if !samePointer(a.Labels, b.Labels) || !samePointer(a.Annotations, b.Annotations) || &a.ManagedFields[0] != &b.ManagedFields[0] {
		t.Errorf("equal replicas of one owner do not share their maps")
	}
	if a.Namespace != "team-a" || b.Namespace != "team-b" || a.Labels["team"] != "platform" {
		t.Errorf("sharing changed what the replicas hold: %+v", a.ObjectMeta)
	}
	if d, known := template.DiffMetadata(b); !known || !d.InSync() {
		t.Errorf("a shared replica differs from the desired one: known %v, %+v", known, d)
	}

	// A replica whose content someone else wrote says so, and nothing of it leaks into
	// the others.
	tampered := compacted("team-c", func(cm *corev1.ConfigMap) {
		cm.ManagedFields = append(cm.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kubectl-edit", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:data":{"f:k":{}}}`)})
	})
	if &tampered.ManagedFields[0] == &a.ManagedFields[0] || len(a.ManagedFields) != 1 {
		t.Errorf("a different replica shares or spoils the others' managedFields")
	}
	if d, known := template.DiffMetadata(tampered); known {
		t.Errorf("a replica someone else wrote content into was taken as known: %+v", d)
	}

	// Another owner's replica never shares with this owner's.
	otherSource := sampleSource()
	otherSource.Namespace = "other"
	otherOwner := desired.AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "other", Name: "settings"})
	other := desired.NewTemplate(kind, otherSource, desired.Shape{}, otherOwner).In("team-a")
	out, _ := transform(metadataOf(other))
	if samePointer(out.(*metav1.PartialObjectMetadata).Labels, a.Labels) {
		t.Errorf("replicas of two owners share a map")
	}

	// Transforming a compacted object again changes nothing it holds.
	before := a.DeepCopy()
	again, _ := transform(a.DeepCopy())
	if !reflect.DeepEqual(before, again) {
		t.Errorf("the transform is not idempotent:\n%+v\n%+v", before, again)
	}
}

func TestCompactKeepsOnlyOwnership(t *testing.T) {
	kind := desired.ConfigMapKind{}
	template := desired.NewTemplate(kind, sampleSource(), desired.Shape{}, owner)
	replica := template.In("team-a")
	managedByCmsync(replica)
	replica.Labels["theirs"] = "1"
	full := desired.OwnershipOf(kind, replica)

	compact := metadataOf(replica)
	compact.ManagedFields = desired.ReducedManagedFields(kind, compact)
	if len(compact.ManagedFields) != 1 || compact.ManagedFields[0].Time != nil {
		t.Fatalf("managedFields not reduced to one timeless entry of cmsync: %+v", compact.ManagedFields)
	}
	if !desired.IsReduced(compact.ManagedFields) || desired.IsReduced(replica.ManagedFields) || desired.IsReduced(nil) {
		t.Errorf("IsReduced does not tell reduced managedFields from the API server's (or from none)")
	}
	if got := desired.OwnershipOf(kind, compact); !reflect.DeepEqual(got, full) {
		t.Errorf("ownership changed: %+v, want %+v", got, full)
	}
	if d, known := template.DiffMetadata(compact); !known || !d.InSync() {
		t.Errorf("a compacted replica differs from the desired one: known %v, %+v", known, d)
	}
}

func TestOnlyEqualMapsAreShared(t *testing.T) {
	var labels sharedMap
	first := map[string]string{"a": "1", "b": "2"}
	labels.adopt(first)
	if got := labels.adopt(map[string]string{"b": "2", "a": "1"}); !samePointer(got, first) {
		t.Errorf("an equal map was not given the shared instance")
	}
	other := map[string]string{"a": "1", "b": "3"}
	if got := labels.adopt(other); !samePointer(got, other) || !samePointer(labels.m, other) {
		t.Errorf("a different map was given the shared instance, or did not become it")
	}
}
