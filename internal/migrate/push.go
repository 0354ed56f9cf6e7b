package migrate

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// copyIndex finds the peers' copies by the source their markers name.
type copyIndex struct {
	// all are the objects by kind and name ("ConfigMap/ca"), whoever made them.
	all map[string][]Object
	// bySource are the copies whose peer's markers name their source, by peer, kind
	// and source ("reflector|ConfigMap|platform/ca").
	bySource map[string][]Object
}

func indexCopies(objects []Object) copyIndex {
	idx := copyIndex{all: map[string][]Object{}, bySource: map[string][]Object{}}
	for _, obj := range objects {
		idx.all[obj.Kind+"/"+obj.GetName()] = append(idx.all[obj.Kind+"/"+obj.GetName()], obj)
		peer, source, ok := copyMarkers(obj)
		if ok {
			key := peer + "|" + obj.Kind + "|" + source.String()
			idx.bySource[key] = append(idx.bySource[key], obj)
		}
	}
	return idx
}

// copyMarkers reads which peer made obj as a copy of which source, as far as its
// markers name the source. A kubernetes-replicator copy made by its push form names
// no source: tiedPushCopies finds those by name.
func copyMarkers(obj Object) (peer string, source types.NamespacedName, ok bool) {
	a, l := obj.GetAnnotations(), obj.GetLabels()
	switch {
	case a[reflectorReflects] != "":
		source, ok = sourceRef(obj, a[reflectorReflects])
		return Reflector, source, ok
	case a[replicatorReplicateFrom] != "":
		source, ok = sourceRef(obj, a[replicatorReplicateFrom])
		return Replicator, source, ok && strings.Contains(a[replicatorReplicateFrom], "/")
	case l[syncerOriginNamespace] != "" && l[syncerOriginName] != "":
		return ConfigSyncer, types.NamespacedName{Namespace: l[syncerOriginNamespace], Name: l[syncerOriginName]}, true
	}
	return "", source, false
}

// pushTranslation is a peer's push form of a source as cmsync annotations.
type pushTranslation struct {
	peer        string
	annotations map[string]string
	err         error
}

// pushForms translates every push form obj carries.
func pushForms(obj Object) []pushTranslation {
	a := obj.GetAnnotations()
	var out []pushTranslation
	if _, to := a[replicatorReplicateTo]; to || a[replicatorReplicateToMatching] != "" {
		annotations, err := targetAnnotations(a[replicatorReplicateTo], a[replicatorReplicateToMatching])
		out = append(out, pushTranslation{Replicator, annotations, err})
	}
	if isTrue(obj, reflectorAllowed) && isTrue(obj, reflectorAutoEnabled) {
		patterns, err := reflectorAutoPatterns(a[reflectorAutoNamespaces], a[reflectorAllowedNamespaces])
		annotations, err2 := targetAnnotations(patterns, "")
		out = append(out, pushTranslation{Reflector, annotations, errors.Join(err, err2)})
	}
	if selector, sync := a[syncerSync]; sync && a[syncerOrigin] == "" {
		patterns := ""
		if selector == "" {
			patterns = ".*"
		}
		annotations, err := targetAnnotations(patterns, selector)
		out = append(out, pushTranslation{ConfigSyncer, annotations, err})
	}
	return out
}

// reflectorAutoPatterns: reflector copies into the namespaces both of its lists allow
// (an empty list allows every namespace); cmsync has one list.
func reflectorAutoPatterns(auto, allowed string) (string, error) {
	auto, allowed = strings.TrimSpace(auto), strings.TrimSpace(allowed)
	switch {
	case auto == "" && allowed == "":
		return ".*", nil
	case auto == "" || auto == ".*":
		return allowed, nil
	case allowed == "" || allowed == ".*" || allowed == auto:
		return auto, nil
	}
	return "", fmt.Errorf(
		"%s and %s both narrow the targets, to namespaces both lists match; cmsync has one list",
		reflectorAutoNamespaces,
		reflectorAllowedNamespaces,
	)
}

