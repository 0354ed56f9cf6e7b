package desired

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Source is one source as Resolve reads it, in either form.
type Source[T Object] struct {
	// Key names the source object.
	Key types.NamespacedName
	// Meta is the source's metadata; nil while it has not been read, or when it does not
	// exist (a ConfigMapSync may name a missing one).
	Meta metav1.Object
	// Object is the source with its content, when it was read whole (Whole): then the
	// kind's check of the source and the byte budget are decided too.
	Object T
	Whole  bool
	// Sync is the ConfigMapSync or SecretSync that names the source (the explicit
	// form); nil for the annotation form.
	Sync v1alpha1.Sync
}

// AnnotatedSource is an annotated source read whole.
func AnnotatedSource[T Object](obj T) Source[T] {
	return Source[T]{Key: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}, Meta: obj, Object: obj, Whole: true}
}

// IsActiveSource reports whether obj is a source of the annotation form: labelled
// cmsync.io/replicate=true and not being deleted. Any other object has no replicas (a
// source being deleted has its replicas deleted), for the controller and the plugin alike.
func IsActiveSource(obj metav1.Object) bool {
	return obj.GetLabels()[v1alpha1.ReplicateLabel] == v1alpha1.ReplicateLabelValue && obj.GetDeletionTimestamp() == nil
}

// Intent is what a source wants, as the controller decides it: the owner of its
// replicas, their name, where they go, and, for a source read whole, the replica
// itself; or why the controller will not act on it (Invalid: then nothing is changed).
type Intent[T Object] struct {
	Owner       Owner
	ReplicaName string
	Spec        TargetSpec
	// Origin is where the source lives, which tenant binds it and which namespace it
	// never enters; set also when the intent is Invalid (AdmittingNamespaces; an
	// explicit object that cannot be acted on takes SyncOrigin).
	Origin  Origin
	Targets Targets
	// Template is the replica, when the source was read whole and is valid.
	Template Template[T]
	Invalid  error
	// shape is how the replicas differ from the source, as far as the form says.
	shape Shape
}

// Resolve is the one decision about what a source wants, made by both front doors and
// by kubectl cmsync: the controller's policy over the source's form — its annotations
// (the annotation form, bound by the tenant boundary) or the ConfigMapSync or SecretSync naming it —
// and, once the source is read, its content. Every problem of the source's own
// annotations (or the explicit kind's spec) is named in Invalid at once.
func Resolve[T Object](kind Kind[T], src Source[T], namespaces []Namespace, policy Policy) Intent[T] {
	var intent Intent[T]
	if src.Sync != nil {
		intent = resolveSync(kind, src.Sync, namespaces, policy)
	} else {
		intent = resolveAnnotated[T](kind, src, namespaces, policy)
	}
	return intent.WithSource(kind, src, policy)
}

// AdmittingNamespaces lists the namespaces that admit a replica of a source of origin
// whatever the source names: the controller's policy allows it (not excluded, ignored,
// terminating or outside the scope) and the tenant boundary admits it. Consent is the
// namespace's, not the source's: a source that cannot be acted on (Invalid) keeps its
// replicas only there, so a tenant cannot hold a replica in a namespace that withdrew
// its consent by breaking the source's annotations.
func AdmittingNamespaces(origin Origin, namespaces []Namespace, policy Policy) []string {
	var admitting []string
	for _, ns := range namespaces {
		if ns.Name == origin.Namespace || policy.refusal(ns).rule != notRefused {
			continue
		}
		// A source whose tenant is not known yet (its namespace not seen) is not
		// judged by the boundary here: withdrawing its replicas would be a guess.
		if r := origin.admits(ns); origin.unknown || r == notRefused || r == acceptedFrom {
			admitting = append(admitting, ns.Name)
		}
	}
	return admitting
}

// resolveAnnotated decides from an annotated source's metadata.
func resolveAnnotated[T Object](kind Kind[T], src Source[T], namespaces []Namespace, policy Policy) Intent[T] {
	intent := Intent[T]{Owner: AnnotationOwner(kind.Name(), src.Key), ReplicaName: src.Key.Name, Origin: policy.OriginOf(src.Key.Namespace, namespaces)}
	if err := policy.CheckSourceNamespace(src.Key.Namespace); err != nil {
		intent.Invalid = err
		return intent
	}
	if IsReplica(src.Meta) {
		intent.Invalid = fmt.Errorf("this %s is a replica of %s and cannot be a source; remove the %s label",
			kind.Name(), src.Meta.GetAnnotations()[v1alpha1.SourceAnnotation], v1alpha1.ReplicateLabel)
		return intent
	}
	spec, targetsErr := TargetsOf(src.Meta)
	shape, shapeErr := ShapeOf(src.Meta)
	if err := errors.Join(targetsErr, shapeErr); err != nil {
		intent.Invalid = err
		return intent
	}
	intent.ReplicaName, intent.shape = shape.NameFor(src.Key.Name), shape
	if err := policy.CheckReplicaName(intent.ReplicaName); err != nil {
		intent.Invalid = err
		return intent
	}
	intent.Spec = spec
	intent.Targets = TargetNamespaces(spec, intent.Origin, namespaces, policy)
	return intent
}

