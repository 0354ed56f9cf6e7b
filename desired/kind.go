// Package desired decides what cmsync wants: it parses what users wrote, resolves the
// target namespaces, builds the replica a source wants and compares it with the one
// that exists, and sums a pass up as a status. It is pure: no client, cache, clock or
// logger, so every decision is table-tested on its own, and the code that acts
// (replicator) only writes what was decided here.
package desired

import (
	"bytes"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Object is an object of a kind cmsync replicates.
type Object interface {
	metav1.Object
	runtime.Object
}

// ObjectList is a list of objects of a kind.
type ObjectList interface {
	metav1.ListInterface
	runtime.Object
}

// Content is what a replica copies from its source besides labels and annotations, in
// one form for every kind, so that the replica's content is built, compared, hashed
// and patched by one piece of code. The maps are the object's own.
type Content struct {
	// Type is a Secret's type; empty for a ConfigMap.
	Type string
	// Immutable is the object's immutable flag.
	Immutable *bool
	// Text is a ConfigMap's data.
	Text map[string]string
	// Binary is a ConfigMap's binaryData.
	Binary map[string][]byte
	// Fields are the top-level fields of an object of a kind cmsync knows only at run
	// time (ObjectKind): every one but apiVersion, kind, metadata and status. Nil for
	// ConfigMaps and Secrets.
	Fields map[string]any
}

// Kind is what the code shared by every kind must know about one of them: how to read
// and set its content, and how its content fields are named in a patch and in
// managedFields. Metadata (labels, annotations, markers, ownership) is the same for
// every kind and handled once.
type Kind[T Object] interface {
	// Name is the kind as the API names it ("ConfigMap").
	Name() string
	// New returns an empty object of the kind.
	New() T
	// NewList returns an empty list of the kind.
	NewList() ObjectList
	// NewSync and NewSyncList return an empty object and list of the explicit kind
	// that names sources of this kind (ConfigMapSync, SecretSync).
	NewSync() v1alpha1.Sync
	NewSyncList() v1alpha1.SyncList
	// Content returns the content of obj; its maps are obj's own.
	Content(obj T) Content
	// SetContent sets obj's content to c; the maps are taken, not copied.
	SetContent(obj T, c Content)
	// WithMeta returns an object of the kind with this metadata and no content.
	WithMeta(meta metav1.ObjectMeta) T
	// PatchFields names the API fields of Content.Text and Content.Binary; empty when
	// the kind has no such field.
	PatchFields() (text, binary string)
	// CheckSource says why source must not be copied at all, or nil.
	CheckSource(source T) error
	// Fit makes content whose keys were filtered (Shape.Keys) acceptable to the API as
	// an object of the kind, and says what it changed besides the keys, or "".
	Fit(c Content) (Content, string)
}

// ConfigMapKind describes ConfigMaps: data, binaryData and immutable.
type ConfigMapKind struct{}

func (ConfigMapKind) Name() string                  { return "ConfigMap" }
func (ConfigMapKind) New() *corev1.ConfigMap        { return &corev1.ConfigMap{} }
func (ConfigMapKind) NewList() ObjectList           { return &corev1.ConfigMapList{} }
func (ConfigMapKind) PatchFields() (string, string) { return "data", "binaryData" }

func (ConfigMapKind) NewSync() v1alpha1.Sync         { return &v1alpha1.ConfigMapSync{} }
func (ConfigMapKind) NewSyncList() v1alpha1.SyncList { return &v1alpha1.ConfigMapSyncList{} }

func (ConfigMapKind) CheckSource(*corev1.ConfigMap) error { return nil }

// Fit: a ConfigMap accepts any set of keys.
func (ConfigMapKind) Fit(c Content) (Content, string) { return c, "" }

func (ConfigMapKind) Content(cm *corev1.ConfigMap) Content {
	return Content{Immutable: cm.Immutable, Text: cm.Data, Binary: cm.BinaryData}
}

func (ConfigMapKind) SetContent(cm *corev1.ConfigMap, c Content) {
	cm.Immutable, cm.Data, cm.BinaryData = c.Immutable, c.Text, c.Binary
}

func (ConfigMapKind) WithMeta(meta metav1.ObjectMeta) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: meta}
}

// SecretKind describes Secrets: type, data and immutable. A Secret's stringData is
// write-only: the API server merges it into data, so a source read back has none.
type SecretKind struct{}

func (SecretKind) Name() string                  { return "Secret" }
func (SecretKind) New() *corev1.Secret           { return &corev1.Secret{} }
func (SecretKind) NewList() ObjectList           { return &corev1.SecretList{} }
func (SecretKind) PatchFields() (string, string) { return "", "data" }