// targetAnnotations are cmsync's target annotations for a peer's comma list of
// namespace patterns and its namespace label selector.
func targetAnnotations(patterns, selector string) (map[string]string, error) {
	out := map[string]string{}
	globs, err := globsOf(patterns)
	if err != nil {
		return nil, err
	}
	if len(globs) > 0 {
		out[v1alpha1.TargetNamespacesAnnotation] = strings.Join(globs, ",")
	}
	if selector != "" {
		if _, err := labels.Parse(selector); err != nil {
			return nil, fmt.Errorf("namespace selector %q: %w", selector, err)
		}
		out[v1alpha1.TargetSelectorAnnotation] = selector
	}
	return out, nil
}

// pushMoves is the Move of obj's push forms: none, one, or a refusal when two peers'
// forms on it disagree.
func pushMoves(obj Object, idx copyIndex, namespaces []desired.Namespace, controller Controller) []Move {
	forms := pushForms(obj)
	if len(forms) == 0 {
		return nil
	}
	first := forms[0]
	for _, other := range forms[1:] {
		if !maps.Equal(first.annotations, other.annotations) || other.err != nil {
			m := Move{Peer: first.peer + ", " + other.peer, Kind: obj.Kind, Source: key(obj)}
			m.Refused = fmt.Sprintf("it carries the annotations of %s and of %s, and they disagree: keep one", first.peer, other.peer)
			return []Move{m}
		}
	}
	m := Move{Peer: first.peer, Kind: obj.Kind, Source: key(obj), Annotations: first.annotations}
	for _, f := range forms {
		m.Dropped = append(m.Dropped, dropped(f.peer, obj)...)
	}
	slices.Sort(m.Dropped)
	if first.err != nil {
		m.Refused, m.Annotations = first.err.Error(), nil
		return []Move{m}
	}
	if why := controller.refusal(obj.Kind, nil); why != "" {
		m.Refused, m.Annotations = why, nil
		return []Move{m}
	}
	as := obj.DeepCopy()
	as.SetLabels(withEntries(as.GetLabels(), map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}))
	as.SetAnnotations(withEntries(as.GetAnnotations(), m.Annotations))
	r := resolve(obj.Kind, key(obj), as, nil, namespaces, controller.Policy)
	if r.invalid != nil {
		m.Refused = "cmsync would refuse it: " + r.invalid.Error()
		return []Move{m}
	}
	var tied []Object
	for _, f := range forms {
		tied = append(tied, tiedCopies(f.peer, obj, idx)...)
	}
	m.owner, m.sourceVersion = r.owner, obj.GetResourceVersion()
	m.classify(tied, r, idx.all[obj.Kind+"/"+r.name])
	return []Move{m}
}

// tiedCopies are the copies peer's markers tie to obj. A kubernetes-replicator push
// copy names no source: it is the object of obj's name with the peer's copy markers in
// a namespace its targets match, unless another of its sources of that name also
// targets that namespace.
func tiedCopies(peer string, obj Object, idx copyIndex) []Object {
	if peer != Replicator {
		// Reflector marks its mirrors too: they are its pull form (pullMoves).
		return slices.DeleteFunc(slices.Clone(idx.bySource[peer+"|"+obj.Kind+"|"+key(obj).String()]),
			func(c Object) bool { return peer == Reflector && !isTrue(c, reflectorAutoReflects) })
	}
	var out []Object
	for _, c := range idx.all[obj.Kind+"/"+obj.GetName()] {
		a := c.GetAnnotations()
		_, keys := a[replicatorReplicatedKeys]
		_, version := a[replicatorReplicatedVersion]
		if (keys || version) && a[replicatorReplicateFrom] == "" && c.GetNamespace() != obj.GetNamespace() &&
			onlyPushSourceFor(c, obj, idx) {
			out = append(out, c)
		}
	}
	return out
}

// onlyPushSourceFor reports whether src is the only kubernetes-replicator push source
// of copy's name whose targets could include copy's namespace.
func onlyPushSourceFor(copy, src Object, idx copyIndex) bool {
	for _, other := range idx.all[src.Kind+"/"+src.GetName()] {
		a := other.GetAnnotations()
		_, to := a[replicatorReplicateTo]
		if other.GetUID() != src.GetUID() && other.GetNamespace() != copy.GetNamespace() && (to || a[replicatorReplicateToMatching] != "") {
			return false
		}
	}
	return true
}

