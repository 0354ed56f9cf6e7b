package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretSyncSpec names a source Secret and the namespaces to copy it into.
// +kubebuilder:validation:XValidation:rule="has(self.destinationNamespace) || (has(self.destinationNamespaces) && self.destinationNamespaces.exists(n, !n.startsWith('!'))) || has(self.namespaceSelector)",message="set destinationNamespace, destinationNamespaces (with at least one entry that is not an exclusion) or namespaceSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",message="destinationNamespace must differ from sourceNamespace: a Secret is never copied onto itself"
type SecretSyncSpec struct {
	// SourceNamespace is the namespace of the source Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	SourceNamespace string `json:"sourceNamespace"`

	// SecretName is the name of the source Secret; replicas get the same name unless
	// targetName says otherwise. The Secret needs no cmsync label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SecretName string `json:"secretName"`

	ReplicaSpec `json:",inline"`
}

// SecretSync copies one Secret into the namespaces it names, and keeps the copies equal
// to it: the explicit form for Secrets, whose source needs no label (an operator may
// write and rewrite it). It is cluster-scoped: creating one is an administrator's act.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ssync
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.synced`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SecretSyncSpec `json:"spec"`
	Status SyncStatus     `json:"status,omitempty"`
}

// SecretSyncList is a list of SecretSyncs.
// +kubebuilder:object:root=true
type SecretSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SecretSync `json:"items"`
}

// SyncSpec is the spec as the explicit kinds share it (Sync).
func (s SecretSyncSpec) SyncSpec() SyncSpec {
	return SyncSpec{Kind: SecretSyncKind, SourceKind: "Secret", SourceNamespace: s.SourceNamespace, SourceName: s.SecretName, ReplicaSpec: s.ReplicaSpec}
}

// SyncSpec is its spec as the explicit kinds share it.
func (s *SecretSync) SyncSpec() SyncSpec { return s.Spec.SyncSpec() }

// SyncStatus is its status.
func (s *SecretSync) SyncStatus() *SyncStatus { return &s.Status }

// Syncs are the list's items.
func (l *SecretSyncList) Syncs() []Sync {
	syncs := make([]Sync, len(l.Items))
	for i := range l.Items {
		syncs[i] = &l.Items[i]
	}
	return syncs
}
