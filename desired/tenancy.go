package desired

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// cmsync can write in every namespace it serves. What follows keeps a user who can edit
// a source in one namespace from gaining, through cmsync, power over namespaces that
// are not theirs: names cmsync never writes, and the tenant boundary.

// IsReserved reports whether cmsync must never create, change or delete an object
// named name: the cluster's CA bundle, and the controller's --reserved-names.
func (p Policy) IsReserved(name string) bool {
	return name == v1alpha1.RootCAConfigMapName || slices.Contains(p.ReservedNames, name)
}

// CheckReplicaName says why replicas may not be named name, or nil.
func (p Policy) CheckReplicaName(name string) error {
	switch {
	case name == v1alpha1.RootCAConfigMapName:
		return fmt.Errorf("the replicas would be named %s, a reserved name (the ConfigMap Kubernetes publishes with the cluster's CA into every namespace): "+
			"cmsync never creates, changes or deletes an object of that name", name)
	case p.IsReserved(name):
		return fmt.Errorf("the replicas would be named %s, a reserved name (the controller's --reserved-names): "+
			"cmsync never creates, changes or deletes an object of that name", name)
	}
	return nil
}

// ParseReservedNames parses --reserved-names: a comma list of object names (no globs).
// Empty entries are skipped.
func ParseReservedNames(value string) ([]string, error) {
	var names []string
	for _, entry := range nonEmptyEntries(value) {
		if problems := validation.IsDNS1123Subdomain(entry); len(problems) > 0 {
			return nil, fmt.Errorf("entry %q is not an object name: %s", entry, strings.Join(problems, "; "))
		}
		names = append(names, entry)
	}
	return names, nil
}

// ParseTenantLabel checks --tenant-label: empty (the boundary is off) or a label key.
func ParseTenantLabel(value string) (string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return "", nil
	}
	if problems := validation.IsQualifiedName(value); len(problems) > 0 {
		return "", fmt.Errorf("%q is not a label key: %s", value, strings.Join(problems, "; "))
	}
	return value, nil
}

// NamespaceOf is what target resolution reads of a namespace object.
func NamespaceOf(obj metav1.Object) Namespace {
	ns := Namespace{Name: obj.GetName(), Labels: obj.GetLabels(), Terminating: obj.GetDeletionTimestamp() != nil}
	if accept, ok := obj.GetAnnotations()[v1alpha1.AcceptFromAnnotation]; ok {
		ns.AcceptFrom = &accept
	}
	return ns
}

// ParseAcceptFrom parses a namespace's cmsync.io/accept-from annotation: the namespaces
// whose sources it accepts, as names and globs with "!" exclusions.
func ParseAcceptFrom(value string) (include, exclude []string, err error) {
	include, exclude, err = parseNamespaceList(value)
	if err == nil && len(include) == 0 {
		err = errors.New("only exclusions: name the namespaces to accept")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("invalid %s %q: %w", v1alpha1.AcceptFromAnnotation, value, err)
	}
	return include, exclude, nil
}

// Origin is where a source lives, and which namespaces its replicas may enter whatever
// its targets say. A source written by a namespace's user (the annotation form) in a
// namespace of a tenant is bound: it reaches the namespaces of its tenant and those that
// accept its namespace. A source in a namespace of no tenant, an explicit object's
// (cluster-scoped, an administrator's) and every source while --tenant-label is unset
// are not bound. An ObjectSync's never reaches the controller's own namespace (SyncOrigin).
type Origin struct {
	// Namespace is the source's namespace.
	Namespace string
	bound     bool
	// label and tenant: the boundary keeps a bound source within the namespaces whose
	// label has the value tenant.
	label, tenant string
	// unknown: the boundary is on but the source's namespace is not among the
	// namespaces (not seen yet), so its tenant is not known: a bound source then
	// reaches no namespace, rather than every one.
	unknown bool
	// guarded is a namespace no replica of the source enters whatever its targets say:
	// the controller's own, for an ObjectSync (Policy.ControllerNamespace).
	guarded string
}

// Unbound is the origin of a source the tenant boundary does not bind: a ConfigMapSync's
// source.
func Unbound(sourceNamespace string) Origin { return Origin{Namespace: sourceNamespace} }

// OriginOf is the origin of an annotated source living in sourceNamespace, among the
// cluster's namespaces.
func (p Policy) OriginOf(sourceNamespace string, namespaces []Namespace) Origin {
	if p.TenantLabel == "" {
		return Unbound(sourceNamespace)
	}
	for _, ns := range namespaces {
		if ns.Name != sourceNamespace {
			continue
		}
		tenant, ok := ns.Labels[p.TenantLabel]
		if !ok {
			return Unbound(sourceNamespace)
		}
		return Origin{Namespace: sourceNamespace, bound: true, label: p.TenantLabel, tenant: tenant}
	}
	return Origin{Namespace: sourceNamespace, bound: true, label: p.TenantLabel, unknown: true}
}

