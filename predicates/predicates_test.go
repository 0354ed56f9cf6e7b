package predicates

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

func configMap() *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "app", Namespace: "ns", UID: "u1", ResourceVersion: "1",
			Labels:      map[string]string{v1alpha1.ReplicateLabel: "true"},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: "*"},
		},
		Data: map[string]string{"k": "v"},
	}
}

type change struct {
	name   string
	mutate func(cm *corev1.ConfigMap)
	want   bool
}

func commonChanges() []change {
	return []change{
		{"resync, nothing changed", func(*corev1.ConfigMap) {}, false},
		{"resourceVersion and managedFields only", func(cm *corev1.ConfigMap) {
			cm.ResourceVersion = "2"
			cm.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
		}, false},
		{"data", func(cm *corev1.ConfigMap) { cm.Data["k"] = "w" }, true},
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }, true},
		{"immutable", func(cm *corev1.ConfigMap) { t := true; cm.Immutable = &t }, true},
		{"label", func(cm *corev1.ConfigMap) { cm.Labels["x"] = "y" }, true},
		{"annotation", func(cm *corev1.ConfigMap) { cm.Annotations["x"] = "y" }, true},
		{"recreated", func(cm *corev1.ConfigMap) { cm.UID = "u2" }, true},
		{"deletion started", func(cm *corev1.ConfigMap) { now := metav1.Now(); cm.DeletionTimestamp = &now }, true},
	}
}

func TestSourceChanged(t *testing.T) {
	// The manager's cache holds a source's metadata without managedFields, so a new
	// version is all a change of content shows, and passes.
	changes := slices.DeleteFunc(commonChanges(), func(c change) bool { return c.name == "resourceVersion and managedFields only" })
	changes = append(changes,
		change{"resourceVersion only", func(cm *corev1.ConfigMap) { cm.ResourceVersion = "2" }, true},
		// A status write passes: cmsync's own costs a pass that writes nothing, anyone
		// else's is put right.
		change{"status write", func(cm *corev1.ConfigMap) {
			cm.Annotations[v1alpha1.StatusAnnotation] = "Synced"
			cm.Annotations[v1alpha1.SyncedAnnotation] = "1/1"
			cm.Annotations[v1alpha1.MessageAnnotation] = "m"
			cm.Annotations[v1alpha1.LastSyncTimeAnnotation] = "t"
		}, true},
		change{"resync", func(*corev1.ConfigMap) {}, false},
		change{"target annotation", func(cm *corev1.ConfigMap) { cm.Annotations[v1alpha1.TargetNamespacesAnnotation] = "a" }, true},
	)
	p := SourceChanged()
	for _, c := range changes {
		t.Run(c.name, func(t *testing.T) {
			old := configMap()
			updated := old.DeepCopy()
			c.mutate(updated)
			if c.want {
				// The API server gives every change a new version, which is all the
				// manager's cache may show of a change of content.
				updated.ResourceVersion = old.ResourceVersion + "1"
			}
			if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != c.want {
				t.Errorf("Update = %v, want %v", got, c.want)
			}
		})
	}
	if !p.Create(event.CreateEvent{Object: configMap()}) || !p.Delete(event.DeleteEvent{Object: configMap()}) {
		t.Errorf("creates and deletes of sources must pass")
	}
}

func TestReplicaChanged(t *testing.T) {
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(fields)}
	}
	replica := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: "app", Namespace: "ns", UID: "u1", ResourceVersion: "1",
			Labels:        map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
			Annotations:   map[string]string{v1alpha1.SourceAnnotation: "src/app"},
			ManagedFields: []metav1.ManagedFieldsEntry{entry(v1alpha1.FieldManager, `{"f:data":{"f:k":{}}}`)},
		}}
	}
	tests := []struct {
		name   string
		mutate func(*metav1.PartialObjectMetadata)
		want   bool
	}{
		{"resync, nothing changed", func(*metav1.PartialObjectMetadata) {}, false},
		{"resourceVersion only", func(r *metav1.PartialObjectMetadata) { r.ResourceVersion = "2" }, false},
		// The cache reduces managedFields to ownership: a content edit by someone else
		// shows there.
		{"ownership of content", func(r *metav1.PartialObjectMetadata) {
			r.ManagedFields = append(r.ManagedFields, entry("(others)", `{"f:data":{}}`))
		}, true},
		{"a key left cmsync's ownership", func(r *metav1.PartialObjectMetadata) {
			r.ManagedFields = []metav1.ManagedFieldsEntry{entry(v1alpha1.FieldManager, `{}`)}
		}, true},
		{"label", func(r *metav1.PartialObjectMetadata) { r.Labels["x"] = "y" }, true},
		{"annotation", func(r *metav1.PartialObjectMetadata) { r.Annotations["x"] = "y" }, true},
		{"status annotation on a replica", func(r *metav1.PartialObjectMetadata) { r.Annotations[v1alpha1.StatusAnnotation] = "x" }, true},
		{"recreated", func(r *metav1.PartialObjectMetadata) { r.UID = "u2" }, true},
		{"deletion started", func(r *metav1.PartialObjectMetadata) { now := metav1.Now(); r.DeletionTimestamp = &now }, true},
	}
	p := ReplicaChanged()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := replica()
			updated := old.DeepCopy()
			tt.mutate(updated)
			if got := p.Update(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: old, ObjectNew: updated}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
	if !p.Create(event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: replica()}) ||
		!p.Delete(event.TypedDeleteEvent[*metav1.PartialObjectMetadata]{Object: replica()}) {
		t.Errorf("creates (orphans found at start-up) and deletes (replicas to restore) must pass")
	}

	// A replica the store keeps compacted shows an edit by its resourceVersion alone.
	compacted := func(version string) *metav1.PartialObjectMetadata {
		r := replica()
		r.ResourceVersion = version
		r.Annotations["note"] = strings.Repeat("x", 128<<10)
		if !desired.CompactOversized(desired.ConfigMapKind{}, r) {
			t.Fatal("not compacted")
		}
		return r
	}
	if !p.Update(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: compacted("1"), ObjectNew: compacted("2")}) {
		t.Error("a new version of a compacted replica is dropped")
	}
	if p.Update(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: compacted("2"), ObjectNew: compacted("2")}) {
		t.Error("a resync of a compacted replica passes")
	}
}

