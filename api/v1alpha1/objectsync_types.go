package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ObjectSource names the object an ObjectSync copies: any namespaced kind the
// controller was started with (--object-kinds).
type ObjectSource struct {
	// APIVersion is the group and version of the source's kind: "v1" for a core kind,
	// "networking.k8s.io/v1" otherwise.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// Kind is the source's kind, as the API names it ("NetworkPolicy").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`

	// Namespace is the namespace of the source.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`

	// Name is the name of the source; replicas get the same name unless targetName
	// says otherwise. The source needs no cmsync label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ObjectSyncSpec names a source object and the namespaces to copy it into. Its target
// fields are ConfigMapSync's; the three combine as a union, and "!" entries of
// destinationNamespaces exclude from all of it.
// +kubebuilder:validation:XValidation:rule="has(self.destinationNamespace) || (has(self.destinationNamespaces) && self.destinationNamespaces.exists(n, !n.startsWith('!'))) || has(self.namespaceSelector)",message="set destinationNamespace, destinationNamespaces (with at least one entry that is not an exclusion) or namespaceSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.destinationNamespace) || self.destinationNamespace != self.source.__namespace__",message="destinationNamespace must differ from source.namespace: an object is never copied onto itself"
type ObjectSyncSpec struct {
	// Source is the object copied.
	Source ObjectSource `json:"source"`

	// DestinationNamespace is one target namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	DestinationNamespace string `json:"destinationNamespace,omitempty"`

	// DestinationNamespaces are target namespace names or globs ("*", "?", "[a-z]"); an
	// entry starting with "!" excludes.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=254
	// +kubebuilder:validation:items:Pattern=`^!?[-a-z0-9*?\[\]^]+$`
	DestinationNamespaces []string `json:"destinationNamespaces,omitempty"`

	// NamespaceSelector selects target namespaces by label.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// TargetName is the name of the replicas; default: the source's name. The schema
	// bounds its length only: cmsync judges the name itself and reports a bad one as
	// Ready=False, reason Invalid. (An empty one is refused here: cmsync could not tell
	// it from an absent one.)
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TargetName string `json:"targetName,omitempty"`
}

// ObjectSync copies one object of a namespaced kind the administrator enabled
// (--object-kinds) into the namespaces it names, and keeps the copies equal to it: a
// NetworkPolicy, LimitRange, Role or custom resource in every team namespace. It is
// cluster-scoped: creating one is an administrator's act.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=osync
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.source.kind`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.synced`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ObjectSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ObjectSyncSpec `json:"spec"`
	Status SyncStatus     `json:"status,omitempty"`
}

// ObjectSyncList is a list of ObjectSyncs.
// +kubebuilder:object:root=true
type ObjectSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ObjectSync `json:"items"`
}

// SyncSpec is the spec as the explicit kinds share it (Sync). An ObjectSync copies no
// keys filter: a kind's content has no keys to choose from.
func (s ObjectSyncSpec) SyncSpec() SyncSpec {
	return SyncSpec{
		Kind:             ObjectSyncKind,
		SourceKind:       s.Source.Kind,
		SourceAPIVersion: s.Source.APIVersion,
		SourceNamespace:  s.Source.Namespace,
		SourceName:       s.Source.Name,
		ReplicaSpec: ReplicaSpec{
			DestinationNamespace:  s.DestinationNamespace,
			DestinationNamespaces: s.DestinationNamespaces,
			NamespaceSelector:     s.NamespaceSelector,
			TargetName:            s.TargetName,
		},
	}
}

// SyncSpec is its spec as the explicit kinds share it.
func (s *ObjectSync) SyncSpec() SyncSpec { return s.Spec.SyncSpec() }

// SyncStatus is its status.
func (s *ObjectSync) SyncStatus() *SyncStatus { return &s.Status }

// Syncs are the list's items.
func (l *ObjectSyncList) Syncs() []Sync {
	syncs := make([]Sync, len(l.Items))
	for i := range l.Items {
		syncs[i] = &l.Items[i]
	}
	return syncs
}
