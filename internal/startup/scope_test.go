package startup

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
)

// A namespace is reachable when the rules the API server reports for cmsync there grant
// the verb on the core resource to every object: a rule of another group, or naming
// objects, does not make an informer list.
func TestAllows(t *testing.T) {
	rule := func(groups, resources, verbs, names []string) authorizationv1.ResourceRule {
		return authorizationv1.ResourceRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
	}
	core, all := []string{""}, []string{"*"}
	for _, tc := range []struct {
		name  string
		rules []authorizationv1.ResourceRule
		want  bool
	}{
		{"the resource and verb named", []authorizationv1.ResourceRule{rule(core, []string{"configmaps"}, []string{"get", "list"}, nil)}, true},
		{"wildcards", []authorizationv1.ResourceRule{rule(all, all, all, nil)}, true},
		{"another verb", []authorizationv1.ResourceRule{rule(core, []string{"configmaps"}, []string{"watch"}, nil)}, false},
		{"another resource", []authorizationv1.ResourceRule{rule(core, []string{"secrets"}, all, nil)}, false},
		{"another group", []authorizationv1.ResourceRule{rule([]string{"apps"}, []string{"configmaps"}, all, nil)}, false},
		{"named objects only", []authorizationv1.ResourceRule{rule(core, []string{"configmaps"}, all, []string{"app"})}, false},
		{"no rule", nil, false},
		{"one rule of several", []authorizationv1.ResourceRule{
			rule(core, []string{"pods"}, all, nil), rule(core, []string{"configmaps"}, []string{"list"}, nil),
		}, true},
	} {
		if got := allows(tc.rules, "configmaps", "list"); got != tc.want {
			t.Errorf("%s: allows(list configmaps) = %v, want %v", tc.name, got, tc.want)
		}
	}
}
