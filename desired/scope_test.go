package desired

import (
	"slices"
	"strings"
	"testing"
)

func TestParseScope(t *testing.T) {
	tests := []struct {
		value, want, err string
	}{
		{"", "", ""},
		{" , ", "", ""},
		{"team-b, team-a,team-b", "team-a,team-b", ""},
		{"team-*", "", `entry "team-*" is a glob: list each namespace by name`},
		{"team-[ab]", "", "is a glob"},
		{"Team-A", "", `entry "Team-A" is not a namespace name`},
		{"a.b", "", `entry "a.b" is not a namespace name`},
	}
	for _, tt := range tests {
		got, err := ParseScope(tt.value)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ParseScope(%q) = %v, %v; want the error %q", tt.value, got, err, tt.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tt.want {
			t.Errorf("ParseScope(%q) = %v, %v; want %q", tt.value, got, err, tt.want)
		}
	}
}

// A source's targets are limited to the namespaces cmsync serves, whatever its glob or
// selector matches; explain says why; a source namespace outside is no source.
func TestScopeLimitsTargetsAndSources(t *testing.T) {
	policy := Policy{SourceNamespaces: []string{"*"}, Scope: []string{"team-a", "team-b", "team-src"}}
	namespaces := []Namespace{{Name: "team-a"}, {Name: "team-b"}, {Name: "team-c"}, {Name: "team-src"}, {Name: "other"}}
	spec, err := parseTargetAnnotations(ptrTo("team-*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	origin := policy.OriginOf("team-src", namespaces)
	if got := TargetNamespaces(spec, origin, namespaces, policy).Namespaces; !slices.Equal(got, []string{"team-a", "team-b"}) {
		t.Errorf("targets %v, want team-a and team-b", got)
	}
	verdict := ExplainTarget(spec, origin, Namespace{Name: "team-c"}, policy)
	if verdict.Wanted || !strings.Contains(verdict.Rule, "outside the namespaces cmsync serves (its --namespaces)") {
		t.Errorf("explain team-c: %+v", verdict)
	}
	if err := policy.CheckSourceNamespace("other"); err == nil || !strings.Contains(err.Error(), "outside the namespaces cmsync serves") {
		t.Errorf("a source namespace outside the scope: %v", err)
	}
	if err := policy.CheckSourceNamespace("team-a"); err != nil {
		t.Errorf("a source namespace inside the scope: %v", err)
	}
	if everywhere := (Policy{}); !everywhere.InScope("anything") {
		t.Error("no scope serves every namespace")
	}
}
