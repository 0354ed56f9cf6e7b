package desired

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Namespace is what target resolution needs to know about a namespace.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Terminating bool
	// AcceptFrom is the namespace's cmsync.io/accept-from annotation; nil when absent.
	AcceptFrom *string
}

// TargetSpec says where a source wants its replicas: namespaces matched by the include
// globs or by the selector, minus those matched by an exclude glob. The zero value
// targets nothing. Build it with TargetsOf (the annotation form) or
// ParseSyncTargets (the ConfigMapSync form); both validate every part.
type TargetSpec struct {
	include  namePatterns
	exclude  namePatterns
	selector labels.Selector
}

// newTargetSpec combines already parsed parts into a spec. selector may be nil.
func newTargetSpec(include, exclude []string, selector labels.Selector) TargetSpec {
	return TargetSpec{include: namePatternsOf(include), exclude: namePatternsOf(exclude), selector: selector}
}

// IsEmpty reports whether the spec can match no namespace at all.
func (s TargetSpec) IsEmpty() bool {
	return s.include.isEmpty() && s.selector == nil
}

// Matches reports whether the spec itself selects ns, before the controller's policy
// (excluded, ignored and terminating namespaces, the source's own namespace) is applied.
func (s TargetSpec) Matches(ns Namespace) bool {
	return s.match(ns).rule.selects()
}

// match finds the part of the spec that decides about ns: an exclusion first, then an
// include entry, then the selector.
func (s TargetSpec) match(ns Namespace) decision {
	if pattern, ok := s.exclude.match(ns.Name); ok {
		return decision{rule: excludedByEntry, pattern: pattern}
	}
	if pattern, ok := s.include.match(ns.Name); ok {
		return decision{rule: includedByEntry, pattern: pattern}
	}
	if s.selector != nil && s.selector.Matches(labels.Set(ns.Labels)) {
		return decision{rule: includedBySelector, pattern: s.selector.String()}
	}
	return decision{rule: notNamed}
}

// Policy is the controller's own limit on where replicas may go and where sources may
// live, set by its flags.
type Policy struct {
	// ExcludeNamespaces are globs of namespaces that never receive a replica.
	ExcludeNamespaces []string
	// SourceNamespaces are globs of namespaces whose ConfigMaps may be sources.
	SourceNamespaces []string
	// MaxReplicatedBytes bounds the content one source may write across all its
	// targets (CheckWriteBudget); 0 means no bound.
	MaxReplicatedBytes int64
	// ReservedNames are object names cmsync never creates, changes or deletes, besides
	// kube-root-ca.crt (IsReserved).
	ReservedNames []string
	// TenantLabel names the namespace label that says which tenant a namespace belongs
	// to; "" turns the tenant boundary off (OriginOf).
	TenantLabel string
	// Scope are the namespaces cmsync serves (--namespaces), sorted: it reads and
	// writes ConfigMaps and Secrets in no other. Empty: every namespace.
	Scope []string
	// ControllerNamespace is the namespace cmsync itself runs in, where its
	// ServiceAccount lives: an ObjectSync never writes there (Origin.guarded), since a
	// RoleBinding there would hand cmsync's cluster-wide rights to whoever may create
	// ObjectSyncs, and a deny-all NetworkPolicy there would stop cmsync. "": not known
	// (a process outside a cluster with no --leader-election-namespace).
	ControllerNamespace string
}

// InScope reports whether cmsync serves namespace.
func (p Policy) InScope(namespace string) bool {
	if len(p.Scope) == 0 {
		return true
	}
	_, found := slices.BinarySearch(p.Scope, namespace)
	return found
}

// AllowsTarget reports whether a replica may be written into ns at all.
func (p Policy) AllowsTarget(ns Namespace) bool {
	return p.refusal(ns).rule == notRefused
}

// refusal finds why the policy keeps replicas out of ns, if it does.
func (p Policy) refusal(ns Namespace) decision {
	switch {
	case ns.Terminating:
		return decision{rule: terminating}
	case ns.Labels[v1alpha1.IgnoreNamespaceLabel] == v1alpha1.IgnoreNamespaceLabelValue:
		return decision{rule: ignored}
	case !p.InScope(ns.Name):
		return decision{rule: outsideScope}
	}
	for _, pattern := range p.ExcludeNamespaces {
		if globMatch(pattern, ns.Name) {
			return decision{rule: excludedByController, pattern: pattern}
		}
	}
	return decision{rule: notRefused}
}

