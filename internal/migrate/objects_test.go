package migrate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/desired"
)

var networkPolicy = schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}

func networkPolicyObject(namespace, name string, labels, annotations map[string]string) Object {
	o := object("NetworkPolicy", namespace, name, labels, annotations)
	o.APIVersion = networkPolicy.GroupVersion().String()
	return o
}

func namespacesNamed(names ...string) []desired.Namespace {
	out := make([]desired.Namespace, 0, len(names))
	for _, n := range names {
		out = append(out, desired.Namespace{Name: n, Labels: map[string]string{"team": strings.TrimSuffix(n, "-x")}})
	}
	return out
}

// inHNCTree labels namespaces as HNC labels a tree of parents: each with its own name
// and each ancestor's, of their depth (HNCTreeDepth).
func inHNCTree(namespaces []desired.Namespace, parents map[string]string) []desired.Namespace {
	for i := range namespaces {
		ns := &namespaces[i]
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[ns.Name+HNCTreeDepth] = "0"
		for depth, up := 1, parents[ns.Name]; up != "" && depth < 100; depth, up = depth+1, parents[up] {
			ns.Labels[up+HNCTreeDepth] = fmt.Sprint(depth)
		}
	}
	return namespaces
}

func enabled(kinds ...schema.GroupVersionKind) Controller {
	c := Controller{Policy: desired.Policy{SourceNamespaces: []string{"*"}}, ConfigMapSyncs: true, ObjectKinds: desired.ObjectKinds{}}
	for _, k := range kinds {
		c.ObjectKinds[k] = desired.Namespaced
	}
	return c
}

