package desired

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

const tenantLabel = "capsule.clastix.io/tenant"

func tenantNS(name, tenant string, acceptFrom ...string) Namespace {
	ns := Namespace{Name: name, Labels: map[string]string{}}
	if tenant != "" {
		ns.Labels[tenantLabel] = tenant
	}
	if len(acceptFrom) > 0 {
		ns.AcceptFrom = &acceptFrom[0]
	}
	return ns
}

// tenantNamespaces: tenants a (a-dev, a-prod) and b (b-dev, b-prod, b-shared accepting
// a-dev, b-open accepting every namespace but a-prod, b-broken with a malformed
// accept-from), and namespaces of no tenant (platform, shared, empty-tenant with the
// label but no value).
var tenantNamespaces = []Namespace{
	tenantNS("a-dev", "a"), tenantNS("a-prod", "a"),
	tenantNS("b-dev", "b"), tenantNS("b-prod", "b"),
	tenantNS("b-shared", "b", "a-dev"), tenantNS("b-open", "b", "*,!a-prod"), tenantNS("b-broken", "b", "a-dev,[x"),
	tenantNS("platform", ""), tenantNS("shared", "", "platform,a-*"),
	{Name: "empty-tenant", Labels: map[string]string{tenantLabel: ""}},
	{Name: "kube-system"},
}