// SyncOrigin is the origin of the source of an explicit object of kind, living in
// sourceNamespace: an administrator's, so the tenant boundary does not bind it; and an
// ObjectSync's replicas never enter the controller's own namespace (Origin.guarded),
// neither written nor, when the ObjectSync cannot be acted on, kept there.
func SyncOrigin[T Object](kind Kind[T], sourceNamespace string, policy Policy) Origin {
	origin := Unbound(sourceNamespace)
	if contentIsFields(kind) {
		origin.guarded = policy.ControllerNamespace
	}
	return origin
}

// resolveSync decides from a ConfigMapSync's or SecretSync's spec.
func resolveSync[T Object](kind Kind[T], sync v1alpha1.Sync, namespaces []Namespace, policy Policy) Intent[T] {
	owner, syncSpec := SyncOwner(sync), sync.SyncSpec()
	intent := Intent[T]{Owner: owner, ReplicaName: SyncReplicaName(syncSpec), Origin: SyncOrigin(kind, owner.Source.Namespace, policy)}
	if syncSpec.SourceKind != kind.Name() {
		intent.Invalid = fmt.Errorf("a %s names a %s, not a %s", syncSpec.Kind, syncSpec.SourceKind, kind.Name())
		return intent
	}
	spec, targetsErr := ParseSyncTargets(syncSpec)
	shape, shapeErr := ParseSyncShape(syncSpec)
	intent.shape = shape
	if err := errors.Join(targetsErr, shapeErr, policy.CheckSourceNamespace(owner.Source.Namespace), policy.CheckReplicaName(intent.ReplicaName)); err != nil {
		intent.Invalid = err
		return intent
	}
	intent.Spec = spec
	intent.Targets = TargetNamespaces(spec, intent.Origin, namespaces, policy)
	return intent
}

// WithSource completes an intent decided from its form with the source itself: a
// ConfigMapSync's or SecretSync's source must not be a replica, and its strip-metadata annotation
// applies (it is the source owner's say over what of their metadata leaves the
// namespace, whichever form copies it); a source read whole passes the kind's check,
// becomes the replica's template and must fit the byte budget.
func (intent Intent[T]) WithSource(kind Kind[T], src Source[T], policy Policy) Intent[T] {
	if intent.Invalid != nil || src.Meta == nil {
		return intent
	}
	shape := intent.shape
	if src.Sync != nil {
		if IsReplica(src.Meta) {
			intent.Invalid = fmt.Errorf("source %s %s is itself a replica of %s; name the original",
				kind.Name(), src.Key, src.Meta.GetAnnotations()[v1alpha1.SourceAnnotation])
			return intent
		}
		strip, err := StripMetadataOf(src.Meta)
		if err != nil {
			intent.Invalid = fmt.Errorf("source %s %s: %w", kind.Name(), src.Key, err)
			return intent
		}
		shape.Strip = strip
	}
	if !src.Whole {
		// The metadata alone decides the bound on a replica's metadata: a reader who may
		// see only that (kubectl cmsync) is told what cmsync would say.
		labels, annotations := replicaMetadata(src.Key, src.Meta, shape.Strip)
		intent.Invalid = checkReplicaMetadata(metadataBytes(labels, annotations) + contentHashBytes)
		return intent
	}
	if err := kind.CheckSource(src.Object); err != nil {
		intent.Invalid = err
		return intent
	}
	intent.Template = NewTemplate(kind, src.Object, shape, intent.Owner)
	err := checkReplicaMetadata(metadataBytes(intent.Template.labels, intent.Template.annotations))
	if err == nil {
		err = policy.CheckWriteBudget(intent.Template.Size(), len(intent.Targets.Namespaces))
	}
	if err != nil {
		intent.Invalid = err
		intent.Template = Template[T]{}
	}
	return intent
}