// admits decides whether a replica of a source of this origin may enter ns:
// controllerNamespace for a guarded origin in the controller's namespace; else, by the
// tenant boundary, notRefused within the tenant (or unbound), acceptedFrom when ns
// accepts the source's namespace, otherwise outsideTenant or acceptFromInvalid. It runs for every
// matched namespace of every pass, so it decides only: boundaryWords says why.
func (o Origin) admits(ns Namespace) rule {
	if o.guarded != "" && ns.Name == o.guarded {
		return controllerNamespace
	}
	if !o.bound {
		return notRefused
	}
	if tenant, ok := ns.Labels[o.label]; ok && !o.unknown && tenant == o.tenant {
		return notRefused
	}
	if ns.AcceptFrom == nil {
		return outsideTenant
	}
	include, exclude, err := ParseAcceptFrom(*ns.AcceptFrom)
	switch {
	case err != nil:
		return acceptFromInvalid
	case matchesAny(exclude, o.Namespace) || !matchesAny(include, o.Namespace):
		return outsideTenant
	}
	return acceptedFrom
}

// boundaryWords says, for a person, why the boundary decided r (admits) about ns.
func (o Origin) boundaryWords(ns Namespace, r rule) string {
	if r == acceptedFrom {
		return fmt.Sprintf("accepted across tenants by the namespace's %s %q", v1alpha1.AcceptFromAnnotation, *ns.AcceptFrom)
	}
	acceptance := "it does not accept from " + o.Namespace + " (no " + v1alpha1.AcceptFromAnnotation + ")"
	if ns.AcceptFrom != nil {
		acceptance = fmt.Sprintf("it does not accept from %s (%s %q)", o.Namespace, v1alpha1.AcceptFromAnnotation, *ns.AcceptFrom)
		if _, _, err := ParseAcceptFrom(*ns.AcceptFrom); err != nil {
			acceptance = err.Error() + ", so it accepts nothing"
		}
	}
	if o.unknown {
		return fmt.Sprintf("the tenant of the source's namespace %s is not known yet (namespace not seen); %s", o.Namespace, acceptance)
	}
	where := "it has no " + o.label + " label"
	if tenant, ok := ns.Labels[o.label]; ok {
		where = fmt.Sprintf("it is in tenant %q", tenant)
	}
	return fmt.Sprintf("outside tenant %q of the source's namespace (%s); %s", o.tenant, where, acceptance)
}

// Targets is where a source's replicas go, and what the tenant boundary kept out.
type Targets struct {
	// Namespaces must hold a replica, sorted.
	Namespaces []string
	// Outside are the namespaces the source's targets name and the controller's policy
	// allows, but the tenant boundary keeps out, sorted; Unparsable are those of them
	// whose cmsync.io/accept-from cannot be parsed (it then accepts nothing).
	Outside, Unparsable []string
	origin              Origin
}

// Notice is the end of the status message that says what the tenant boundary kept
// out; "" when it kept out nothing. It counts those namespaces and names none: a
// tenant's source may match any name, and must not learn which namespaces exist
// outside its reach (kubectl cmsync explain, run with the reader's own rights, names
// them; cmsync's log names a namespace whose accept-from cannot be parsed).
func (t Targets) Notice() string {
	if len(t.Outside) == 0 {
		return ""
	}
	n := len(t.Outside)
	var notice string
	if t.origin.unknown {
		notice = fmt.Sprintf("%d matched %s wait for the tenant of namespace %s, not seen yet",
			n, plural(n, "namespace", "namespaces"), t.origin.Namespace)
	} else {
		notice = fmt.Sprintf("%d matched %s outside tenant %q and not accepting from %s",
			n, plural(n, "namespace is", "namespaces are"), t.origin.tenant, t.origin.Namespace)
	}
	if u := len(t.Unparsable); u > 0 {
		notice += fmt.Sprintf("; %d of them %s a %s that cannot be parsed and accepts nothing",
			u, plural(u, "has", "have"), v1alpha1.AcceptFromAnnotation)
	}
	return notice
}

// sortTargets sorts every list of t.
func (t *Targets) sort() {
	sort.Strings(t.Namespaces)
	sort.Strings(t.Outside)
	sort.Strings(t.Unparsable)
}