// CheckSourceNamespace says why an object in namespace may not be a source, or nil.
func (p Policy) CheckSourceNamespace(namespace string) error {
	switch {
	case !p.InScope(namespace):
		return fmt.Errorf("namespace %s is outside the namespaces cmsync serves (its --namespaces): cmsync does not read there", namespace)
	case !matchesAny(p.SourceNamespaces, namespace):
		return fmt.Errorf("sources are not allowed in namespace %s (the controller's --source-namespaces)", namespace)
	}
	return nil
}

// AllowsSource reports whether a ConfigMap in namespace may be a source.
func (p Policy) AllowsSource(namespace string) bool { return p.CheckSourceNamespace(namespace) == nil }

// TargetNamespaces returns the namespaces that must hold a replica of a source of
// origin: those the spec matches, the policy allows and the tenant boundary admits,
// never the source's own namespace; and those the boundary alone kept out.
func TargetNamespaces(spec TargetSpec, origin Origin, namespaces []Namespace, policy Policy) Targets {
	targets := Targets{origin: origin}
	for _, ns := range namespaces {
		switch d := decide(spec, origin, ns, policy); {
		case d.rule.selects():
			targets.Namespaces = append(targets.Namespaces, ns.Name)
		case d.rule == outsideTenant:
			targets.Outside = append(targets.Outside, ns.Name)
		case d.rule == acceptFromInvalid:
			targets.Outside = append(targets.Outside, ns.Name)
			targets.Unparsable = append(targets.Unparsable, ns.Name)
		}
	}
	targets.sort()
	return targets
}

// parseTargetAnnotations parses the target-namespaces and target-selector annotation
// values; a nil value means the annotation is absent. Both absent is valid and targets
// nothing (the source's replicas are then cleaned up). A present but empty value, a bad
// glob, a bad selector or a list of exclusions with nothing to exclude from is an error
// naming the annotation and the problem.
func parseTargetAnnotations(namespaces, selector *string) (TargetSpec, error) {
	var include, exclude []string
	var sel labels.Selector
	var errs []error
	if namespaces != nil {
		var err error
		if include, exclude, err = parseTargetNamespaces(*namespaces); err != nil {
			errs = append(errs, err)
		}
	}
	if selector != nil {
		// Each comma parts a requirement or a value of one; every pass matches them all
		// against every namespace, so they are bounded as the lists are.
		err := checkListLength(v1alpha1.TargetSelectorAnnotation, *selector, "select the namespaces by a label they share")
		if err == nil {
			if sel, err = parseNamespaceSelector(*selector); err != nil {
				err = fmt.Errorf("invalid target-selector %q: %w", *selector, err)
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	spec := newTargetSpec(include, exclude, sel)
	if len(errs) == 0 && len(exclude) > 0 && spec.IsEmpty() {
		errs = append(
			errs,
			fmt.Errorf("invalid target-namespaces %q: only exclusions; add the namespaces to include (for example \"*\") or a target-selector", *namespaces),
		)
	}
	if err := errors.Join(errs...); err != nil {
		return TargetSpec{}, err
	}
	return spec, nil
}

// parseTargetNamespaces parses the target-namespaces annotation, once its number of
// entries is within the bound.
func parseTargetNamespaces(value string) (include, exclude []string, err error) {
	hint := "name many namespaces with one glob, or select them with " + v1alpha1.TargetSelectorAnnotation
	if err := checkListLength(v1alpha1.TargetNamespacesAnnotation, value, hint); err != nil {
		return nil, nil, err
	}
	if include, exclude, err = parseNamespaceList(value); err != nil {
		return nil, nil, fmt.Errorf("invalid target-namespaces %q: %w", value, err)
	}
	return include, exclude, nil
}

// TargetsOf parses the target annotations of a source.
func TargetsOf(source metav1.Object) (TargetSpec, error) {
	return parseTargetAnnotations(annotationOf(source, v1alpha1.TargetNamespacesAnnotation), annotationOf(source, v1alpha1.TargetSelectorAnnotation))
}

// annotationOf returns a pointer to an annotation's value, nil when it is absent.
func annotationOf(obj metav1.Object, key string) *string {
	if v, ok := obj.GetAnnotations()[key]; ok {
		return &v
	}
	return nil
}

// parseNamespaceList splits a comma list of namespace names and globs into include and
// exclude ("!"-prefixed) patterns. Spaces around entries are ignored; an empty list, an
// empty entry or an entry that is not a valid name or glob is an error.
func parseNamespaceList(value string) (include, exclude []string, err error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil, errors.New("the list is empty")
	}
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		pattern, excluded := strings.CutPrefix(entry, "!")
		if err := validateNamespaceGlob(pattern); err != nil {
			return nil, nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		if excluded {
			exclude = append(exclude, pattern)
		} else {
			include = append(include, pattern)
		}
	}
	return include, exclude, nil
}

// parseNamespaceSelector parses a label selector exactly as kubectl -l does. An empty
// value is an error: it would otherwise select every namespace.
func parseNamespaceSelector(value string) (labels.Selector, error) {
	if strings.TrimSpace(value) == "" {
		return nil, errors.New("the selector is empty")
	}
	return labels.Parse(value)
}

// nonEmptyEntries splits a comma list into its entries, trimmed, leaving out the empty
// ones.
func nonEmptyEntries(value string) []string {
	var entries []string
	for _, entry := range strings.Split(value, ",") {
		if entry = strings.TrimSpace(entry); entry != "" {
			entries = append(entries, entry)
		}
	}
	return entries
}

// ParseGlobList parses a comma list of globs, as used by --exclude-namespaces and
// --source-namespaces. Empty entries are skipped; an empty list matches nothing.
func ParseGlobList(value string) ([]string, error) {
	var globs []string
	for _, entry := range nonEmptyEntries(value) {
		if err := validateNamespaceGlob(entry); err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		globs = append(globs, entry)
	}
	return globs, nil
}

// namespaceGlobs are namespace names and globs that can match one: lower-case letters,
// digits and "-", plus the glob syntax "*", "?" and character classes such as "[a-z]"
// or "[^0-9]".
var namespaceGlobs = globAlphabet{
	empty: "empty name", in: "a namespace name or glob", rule: "names are lower-case letters, digits and '-'",
	allows: func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' },
}

func validateNamespaceGlob(pattern string) error { return namespaceGlobs.validate(pattern) }

// globAlphabet says what a glob over one kind of name may hold besides the glob syntax,
// and how its errors word it.
type globAlphabet struct {
	empty, in, rule string
	allows          func(rune) bool
}

// validate checks that pattern is a name of the alphabet or a glob that can match one.
func (a globAlphabet) validate(pattern string) error {
	if pattern == "" {
		return errors.New(a.empty)
	}
	if len(pattern) > 253 {
		return errors.New("longer than 253 characters")
	}
	for _, r := range pattern {
		if !a.allows(r) && !strings.ContainsRune("*?[]^", r) {
			return fmt.Errorf("character %q cannot appear in %s (%s; globs add '*', '?' and '[...]')", r, a.in, a.rule)
		}
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("malformed glob: %w", err)
	}
	return nil
}

// globMatch matches a validated glob against a name. Validation has ruled out the
// patterns path.Match would reject, so its error cannot occur here.
func globMatch(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok
}

func matchesAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if globMatch(p, name) {
			return true
		}
	}
	return false
}

