package desired

import "fmt"

// rule is the part of the targets or of the controller's policy that decides whether a
// namespace holds a replica of a source.
type rule int

const (
	notNamed rule = iota
	includedByEntry
	includedBySelector
	excludedByEntry
	ownNamespace
	terminating
	ignored
	excludedByController
	outsideScope
	notRefused
	// The rules of Origin.admits: the controller's own namespace, then the tenant boundary's.
	controllerNamespace
	outsideTenant
	acceptFromInvalid
	acceptedFrom
)

// selects reports whether the rule puts a replica in the namespace.
func (r rule) selects() bool { return r == includedByEntry || r == includedBySelector }

// decision is a rule and the pattern or selector it applied; across is set when a
// namespace of another tenant accepted the source.
type decision struct {
	rule    rule
	pattern string
	across  bool
}

// decide is the one decision about one namespace that TargetNamespaces makes for every
// namespace and ExplainTarget puts into words: the source's own namespace never, then
// what the targets say, then what the controller's policy allows, then the tenant
// boundary.
func decide(spec TargetSpec, origin Origin, ns Namespace, policy Policy) decision {
	if ns.Name == origin.Namespace {
		return decision{rule: ownNamespace}
	}
	d := spec.match(ns)
	if !d.rule.selects() {
		return d
	}
	if refused := policy.refusal(ns); refused.rule != notRefused {
		return refused
	}
	switch admitted := origin.admits(ns); admitted {
	case notRefused:
	case acceptedFrom:
		d.across = true
	default:
		return decision{rule: admitted}
	}
	return d
}

// Verdict says whether a namespace must hold a replica of a source, and which rule
// decided, in words for a person.
type Verdict struct {
	Wanted bool
	Rule   string
}

// ExplainTarget is TargetNamespaces' decision about one namespace, with its reason.
func ExplainTarget(spec TargetSpec, origin Origin, ns Namespace, policy Policy) Verdict {
	d := decide(spec, origin, ns, policy)
	words := d.describe()
	switch {
	case d.rule == outsideTenant || d.rule == acceptFromInvalid:
		words = origin.boundaryWords(ns, d.rule)
	case d.across:
		words += "; " + origin.boundaryWords(ns, acceptedFrom)
	}
	return Verdict{Wanted: d.rule.selects(), Rule: words}
}

func (d decision) describe() string {
	switch d.rule {
	case includedByEntry:
		if isLiteral(d.pattern) {
			return fmt.Sprintf("listed by name (%s)", d.pattern)
		}
		return fmt.Sprintf("matched by the glob %q", d.pattern)
	case includedBySelector:
		return fmt.Sprintf("selected by the namespace selector %q", d.pattern)
	case excludedByEntry:
		return fmt.Sprintf("excluded by the entry %q", "!"+d.pattern)
	case ownNamespace:
		return "the source's own namespace: a source is never copied onto itself"
	case terminating:
		return "the namespace is terminating"
	case ignored:
		return "the namespace is labelled cmsync.io/ignore=true"
	case excludedByController:
		return fmt.Sprintf("excluded by the controller's --exclude-namespaces (%q)", d.pattern)
	case outsideScope:
		return "outside the namespaces cmsync serves (its --namespaces): cmsync neither reads nor writes there"
	case controllerNamespace:
		return "cmsync's own namespace: an ObjectSync never writes where cmsync runs (a Role, RoleBinding or NetworkPolicy there would reach cmsync itself)"
	default:
		return "not named by the targets (no entry, glob or selector matches it)"
	}
}

// isLiteral reports whether a validated namespace glob is a plain name.
func isLiteral(pattern string) bool {
	for _, r := range pattern {
		if r == '*' || r == '?' || r == '[' {
			return false
		}
	}
	return true
}
