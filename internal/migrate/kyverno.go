package migrate

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// Kyverno's names (kyverno/kyverno: api/kyverno/v1 for the policy's fields,
// pkg/background/common/constants.go for the labels its generate rules put on a copy).
const (
	// KyvernoPeer is Kyverno's generate-clone rules.
	KyvernoPeer = "kyverno"
	// KyvernoAPIVersion and ClusterPolicyKind serve the policies.
	KyvernoAPIVersion = "kyverno.io/v1"
	ClusterPolicyKind = "ClusterPolicy"
	PolicyKind        = "Policy"

	kyvernoPolicyLabel = "generate.kyverno.io/policy-name"
	kyvernoRuleLabel   = "generate.kyverno.io/rule-name"
	kyvernoSourceNS    = "generate.kyverno.io/source-namespace"
	kyvernoSourceKind  = "generate.kyverno.io/source-kind"
	// kyvernoTargetNamespace is the one generate.namespace that puts the copy into the
	// Namespace that matched: the only one a list of namespaces says.
	kyvernoTargetNamespace = "{{request.object.metadata.name}}"
)

// Kyverno is what migrate reads of Kyverno: its ClusterPolicies, and the objects of the
// kinds their clone rules copy, sources and copies alike; and its namespaced Policies,
// whose clone rules are refused (NamespacedPolicies).
type Kyverno struct {
	Policies           []*unstructured.Unstructured
	Objects            []Object
	NamespacedPolicies []*unstructured.Unstructured
}

// The parts of a ClusterPolicy migrate reads, as Kyverno's API names them.
type (
	kyvernoPolicy struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Rules []kyvernoRule `json:"rules"`
		} `json:"spec"`
	}
	kyvernoRule struct {
		Name             string           `json:"name"`
		Match            kyvernoMatch     `json:"match"`
		Exclude          json.RawMessage  `json:"exclude,omitempty"`
		Preconditions    json.RawMessage  `json:"preconditions,omitempty"`
		CELPreconditions json.RawMessage  `json:"celPreconditions,omitempty"`
		Context          json.RawMessage  `json:"context,omitempty"`
		Generate         *kyvernoGenerate `json:"generate,omitempty"`
	}
	kyvernoMatch struct {
		Any       []kyvernoFilter   `json:"any,omitempty"`
		All       []kyvernoFilter   `json:"all,omitempty"`
		Resources *kyvernoResources `json:"resources,omitempty"`
		kyvernoUserInfo
	}
	kyvernoFilter struct {
		Resources kyvernoResources `json:"resources"`
		kyvernoUserInfo
	}
	kyvernoUserInfo struct {
		Roles        []string          `json:"roles,omitempty"`
		ClusterRoles []string          `json:"clusterRoles,omitempty"`
		Subjects     []json.RawMessage `json:"subjects,omitempty"`
	}
	kyvernoResources struct {
		Kinds             []string              `json:"kinds,omitempty"`
		Name              string                `json:"name,omitempty"`
		Names             []string              `json:"names,omitempty"`
		Namespaces        []string              `json:"namespaces,omitempty"`
		Annotations       map[string]string     `json:"annotations,omitempty"`
		Selector          *metav1.LabelSelector `json:"selector,omitempty"`
		NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
		Operations        []string              `json:"operations,omitempty"`
	}
	kyvernoGenerate struct {
		APIVersion       string            `json:"apiVersion,omitempty"`
		Kind             string            `json:"kind,omitempty"`
		Namespace        string            `json:"namespace,omitempty"`
		Name             string            `json:"name,omitempty"`
		Synchronize      bool              `json:"synchronize,omitempty"`
		GenerateExisting *bool             `json:"generateExisting,omitempty"`
		Orphan           bool              `json:"orphanDownstreamOnPolicyDelete,omitempty"`
		ForEach          []json.RawMessage `json:"foreach,omitempty"`
		Clone            struct {
			Namespace string `json:"namespace,omitempty"`
			Name      string `json:"name,omitempty"`
		} `json:"clone,omitempty"`
		CloneList struct {
			Namespace string                `json:"namespace,omitempty"`
			Kinds     []string              `json:"kinds,omitempty"`
			Selector  *metav1.LabelSelector `json:"selector,omitempty"`
		} `json:"cloneList,omitempty"`
	}
)