// HNC's propagated copies carry hnc.x-k8s.io/inherited-from and HNC's managed-by
// label (internal/objects/reconciler.go: writeObject, canonical). A source becomes an
// ObjectSync (or a ConfigMapSync) into exactly the namespaces below it holding a copy;
// a copy outside the tree is left; a kind the controller does not copy, and a source
// whose propagate annotations chose its namespaces, are refused with what to do.
func TestPlanHNC(t *testing.T) {
	copyLabels := map[string]string{HNCInheritedFrom: "org", "app.kubernetes.io/managed-by": HNCGroup}
	parents := map[string]string{"team-a": "org", "team-b": "org", "team-b-dev": "team-b", "stray": "elsewhere"}
	tree := func(names ...string) []desired.Namespace { return inHNCTree(namespacesNamed(names...), parents) }
	h := HNC{
		Objects: []Object{
			networkPolicyObject("org", "deny", nil, nil),
			networkPolicyObject("org", "narrowed", nil, map[string]string{hncPropagatePrefix + "treeSelect": "!team-b"}),
			networkPolicyObject("team-a", "narrowed", copyLabels, nil),
			networkPolicyObject("team-a", "deny", copyLabels, nil),
			networkPolicyObject("team-b-dev", "deny", copyLabels, nil),
			networkPolicyObject("stray", "deny", copyLabels, nil),
			object("ConfigMap", "org", "ca", nil, nil),
			object("ConfigMap", "team-a", "ca", copyLabels, nil),
			networkPolicyObject("team-a", "gone", copyLabels, nil),
		},
	}
	moves := PlanHNC(h, tree("org", "team-a", "team-b", "team-b-dev", "stray"), enabled(networkPolicy))

	deny := moveOf(t, moves, "NetworkPolicy", "org/deny", HNCPeer)
	if deny.Refused != "" || deny.ObjectSync == nil {
		t.Fatalf("deny: %+v", deny)
	}
	if got := deny.ObjectSync.Spec.DestinationNamespaces; !slices.Equal(got, []string{"team-a", "team-b-dev"}) {
		t.Errorf("deny goes to %v, want the namespaces below org that hold a copy", got)
	}
	if deny.ObjectSync.Name != "org.deny.networkpolicy" || deny.ObjectSync.Spec.Source.APIVersion != "networking.k8s.io/v1" {
		t.Errorf("deny's ObjectSync: %+v", deny.ObjectSync)
	}
	if got := namespacesIn(deny.TakeOver); !slices.Equal(got, []string{"team-a", "team-b-dev"}) {
		t.Errorf("deny takes over %v", got)
	}
	if len(deny.Left) != 1 || deny.Left[0].Namespace != "stray" || !strings.Contains(deny.Left[0].Why, "not below org") {
		t.Errorf("deny leaves %+v, want the copy in stray, not below org", deny.Left)
	}
	if len(deny.Dropped) != 1 || !strings.Contains(deny.Dropped[0], "created later") {
		t.Errorf("deny drops %v, want the hierarchy's later namespaces", deny.Dropped)
	}
	// Where the source chose its namespaces, a copy in a namespace HNC left out could be
	// anyone's: refused.
	if narrowed := moveOf(t, moves, "NetworkPolicy", "org/narrowed", HNCPeer); !strings.Contains(narrowed.Refused, "treeSelect") ||
		narrowed.ObjectSync != nil || len(narrowed.TakeOver) > 0 {
		t.Errorf("a source with a treeSelect annotation: %+v, want it refused, naming the annotation", narrowed)
	}
	labels, _, ref := deny.Markers()
	if labels["app.kubernetes.io/managed-by"] != "cmsync" || ref == nil || ref.Kind != "ObjectSync" {
		t.Errorf("markers %v %v", labels, ref)
	}

	if ca := moveOf(t, moves, "ConfigMap", "org/ca", HNCPeer); ca.ConfigMapSync == nil || len(ca.TakeOver) != 1 {
		t.Errorf("a ConfigMap HNC propagated becomes a ConfigMapSync: %+v", ca)
	}
	if gone := moveOf(t, moves, "NetworkPolicy", "org/gone", HNCPeer); !strings.Contains(gone.Refused, "does not exist") {
		t.Errorf("a copy without its source: %+v", gone)
	}

	refused := moveOf(t, PlanHNC(h, tree("org", "team-a", "team-b-dev"), enabled()), "NetworkPolicy", "org/deny", HNCPeer)
	if !strings.Contains(refused.Refused, "networking.k8s.io/v1/NetworkPolicy is not in the controller's --object-kinds; enable it with objectSync.kinds") ||
		len(refused.TakeOver) > 0 || refused.ObjectSync != nil {
		t.Errorf("a kind the controller does not copy: %+v", refused)
	}
	wide, wideParents := HNC{Objects: []Object{networkPolicyObject("org", "deny", nil, nil)}}, map[string]string{}
	wideNames := append(make([]string, 0, maxDestinationNamespaces+2), "org")
	for i := range maxDestinationNamespaces + 1 {
		ns := fmt.Sprintf("team-%d", i)
		wideParents[ns], wideNames = "org", append(wideNames, ns)
		wide.Objects = append(wide.Objects, networkPolicyObject(ns, "deny", copyLabels, nil))
	}
	wideTree := inHNCTree(namespacesNamed(wideNames...), wideParents)
	if m := moveOf(t, PlanHNC(wide, wideTree, enabled(networkPolicy)), "NetworkPolicy", "org/deny", HNCPeer); !strings.Contains(m.Refused, "257 namespaces") {
		t.Errorf("copies in more namespaces than destinationNamespaces holds: %+v", m.Refused)
	}
	notServed := enabled()
	notServed.ObjectKinds[networkPolicy] = desired.NotServed
	if m := moveOf(t, PlanHNC(h, tree("org", "team-a"), notServed), "NetworkPolicy", "org/deny", HNCPeer); !strings.Contains(m.Refused,
		"the API server does not serve NetworkPolicy.v1.networking.k8s.io: install its CustomResourceDefinition") {
		t.Errorf("a kind enabled but not served: %+v", m)
	}
}

// A kind HNC copies only where a source asks (AllowPropagate): anyone may have written
// HNC's label on an object of it, so no copy is evidence, and its sources are refused.
func TestPlanHNCRefusesKindsCopiedOnRequest(t *testing.T) {
	copyLabels := map[string]string{HNCInheritedFrom: "org", "app.kubernetes.io/managed-by": HNCGroup}
	asked := HNC{OnRequest: []Object{
		object("Secret", "org", "db-root", nil, nil),
		object("Secret", "team-a", "db-root", copyLabels, nil),
	}}
	if m := moveOf(
		t,
		PlanHNC(asked, inHNCTree(namespacesNamed("org", "team-a"), map[string]string{"team-a": "org"}), enabled()),
		"Secret",
		"org/db-root",
		HNCPeer,
	); !strings.Contains(m.Refused,
		"mode AllowPropagate") || m.SecretSync != nil ||
		len(m.TakeOver) > 0 {
		t.Errorf("a Secret of a kind HNC copies on request: %+v, want it refused", m)
	}
	onRequest := HNCResource{Resource: "secrets", Mode: "AllowPropagate"}
	if !onRequest.HNCPropagatesOnRequest() || onRequest.HNCPropagates() || !(HNCResource{Resource: "secrets"}).HNCPropagates() {
		t.Errorf("HNC's modes read wrong")
	}
}