func TestTenantBoundary(t *testing.T) {
	bounded := Policy{TenantLabel: tenantLabel, ExcludeNamespaces: []string{"kube-system"}}
	everywhere, err := parseTargetAnnotations(ptrTo("*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		policy      Policy
		origin      func(Policy) Origin
		want        []string
		outside     []string
		unparsable  []string
		noticeParts []string
	}{
		{
			name:       "a tenant's source stays in its tenant and the namespaces accepting it",
			policy:     bounded,
			origin:     func(p Policy) Origin { return p.OriginOf("a-dev", tenantNamespaces) },
			want:       []string{"a-prod", "b-open", "b-shared", "shared"},
			outside:    []string{"b-broken", "b-dev", "b-prod", "empty-tenant", "platform"},
			unparsable: []string{"b-broken"},
			noticeParts: []string{
				`5 matched namespaces are outside tenant "a" and not accepting from a-dev; 1 of them has a cmsync.io/accept-from that cannot be parsed`,
			},
		},
		{
			name: "an exclusion in accept-from keeps the named namespace out", policy: bounded,
			origin:  func(p Policy) Origin { return p.OriginOf("a-prod", tenantNamespaces) },
			want:    []string{"a-dev", "shared"},
			outside: []string{"b-broken", "b-dev", "b-open", "b-prod", "b-shared", "empty-tenant", "platform"}, unparsable: []string{"b-broken"},
		},
		{
			name: "a source of no tenant reaches every tenant", policy: bounded,
			origin: func(p Policy) Origin { return p.OriginOf("platform", tenantNamespaces) },
			want:   []string{"a-dev", "a-prod", "b-broken", "b-dev", "b-open", "b-prod", "b-shared", "empty-tenant", "shared"},
		},
		{
			name: "a label with an empty value is a tenant of its own", policy: bounded,
			origin:  func(p Policy) Origin { return p.OriginOf("empty-tenant", tenantNamespaces) },
			want:    []string{"b-open"},
			outside: []string{"a-dev", "a-prod", "b-broken", "b-dev", "b-prod", "b-shared", "platform", "shared"}, unparsable: []string{"b-broken"},
		},
		{
			name: "a source whose namespace is not seen yet reaches only the namespaces accepting it", policy: bounded,
			origin:      func(p Policy) Origin { return p.OriginOf("new", tenantNamespaces) },
			want:        []string{"b-open"},
			outside:     []string{"a-dev", "a-prod", "b-broken", "b-dev", "b-prod", "b-shared", "empty-tenant", "platform", "shared"},
			unparsable:  []string{"b-broken"},
			noticeParts: []string{"9 matched namespaces wait for the tenant of namespace new, not seen yet"},
		},
		{
			name: "without --tenant-label, accept-from changes nothing", policy: Policy{ExcludeNamespaces: []string{"kube-system"}},
			origin: func(p Policy) Origin { return p.OriginOf("a-dev", tenantNamespaces) },
			want:   []string{"a-prod", "b-broken", "b-dev", "b-open", "b-prod", "b-shared", "empty-tenant", "platform", "shared"},
		},
		{
			name: "a ConfigMapSync is not bound", policy: bounded,
			origin: func(Policy) Origin { return Unbound("a-dev") },
			want:   []string{"a-prod", "b-broken", "b-dev", "b-open", "b-prod", "b-shared", "empty-tenant", "platform", "shared"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			origin := tt.origin(tt.policy)
			got := TargetNamespaces(everywhere, origin, tenantNamespaces, tt.policy)
			if !reflect.DeepEqual(got.Namespaces, tt.want) || !reflect.DeepEqual(got.Outside, tt.outside) || !reflect.DeepEqual(got.Unparsable, tt.unparsable) {
				t.Errorf(
					"got %v, outside %v, unparsable %v\nwant %v, outside %v, unparsable %v",
					got.Namespaces,
					got.Outside,
					got.Unparsable,
					tt.want,
					tt.outside,
					tt.unparsable,
				)
			}
			if (got.Notice() == "") != (len(tt.outside) == 0) {
				t.Errorf("notice %q with %d outside", got.Notice(), len(tt.outside))
			}
			for _, part := range tt.noticeParts {
				if !strings.Contains(got.Notice(), part) {
					t.Errorf("notice %q lacks %q", got.Notice(), part)
				}
			}
		})
	}
}

func TestExplainTenantBoundary(t *testing.T) {
	policy := Policy{TenantLabel: tenantLabel}
	spec, err := parseTargetAnnotations(ptrTo("*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	origin := policy.OriginOf("a-dev", tenantNamespaces)
	tests := []struct {
		ns     string
		wanted bool
		rule   string
	}{
		{"a-prod", true, `matched by the glob "*"`},
		{"b-shared", true, `matched by the glob "*"; accepted across tenants by the namespace's cmsync.io/accept-from "a-dev"`},
		{"b-dev", false, `outside tenant "a" of the source's namespace (it is in tenant "b"); it does not accept from a-dev (no cmsync.io/accept-from)`},
		{
			"platform",
			false,
			`outside tenant "a" of the source's namespace (it has no capsule.clastix.io/tenant label); it does not accept from a-dev (no cmsync.io/accept-from)`,
		},
		{"b-broken", false, `invalid cmsync.io/accept-from "a-dev,[x": entry "[x": malformed glob: syntax error in pattern, so it accepts nothing`},
	}
	for _, tt := range tests {
		i := slices.IndexFunc(tenantNamespaces, func(ns Namespace) bool { return ns.Name == tt.ns })
		got := ExplainTarget(spec, origin, tenantNamespaces[i], policy)
		if got.Wanted != tt.wanted || !strings.Contains(got.Rule, tt.rule) {
			t.Errorf("%s: got %+v, want %v %q", tt.ns, got, tt.wanted, tt.rule)
		}
	}
}

func TestReservedNames(t *testing.T) {
	policy := Policy{ReservedNames: []string{"istio-ca-root-cert"}}
	for name, reserved := range map[string]bool{"kube-root-ca.crt": true, "istio-ca-root-cert": true, "ca-bundle": false, "kube-root-ca": false} {
		if policy.IsReserved(name) != reserved {
			t.Errorf("IsReserved(%s) = %v", name, !reserved)
		}
		err := policy.CheckReplicaName(name)
		if (err != nil) != reserved || err != nil && !strings.Contains(err.Error(), name) {
			t.Errorf("CheckReplicaName(%s) = %v", name, err)
		}
	}
	if !(Policy{}).IsReserved("kube-root-ca.crt") {
		t.Errorf("kube-root-ca.crt must be reserved without any flag")
	}
}

func TestParsePolicyValues(t *testing.T) {
	if got, err := ParseReservedNames(
		" istio-ca-root-cert, ,openshift-service-ca.crt",
	); err != nil ||
		!reflect.DeepEqual(got, []string{"istio-ca-root-cert", "openshift-service-ca.crt"}) {
		t.Errorf("ParseReservedNames: %v %v", got, err)
	}
	for _, bad := range []string{"Upper", "a b", "ca-*", "x/y"} {
		if _, err := ParseReservedNames(bad); err == nil || !strings.Contains(err.Error(), "not an object name") {
			t.Errorf("ParseReservedNames(%q): %v", bad, err)
		}
	}
	if got, err := ParseTenantLabel(" capsule.clastix.io/tenant "); err != nil || got != "capsule.clastix.io/tenant" {
		t.Errorf("ParseTenantLabel: %q %v", got, err)
	}
	for _, bad := range []string{"a b", "-x", "example.com/", "=x"} {
		if _, err := ParseTenantLabel(bad); err == nil {
			t.Errorf("ParseTenantLabel(%q) accepted", bad)
		}
	}
	for value, wantErr := range map[string]string{"": "the list is empty", "!a": "only exclusions", "a,,b": "empty name", "A": "cannot appear"} {
		if _, _, err := ParseAcceptFrom(
			value,
		); err == nil || !strings.Contains(err.Error(), wantErr) ||
			!strings.Contains(err.Error(), "cmsync.io/accept-from") {
			t.Errorf("ParseAcceptFrom(%q): %v, want %q", value, err, wantErr)
		}
	}
}

// FuzzTenantBoundary: whatever a namespace's tenant and accept-from say, a bound
// source reaches another tenant's namespace only when its accept-from parses and names
// the source's namespace (never more than it says), ExplainTarget agrees with
// TargetNamespaces, and nothing panics.
func FuzzTenantBoundary(f *testing.F) {
	for _, seed := range [][4]string{
		{"a", "b", "a-dev", "team-*"}, {"a", "a", "a-dev", ""}, {"a", "", "a-dev", "*,!a-dev"},
		{"", "b", "a-dev", "[x"}, {"a", "b", "a-dev", "!a-dev"}, {"a", "b", "a-dev", " a-dev , b"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], true)
	}
	f.Fuzz(func(t *testing.T, sourceTenant, targetTenant, sourceNS, acceptFrom string, hasAccept bool) {
		if sourceNS == "" || sourceNS == "target" {
			return
		}
		source := Namespace{Name: sourceNS, Labels: map[string]string{}}
		if sourceTenant != "" {
			source.Labels[tenantLabel] = sourceTenant
		}
		target := Namespace{Name: "target", Labels: map[string]string{}}
		if targetTenant != "" {
			target.Labels[tenantLabel] = targetTenant
		}
		if hasAccept {
			target.AcceptFrom = &acceptFrom
		}
		policy := Policy{TenantLabel: tenantLabel}
		namespaces := []Namespace{source, target}
		origin := policy.OriginOf(sourceNS, namespaces)
		spec := newTargetSpec([]string{"*"}, nil, nil)
		got := TargetNamespaces(spec, origin, namespaces, policy)
		reached := slices.Contains(got.Namespaces, "target")
		if ExplainTarget(spec, origin, target, policy).Wanted != reached {
			t.Fatalf("ExplainTarget and TargetNamespaces disagree")
		}
		if reached == slices.Contains(got.Outside, "target") {
			t.Fatalf("target is both or neither reached and outside: %+v", got)
		}
		sameTenant := sourceTenant == "" || targetTenant == sourceTenant
		if !reached || sameTenant {
			return
		}
		if !hasAccept {
			t.Fatalf("tenant %q reached tenant %q without accept-from", sourceTenant, targetTenant)
		}
		include, exclude, err := ParseAcceptFrom(acceptFrom)
		if err != nil {
			t.Fatalf("a malformed accept-from %q let a source in: %v", acceptFrom, err)
		}
		if !matchesAny(include, sourceNS) || matchesAny(exclude, sourceNS) {
			t.Fatalf("accept-from %q does not name %s, yet let it in", acceptFrom, sourceNS)
		}
	})
}

// A pass whose every matched namespace is outside the tenant says none is within reach,
// and still ends with what the boundary kept out.
func TestSummaryWithinTheBoundary(t *testing.T) {
	boundary := `2 matched namespaces are outside tenant "a" and not accepting from a-dev`
	s := Summarize(nil, 0, nil, "")
	s.Within(boundary)
	if want := "no target namespace within reach; " + boundary; s.Message != want {
		t.Errorf("message %q, want %q", s.Message, want)
	}
	s = Summarize([]Result{{Namespace: "a-prod", Outcome: Created}}, 0, nil, "")
	s.Within(boundary)
	if want := "in sync in 1 namespace; " + boundary; s.Message != want {
		t.Errorf("message %q, want %q", s.Message, want)
	}
	s = Summarize(nil, 0, nil, "")
	s.Within("")
	if s.Message != noTargets {
		t.Errorf("without a boundary: %q", s.Message)
	}
}

// AdmittingNamespaces is where an Invalid source keeps its replicas: the namespaces that
// admit it whatever it names. Each namespace is a target of "*" exactly when it admits
// the source, so the two agree on every namespace of every origin.
func TestAdmittingNamespaces(t *testing.T) {
	policy := Policy{TenantLabel: tenantLabel, ExcludeNamespaces: []string{"kube-system"}}
	namespaces := append(slices.Clone(tenantNamespaces),
		Namespace{Name: "a-ignored", Labels: map[string]string{tenantLabel: "a", "cmsync.io/ignore": "true"}},
		Namespace{Name: "a-leaving", Labels: map[string]string{tenantLabel: "a"}, Terminating: true},
	)
	everywhere, err := parseTargetAnnotations(ptrTo("*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, source := range []string{"a-dev", "b-dev", "platform", "unseen"} {
		origin := policy.OriginOf(source, namespaces)
		got := AdmittingNamespaces(origin, namespaces, policy)
		if source == "unseen" {
			// The tenant of an unseen namespace is not known: nothing is withdrawn on a guess.
			if !slices.Contains(got, "b-prod") || !slices.Contains(got, "a-prod") {
				t.Errorf("unseen origin: %v", got)
			}
			continue
		}
		want := TargetNamespaces(everywhere, origin, namespaces, policy).Namespaces
		if !reflect.DeepEqual(sortedCopy(got), want) {
			t.Errorf("source in %s: admitting %v, targets of * %v", source, got, want)
		}
		for _, never := range []string{"kube-system", "a-ignored", "a-leaving", source} {
			if slices.Contains(got, never) {
				t.Errorf("source in %s: %s admits it", source, never)
			}
		}
	}
	// Without the boundary, every namespace the policy allows admits every source.
	if got := AdmittingNamespaces(Unbound("a-dev"), namespaces, Policy{}); !slices.Contains(got, "b-prod") || slices.Contains(got, "a-ignored") {
		t.Errorf("unbound: %v", got)
	}
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// With the tenant boundary on, a conflict with another source's replica does not name
// that source, which may live beyond the reader's reach; without it, and for an object
// not cmsync's, the holder is described as before.
func TestDescribeHolderNamesNoSourceAcrossTenants(t *testing.T) {
	replica := &metav1.ObjectMeta{
		Labels:      map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue},
		Annotations: map[string]string{v1alpha1.SourceAnnotation: "other-tenant/secret-project"},
	}
	bounded := Policy{TenantLabel: tenantLabel}
	if got := bounded.DescribeHolder("ConfigMap", replica); strings.Contains(got, "other-tenant") {
		t.Errorf("with the boundary: %q", got)
	}
	if got := (Policy{}).DescribeHolder("ConfigMap", replica); !strings.Contains(got, "other-tenant/secret-project") {
		t.Errorf("without the boundary: %q", got)
	}
	if got := bounded.DescribeHolder("ConfigMap", &metav1.ObjectMeta{}); got != "a ConfigMap not managed by cmsync exists" {
		t.Errorf("an object not cmsync's: %q", got)
	}
}
