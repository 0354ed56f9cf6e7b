package desired

import (
	"reflect"
	"strings"
	"testing"
)

func strPtr(s string) *string { return &s }

func TestParseTargetAnnotations(t *testing.T) {
	tests := []struct {
		name          string
		names, sel    *string
		wantErr       string // substring; empty means valid
		wantEmptySpec bool
	}{
		{name: "both absent targets nothing", wantEmptySpec: true},
		{name: "single name", names: strPtr("team-a")},
		{name: "globs and exclusions", names: strPtr("team-*, shared ,!team-legacy")},
		{name: "star alone", names: strPtr("*")},
		{name: "star with exclusions", names: strPtr("*,!kube-*")},
		{name: "character class", names: strPtr("team-[a-c]"), sel: nil},
		{name: "negated class", names: strPtr("team-[^x]")},
		{name: "question mark", names: strPtr("team-?")},
		{name: "selector only", sel: strPtr("env=prod")},
		{name: "selector with empty value", sel: strPtr("env=")},
		{name: "set based selector", sel: strPtr("env=prod,tier in (web,api),!deprecated")},
		{name: "exclusions with selector", names: strPtr("!legacy"), sel: strPtr("env=prod")},
		{name: "empty list", names: strPtr(""), wantErr: `invalid target-namespaces "": the list is empty`},
		{name: "whitespace list", names: strPtr("  "), wantErr: "the list is empty"},
		{name: "empty entry", names: strPtr("a,,b"), wantErr: `entry "": empty name`},
		{name: "trailing comma", names: strPtr("a,"), wantErr: "empty name"},
		{name: "bare exclusion mark", names: strPtr("a,!"), wantErr: `entry "!": empty name`},
		{name: "unclosed class", names: strPtr("team-[a"), wantErr: "malformed glob"},
		{name: "empty class", names: strPtr("[]"), wantErr: "malformed glob"},
		{name: "upper case", names: strPtr("Team"), wantErr: "character 'T'"},
		{name: "underscore", names: strPtr("team_a"), wantErr: "character '_'"},
		{name: "slash", names: strPtr("ns/name"), wantErr: "character '/'"},
		{name: "space inside", names: strPtr("team a"), wantErr: "character ' '"},
		{name: "too long", names: strPtr(strings.Repeat("a", 254)), wantErr: "longer than 253"},
		{name: "only exclusions", names: strPtr("!a,!b"), wantErr: "only exclusions"},
		{name: "selector without key", sel: strPtr("=prod"), wantErr: `invalid target-selector "=prod"`},
		{name: "unclosed set", sel: strPtr("tier in ("), wantErr: `invalid target-selector "tier in ("`},
		{name: "two words", sel: strPtr("a b"), wantErr: `invalid target-selector "a b"`},
		{name: "empty selector", sel: strPtr(""), wantErr: "the selector is empty"},
		{name: "bad label key", sel: strPtr("-bad=x"), wantErr: "invalid target-selector"},
		{name: "both bad, both named", names: strPtr("A"), sel: strPtr("=x"), wantErr: "invalid target-namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := parseTargetAnnotations(tt.names, tt.sel)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if spec.IsEmpty() != tt.wantEmptySpec {
					t.Errorf("IsEmpty = %v, want %v", spec.IsEmpty(), tt.wantEmptySpec)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
	_, err := parseTargetAnnotations(strPtr("A"), strPtr("=x"))
	if err == nil || !strings.Contains(err.Error(), "target-selector") {
		t.Errorf("both problems should be reported, got %v", err)
	}
}

func TestTargetNamespaces(t *testing.T) {
	namespaces := []Namespace{
		{Name: "platform"},
		{Name: "team-a", Labels: map[string]string{"env": "prod"}},
		{Name: "team-b"},
		{Name: "team-legacy", Labels: map[string]string{"env": "prod"}},
		{Name: "shared"},
		{Name: "web", Labels: map[string]string{"env": "prod", "tier": "web"}},
		{Name: "old", Labels: map[string]string{"env": "prod", "deprecated": "yes"}},
		{Name: "empty-env", Labels: map[string]string{"env": ""}},
		{Name: "ignored", Labels: map[string]string{"cmsync.io/ignore": "true", "env": "prod"}},
		{Name: "not-ignored", Labels: map[string]string{"cmsync.io/ignore": "false"}},
		{Name: "going", Terminating: true},
		{Name: "kube-system", Labels: map[string]string{"env": "prod"}},
	}
	policy := Policy{ExcludeNamespaces: []string{"kube-system", "kube-public", "kube-node-lease"}}
	tests := []struct {
		name       string
		names, sel *string
		want       []string
	}{
		{name: "names", names: strPtr("team-a,shared"), want: []string{"shared", "team-a"}},
		{name: "glob with exclusion", names: strPtr("team-*,!team-legacy"), want: []string{"team-a", "team-b"}},
		{name: "class", names: strPtr("team-[ab]"), want: []string{"team-a", "team-b"}},
		{name: "selector", sel: strPtr("env=prod,tier in (web,api),!deprecated"), want: []string{"web"}},
		{name: "selector with empty value", sel: strPtr("env="), want: []string{"empty-env"}},
		{name: "union minus exclusions", names: strPtr("shared,!team-legacy"), sel: strPtr("env=prod"),
			want: []string{"old", "shared", "team-a", "web"}},
		{name: "star skips own, excluded, ignored and terminating namespaces", names: strPtr("*"),
			want: []string{"empty-env", "not-ignored", "old", "shared", "team-a", "team-b", "team-legacy", "web"}},
		{name: "own namespace listed", names: strPtr("platform,shared"), want: []string{"shared"}},
		{name: "explicitly named excluded namespace", names: strPtr("kube-system"), want: nil},
		{name: "matches nothing", sel: strPtr("env=none"), want: nil},
		{name: "nothing asked", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := parseTargetAnnotations(tt.names, tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			got := TargetNamespaces(spec, Unbound("platform"), namespaces, policy).Namespaces
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPolicyAllowsSource(t *testing.T) {
	globs, err := ParseGlobList("platform, team-*")
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{SourceNamespaces: globs}
	for ns, want := range map[string]bool{"platform": true, "team-x": true, "other": false} {
		if got := p.AllowsSource(ns); got != want {
			t.Errorf("AllowsSource(%s) = %v", ns, got)
		}
	}
	if (Policy{}).AllowsSource("x") {
		t.Errorf("an empty --source-namespaces must allow nothing")
	}
}

func TestParseGlobList(t *testing.T) {
	if got, err := ParseGlobList("a, b*,,"); err != nil || !reflect.DeepEqual(got, []string{"a", "b*"}) {
		t.Errorf("got %v %v", got, err)
	}
	if got, err := ParseGlobList(""); err != nil || got != nil {
		t.Errorf("empty list: got %v %v", got, err)
	}
	if _, err := ParseGlobList("ok,[bad"); err == nil || !strings.Contains(err.Error(), `entry "[bad"`) {
		t.Errorf("bad glob: %v", err)
	}
}
