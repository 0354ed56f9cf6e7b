package replicator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
)

// The caches hold only what cmsync manages, so memory grows with the sources and
// replicas, not with the objects of the cluster:
//   - the manager's cache: ConfigMaps (and Secrets, when enabled) labelled
//     cmsync.io/replicate=true (sources), and
//     namespaces as metadata only (names, labels, deletion);
//   - the replica cache of each kind (replicacache): the objects carrying cmsync's
//     managed-by label.
// One informer per kind takes one label selector, and sources and replicas carry
// different labels (a replica never carries the replicate label, so it can never become
// a source), hence two caches.

// ManagerCacheOptions filters the manager's cache to sources (labelled ConfigMaps and,
// with o.Secrets, labelled Secrets) and namespace metadata. Without o.Secrets the cache
// has no Secret informer, so cmsync makes no request about Secrets.
func ManagerCacheOptions(o Options) cache.Options {
	sources := cache.ByObject{
		Label:     labels.SelectorFromSet(labels.Set{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}),
		Transform: cache.TransformStripManagedFields(),
	}
	byObject := map[client.Object]cache.ByObject{
		&corev1.ConfigMap{}: sources,
		// Every pass lists every namespace; nothing modifies what it reads of them, so
		// the list need not copy each namespace's metadata (100 sources' passes over
		// 1,000 namespaces copied 100,000 at a start).
		namespaceMetadata(): {Transform: stripNamespaceMetadata, UnsafeDisableDeepCopy: ptr.To(true)},
	}
	if o.Secrets {
		byObject[&corev1.Secret{}] = sources
	}
	return cache.Options{ByObject: byObject}
}

// namespaceMetadata is the metadata-only form of Namespace that the manager's cache
// holds and target resolution lists.
func namespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// stripNamespaceMetadata keeps what target resolution reads of a namespace.
func stripNamespaceMetadata(in any) (any, error) {
	if obj, err := meta.Accessor(in); err == nil {
		obj.SetManagedFields(nil)
		obj.SetAnnotations(nil)
	}
	return in, nil
}

// listNamespaces reads every namespace's metadata from the cache.
func listNamespaces(ctx context.Context, reader client.Reader) ([]desired.Namespace, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := reader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	namespaces := make([]desired.Namespace, 0, len(list.Items))
	for i := range list.Items {
		namespaces = append(namespaces, namespaceOf(&list.Items[i]))
	}
	return namespaces, nil
}

func namespaceOf(obj client.Object) desired.Namespace {
	return desired.Namespace{Name: obj.GetName(), Labels: obj.GetLabels(), Terminating: obj.GetDeletionTimestamp() != nil}
}
