package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// NotChecked is something a command could not read with the user's rights: the
// permission that was missing, and what the answer therefore leaves out. A user who may
// read only their own namespace gets every answer that namespace allows, with these
// naming the rest, rather than an error.
type NotChecked struct {
	// Missing is the permission, as a Role or ClusterRole grants it: "list namespaces
	// (cluster-wide)", "list secrets in namespace team-a".
	Missing string `json:"missing"`
	// Unchecked is what the answer does not cover for want of it.
	Unchecked string `json:"unchecked"`
}

// The kinds, besides the sources', whose permissions the plugin names.
const (
	namespaceKind  = "Namespace"
	deploymentKind = "Deployment"
)

// mayGet is the permission to get objects of kind in namespace ("": cluster-wide).
func mayGet(kind, namespace string) permission { return permission{"get", kind, namespace} }

// mayList is the permission to list objects of kind in namespace ("": cluster-wide).
func mayList(kind, namespace string) permission { return permission{"list", kind, namespace} }

// permission is one RBAC verb on one resource, in one namespace or cluster-wide
// (namespace "").
type permission struct {
	verb, kind, namespace string
}

func (p permission) String() string {
	switch {
	case p.namespace == "":
		return fmt.Sprintf("%s %s (cluster-wide)", p.verb, resourceOf(p.kind))
	case p.kind == namespaceKind:
		// A RoleBinding in a namespace may grant get on that namespace itself.
		return fmt.Sprintf("%s namespace %s", p.verb, p.namespace)
	}
	return fmt.Sprintf("%s %s in namespace %s", p.verb, resourceOf(p.kind), p.namespace)
}

// resourceOf names the resource of kind as a rule of a Role grants it.
func resourceOf(kind string) string {
	switch kind {
	case v1alpha1.ConfigMapSyncKind, v1alpha1.SecretSyncKind, v1alpha1.ObjectSyncKind:
		return strings.ToLower(kind) + "s." + v1alpha1.GroupVersion.Group
	case deploymentKind:
		return "deployments.apps"
	}
	if gvk := gvkOf(kind); gvk.Group != "" {
		return pluralOf(gvk.Kind) + "." + gvk.Group
	}
	return pluralOf(kindName(kind))
}

// readError is the error of a read that failed, said plainly when for want of p.
func readError(kind, name string, p permission, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("you may not read %s %s (missing: %s)", kind, name, p)
	}
	return fmt.Errorf("reading %s %s: %w", kind, name, err)
}

// missed collects what a command could not read, once each.
type missed struct {
	items []NotChecked
}

func (m *missed) add(p permission, unchecked string) {
	item := NotChecked{Missing: p.String(), Unchecked: unchecked}
	if !slices.Contains(m.items, item) {
		m.items = append(m.items, item)
	}
}

// list is what was missed, for an answer; nil when nothing was.
func (m *missed) list() []NotChecked {
	return slices.Clone(m.items)
}

// printNotChecked writes the table lines that name what was not checked.
func printNotChecked(w io.Writer, items []NotChecked) {
	for _, n := range items {
		printf(w, "not checked: %s (missing: %s)\n", n.Unchecked, n.Missing)
	}
}

// namesOf lists names for a message: "a, b and c"; "none" when empty.
func namesOf(names []string) string {
	switch len(names) {
	case 0:
		return "none"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
