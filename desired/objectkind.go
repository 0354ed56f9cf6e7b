package desired

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// ObjectKind describes the objects of one namespaced kind an administrator enabled
// for ObjectSync (--object-kinds), read as unstructured objects: a kind cmsync knows
// only at run time. Its content is every top-level field but apiVersion, kind,
// metadata and status (Content.Fields).
type ObjectKind struct {
	gvk schema.GroupVersionKind
}

// NewObjectKind is the kind gvk as ObjectSync copies it.
func NewObjectKind(gvk schema.GroupVersionKind) ObjectKind { return ObjectKind{gvk: gvk} }

// notContent are the top-level fields of an object that are not its content: the
// type, the metadata (copied as §2 says) and the status (the target's own).
var notContent = map[string]bool{"apiVersion": true, "kind": true, "metadata": true, "status": true}

func (k ObjectKind) Name() string { return k.gvk.Kind }

// GroupVersionKind is the kind's group, version and kind (GroupVersionKindOf).
func (k ObjectKind) GroupVersionKind() schema.GroupVersionKind { return k.gvk }

func (k ObjectKind) New() *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetGroupVersionKind(k.gvk)
	return obj
}

func (k ObjectKind) NewList() ObjectList {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	return list
}

func (ObjectKind) NewSync() v1alpha1.Sync         { return &v1alpha1.ObjectSync{} }
func (ObjectKind) NewSyncList() v1alpha1.SyncList { return &v1alpha1.ObjectSyncList{} }

// PatchFields: an object's content has no data-like field; its fields are patched
// one by one (Content.Fields).
func (ObjectKind) PatchFields() (string, string) { return "", "" }

// CheckSource: whether a kind may be copied at all is decided before its source is
// read (CheckObjectKind); any object of an enabled kind may.
func (ObjectKind) CheckSource(*unstructured.Unstructured) error { return nil }

// Fit: an ObjectSync filters no keys.
func (ObjectKind) Fit(c Content) (Content, string) { return c, "" }

// Content is obj's top-level fields but apiVersion, kind, metadata and status; the
// values are obj's own.
func (ObjectKind) Content(obj *unstructured.Unstructured) Content {
	fields := make(map[string]any, len(obj.Object))
	for k, v := range obj.Object {
		if !notContent[k] {
			fields[k] = v
		}
	}
	return Content{Fields: fields}
}

// SetContent replaces obj's content fields with c's, taking c's values.
func (ObjectKind) SetContent(obj *unstructured.Unstructured, c Content) {
	maps.DeleteFunc(obj.Object, func(k string, _ any) bool { return !notContent[k] })
	for k, v := range c.Fields {
		if !notContent[k] {
			obj.Object[k] = v
		}
	}
}

// WithMeta is an object of the kind with meta as its metadata and no content.
func (k ObjectKind) WithMeta(meta metav1.ObjectMeta) *unstructured.Unstructured {
	obj := k.New()
	// ObjectMeta holds only JSON-encodable fields: the conversion cannot fail.
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&meta)
	obj.Object["metadata"] = m
	return obj
}

// immutableFields are, by kind, the top-level content fields whose value the API
// server refuses to change in place: a replica whose value there differs from the
// source's is deleted and created anew, as an immutable ConfigMap is.
var immutableFields = map[schema.GroupKind][]string{
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}: {"roleRef"},
}

// immutableFieldsOf are kind's immutableFields.
func immutableFieldsOf[T Object](kind Kind[T]) []string {
	return immutableFields[GroupVersionKindOf(kind).GroupKind()]
}

// changesImmutableField reports whether have, a replica's content, differs from want
// in a field of kind the API server will not change in place.
func changesImmutableField[T Object](kind Kind[T], have, want Content) bool {
	for _, field := range immutableFieldsOf(kind) {
		if w, ok := want.Fields[field]; ok && !valueHolds(have.Fields[field], w) {
			return true
		}
	}
	return false
}

// contentIsFields marks ObjectKind as a kind whose content is Content.Fields.
func (ObjectKind) contentIsFields() {}

// fieldsKind is a kind whose content is its top-level fields (ObjectKind).
type fieldsKind interface{ contentIsFields() }

// contentIsFields reports whether kind's content is its top-level fields.
func contentIsFields[T Object](kind Kind[T]) bool {
	_, ok := kind.(fieldsKind)
	return ok
}

// groupVersionKinded is a kind that names its group and version.
type groupVersionKinded interface {
	GroupVersionKind() schema.GroupVersionKind
}

// GroupVersionKindOf is kind's group, version and kind: ConfigMaps and Secrets are in
// the core group; an ObjectKind says its own.
func GroupVersionKindOf[T Object](kind Kind[T]) schema.GroupVersionKind {
	if k, ok := kind.(groupVersionKinded); ok {
		return k.GroupVersionKind()
	}
	return schema.GroupVersionKind{Version: "v1", Kind: kind.Name()}
}