// isBelow reads HNC's tree from the namespaces' labels alone: an ancestor's depth label
// over 0. A namespace's own label (depth 0), a namespace not listed and another
// namespace's labels do not make it a descendant.
func TestIsBelow(t *testing.T) {
	namespaces := inHNCTree(namespacesNamed("a", "b", "c", "x"), map[string]string{"a": "b", "b": "c"})
	for _, tc := range []struct {
		ns, ancestor string
		want         bool
	}{{"a", "c", true}, {"a", "b", true}, {"c", "a", false}, {"a", "a", false}, {"x", "c", false}, {"absent", "c", false}} {
		if got := isBelow(namespaces, tc.ns, tc.ancestor); got != tc.want {
			t.Errorf("isBelow(%s, %s) = %v", tc.ns, tc.ancestor, got)
		}
	}
}

func policy(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

// A clone rule of the shape Kyverno's docs show: Namespaces matched by a label or by
// names, the copy named in generate.name in {{request.object.metadata.name}}.
const clonePolicy = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: netpol}
spec:
  rules:
  - name: deny
    match:
      any:
      - resources: {kinds: [Namespace], selector: {matchLabels: {tier: team}}}
      - resources: {kinds: [Namespace], names: ["legacy-*"]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{request.object.metadata.name}}"
      synchronize: true
      generateExisting: true
      clone: {namespace: platform, name: deny-template}
`

// Kyverno's clone copies carry the source's labels, generate.kyverno.io/policy-name,
// rule-name, source-namespace and source-kind (pkg/background/common/labels.go,
// pkg/background/generate/source.go): those of this rule and source are taken over;
// the targets translate into destinationNamespaces and namespaceSelector, added up
// as Kyverno's any adds its filters.
func TestPlanKyvernoClone(t *testing.T) {
	copyLabels := map[string]string{
		kyvernoPolicyLabel: "netpol", kyvernoRuleLabel: "deny", kyvernoSourceNS: "platform", kyvernoSourceKind: "NetworkPolicy",
		"app.kubernetes.io/managed-by": "kyverno",
	}
	k := Kyverno{
		Policies: []*unstructured.Unstructured{policy(t, clonePolicy)},
		Objects: []Object{
			networkPolicyObject("platform", "deny-template", nil, nil),
			networkPolicyObject("team-x", "default-deny", copyLabels, nil),
			networkPolicyObject("legacy-x", "default-deny", copyLabels, nil),
			networkPolicyObject("other", "default-deny", nil, nil),
		},
	}
	namespaces := append(namespacesNamed("platform", "team-x", "other"), desired.Namespace{Name: "legacy-x"})
	namespaces[1].Labels = map[string]string{"tier": "team"}
	moves := PlanKyverno(k, namespaces, enabled(networkPolicy))
	m := moveOf(t, moves, "NetworkPolicy", "platform/deny-template", KyvernoPeer+" ClusterPolicy netpol rule deny")
	if m.Refused != "" || m.ObjectSync == nil {
		t.Fatalf("%+v", m)
	}
	spec := m.ObjectSync.Spec
	if !slices.Equal(spec.DestinationNamespaces, []string{"legacy-*"}) || spec.NamespaceSelector.MatchLabels["tier"] != "team" ||
		spec.TargetName != "default-deny" {
		t.Errorf("spec %+v", spec)
	}
	if got := namespacesIn(m.TakeOver); !slices.Equal(got, []string{"legacy-x", "team-x"}) {
		t.Errorf("takes over %v", got)
	}
	if len(m.Left) > 0 || len(m.New) > 0 {
		t.Errorf("left %+v, new %v", m.Left, m.New)
	}
}

// Where the rule says more than cmsync can, the move is refused, naming the part.
func TestPlanKyvernoRefusesWhatIsNotExact(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"exclude", "    generate:", "    exclude: {any: [{resources: {names: [kube-system]}}]}\n    generate:", "the rule has exclude"},
		{"preconditions", "    generate:", "    preconditions: {all: [{key: a, operator: Equals, value: a}]}\n    generate:", "the rule has preconditions"},
		{"context", "    generate:", "    context: [{name: x, variable: {value: 1}}]\n    generate:", "the rule has context"},
		{"not synchronized", "synchronize: true", "synchronize: false", "generate.synchronize is false"},
		{"a variable", "name: deny-template", "name: \"{{request.object.metadata.labels.t}}\"", "generate.clone.name"},
		{"another namespace", `namespace: "{{request.object.metadata.name}}"`, "namespace: shared", "generate.namespace is \"shared\""},
		{"expressions", "selector: {matchLabels: {tier: team}}", "selector: {matchExpressions: [{key: tier, operator: Exists}]}", "matchExpressions"},
		{"names and selector", "selector: {matchLabels: {tier: team}}", "selector: {matchLabels: {tier: team}}, names: [a]", "names and a selector"},
		{"another kind", "kinds: [Namespace], names", "kinds: [Pod], names", "matches kinds [Pod]"},
		{"no apiVersion", "      apiVersion: networking.k8s.io/v1\n", "", "generate.apiVersion or generate.kind is not set"},
		{"users", "      - resources: {kinds: [Namespace], names",
			"      - subjects: [{kind: User, name: x}]\n        resources: {kinds: [Namespace], names", "names users"},
	} {
		manifest := strings.Replace(clonePolicy, tc.from, tc.to, 1)
		if manifest == clonePolicy {
			t.Fatalf("%s: %q not in the policy", tc.name, tc.from)
		}
		k := Kyverno{Policies: []*unstructured.Unstructured{policy(t, manifest)}, Objects: []Object{networkPolicyObject("platform", "deny-template", nil, nil)}}
		moves := PlanKyverno(k, namespacesNamed("platform"), enabled(networkPolicy))
		if len(moves) != 1 || !strings.Contains(moves[0].Refused, tc.want) || moves[0].Explicit() != nil {
			t.Errorf("%s: %+v, want refused with %q", tc.name, moves, tc.want)
		}
	}
}

// cloneList names kinds with their versions and the sources by selector: each source
// there now is one move, its copies of the same name.
func TestPlanKyvernoCloneList(t *testing.T) {
	manifest := `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: sync}
