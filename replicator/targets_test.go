package replicator

import (
	"reflect"
	"strings"
	"testing"
)

func ptr(s string) *string { return &s }

func TestParseTargetAnnotations(t *testing.T) {
	tests := []struct {
		name          string
		names, sel    *string
		wantErr       string // substring; empty means valid
		wantEmptySpec bool
	}{
		{name: "both absent targets nothing", wantEmptySpec: true},
		{name: "single name", names: ptr("team-a")},
		{name: "globs and exclusions", names: ptr("team-*, shared ,!team-legacy")},
		{name: "star alone", names: ptr("*")},
		{name: "star with exclusions", names: ptr("*,!kube-*")},
		{name: "character class", names: ptr("team-[a-c]"), sel: nil},
		{name: "negated class", names: ptr("team-[^x]")},
		{name: "question mark", names: ptr("team-?")},
		{name: "selector only", sel: ptr("env=prod")},
		{name: "selector with empty value", sel: ptr("env=")},
		{name: "set based selector", sel: ptr("env=prod,tier in (web,api),!deprecated")},
		{name: "exclusions with selector", names: ptr("!legacy"), sel: ptr("env=prod")},
		{name: "empty list", names: ptr(""), wantErr: `invalid target-namespaces "": the list is empty`},
		{name: "whitespace list", names: ptr("  "), wantErr: "the list is empty"},
		{name: "empty entry", names: ptr("a,,b"), wantErr: `entry "": empty name`},
		{name: "trailing comma", names: ptr("a,"), wantErr: "empty name"},
		{name: "bare exclusion mark", names: ptr("a,!"), wantErr: `entry "!": empty name`},
		{name: "unclosed class", names: ptr("team-[a"), wantErr: "malformed glob"},
		{name: "empty class", names: ptr("[]"), wantErr: "malformed glob"},
		{name: "upper case", names: ptr("Team"), wantErr: "character 'T'"},
		{name: "underscore", names: ptr("team_a"), wantErr: "character '_'"},
		{name: "slash", names: ptr("ns/name"), wantErr: "character '/'"},
		{name: "space inside", names: ptr("team a"), wantErr: "character ' '"},
		{name: "too long", names: ptr(strings.Repeat("a", 254)), wantErr: "longer than 253"},
		{name: "only exclusions", names: ptr("!a,!b"), wantErr: "only exclusions"},
		{name: "selector without key", sel: ptr("=prod"), wantErr: `invalid target-selector "=prod"`},
		{name: "unclosed set", sel: ptr("tier in ("), wantErr: `invalid target-selector "tier in ("`},
		{name: "two words", sel: ptr("a b"), wantErr: `invalid target-selector "a b"`},
		{name: "empty selector", sel: ptr(""), wantErr: "the selector is empty"},
		{name: "bad label key", sel: ptr("-bad=x"), wantErr: "invalid target-selector"},
		{name: "both bad, both named", names: ptr("A"), sel: ptr("=x"), wantErr: "invalid target-namespaces"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := ParseTargetAnnotations(tt.names, tt.sel)
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
	_, err := ParseTargetAnnotations(ptr("A"), ptr("=x"))
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
		{name: "names", names: ptr("team-a,shared"), want: []string{"shared", "team-a"}},
		{name: "glob with exclusion", names: ptr("team-*,!team-legacy"), want: []string{"team-a", "team-b"}},
		{name: "class", names: ptr("team-[ab]"), want: []string{"team-a", "team-b"}},
		{name: "selector", sel: ptr("env=prod,tier in (web,api),!deprecated"), want: []string{"web"}},
		{name: "selector with empty value", sel: ptr("env="), want: []string{"empty-env"}},
		{name: "union minus exclusions", names: ptr("shared,!team-legacy"), sel: ptr("env=prod"),
			want: []string{"old", "shared", "team-a", "web"}},
		{name: "star skips own, excluded, ignored and terminating namespaces", names: ptr("*"),
			want: []string{"empty-env", "not-ignored", "old", "shared", "team-a", "team-b", "team-legacy", "web"}},
		{name: "own namespace listed", names: ptr("platform,shared"), want: []string{"shared"}},
		{name: "explicitly named excluded namespace", names: ptr("kube-system"), want: nil},
		{name: "matches nothing", sel: ptr("env=none"), want: nil},
		{name: "nothing asked", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := ParseTargetAnnotations(tt.names, tt.sel)
			if err != nil {
				t.Fatal(err)
			}
			got := TargetNamespaces(spec, "platform", namespaces, policy)
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