// ParseSyncTargets builds the target spec of a ConfigMapSync or SecretSync: destinationNamespace,
// destinationNamespaces and namespaceSelector combine as a union, minus the "!" entries
// of destinationNamespaces. The CRD schema already refuses most bad input; this also
// catches what it cannot (malformed globs, selector operators), naming the field.
func ParseSyncTargets(spec v1alpha1.SyncSpec) (TargetSpec, error) {
	var include, exclude []string
	if spec.DestinationNamespace != "" {
		if err := validateNamespaceGlob(spec.DestinationNamespace); err != nil {
			return TargetSpec{}, fmt.Errorf("spec.destinationNamespace %q: %w", spec.DestinationNamespace, err)
		}
		include = append(include, spec.DestinationNamespace)
	}
	for i, entry := range spec.DestinationNamespaces {
		pattern, excluded := strings.CutPrefix(strings.TrimSpace(entry), "!")
		if err := validateNamespaceGlob(pattern); err != nil {
			return TargetSpec{}, fmt.Errorf("spec.destinationNamespaces[%d] %q: %w", i, entry, err)
		}
		if excluded {
			exclude = append(exclude, pattern)
		} else {
			include = append(include, pattern)
		}
	}
	var selector labels.Selector
	if spec.NamespaceSelector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
			return TargetSpec{}, fmt.Errorf("spec.namespaceSelector: %w", err)
		}
	}
	targets := newTargetSpec(include, exclude, selector)
	if targets.IsEmpty() {
		return TargetSpec{}, errors.New("no targets: set spec.destinationNamespace, spec.destinationNamespaces or spec.namespaceSelector")
	}
	return targets, nil
}