// refused is the move of a clone rule that is not translated, saying why: it names
// what the rule clones (its clone, or its cloneList's kinds and namespace).
func (g *kyvernoGenerate) refused(peer, why string) Move {
	kind, apiVersion := coreKind(g.APIVersion, g.Kind)
	source := types.NamespacedName{Namespace: g.Clone.Namespace, Name: g.Clone.Name}
	if g.Clone.Name == "" {
		kind, apiVersion, source = strings.Join(g.CloneList.Kinds, ","), "", types.NamespacedName{Namespace: g.CloneList.Namespace}
	}
	return Move{Peer: peer, Kind: kind, APIVersion: apiVersion, Source: source, Refused: why}
}

// isClone reports whether a rule generates by cloning (clone or cloneList).
func (g *kyvernoGenerate) isClone() bool {
	return g != nil && (g.Clone.Name != "" || len(g.CloneList.Kinds) > 0)
}

// readPolicy reads the parts of a ClusterPolicy migrate needs.
func readPolicy(obj *unstructured.Unstructured) (kyvernoPolicy, error) {
	var p kyvernoPolicy
	raw, err := json.Marshal(obj.Object)
	if err == nil {
		err = json.Unmarshal(raw, &p)
	}
	return p, err
}

// KyvernoKinds are the kinds the clone rules of policies copy, as "apiVersion/Kind"
// (v1/ConfigMap, networking.k8s.io/v1/NetworkPolicy): the kinds whose objects Kyverno
// planning needs. A kind written without its version is left out; its rule is refused.
func KyvernoKinds(policies []*unstructured.Unstructured) []string {
	var kinds []string
	for _, obj := range policies {
		p, err := readPolicy(obj)
		if err != nil {
			continue
		}
		for _, r := range p.Spec.Rules {
			if !r.Generate.isClone() {
				continue
			}
			if r.Generate.Clone.Name != "" && r.Generate.APIVersion != "" {
				kinds = append(kinds, r.Generate.APIVersion+"/"+r.Generate.Kind)
			}
			for _, k := range r.Generate.CloneList.Kinds {
				if strings.Contains(k, "/") {
					kinds = append(kinds, k)
				}
			}
		}
	}
	slices.Sort(kinds)
	return slices.Compact(kinds)
}

// PlanKyverno translates each generate-clone rule of Kyverno's ClusterPolicies that
// matches Namespaces into the explicit object of each source it clones, where the
// translation is exact, and takes the copies Kyverno's labels tie to the rule and
// source over in place; otherwise it refuses, naming the part that is not exact.
func PlanKyverno(k Kyverno, namespaces []desired.Namespace, controller Controller) []Move {
	var moves []Move
	for _, obj := range k.Policies {
		p, err := readPolicy(obj)
		if err != nil {
			moves = append(moves, Move{Peer: KyvernoPeer, Kind: ClusterPolicyKind, Source: types.NamespacedName{Name: obj.GetName()},
				Refused: "its rules cannot be read: " + err.Error()})
			continue
		}
		for _, r := range p.Spec.Rules {
			if r.Generate.isClone() {
				moves = append(moves, ruleMoves(p.Metadata.Name, r, k.Objects, namespaces, controller)...)
			}
		}
	}
	for _, obj := range k.NamespacedPolicies {
		moves = append(moves, namespacedPolicyMoves(obj)...)
	}
	sortMoves(moves)
	return moves
}

