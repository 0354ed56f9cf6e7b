package desired

import (
	"slices"
	"testing"
)

func TestExplainTarget(t *testing.T) {
	spec, err := parseTargetAnnotations(ptrTo("team-*,shared,!team-legacy"), ptrTo("env=prod"))
	if err != nil {
		t.Fatal(err)
	}
	policy := Policy{ExcludeNamespaces: []string{"kube-*"}, SourceNamespaces: []string{"*"}}
	tests := []struct {
		ns     Namespace
		wanted bool
		rule   string
	}{
		{Namespace{Name: "shared"}, true, "listed by name (shared)"},
		{Namespace{Name: "team-a"}, true, `matched by the glob "team-*"`},
		{Namespace{Name: "billing", Labels: map[string]string{"env": "prod"}}, true, `selected by the namespace selector "env=prod"`},
		{Namespace{Name: "team-legacy"}, false, `excluded by the entry "!team-legacy"`},
		{Namespace{Name: "platform"}, false, "the source's own namespace: a source is never copied onto itself"},
		{Namespace{Name: "team-b", Terminating: true}, false, "the namespace is terminating"},
		{Namespace{Name: "team-c", Labels: map[string]string{"cmsync.io/ignore": "true"}}, false, "the namespace is labelled cmsync.io/ignore=true"},
		{Namespace{Name: "kube-prod", Labels: map[string]string{"env": "prod"}}, false, `excluded by the controller's --exclude-namespaces ("kube-*")`},
		{Namespace{Name: "other"}, false, "not named by the targets (no entry, glob or selector matches it)"},
		// What the targets do not name is said first, whatever the policy would say.
		{Namespace{Name: "kube-system"}, false, "not named by the targets (no entry, glob or selector matches it)"},
	}
	all := make([]Namespace, 0, len(tests)+1)
	for _, tt := range tests {
		all = append(all, tt.ns)
	}
	all = append(all, Namespace{Name: "platform"})
	targets := TargetNamespaces(spec, Unbound("platform"), all, policy).Namespaces
	for _, tt := range tests {
		t.Run(tt.ns.Name, func(t *testing.T) {
			got := ExplainTarget(spec, Unbound("platform"), tt.ns, policy)
			if got.Wanted != tt.wanted || got.Rule != tt.rule {
				t.Errorf("got %+v, want %v %q", got, tt.wanted, tt.rule)
			}
			if slices.Contains(targets, tt.ns.Name) != got.Wanted {
				t.Errorf("ExplainTarget says wanted=%v, TargetNamespaces %v", got.Wanted, targets)
			}
		})
	}
}

func ptrTo(s string) *string { return &s }
