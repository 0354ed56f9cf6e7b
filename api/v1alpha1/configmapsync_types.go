package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigMapSyncSpec names a source ConfigMap and the namespaces to copy it into. The
// three target fields combine as a union; "!" entries of destinationNamespaces exclude
// from all of it.
// +kubebuilder:validation:XValidation:rule="has(self.destinationNamespace) || (has(self.destinationNamespaces) && self.destinationNamespaces.exists(n, !n.startsWith('!'))) || has(self.namespaceSelector)",message="set destinationNamespace, destinationNamespaces (with at least one entry that is not an exclusion) or namespaceSelector"
// +kubebuilder:validation:XValidation:rule="!has(self.destinationNamespace) || self.destinationNamespace != self.sourceNamespace",message="destinationNamespace must differ from sourceNamespace: a ConfigMap is never copied onto itself"
type ConfigMapSyncSpec struct {
	// SourceNamespace is the namespace of the source ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	SourceNamespace string `json:"sourceNamespace"`

	// ConfigMapName is the name of the source ConfigMap; replicas get the same name
	// unless targetName says otherwise.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ConfigMapName string `json:"configMapName"`

	ReplicaSpec `json:",inline"`
}

// ReplicaSpec is where the replicas of a ConfigMapSync or SecretSync go, and what they
// hold: the spec's fields besides its source. The three target fields combine as a
// union; "!" entries of destinationNamespaces exclude from all of it.
type ReplicaSpec struct {
	// DestinationNamespace is one target namespace (the original tutorial form).
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
	// Ready=False, reason Invalid, as it does the target-name annotation. (An empty
	// one is refused here: cmsync could not tell it from an absent one.)
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	TargetName string `json:"targetName,omitempty"`

	// Keys are key globs ("*", "?", "[a-z]") over the source's data (and a ConfigMap's
	// binaryData): only matching keys are copied; an entry starting with "!" excludes.
	// Default: every key. The schema bounds the list and its entries only: cmsync
	// judges the globs (and an empty list) itself and reports a bad one as
	// Ready=False, reason Invalid, as it does the keys annotation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=254
	Keys []string `json:"keys,omitempty"`
}

// FailedNamespace is a target namespace that is not in sync, and why.
type FailedNamespace struct {
	// Namespace is the target namespace.
	Namespace string `json:"namespace"`
	// Reason is Conflict (an object cmsync does not own for this ConfigMapSync or
	// SecretSync is in the way) or Failed (the API refused the write).
	Reason string `json:"reason"`
	// Message is the detail.
	Message string `json:"message"`
}

// SyncStatus is the status of a ConfigMapSync or a SecretSync, recomputed from the
// cluster on every pass.
type SyncStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Source is "<sourceNamespace>/<configMapName>" (a SecretSync's:
	// "<sourceNamespace>/<secretName>").
	// +optional
	Source string `json:"source,omitempty"`
	// Synced is "<syncedNamespaces>/<targetNamespaces>".
	// +optional
	Synced string `json:"synced,omitempty"`
	// TargetNamespaces is how many namespaces must hold a replica.
	// +optional
	TargetNamespaces int32 `json:"targetNamespaces"`
	// SyncedNamespaces is how many of them hold one equal to the source.
	// +optional
	SyncedNamespaces int32 `json:"syncedNamespaces"`
	// FailedNamespaces lists targets that are not in sync, at most 20.
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +kubebuilder:validation:MaxItems=20
	FailedNamespaces []FailedNamespace `json:"failedNamespaces,omitempty"`
	// LastSyncTime is when a pass last created, changed or deleted a replica.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// Conditions: Ready, with reason Synced, Degraded, SourceNotFound or Invalid.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ConfigMapSync copies one ConfigMap into the namespaces it names, and keeps the copies
// equal to it. It is cluster-scoped: creating one is an administrator's act.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=cms
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Synced",type=string,JSONPath=`.status.synced`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigMapSync struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ConfigMapSyncSpec `json:"spec"`
	Status SyncStatus        `json:"status,omitempty"`
}

// ConfigMapSyncList is a list of ConfigMapSyncs.
// +kubebuilder:object:root=true
type ConfigMapSyncList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigMapSync `json:"items"`
}

// SyncSpec is the spec as the explicit kinds share it (Sync).
func (s ConfigMapSyncSpec) SyncSpec() SyncSpec {
	return SyncSpec{
		Kind:            ConfigMapSyncKind,
		SourceKind:      "ConfigMap",
		SourceNamespace: s.SourceNamespace,
		SourceName:      s.ConfigMapName,
		ReplicaSpec:     s.ReplicaSpec,
	}
}

// SyncSpec is its spec as the explicit kinds share it.
func (s *ConfigMapSync) SyncSpec() SyncSpec { return s.Spec.SyncSpec() }

// SyncStatus is its status.
func (s *ConfigMapSync) SyncStatus() *SyncStatus { return &s.Status }

// Syncs are the list's items.
func (l *ConfigMapSyncList) Syncs() []Sync {
	syncs := make([]Sync, len(l.Items))
	for i := range l.Items {
		syncs[i] = &l.Items[i]
	}
	return syncs
}