func TestNamespaceChanged(t *testing.T) {
	ns := func() *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "u", Labels: map[string]string{"env": "prod"}, Annotations: map[string]string{"a": "1"}},
		}
	}
	tests := []struct {
		name   string
		mutate func(*metav1.PartialObjectMetadata)
		want   bool
	}{
		{"annotation only", func(n *metav1.PartialObjectMetadata) { n.Annotations["a"] = "2" }, false},
		{"finalizers only", func(n *metav1.PartialObjectMetadata) { n.Finalizers = []string{"kubernetes"} }, false},
		{"label added", func(n *metav1.PartialObjectMetadata) { n.Labels["tier"] = "web" }, true},
		{"label removed", func(n *metav1.PartialObjectMetadata) { delete(n.Labels, "env") }, true},
		{"ignore label", func(n *metav1.PartialObjectMetadata) { n.Labels[v1alpha1.IgnoreNamespaceLabel] = "true" }, true},
		{"terminating", func(n *metav1.PartialObjectMetadata) { now := metav1.Now(); n.DeletionTimestamp = &now }, true},
	}
	p := NamespaceChanged()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := ns()
			updated := old.DeepCopy()
			tt.mutate(updated)
			if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated}); got != tt.want {
				t.Errorf("Update = %v, want %v", got, tt.want)
			}
		})
	}
	// A namespace created while cmsync runs reaches its sources; the namespaces of a
	// watch's initial list do not (each source's own initial list queues it).
	if !p.Create(event.CreateEvent{Object: ns()}) {
		t.Error("Create of a new namespace = false, want true")
	}
	if p.Create(event.CreateEvent{Object: ns(), IsInInitialList: true}) {
		t.Error("Create of a namespace in the initial list = true, want false")
	}
}

func TestSyncChanged(t *testing.T) {
	base := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u", Generation: 1},
		Status: v1alpha1.SyncStatus{TargetNamespaces: 2, SyncedNamespaces: 2}}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.ConfigMapSync)
		want   bool
	}{
		{"finalizer write", func(o *v1alpha1.ConfigMapSync) {
			o.ResourceVersion = "2"
			o.Finalizers = []string{"cmsync.io/cleanup"}
		}, false},
		{"resync", func(*v1alpha1.ConfigMapSync) {}, false},
		{"status write, cmsync's or anyone's", func(o *v1alpha1.ConfigMapSync) { o.Status.SyncedNamespaces = 1 }, true},
		{"spec edit", func(o *v1alpha1.ConfigMapSync) { o.Generation = 2 }, true},
		{"deletion started", func(o *v1alpha1.ConfigMapSync) { now := metav1.Now(); o.DeletionTimestamp = &now }, true},
	}
	for _, tt := range tests {
		updated := base.DeepCopy()
		tt.mutate(updated)
		if got := SyncChanged().Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated}); got != tt.want {
			t.Errorf("%s: Update = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNotReserved(t *testing.T) {
	p := NotReserved(desired.Policy{ReservedNames: []string{"trust-bundle"}})
	for name, want := range map[string]bool{v1alpha1.RootCAConfigMapName: false, "trust-bundle": false, "app": true} {
		obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}}}
		if got := p.Create(event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: obj}) &&
			p.Update(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: obj, ObjectNew: obj}) &&
			p.Delete(event.TypedDeleteEvent[*metav1.PartialObjectMetadata]{Object: obj}); got != want {
			t.Errorf("%s: passes %v, want %v", name, got, want)
		}
	}
}
