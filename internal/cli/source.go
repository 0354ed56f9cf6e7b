package cli

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/replicator/desired"
)

// source is what the controller decides from one source, made by the controller's own
// functions: the owner of its replicas, their name and kind, and its targets; or why
// the controller will not act on it.
type source struct {
	// describe names it for a person: "ConfigMap platform/ca-bundle", "ConfigMapSync ca".
	describe    string
	kind        string
	owner       desired.Owner
	namespace   string
	replicaName string
	targets     desired.TargetSpec
	// bound: the tenant boundary applies to it (the annotation form; desired.OriginOf).
	bound bool
	// invalid is why the controller refuses the source: it then changes nothing.
	invalid error
}

// origin is where the source lives, as the tenant boundary sees it among namespaces.
func (s source) origin(namespaces []desired.Namespace, policy desired.Policy) desired.Origin {
	if s.bound {
		return policy.OriginOf(s.namespace, namespaces)
	}
	return desired.Unbound(s.namespace)
}

// annotatedSource is the annotation form's source obj of kind. (A Secret's type is not
// read, so a service-account token source is not recognised as Invalid here.)
func annotatedSource(kind string, obj metav1.Object, policy desired.Policy) source {
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	s := source{
		describe: kind + " " + key.String(), kind: kind, owner: desired.AnnotationOwner(kind, key),
		namespace: key.Namespace, replicaName: key.Name, bound: true,
	}
	if obj.GetLabels()[v1alpha1.ReplicateLabel] != v1alpha1.ReplicateLabelValue {
		s.invalid = fmt.Errorf("it is not labelled %s=%s, so it has no replicas", v1alpha1.ReplicateLabel, v1alpha1.ReplicateLabelValue)
		return s
	}
	if err := policy.CheckSourceNamespace(key.Namespace); err != nil {
		s.invalid = err
		return s
	}
	if desired.IsReplica(obj) {
		s.invalid = fmt.Errorf("it is a replica of %s and cannot be a source", obj.GetAnnotations()[v1alpha1.SourceAnnotation])
		return s
	}
	targets, targetsErr := desired.TargetsOf(obj)
	shape, shapeErr := desired.ShapeOf(obj)
	if err := errors.Join(targetsErr, shapeErr); err != nil {
		s.invalid = err
		return s
	}
	s.targets, s.replicaName = targets, shape.NameFor(key.Name)
	s.invalid = policy.CheckReplicaName(s.replicaName)
	return s
}

// syncSource is the source a ConfigMapSync names, as the ConfigMapSync's spec decides.
func syncSource(sync *v1alpha1.ConfigMapSync, policy desired.Policy) source {
	owner := desired.SyncOwner(sync)
	s := source{
		describe: v1alpha1.ConfigMapSyncKind + " " + sync.Name, kind: configMapKind, owner: owner,
		namespace: owner.Source.Namespace, replicaName: desired.SyncReplicaName(sync.Spec),
	}
	targets, targetsErr := desired.ParseSyncTargets(sync.Spec)
	_, shapeErr := desired.ParseSyncShape(sync.Spec)
	s.targets, s.invalid = targets, errors.Join(targetsErr, shapeErr, policy.CheckSourceNamespace(owner.Source.Namespace), policy.CheckReplicaName(s.replicaName))
	return s
}

// parseSourceRef reads "NAMESPACE/NAME" (a ConfigMap or Secret) or, for a
// ConfigMapSync, "NAME".
func parseSourceRef(kind, ref string) (types.NamespacedName, error) {
	if kind == v1alpha1.ConfigMapSyncKind {
		if strings.Contains(ref, "/") {
			return types.NamespacedName{}, fmt.Errorf("a ConfigMapSync is cluster-scoped: name it without a namespace, not %q", ref)
		}
		return types.NamespacedName{Name: ref}, nil
	}
	namespace, name, ok := strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("name the source as NAMESPACE/NAME, not %q", ref)
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// kindOf reads the --kind flag.
func kindOf(flag string) (string, error) {
	switch strings.ToLower(flag) {
	case "configmap", "cm", "configmaps":
		return configMapKind, nil
	case "secret", "secrets":
		return secretKind, nil
	case "configmapsync", "cms", "configmapsyncs":
		return v1alpha1.ConfigMapSyncKind, nil
	}
	return "", fmt.Errorf("--kind %q: must be configmap, secret or configmapsync", flag)
}
