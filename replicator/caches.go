package replicator

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
	"github.com/cmsync/cmsync/replicator/replicastore"
)

// The caches hold only what cmsync manages, so memory grows with the sources and
// replicas, not with the objects of the cluster nor with the bytes users label:
//   - the manager's cache: the metadata of ConfigMaps (and Secrets, when enabled)
//     labelled cmsync.io/replicate=true (sources), in every namespace or, in scoped mode,
//     in each namespace cmsync serves (--namespaces), reduced to what routes events
//     (sourceTransform); a pass reads the source whole (sourceContents), and
//     namespaces as metadata only (names, labels, deletion, cmsync.io/accept-from);
//   - the replica store of each kind (replicastore): the objects carrying cmsync's
//     managed-by label.
// One informer per kind takes one label selector, and sources and replicas carry
// different labels (a replica never carries the replicate label, so it can never become
// a source), hence two caches.

// ManagerCacheOptions filters the manager's cache to the metadata of sources (labelled
// ConfigMaps and, with o.Secrets, labelled Secrets) and of namespaces. Without o.Secrets
// the cache has no Secret informer, so cmsync makes no request about Secrets.
func ManagerCacheOptions(o Options) cache.Options {
	sources := cache.ByObject{
		Label:     labels.SelectorFromSet(labels.Set{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}),
		Transform: sourceTransform,
		// In scoped mode, one informer per namespace served: cmsync lists and watches
		// sources there alone, under the Roles of those namespaces.
		Namespaces: replicastore.PerNamespace(o.Policy.Scope),
		// Nothing modifies what it reads of them (a pass reads the source whole).
		UnsafeDisableDeepCopy: ptr.To(true),
	}
	byObject := map[client.Object]cache.ByObject{
		desired.NewMetadata(desired.ConfigMapKind{}): sources,
		// Every pass lists every namespace, from the informer's store (namespaceLister);
		// nothing modifies what it reads of them, so no read through the cache copies
		// them either.
		namespaceMetadata(): {Transform: namespaceTransform(o.Policy.TenantLabel != ""), UnsafeDisableDeepCopy: ptr.To(true)},
	}
	if o.Secrets {
		byObject[desired.NewMetadata(desired.SecretKind{})] = sources
	}
	return cache.Options{ByObject: byObject}
}

// routingAnnotations are the annotations of a labelled object that the manager's cache
// keeps: what maps a namespace's event to the sources it may concern (the targets) and
// what says whether a source is Invalid (the status). Everything else — the content,
// the other labels and annotations, managedFields — is read with the whole source by
// the pass that needs it.
var routingAnnotations = []string{
	v1alpha1.TargetNamespacesAnnotation, v1alpha1.TargetSelectorAnnotation,
	v1alpha1.StatusAnnotation, v1alpha1.SyncedAnnotation, v1alpha1.MessageAnnotation, v1alpha1.LastSyncTimeAnnotation,
}

// maxRoutingValue bounds each target annotation the cache keeps, and maxStatusValue each
// status annotation (cmsync writes none longer: desired's message is at most 1 KiB). A
// longer one is kept as tooLongToRoute, which no target parser accepts: its source is
// then routed by its replicas (findSourcesForNamespace), and its passes read the real
// value from the whole source; a status that long is not cmsync's, and is written over.
const (
	maxRoutingValue = 4 << 10
	maxStatusValue  = 1 << 10
	tooLongToRoute  = "(too long to keep in the cache: read from the source)"
)

// sourceTransform reduces a labelled object's metadata to its identity, its deletion,
// the replicate label and the routing annotations, so that what a user labels costs
// cmsync at most a few KiB however large it is, wherever it lives.
func sourceTransform(in any) (any, error) {
	obj, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	obj.ManagedFields = nil
	obj.OwnerReferences = nil
	obj.Finalizers = nil
	obj.Labels = map[string]string{v1alpha1.ReplicateLabel: obj.Labels[v1alpha1.ReplicateLabel]}
	var kept map[string]string
	for _, key := range routingAnnotations {
		value, found := obj.Annotations[key]
		if !found {
			continue
		}
		limit := maxStatusValue
		if key == v1alpha1.TargetNamespacesAnnotation || key == v1alpha1.TargetSelectorAnnotation {
			limit = maxRoutingValue
		}
		if len(value) > limit {
			value = tooLongToRoute
		}
		if kept == nil {
			kept = make(map[string]string, len(routingAnnotations))
		}
		kept[key] = value
	}
	obj.Annotations = kept
	return obj, nil
}

// namespaceMetadata is the metadata-only form of Namespace that the manager's cache
// holds and target resolution lists.
func namespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// namespaceTransform keeps what target resolution reads of a namespace: its name,
// labels, deletion and cmsync.io/accept-from. With the tenant boundary on
// (logAcceptFrom), it logs an accept-from that cannot be parsed, once per change of the
// namespace: such a namespace accepts nothing, and the sources it kept out say so in
// their status.
func namespaceTransform(logAcceptFrom bool) toolscache.TransformFunc {
	logger := ctrl.Log.WithName("namespaces")
	return func(in any) (any, error) {
		obj, err := meta.Accessor(in)
		if err != nil {
			return in, nil
		}
		obj.SetManagedFields(nil)
		accept, ok := obj.GetAnnotations()[v1alpha1.AcceptFromAnnotation]
		if !ok {
			obj.SetAnnotations(nil)
			return in, nil
		}
		obj.SetAnnotations(map[string]string{v1alpha1.AcceptFromAnnotation: accept})
		if _, _, err := desired.ParseAcceptFrom(accept); err != nil && logAcceptFrom {
			logger.Info("namespace accepts no source of another tenant: its accept-from cannot be parsed", "namespace", obj.GetName(), "error", err.Error())
		}
		return in, nil
	}
}

// namespaceLister reads every namespace's metadata straight from the manager cache's
// informer, which every pass does. The cache's List fills a list of values by
// reflection, so even with its deep copies off it copied each namespace: at a start,
// 100 sources' passes over 1,000 namespaces allocated 34 MB so, about 6% of all the
// start allocated (make bench-restarts).
type namespaceLister struct {
	indexer toolscache.Indexer
}

// newNamespaceLister gets (or creates) the manager cache's namespace informer, which
// the controllers' namespace watches share.
func newNamespaceLister(ctx context.Context, c cache.Cache) (namespaceLister, error) {
	informer, err := c.GetInformer(ctx, namespaceMetadata())
	if err != nil {
		return namespaceLister{}, fmt.Errorf("getting the namespace informer: %w", err)
	}
	shared, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return namespaceLister{}, fmt.Errorf("getting the namespace informer: unexpected informer %T", informer)
	}
	return namespaceLister{indexer: shared.GetIndexer()}, nil
}

// List returns every namespace the cache holds. Passes run once the cache has listed.
func (l namespaceLister) List() []desired.Namespace {
	objs := l.indexer.List()
	namespaces := make([]desired.Namespace, 0, len(objs))
	for _, obj := range objs {
		if ns, ok := obj.(*metav1.PartialObjectMetadata); ok {
			namespaces = append(namespaces, desired.NamespaceOf(ns))
		}
	}
	return namespaces
}