// namespacedPolicyMoves refuses each clone rule of a namespaced Policy: such a rule
// generates into the Policy's own namespace when an object there matches it, not once
// for each namespace as a ClusterPolicy matching Namespaces does, and an ObjectSync has
// no equivalent of that trigger.
func namespacedPolicyMoves(obj *unstructured.Unstructured) []Move {
	peer := KyvernoPeer + " Policy " + obj.GetNamespace() + "/" + obj.GetName()
	p, err := readPolicy(obj)
	if err != nil {
		return []Move{{Peer: peer, Kind: PolicyKind, Source: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()},
			Refused: "its rules cannot be read: " + err.Error()}}
	}
	var moves []Move
	for _, r := range p.Spec.Rules {
		if !r.Generate.isClone() {
			continue
		}
		moves = append(moves, r.Generate.refused(peer+" rule "+r.Name, fmt.Sprintf(
			"not translated exactly: a namespaced Policy clones into its own namespace (%s) when an object there matches its rule, "+
				"not into each namespace as a ClusterPolicy matching Namespaces does, and an ObjectSync has no such trigger; "+
				"keep the rule in Kyverno, or write it as a ClusterPolicy matching Namespaces and run migrate again", obj.GetNamespace())))
	}
	return moves
}

// ruleMoves are the moves of one clone rule: one per source it clones.
func ruleMoves(policy string, r kyvernoRule, objects []Object, namespaces []desired.Namespace, controller Controller) []Move {
	peer := KyvernoPeer + " ClusterPolicy " + policy + " rule " + r.Name
	targets, dropped, err := ruleTargets(r)
	sources, sourcesErr := ruleSources(r.Generate, objects)
	if err == nil {
		err = sourcesErr
	}
	if err != nil {
		return []Move{r.Generate.refused(peer, "not translated exactly: "+err.Error())}
	}
	moves := make([]Move, 0, len(sources))
	for _, s := range sources {
		m := Move{Peer: peer, Kind: s.source.Kind, APIVersion: s.source.APIVersion, Source: key(s.source), Dropped: dropped}
		if !s.found {
			m.Refused = fmt.Sprintf("the source %s %s the rule clones does not exist", m.Kind, m.Source)
			moves = append(moves, m)
			continue
		}
		m.planClone(policy, r.Name, s.source, s.name, targets, objects, namespaces, controller)
		moves = append(moves, m)
	}
	return moves
}

// planClone decides the explicit object of one source and the copies taken over.
func (m *Move) planClone(policy, rule string, source Object, name string, targets v1alpha1.ReplicaSpec, objects []Object,
	namespaces []desired.Namespace, controller Controller,
) {
	explicit := explicitOf(KyvernoPeer, source, name, targets)
	r, ok := m.planExplicit(explicit, source, namespaces, controller)
	if !ok {
		return
	}
	var tied, named []Object
	for _, obj := range objects {
		if obj.kindKey() != source.kindKey() || obj.GetName() != name || obj.GetNamespace() == source.GetNamespace() {
			continue
		}
		named = append(named, obj)
		l := obj.GetLabels()
		if l[kyvernoPolicyLabel] == policy && l[kyvernoRuleLabel] == rule && l[kyvernoSourceNS] == source.GetNamespace() &&
			l[kyvernoSourceKind] == source.Kind {
			tied = append(tied, obj)
		}
	}
	m.owner = r.owner
	m.classify(tied, r, named)
}

// clonedSource is one source a rule clones, and the name of its copies.
type clonedSource struct {
	source Object
	name   string
	found  bool
}

// ruleSources are the sources a clone rule copies: its clone, or the objects its
// cloneList selects now.
func ruleSources(g *kyvernoGenerate, objects []Object) ([]clonedSource, error) {
	if g.Clone.Name != "" {
		if g.APIVersion == "" || g.Kind == "" {
			return nil, fmt.Errorf("generate.apiVersion or generate.kind is not set: an ObjectSync names its kind by group, version and kind")
		}
		kind, apiVersion := coreKind(g.APIVersion, g.Kind)
		want := types.NamespacedName{Namespace: g.Clone.Namespace, Name: g.Clone.Name}
		for _, obj := range objects {
			if obj.Kind == kind && obj.APIVersion == apiVersion && key(obj) == want {
				return []clonedSource{{source: obj, name: g.Name, found: true}}, nil
			}
		}
		missing := Object{Kind: kind, APIVersion: apiVersion,
			PartialObjectMetadata: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}}
		return []clonedSource{{source: missing, name: g.Name}}, nil
	}
	selector := labels.Everything()
	if g.CloneList.Selector != nil {
		var err error
		if selector, err = metav1.LabelSelectorAsSelector(g.CloneList.Selector); err != nil {
			return nil, fmt.Errorf("generate.cloneList.selector: %w", err)
		}
	}
	var out []clonedSource
	for _, k := range g.CloneList.Kinds {
		if !strings.Contains(k, "/") {
			return nil, fmt.Errorf("generate.cloneList.kinds entry %q names no version: write it as v1/%s or group/version/%s", k, k, k)
		}
		for _, obj := range objects {
			if "v1/"+obj.kindKey() != k && obj.kindKey() != k {
				continue
			}
			if obj.GetNamespace() == g.CloneList.Namespace && selector.Matches(labels.Set(obj.GetLabels())) && !desired.IsReplica(obj) {
				out = append(out, clonedSource{source: obj, name: obj.GetName(), found: true})
			}
		}
	}
	return out, nil
}