spec:
  rules:
  - name: copy
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      namespace: "{{request.object.metadata.name}}"
      synchronize: true
      cloneList: {namespace: platform, kinds: [v1/ConfigMap, networking.k8s.io/v1/NetworkPolicy], selector: {matchLabels: {share: "yes"}}}
`
	k := Kyverno{Policies: []*unstructured.Unstructured{policy(t, manifest)}, Objects: []Object{
		object("ConfigMap", "platform", "ca", map[string]string{"share": "yes"}, nil),
		object("ConfigMap", "platform", "private", nil, nil),
		networkPolicyObject("platform", "deny", map[string]string{"share": "yes"}, nil),
	}}
	if got := KyvernoKinds(k.Policies); !slices.Equal(got, []string{"networking.k8s.io/v1/NetworkPolicy", "v1/ConfigMap"}) {
		t.Errorf("kinds %v", got)
	}
	moves := PlanKyverno(k, namespacesNamed("platform", "a"), enabled(networkPolicy))
	if len(moves) != 2 {
		t.Fatalf("%+v", moves)
	}
	ca := moveOf(t, moves, "ConfigMap", "platform/ca", KyvernoPeer+" ClusterPolicy sync rule copy")
	if ca.ConfigMapSync == nil || !slices.Equal(ca.ConfigMapSync.Spec.DestinationNamespaces, []string{"*"}) || !slices.Equal(ca.New, []string{"a"}) {
		t.Errorf("ca %+v", ca)
	}
	if !strings.Contains(ca.Dropped[0], "generateExisting") {
		t.Errorf("dropped %v", ca.Dropped)
	}
}

// A namespaced Policy's clone rule generates into the Policy's own namespace when an
// object there matches: no ObjectSync says that, so each clone rule is refused, named,
// and nothing of it is applied.
func TestPlanKyvernoRefusesANamespacedPolicy(t *testing.T) {
	manifest := `
apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: secrets, namespace: team-a}
spec:
  rules:
  - name: copy-ca
    match: {any: [{resources: {kinds: [Pod]}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: allow-ca
      namespace: team-a
      synchronize: true
      clone: {namespace: team-a, name: allow-ca-template}
  - name: validate-only
    match: {any: [{resources: {kinds: [Pod]}}]}
`
	k := Kyverno{NamespacedPolicies: []*unstructured.Unstructured{policy(t, manifest)},
		Objects: []Object{networkPolicyObject("team-a", "allow-ca-template", nil, nil)}}
	moves := PlanKyverno(k, namespacesNamed("team-a"), enabled(networkPolicy))
	if len(moves) != 1 {
		t.Fatalf("%+v, want one move, of the clone rule", moves)
	}
	m := moves[0]
	if m.Peer != KyvernoPeer+" Policy team-a/secrets rule copy-ca" || m.Source.String() != "team-a/allow-ca-template" ||
		!strings.Contains(m.Refused, "a namespaced Policy clones into its own namespace (team-a)") || m.Explicit() != nil {
		t.Errorf("%+v, want the rule refused, naming its source and why", m)
	}
}
