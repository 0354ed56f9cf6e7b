// Package v1alpha1 holds the ConfigMapSync and SecretSync API (group cmsync.io, version v1alpha1) and
// every label, annotation and name cmsync uses (keys.go).
// +kubebuilder:object:generate=true
// +groupName=cmsync.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the ConfigMapSync and SecretSync API.
	GroupVersion = schema.GroupVersion{Group: "cmsync.io", Version: "v1alpha1"}

	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

// addKnownTypes registers the API's types; an API package depends on apimachinery only.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ConfigMapSync{}, &ConfigMapSyncList{}, &SecretSync{}, &SecretSyncList{}, &ObjectSync{}, &ObjectSyncList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
