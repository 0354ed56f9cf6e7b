package desired

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// ParseObjectKinds parses --object-kinds: a comma list of group/version/Kind, a core
// kind as version/Kind (v1/LimitRange). Empty: no kind, and ObjectSync is inert.
// ConfigMaps and Secrets are refused: their own forms copy them.
func ParseObjectKinds(value string) ([]schema.GroupVersionKind, error) {
	var kinds []schema.GroupVersionKind
	var errs []error
	for _, entry := range nonEmptyEntries(value) {
		gvk, err := parseObjectKind(entry)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--object-kinds entry %q: %w", entry, err))
		case slices.Contains(kinds, gvk):
			errs = append(errs, fmt.Errorf("--object-kinds entry %q: listed twice", entry))
		default:
			kinds = append(kinds, gvk)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(kinds) == 0 && strings.TrimSpace(value) != "" {
		return nil, errors.New("--object-kinds: the list is empty; leave the flag out to enable no kind")
	}
	return kinds, nil
}

// parseObjectKind parses one entry of --object-kinds.
func parseObjectKind(entry string) (schema.GroupVersionKind, error) {
	parts := strings.Split(entry, "/")
	var gvk schema.GroupVersionKind
	switch len(parts) {
	case 2:
		gvk = schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}
	case 3:
		gvk = schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
		if problems := validation.IsDNS1123Subdomain(gvk.Group); len(problems) > 0 {
			return gvk, fmt.Errorf("group %q: %s", gvk.Group, strings.Join(problems, "; "))
		}
		if gvk.Group == "core" {
			return gvk, fmt.Errorf("the core group has no name: write v1/%s", gvk.Kind)
		}
	default:
		return gvk, errors.New("write group/version/Kind (networking.k8s.io/v1/NetworkPolicy), or version/Kind for a core kind (v1/LimitRange)")
	}
	if problems := validation.IsDNS1035Label(gvk.Version); len(problems) > 0 || !strings.HasPrefix(gvk.Version, "v") {
		return gvk, fmt.Errorf("version %q: not an API version such as v1 or v1beta1", gvk.Version)
	}
	if !isKindName(gvk.Kind) {
		return gvk, fmt.Errorf("kind %q: a kind is written as the API names it, e.g. NetworkPolicy", gvk.Kind)
	}
	if reason := ownFormOf(gvk); reason != "" {
		return gvk, errors.New(reason)
	}
	return gvk, nil
}

// isKindName reports whether s is written as the API writes a kind: a capital letter,
// then letters and digits.
func isKindName(s string) bool {
	if s == "" || len(s) > 63 || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9')
	})
}

// ownFormOf says which form copies gvk when ObjectSync must not (ConfigMap, Secret),
// or "".
func ownFormOf(gvk schema.GroupVersionKind) string {
	if gvk.Group != "" {
		return ""
	}
	switch gvk.Kind {
	case "ConfigMap":
		return "ConfigMaps are copied by the cmsync.io/replicate label or a " + v1alpha1.ConfigMapSyncKind + ", not by an " + v1alpha1.ObjectSyncKind
	case "Secret":
		return "Secrets are copied by the cmsync.io/replicate label (with --secrets=enabled) or a " + v1alpha1.SecretSyncKind +
			", not by an " + v1alpha1.ObjectSyncKind
	}
	return ""
}

// KindScope is what the API server said of an enabled kind when cmsync started.
type KindScope int

const (
	// NotServed: the API server does not serve the kind (its CRD is not installed).
	NotServed KindScope = iota
	// Namespaced: the API server serves the kind, in namespaces: ObjectSync copies it.
	Namespaced
	// ClusterScoped: the API server serves the kind, outside namespaces.
	ClusterScoped
)

// ScopeOfMapping classifies what the API server's discovery answered for a kind
// (mapper.RESTMapping): not served, namespaced or cluster-scoped. The controller at its
// start and the plugin both ask, and judge the answer here.
func ScopeOfMapping(mapping *meta.RESTMapping, err error) (KindScope, error) {
	switch {
	case meta.IsNoMatchError(err):
		return NotServed, nil
	case err != nil:
		return NotServed, err
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		return ClusterScoped, nil
	}
	return Namespaced, nil
}

// ObjectKinds are the kinds the administrator enabled for ObjectSync, and what the API
// server said of each at cmsync's start.
type ObjectKinds map[schema.GroupVersionKind]KindScope

// CheckObjectKind says why an ObjectSync naming a source of apiVersion and kind cannot
// be acted on, or nil: the kind is ConfigMap or Secret (their own forms copy them), not
// enabled, not served, or cluster-scoped. The message says what to do.
func (k ObjectKinds) CheckObjectKind(apiVersion, kind string) error {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return fmt.Errorf("spec.source.apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	if reason := ownFormOf(gvk); reason != "" {
		return fmt.Errorf("spec.source names a %s: %s", kind, reason)
	}
	scope, enabled := k[gvk]
	switch {
	case !enabled:
		return fmt.Errorf("kind %s is not enabled for ObjectSync: the administrator adds %s to the controller's --object-kinds (chart value objectSync.kinds)",
			describeKind(gvk), ObjectKindEntry(gvk))
	case scope == NotServed:
		return fmt.Errorf(
			"the API server does not serve %s: install its CustomResourceDefinition (or fix spec.source.apiVersion); cmsync serves it once it is served",
			describeKind(gvk),
		)
	case scope == ClusterScoped:
		return fmt.Errorf("%s is cluster-scoped: ObjectSync copies objects of namespaced kinds only; remove it from --object-kinds", describeKind(gvk))
	}
	return nil
}

// describeKind writes gvk as kubectl's api-resources does: Kind.version.group.
func describeKind(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind + "." + gvk.Version
	}
	return gvk.Kind + "." + gvk.Version + "." + gvk.Group
}

// ObjectKindEntry writes gvk as --object-kinds takes it (core kinds as v1/Kind): the
// plugin's name of such a kind too.
func ObjectKindEntry(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Version + "/" + gvk.Kind
	}
	return gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
}
