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
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
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
// size against --max-replicated-bytes); a value is never shown. What the user's rights
// do not let it read cluster-wide it reads where they do, and records in missed what it
// therefore left out.
type cluster struct {
	client client.Client
	missed *missed
}

func metadataList(kind string) *metav1.PartialObjectMetadataList {
	list := &metav1.PartialObjectMetadataList{}
	gvk := gvkOf(kind)
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	return list
}

func metadataOf(kind string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvkOf(kind))
	return obj
}

// namespaces lists every namespace as target resolution sees it (all: true). Without
// the right to list them it reads those of fallback the user may get — their own, which
// the view and edit ClusterRoles bound there grant — and records what it left out.
func (c cluster) namespaces(ctx context.Context, fallback ...string) (namespaces []desired.Namespace, all bool, err error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	err = c.client.List(ctx, list)
	switch {
	case err == nil:
		for i := range list.Items {
			namespaces = append(namespaces, desired.NamespaceOf(&list.Items[i]))
		}
		return namespaces, true, nil
	case !apierrors.IsForbidden(err):
		return nil, false, fmt.Errorf("listing namespaces: %w", err)
	}
	var read []string
	for _, name := range nearby(fallback...) {
		ns := metadataOf("Namespace")
		err := c.client.Get(ctx, client.ObjectKey{Name: name}, ns)
		switch {
		case apierrors.IsForbidden(err):
			c.missed.add(mayGet(namespaceKind, name), "namespace "+name+": not read, so nothing was decided for it")
			continue
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, false, fmt.Errorf("reading namespace %s: %w", name, err)
		}
		namespaces = append(namespaces, desired.NamespaceOf(ns))
		read = append(read, name)
	}
	c.missed.add(mayList(namespaceKind, ""),
		"every namespace"+but(read)+": the targets there, and the byte budget across them, were not checked")
	return namespaces, false, nil
}

// listEverywhere lists the metadata of the objects of kind that opts select, in every
// namespace; without that right, in each of near (the namespaces the command is about)
// where the user may, and records that what (a plural: "replicas of …") was not looked
// for elsewhere. It never falls back to every namespace one by one: a user who may not
// list them cluster-wide is rarely allowed in more than a few. looked is where it
// looked, nil for everywhere.
func (c cluster) listEverywhere(
	ctx context.Context, kind string, near []string, what string, opts ...client.ListOption,
) (items []metav1.PartialObjectMetadata, looked sets.Set[string], err error) {
	list := metadataList(kind)
	err = c.client.List(ctx, list, opts...)
	switch {
	case err == nil:
		return list.Items, nil, nil
	case !apierrors.IsForbidden(err):
		return nil, nil, fmt.Errorf("listing %ss: %w", kindName(kind), err)
	}
	looked = sets.New[string]()
	for _, ns := range near {
		in := metadataList(kind)
		err := c.client.List(ctx, in, append(slices.Clone(opts), client.InNamespace(ns))...)
		if apierrors.IsForbidden(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("listing %ss in namespace %s: %w", kindName(kind), ns, err)
		}
		items = append(items, in.Items...)
		looked.Insert(ns)
	}
	c.missed.add(mayList(kind, ""), what+" in every namespace"+but(sets.List(looked))+": not looked for")
	return items, looked, nil
}

// nearby is the namespaces a command is about (those named, once each), where it
// reads what the user may not list cluster-wide.
func nearby(namespaces ...string) []string {
	return sets.List(sets.New(namespaces...).Delete(""))
}

// but names the namespaces a fallback read, after "every namespace": " but a", " but
// a and b"; "" when it read none.
func but(read []string) string {
	if len(read) == 0 {
		return ""
	}
	return " but " + namesOf(read)
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

// replicasOf lists the objects that src's markers name as its replicas (among
// namespaces where the user may not list them cluster-wide).
func (c cluster) replicasOf(ctx context.Context, src source, namespaces []string) ([]metav1.PartialObjectMetadata, error) {
	managed := client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}
	items, _, err := c.listEverywhere(ctx, src.kind, namespaces, "replicas of "+src.describe, managed)
	if err != nil {
		return nil, err
	}
	var out []metav1.PartialObjectMetadata
	for i := range items {
		if src.owner.Owns(&items[i]) {
			out = append(out, items[i])
		}
	}
	return out, nil
}

// objectNamed reads the metadata of the object of kind namespace/name, if there is one.
func (c cluster) objectNamed(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	obj := metadataOf(kind)
	err := c.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
	if apierrors.IsForbidden(err) {
		return nil, err
	}
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", kindName(kind), namespace, name, err)
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
	whole := newObject(kind)
	err := c.client.Get(ctx, key, whole)
	switch {
	case err == nil:
		in.meta, in.whole = whole, whole
		return in, nil
	case apierrors.IsNotFound(err):
		return in, nil
	case !apierrors.IsForbidden(err):
		return input{}, fmt.Errorf("reading %s %s: %w", kindName(kind), key, err)
	}
	// Allowed its metadata only (an authorizer that tells the two apart): decided
	// without the content, so the kind's check and the byte budget are not made.
	obj, err := c.objectNamed(ctx, kind, key.Namespace, key.Name)
	if apierrors.IsForbidden(err) {
		return input{}, fmt.Errorf("you may not read %s %s, so cmsync's decision for it cannot be told here (missing: %s)",
			kindName(kind), key, mayGet(kind, key.Namespace))
	}
	if err != nil || obj == nil {
		return in, err
	}
	c.missed.add(mayGet(kind, key.Namespace),
		fmt.Sprintf("the content of %s %s: its kind's checks and its size against --max-replicated-bytes", kindName(kind), key))
	in.meta = obj
	return in, nil
}

// syncInput is a ConfigMapSync, SecretSync or ObjectSync and the object it names, as
// far as it exists. The source of an ObjectSync that names a kind the controller
// refuses (kinds.CheckObjectKind) is not read: the controller reads none either.
func (c cluster) syncInput(ctx context.Context, sync v1alpha1.Sync, kinds desired.ObjectKinds) (input, error) {
	spec := sync.SyncSpec()
	kind := sourceKindOf(spec)
	if spec.Kind == v1alpha1.ObjectSyncKind {
		if err := kinds.CheckObjectKind(spec.SourceAPIVersion, spec.SourceKind); err != nil {
			return input{kind: kind, key: spec.Source(), sync: sync, refused: err}, nil
		}
	}
	in, err := c.sourceObject(ctx, kind, spec.Source())
	in.sync = sync
	return in, err
}

// objectsNamed reads, with one request, the metadata of every object of kind named
// name, by namespace: what stands where a source's replicas go. Where the user may not
// list them cluster-wide, it looks in near alone, and looked says where (nil: everywhere).
func (c cluster) objectsNamed(
	ctx context.Context, kind, name string, near []string,
) (named map[string]*metav1.PartialObjectMetadata, looked sets.Set[string], err error) {
	items, looked, err := c.listEverywhere(ctx, kind, near, kindName(kind)+"s named "+name, client.MatchingFields{"metadata.name": name})
	if err != nil {
		return nil, nil, err
	}
	named = make(map[string]*metav1.PartialObjectMetadata, len(items))
	for i := range items {
		named[items[i].Namespace] = &items[i]
	}
	return named, looked, nil
}

// syncs lists the objects of the explicit kind that names sources of kind
// (ConfigMapSyncs, SecretSyncs, ObjectSyncs); none when its CRD is not installed.
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
