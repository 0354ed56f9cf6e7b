package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// Sync is an object of either explicit kind, ConfigMapSync or SecretSync: one
// controller serves both through it.
// +kubebuilder:object:generate=false
type Sync interface {
	metav1.Object
	runtime.Object
	// SyncSpec is its spec, in the form both kinds share.
	SyncSpec() SyncSpec
	// SyncStatus is its status, for cmsync to write.
	SyncStatus() *SyncStatus
}

// SyncList is a list of either explicit kind.
// +kubebuilder:object:generate=false
type SyncList interface {
	metav1.ListInterface
	runtime.Object
	Syncs() []Sync
}

// SyncSpec is the spec of a ConfigMapSync or a SecretSync as cmsync reads it: the two
// differ only in the name of the field that names the source.
// +kubebuilder:object:generate=false
type SyncSpec struct {
	// Kind is the explicit kind ("ConfigMapSync"); SourceKind the kind it copies
	// ("ConfigMap"), and SourceAPIVersion that kind's group and version (an
	// ObjectSync's; "" for the core kinds of ConfigMapSync and SecretSync).
	Kind, SourceKind string
	SourceAPIVersion string
	SourceNamespace  string
	SourceName       string
	ReplicaSpec
}

// Source names the source object.
func (s SyncSpec) Source() types.NamespacedName {
	return types.NamespacedName{Namespace: s.SourceNamespace, Name: s.SourceName}
}
