package cli

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// The plugin names a kind by a string: "ConfigMap" and "Secret" for the kinds of the
// annotation form, and for a kind an ObjectSync copies its --object-kinds entry
// (networking.k8s.io/v1/NetworkPolicy, v1/LimitRange), which says its group and
// version too. objectKindOf reads either.

// isObjectKind reports whether kind names a kind an ObjectSync copies.
func isObjectKind(kind string) bool { return strings.Contains(kind, "/") }

// gvkOf is the group, version and kind the plugin's name of a kind stands for.
func gvkOf(kind string) schema.GroupVersionKind {
	parts := strings.Split(kind, "/")
	switch len(parts) {
	case 2:
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}
	case 3:
		return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}
	}
	return schema.GroupVersionKind{Version: "v1", Kind: kind}
}

// kindName is the kind's name alone, as messages and the controller name it.
func kindName(kind string) string { return gvkOf(kind).Kind }

// sourceKindOf is the plugin's name of the kind of an explicit object's source.
func sourceKindOf(spec v1alpha1.SyncSpec) string {
	if spec.Kind != v1alpha1.ObjectSyncKind {
		return spec.SourceKind
	}
	gv, err := schema.ParseGroupVersion(spec.SourceAPIVersion)
	if err != nil {
		return spec.SourceKind
	}
	return desired.ObjectKindEntry(gv.WithKind(spec.SourceKind))
}

// servedKinds asks the API server, as cmsync does at its start, what it serves of each
// kind the controller enabled (--object-kinds): with desired.ObjectKinds.CheckObjectKind
// the plugin then refuses what the controller refuses.
func (c cluster) servedKinds(enabled []schema.GroupVersionKind) (desired.ObjectKinds, error) {
	kinds := desired.ObjectKinds{}
	for _, gvk := range enabled {
		scope, err := desired.ScopeOfMapping(c.client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version))
		if err != nil {
			return nil, fmt.Errorf("asking the API server about %s (--object-kinds): %w", gvk, err)
		}
		kinds[gvk] = scope
	}
	return kinds, nil
}

// pluralOf is the resource of a kind as RBAC names it, by the English rule the chart
// derives it with (objectSync.resources overrides an irregular one there).
func pluralOf(kind string) string {
	lower := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(lower, "y") && len(lower) > 1 && !strings.ContainsRune("aeiou", rune(lower[len(lower)-2])):
		return lower[:len(lower)-1] + "ies"
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"),
		strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return lower + "es"
	}
	return lower + "s"
}