// coreKind is the kind as migrate names it: ConfigMap and Secret without an
// apiVersion, any other kind with its own.
func coreKind(apiVersion, kind string) (string, string) {
	if apiVersion == "v1" && (kind == (desired.ConfigMapKind{}).Name() || kind == (desired.SecretKind{}).Name()) {
		return kind, ""
	}
	return kind, apiVersion
}

// variable finds a Kyverno variable or JMESPath expression in a field.
var variable = regexp.MustCompile(`\{\{.*\}\}`)

// ruleTargets translates the rule's match into the namespaces an explicit object
// names, exactly, or says which part of the rule no such object says.
func ruleTargets(r kyvernoRule) (v1alpha1.ReplicaSpec, []string, error) {
	g := r.Generate
	parts := []struct {
		name string
		raw  json.RawMessage
	}{{"exclude", r.Exclude}, {"preconditions", r.Preconditions}, {"celPreconditions", r.CELPreconditions}, {"context (variables)", r.Context}}
	for _, part := range parts {
		if raw := string(part.raw); raw != "" && raw != "null" && raw != "{}" && raw != "[]" {
			return v1alpha1.ReplicaSpec{}, nil, fmt.Errorf("the rule has %s, which cmsync has no equivalent of", part.name)
		}
	}
	switch {
	case !g.Synchronize:
		return v1alpha1.ReplicaSpec{}, nil, fmt.Errorf("generate.synchronize is false: Kyverno made the copies once and leaves them, " +
			"cmsync keeps copies equal to their source")
	case len(g.ForEach) > 0:
		return v1alpha1.ReplicaSpec{}, nil, fmt.Errorf("generate.foreach: its copies depend on a JMESPath list")
	case strings.Join(strings.Fields(g.Namespace), "") != kyvernoTargetNamespace:
		return v1alpha1.ReplicaSpec{}, nil, fmt.Errorf("generate.namespace is %q, not %s: the copy does not go into the Namespace that matched",
			g.Namespace, kyvernoTargetNamespace)
	}
	fields := [][2]string{
		{"generate.name", g.Name}, {"generate.kind", g.Kind}, {"generate.apiVersion", g.APIVersion},
		{"generate.clone.namespace", g.Clone.Namespace}, {"generate.clone.name", g.Clone.Name}, {"generate.cloneList.namespace", g.CloneList.Namespace},
	}
	for _, f := range fields {
		if variable.MatchString(f[1]) {
			return v1alpha1.ReplicaSpec{}, nil, fmt.Errorf("%s %q holds a variable: its value is known only per request", f[0], f[1])
		}
	}
	targets, err := matchTargets(r.Match)
	var dropped []string
	if g.GenerateExisting == nil || !*g.GenerateExisting {
		dropped = append(dropped, "generate.generateExisting is not true: Kyverno left Namespaces that matched before the policy without a copy; "+
			"cmsync puts one in every matching namespace (the new replicas below)")
	}
	if g.Orphan {
		dropped = append(dropped, "generate.orphanDownstreamOnPolicyDelete: cmsync deletes its replicas with the ObjectSync; "+
			"delete it with --cascade=orphan to keep them")
	}
	return targets, dropped, err
}

