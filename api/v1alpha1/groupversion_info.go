// Package v1alpha1 holds the ConfigMapSync API (group cmsync.io, version v1alpha1) and
// every label, annotation and name cmsync uses (keys.go).
// +kubebuilder:object:generate=true
// +groupName=cmsync.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the ConfigMapSync API.
	GroupVersion = schema.GroupVersion{Group: "cmsync.io", Version: "v1alpha1"}

	// SchemeBuilder registers the API's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