func (SecretKind) NewSync() v1alpha1.Sync         { return &v1alpha1.SecretSync{} }
func (SecretKind) NewSyncList() v1alpha1.SyncList { return &v1alpha1.SecretSyncList{} }

// CheckSource refuses service-account tokens: a token authenticates as its
// ServiceAccount, and copying it would hand that identity to every target namespace.
func (SecretKind) CheckSource(s *corev1.Secret) error {
	if s.Type == corev1.SecretTypeServiceAccountToken {
		return fmt.Errorf("a Secret of type %s is never copied: a token must not leave its namespace", corev1.SecretTypeServiceAccountToken)
	}
	return nil
}

// Fit keeps the source's type when the filtered keys still satisfy it, and makes the
// replica Opaque when they do not: a team given only the ca.crt of a kubernetes.io/tls
// Secret gets an Opaque Secret holding ca.crt, which the API server accepts, rather than
// a replica it refuses.
func (SecretKind) Fit(c Content) (Content, string) {
	missing := missingTypeKeys(corev1.SecretType(c.Type), c.Binary)
	if missing == "" {
		return c, ""
	}
	note := fmt.Sprintf("the replicas are of type %s: type %s needs %s, which the keys filter leaves out", corev1.SecretTypeOpaque, c.Type, missing)
	c.Type = string(corev1.SecretTypeOpaque)
	return c, note
}

// missingTypeKeys says which keys a Secret of type t needs and data lacks, or "". These
// are the API server's own rules for the built-in types (ValidateSecret in
// k8s.io/kubernetes, which this module does not import); other types need no key.
func missingTypeKeys(t corev1.SecretType, data map[string][]byte) string {
	has := func(k string) bool { _, ok := data[k]; return ok }
	switch t {
	case corev1.SecretTypeTLS:
		if !has(corev1.TLSCertKey) || !has(corev1.TLSPrivateKeyKey) {
			return corev1.TLSCertKey + " and " + corev1.TLSPrivateKeyKey
		}
	case corev1.SecretTypeDockercfg:
		if !has(corev1.DockerConfigKey) {
			return corev1.DockerConfigKey
		}
	case corev1.SecretTypeDockerConfigJson:
		if !has(corev1.DockerConfigJsonKey) {
			return corev1.DockerConfigJsonKey
		}
	case corev1.SecretTypeSSHAuth:
		if len(data[corev1.SSHAuthPrivateKey]) == 0 {
			return corev1.SSHAuthPrivateKey
		}
	case corev1.SecretTypeBasicAuth:
		if !has(corev1.BasicAuthUsernameKey) && !has(corev1.BasicAuthPasswordKey) {
			return corev1.BasicAuthUsernameKey + " or " + corev1.BasicAuthPasswordKey
		}
	}
	return ""
}

func (SecretKind) Content(s *corev1.Secret) Content {
	return Content{Type: string(s.Type), Immutable: s.Immutable, Binary: s.Data}
}

func (SecretKind) SetContent(s *corev1.Secret, c Content) {
	s.Type, s.Immutable, s.Data = corev1.SecretType(c.Type), c.Immutable, c.Binary
}

func (SecretKind) WithMeta(meta metav1.ObjectMeta) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: meta}
}

// SameContent reports whether two contents are equal, as a replica's must be to its
// source's.
func SameContent(a, b Content) bool {
	return a.Type == b.Type && ptr.Deref(a.Immutable, false) == ptr.Deref(b.Immutable, false) &&
		maps.Equal(a.Text, b.Text) && maps.EqualFunc(a.Binary, b.Binary, bytes.Equal) &&
		(a.Fields == nil) == (b.Fields == nil) && fieldsHold(a.Fields, b.Fields) && fieldsHold(b.Fields, a.Fields)
}

// holdsContent reports whether have, a replica's content, holds want, its source's:
// the same type, immutable flag and keys with the same values, and every field want
// sets with want's value. Fields have holds beyond want's (the API server's defaults,
// another writer's) do not count.
func holdsContent(have, want Content) bool {
	return have.Type == want.Type && ptr.Deref(have.Immutable, false) == ptr.Deref(want.Immutable, false) &&
		maps.Equal(have.Text, want.Text) && maps.EqualFunc(have.Binary, want.Binary, bytes.Equal) &&
		fieldsHold(have.Fields, want.Fields)
}

// NewMetadata returns an empty object of kind as metadata only: the form in which the
// replica store holds replicas and cmsync reads them when it needs no content.
func NewMetadata[T Object](kind Kind[T]) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(GroupVersionKindOf(kind))
	return obj
}

// NewMetadataList is an empty list of kind's metadata, as the manager's cache holds
// sources.
func NewMetadataList[T Object](kind Kind[T]) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	gvk := GroupVersionKindOf(kind)
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list
}