// matchTargets translates a rule's match of Namespaces: names and globs into
// destinationNamespaces, one selector of labels into namespaceSelector. Kyverno's
// "any" adds its filters up, as cmsync's target fields do; "all" of one filter is that
// filter.
func matchTargets(m kyvernoMatch) (v1alpha1.ReplicaSpec, error) {
	if m.isSet() {
		return v1alpha1.ReplicaSpec{}, fmt.Errorf("match names users (roles, clusterRoles or subjects): cmsync copies whoever made the Namespace")
	}
	filters := m.Any
	switch {
	case len(m.Any) > 0 && (len(m.All) > 0 || m.Resources != nil):
		return v1alpha1.ReplicaSpec{}, fmt.Errorf("match combines any with all or resources")
	case len(m.All) > 1:
		return v1alpha1.ReplicaSpec{}, fmt.Errorf("match.all has %d filters: Namespaces matching all of them are no list or selector of cmsync's", len(m.All))
	case len(m.All) == 1:
		filters = m.All
	case m.Resources != nil:
		filters = []kyvernoFilter{{Resources: *m.Resources}}
	}
	if len(filters) == 0 {
		return v1alpha1.ReplicaSpec{}, fmt.Errorf("match selects nothing")
	}
	var spec v1alpha1.ReplicaSpec
	for i, f := range filters {
		if err := addFilter(&spec, f); err != nil {
			return v1alpha1.ReplicaSpec{}, fmt.Errorf("match filter %d: %w", i+1, err)
		}
	}
	slices.Sort(spec.DestinationNamespaces)
	spec.DestinationNamespaces = slices.Compact(spec.DestinationNamespaces)
	return spec, nil
}

func (u kyvernoUserInfo) isSet() bool {
	return len(u.Roles)+len(u.ClusterRoles)+len(u.Subjects) > 0
}

// kyvernoName is a Namespace name or a Kyverno wildcard (* and ?) that is a cmsync glob too.
var kyvernoName = regexp.MustCompile(`^[-a-z0-9*?]+$`)

// addFilter adds what one filter of Namespaces selects to spec.
func addFilter(spec *v1alpha1.ReplicaSpec, f kyvernoFilter) error {
	res := f.Resources
	switch {
	case f.isSet():
		return fmt.Errorf("it names users (roles, clusterRoles or subjects)")
	case len(res.Kinds) != 1 || (res.Kinds[0] != "Namespace" && res.Kinds[0] != "v1/Namespace"):
		return fmt.Errorf("it matches kinds %v: cmsync translates a rule that matches Namespaces alone", res.Kinds)
	case len(res.Namespaces) > 0 || res.NamespaceSelector != nil || len(res.Annotations) > 0 || len(res.Operations) > 0:
		return fmt.Errorf("it narrows by namespaces, namespaceSelector, annotations or operations, which cmsync has no equivalent of")
	}
	names := res.Names
	if res.Name != "" {
		names = append(slices.Clone(names), res.Name)
	}
	if len(names) > 0 && res.Selector != nil {
		return fmt.Errorf("it wants names and a selector both; cmsync's destinationNamespaces and namespaceSelector add up")
	}
	for _, n := range names {
		if !kyvernoName.MatchString(n) {
			return fmt.Errorf("name %q is no Namespace name or * ? wildcard", n)
		}
	}
	spec.DestinationNamespaces = append(spec.DestinationNamespaces, names...)
	if res.Selector == nil {
		if len(names) == 0 {
			spec.DestinationNamespaces = append(spec.DestinationNamespaces, "*")
		}
		return nil
	}
	switch {
	case len(res.Selector.MatchExpressions) > 0:
		return fmt.Errorf("its selector has matchExpressions; cmsync translates matchLabels alone")
	case spec.NamespaceSelector != nil:
		return fmt.Errorf("a second selector: cmsync's namespaceSelector is one")
	}
	for k, v := range res.Selector.MatchLabels {
		if strings.ContainsAny(k+v, "*?") {
			return fmt.Errorf("its selector %s=%s has a wildcard", k, v)
		}
	}
	spec.NamespaceSelector = res.Selector.DeepCopy()
	return nil
}
