package cli

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// source is what the controller decides from one source (desired.Resolve, the
// controller's own decision): the owner of its replicas, their name and kind, where
// they go; or why the controller will not act on it.
type source struct {
	// describe names it for a person: "ConfigMap platform/ca-bundle", "ConfigMapSync ca",
	// "SecretSync db".
	describe    string
	kind        string
	owner       desired.Owner
	replicaName string
	targets     desired.TargetSpec
	origin      desired.Origin
	resolved    desired.Targets
	// invalid is why the controller refuses the source: it then changes nothing.
	invalid error
	// inactive is why an object of the annotation form is no source (not labelled, or
	// being deleted): it has no replicas, and cmsync deletes any left.
	inactive error
}

// input is a source as the plugin read it: its metadata (nil when an explicit
// object's source does not exist), and the whole object when it could be read.
type input struct {
	kind  string
	key   types.NamespacedName
	meta  metav1.Object
	whole client.Object
	// sync is the ConfigMapSync, SecretSync or ObjectSync naming the source; nil for
	// the annotation form.
	sync v1alpha1.Sync
	// refused is why the controller serves no ObjectSync naming the source's kind
	// (desired.ObjectKinds.CheckObjectKind): the source was then not read.
	refused error
}

// resolve decides as the controller does, with the controller's own function.
func resolve(in input, namespaces []desired.Namespace, policy desired.Policy) source {
	describe := kindName(in.kind) + " " + in.key.String()
	if in.sync != nil {
		describe = in.sync.SyncSpec().Kind + " " + in.sync.GetName()
		if in.refused != nil {
			return source{describe: describe, kind: in.kind, owner: desired.SyncOwner(in.sync), invalid: in.refused}
		}
		return resolveAs(describe, in, namespaces, policy)
	}
	if !desired.IsActiveSource(in.meta) {
		return source{describe: describe, kind: in.kind, owner: desired.AnnotationOwner(in.kind, in.key), replicaName: in.key.Name,
			inactive: notASource(in.meta)}
	}
	return resolveAs(describe, in, namespaces, policy)
}

// resolveAs resolves in as an object of its kind: the one place the plugin turns a
// kind's name into the controller's Kind.
func resolveAs(describe string, in input, namespaces []desired.Namespace, policy desired.Policy) source {
	if isObjectKind(in.kind) {
		return sourceOf(describe, in.kind, resolveKind(desired.NewObjectKind(gvkOf(in.kind)), in, namespaces, policy))
	}
	if in.kind == secretKind {
		return sourceOf(describe, in.kind, resolveKind(desired.SecretKind{}, in, namespaces, policy))
	}
	return sourceOf(describe, in.kind, resolveKind(desired.ConfigMapKind{}, in, namespaces, policy))
}

// newObject is an empty object of the replicated kind named kind.
func newObject(kind string) client.Object {
	if isObjectKind(kind) {
		return desired.NewObjectKind(gvkOf(kind)).New()
	}
	if kind == secretKind {
		return desired.SecretKind{}.New()
	}
	return desired.ConfigMapKind{}.New()
}

// notASource says why an object the annotation form does not act on has no replicas.
func notASource(obj metav1.Object) error {
	if obj.GetDeletionTimestamp() != nil {
		return beingDeleted(obj)
	}
	return fmt.Errorf("it is not labelled %s=%s, so it has no replicas", v1alpha1.ReplicateLabel, v1alpha1.ReplicateLabelValue)
}

// beingDeleted says that obj is being deleted, and who holds it, if anyone does.
func beingDeleted(obj metav1.Object) error {
	held := ""
	switch f := obj.GetFinalizers(); len(f) {
	case 0:
	case 1:
		held = " (held by the finalizer " + f[0] + ")"
	default:
		held = " (held by the finalizers " + namesOf(f) + ")"
	}
	return fmt.Errorf("it is being deleted%s, so cmsync deletes its replicas", held)
}

func resolveKind[T desired.Object](kind desired.Kind[T], in input, namespaces []desired.Namespace, policy desired.Policy) desired.Intent[T] {
	src := desired.Source[T]{Key: in.key, Meta: in.meta, Sync: in.sync}
	if whole, ok := in.whole.(T); ok {
		src.Object, src.Whole = whole, true
	}
	return desired.Resolve(kind, src, namespaces, policy)
}

func sourceOf[T desired.Object](describe, kind string, intent desired.Intent[T]) source {
	return source{
		describe: describe, kind: kind, owner: intent.Owner, replicaName: intent.ReplicaName,
		targets: intent.Spec, origin: intent.Origin, resolved: intent.Targets, invalid: intent.Invalid,
	}
}

// parseSourceRef reads "NAMESPACE/NAME" (a ConfigMap or Secret, or an object of a kind
// an ObjectSync copies) or, for a ConfigMapSync, SecretSync or ObjectSync, "NAME".
func parseSourceRef(kind, ref string) (types.NamespacedName, error) {
	if newSync(kind) != nil {
		if strings.Contains(ref, "/") {
			return types.NamespacedName{}, fmt.Errorf("a %s is cluster-scoped: name it without a namespace, not %q", kind, ref)
		}
		return types.NamespacedName{Name: ref}, nil
	}
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("name the source as NAMESPACE/NAME, not %q", ref)
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// kindOf reads the --kind flag: one of the plugin's kinds, or a kind an ObjectSync
// copies, written as --object-kinds writes it (networking.k8s.io/v1/NetworkPolicy),
// to name a replica of an ObjectSync.
func kindOf(flag string) (string, error) {
	if isObjectKind(flag) {
		gvk, err := desired.ParseObjectKinds(flag)
		switch {
		case err != nil:
			return "", fmt.Errorf("--kind %q: %w", flag, err)
		case len(gvk) != 1:
			return "", fmt.Errorf("--kind %q: name one kind", flag)
		}
		return desired.ObjectKindEntry(gvk[0]), nil
	}
	switch strings.ToLower(flag) {
	case "configmap", "cm", "configmaps":
		return configMapKind, nil
	case "secret", "secrets":
		return secretKind, nil
	case "configmapsync", "cms", "configmapsyncs":
		return v1alpha1.ConfigMapSyncKind, nil
	case "secretsync", "ssync", "secretsyncs":
		return v1alpha1.SecretSyncKind, nil
	case "objectsync", "osync", "objectsyncs":
		return v1alpha1.ObjectSyncKind, nil
	}
	return "", fmt.Errorf("--kind %q: must be configmap, secret, configmapsync, secretsync, objectsync, "+
		"or group/version/Kind for a replica of an ObjectSync (networking.k8s.io/v1/NetworkPolicy)", flag)
}

// newSync returns an empty object of the explicit kind (ConfigMapSync, SecretSync,
// ObjectSync), or nil when kind is not one.
func newSync(kind string) v1alpha1.Sync {
	switch kind {
	case v1alpha1.ObjectSyncKind:
		return desired.ObjectKind{}.NewSync()
	case v1alpha1.ConfigMapSyncKind:
		return desired.ConfigMapKind{}.NewSync()
	case v1alpha1.SecretSyncKind:
		return desired.SecretKind{}.NewSync()
	}
	return nil
}