// classify sorts the tied copies into those cmsync takes over (replica name, in a
// target) and those left alone; others of the replica name in a target are left (a
// conflict cmsync reports); the targets with no such object get a new replica. Only
// the targets of r, desired.Resolve's under the controller's policy, are taken over
// into: a copy anywhere else would be a replica the controller deletes as stale.
func (m *Move) classify(tied []Object, r resolved, named []Object) {
	name := r.name
	isTarget := map[string]bool{}
	for _, ns := range r.targets {
		isTarget[ns] = true
	}
	taken := map[types.UID]bool{}
	for _, c := range tied {
		switch {
		case desired.IsReplica(c):
			continue
		case c.GetName() != name:
			m.Left = append(m.Left, copyOf(c, "cmsync's replicas of this source are named "+name))
		case !isTarget[c.GetNamespace()]:
			m.Left = append(m.Left, copyOf(c, "not a target of the source under cmsync's rules: "+r.why(c.GetNamespace())))
		case len(c.GetFinalizers()) > 0 || len(c.GetOwnerReferences()) > 0:
			// A replica is cmsync's to delete: one holding another's finalizer could
			// never be deleted once the admission policy protects it, and one owned by
			// another object would be deleted with it behind cmsync's back.
			m.Left = append(
				m.Left,
				copyOf(c, "it carries finalizers or owner references of its own: cmsync takes over only a copy it alone decides the life of"),
			)
		default:
			m.TakeOver = append(m.TakeOver, copyOf(c, ""))
			taken[c.GetUID()] = true
		}
	}
	for _, c := range named {
		if isTarget[c.GetNamespace()] && !taken[c.GetUID()] && !desired.IsReplica(c) && key(c) != m.Source {
			m.Left = append(m.Left, copyOf(c, "not tied to this source by the peer's markers: cmsync reports a conflict there and leaves it"))
		}
	}
	m.markNew(r.targets, name, named)
}

func key(obj Object) types.NamespacedName {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

func withEntries(have, add map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, add)
	return out
}

// resolved is what the controller decides about a source (desired.Resolve): the owner
// of its replicas, their name and its target namespaces, or why it refuses the source.
type resolved struct {
	owner   desired.Owner
	name    string
	targets []string
	invalid error
	// why says which rule keeps a namespace out of the targets.
	why func(namespace string) string
}

// resolve decides, as the controller does (desired.Resolve), the owner, the replica
// name and the target namespaces of a source of kind from its metadata (meta; nil
// when it does not exist) and, for the explicit form, the object naming it. An
// ObjectSync's source is resolved as an object of the kind it names.
func resolve(kind string, source types.NamespacedName, meta metav1.Object, sync v1alpha1.Sync, namespaces []desired.Namespace, policy desired.Policy) resolved {
	var r resolved
	var spec desired.TargetSpec
	var origin desired.Origin
	switch {
	case sync != nil && sync.SyncSpec().Kind == v1alpha1.ObjectSyncKind:
		gv, _ := schema.ParseGroupVersion(sync.SyncSpec().SourceAPIVersion)
		r, spec, origin = resolveKind(desired.NewObjectKind(gv.WithKind(kind)), source, meta, sync, namespaces, policy)
	case kind == (desired.SecretKind{}).Name():
		r, spec, origin = resolveKind(desired.SecretKind{}, source, meta, sync, namespaces, policy)
	default:
		r, spec, origin = resolveKind(desired.ConfigMapKind{}, source, meta, sync, namespaces, policy)
	}
	r.why = func(namespace string) string {
		for _, ns := range namespaces {
			if ns.Name == namespace {
				return desired.ExplainTarget(spec, origin, ns, policy).Rule
			}
		}
		return "the namespace was not found"
	}
	return r
}

// resolveKind is desired.Resolve of a source of kind, read as metadata only.
func resolveKind[T desired.Object](kind desired.Kind[T], source types.NamespacedName, meta metav1.Object, sync v1alpha1.Sync,
	namespaces []desired.Namespace, policy desired.Policy,
) (resolved, desired.TargetSpec, desired.Origin) {
	i := desired.Resolve(kind, desired.Source[T]{Key: source, Meta: meta, Sync: sync}, namespaces, policy)
	return resolved{owner: i.Owner, name: i.ReplicaName, targets: i.Targets.Namespaces, invalid: i.Invalid}, i.Spec, i.Origin
}
