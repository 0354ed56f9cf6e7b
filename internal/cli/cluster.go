// Package cli is kubectl-cmsync, the kubectl plugin for the people who operate cmsync:
// status lists every source and how it is doing, explain says why a namespace has or
// lacks a replica, preview shows what a change of a source would do before it is made,
// and migrate moves another replicator's sources and copies onto cmsync. It reads the
// cluster and writes to it only for migrate --apply; every decision comes from
// desired, the controller's own pure functions, under the controller's
// policy as read from the cmsync release it is pointed at (controller.go).
package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// The kinds of source the plugin knows, as the controller names them.
var (
	configMapKind = desired.ConfigMapKind{}.Name()
	secretKind    = desired.SecretKind{}.Name()
)

// cluster reads what the plugin needs, as metadata wherever that suffices. A source is
// read whole, so that the plugin decides as the controller does (a Secret's type, the
// size against --max-replicated-bytes); a value is never shown.
type cluster struct {
	client client.Client
}

func metadataList(kind string) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: kind + "List"})
	return list
}

func metadataOf(kind string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: kind})
	return obj
}

// namespaces lists every namespace as target resolution sees it.
func (c cluster) namespaces(ctx context.Context) ([]desired.Namespace, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := c.client.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	out := make([]desired.Namespace, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, desired.NamespaceOf(&ns))
	}
	return out, nil
}

// labelledSources lists the labelled sources of kind (in namespace, or all when empty).
func (c cluster) labelledSources(ctx context.Context, kind, namespace string) ([]metav1.PartialObjectMetadata, error) {
	list := metadataList(kind)
	opts := []client.ListOption{client.MatchingLabels{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := c.client.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s sources: %w", kind, err)
	}
	return list.Items, nil
}

// replicasOf lists the objects of kind that owner's markers name as its replicas.
func (c cluster) replicasOf(ctx context.Context, kind string, owner desired.Owner) ([]metav1.PartialObjectMetadata, error) {
	list := metadataList(kind)
	if err := c.client.List(ctx, list, client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("listing %s replicas: %w", kind, err)
	}
	var out []metav1.PartialObjectMetadata
	for i := range list.Items {
		if owner.Owns(&list.Items[i]) {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// objectNamed reads the metadata of the object of kind namespace/name, if there is one.
func (c cluster) objectNamed(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	obj := metadataOf(kind)
	err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kind, namespace, name, err)
	}
	if err != nil {
		return nil, nil
	}
	return obj, nil
}

// sourceObject reads the source of kind at key: its metadata (nil when there is none)
// and, when the plugin may read it, the whole object.
func (c cluster) sourceObject(ctx context.Context, kind string, key types.NamespacedName) (input, error) {
	in := input{kind: kind, key: key}
	var whole client.Object = &corev1.ConfigMap{}
	if kind == secretKind {
		whole = &corev1.Secret{}
	}
	err := c.client.Get(ctx, key, whole)
	switch {
	case err == nil:
		in.meta, in.whole = whole, whole
		return in, nil
	case apierrors.IsNotFound(err):
		return in, nil
	case !apierrors.IsForbidden(err):
		return input{}, fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	// Allowed its metadata only: decided without the content (the kind's check and
	// the byte budget are then not made).
	obj, err := c.objectNamed(ctx, kind, key.Namespace, key.Name)
	if err != nil || obj == nil {
		return in, err
	}
	in.meta = obj
	return in, nil
}

// syncInput is a ConfigMapSync or SecretSync and the object it names, as far as it
// exists.
func (c cluster) syncInput(ctx context.Context, sync v1alpha1.Sync) (input, error) {
	spec := sync.SyncSpec()
	in, err := c.sourceObject(ctx, spec.SourceKind, spec.Source())
	in.sync = sync
	return in, err
}

// objectsNamed reads, with one request, the metadata of every object of kind named
// name, by namespace: what stands where a source's replicas go.
func (c cluster) objectsNamed(ctx context.Context, kind, name string) (map[string]*metav1.PartialObjectMetadata, error) {
	list := metadataList(kind)
	if err := c.client.List(ctx, list, client.MatchingFields{"metadata.name": name}); err != nil {
		return nil, fmt.Errorf("listing %ss named %s: %w", kind, name, err)
	}
	out := make(map[string]*metav1.PartialObjectMetadata, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Namespace] = &list.Items[i]
	}
	return out, nil
}

// syncs lists the objects of the explicit kind that names sources of kind
// (ConfigMapSyncs, SecretSyncs); none when its CRD is not installed.
func syncs[T desired.Object](ctx context.Context, c cluster, kind desired.Kind[T]) ([]v1alpha1.Sync, error) {
	list := kind.NewSyncList()
	err := c.client.List(ctx, list)
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing %ss: %w", kind.NewSync().SyncSpec().Kind, err)
	}
	return list.Syncs(), nil
}
