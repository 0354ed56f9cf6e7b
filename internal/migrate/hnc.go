package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// The Hierarchical Namespace Controller's names (kubernetes-sigs/hierarchical-namespaces,
// api/v1alpha2: hierarchy_types.go and hnc_config.go).
const (
	// HNCPeer is HNC's propagation.
	HNCPeer = "hnc"
	// HNCGroup and HNCVersion serve HNC's configuration kinds.
	HNCGroup   = "hnc.x-k8s.io"
	HNCVersion = "v1alpha2"
	// HNCConfigName is the one HNCConfiguration (cluster-scoped) HNC reads.
	HNCConfigName = "config"
	// HNCInheritedFrom labels every object HNC propagated with its source's namespace.
	HNCInheritedFrom = HNCGroup + "/inherited-from"
	// HNCTreeDepth ends the labels HNC writes on each namespace of a hierarchy, one for
	// the namespace itself and each of its ancestors: "<ancestor>" + HNCTreeDepth, valued
	// the ancestor's distance ("0" for the namespace itself).
	HNCTreeDepth = ".tree." + HNCGroup + "/depth"
	// hncPropagatePrefix begins the annotations that narrow a source's propagation.
	hncPropagatePrefix = "propagate." + HNCGroup + "/"
)

// maxDestinationNamespaces is the most entries an explicit object's
// destinationNamespaces holds (its CRD's maxItems).
const maxDestinationNamespaces = 256

// HNCResource is one entry of HNCConfiguration spec.resources: a resource (a plural,
// in group) and how HNC synchronizes it.
type HNCResource struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
	Mode     string `json:"mode,omitempty"`
}

// HNCPropagates reports whether HNC copies every object of a resource into descendant
// namespaces: mode Propagate (the default). HNC propagates Roles and RoleBindings always.
func (r HNCResource) HNCPropagates() bool {
	return r.Mode == "" || r.Mode == hncPropagate
}

// HNCPropagatesOnRequest reports whether HNC copies only the objects of a resource whose
// propagate annotations ask for it (mode AllowPropagate). HNC's webhook lets anyone
// write its inherited-from label on an object of such a resource, so a copy there is no
// evidence of HNC's: migrate refuses their sources.
func (r HNCResource) HNCPropagatesOnRequest() bool { return r.Mode == hncAllowPropagate }

// hncPropagate is the mode in which HNC copies every object of a resource;
// hncAllowPropagate, the one in which it copies those that ask.
const (
	hncPropagate      = "Propagate"
	hncAllowPropagate = "AllowPropagate"
)

// HNCEnforced are the resources HNC propagates whatever its configuration says.
var HNCEnforced = []HNCResource{
	{Group: "rbac.authorization.k8s.io", Resource: "roles", Mode: hncPropagate},
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Mode: hncPropagate},
}

// HNC is what migrate reads of HNC: the objects of the kinds it propagates, sources
// and copies alike. Its tree is read from the namespaces' labels (HNCTreeDepth).
type HNC struct {
	// Objects are the metadata of every object of a kind HNC propagates.
	Objects []Object
	// OnRequest are the metadata of every object of a kind HNC propagates only when the
	// source asks (HNCPropagatesOnRequest): their sources are refused.
	OnRequest []Object
}

// hncGroup is the copies HNC made of one source.
type hncGroup struct {
	source types.NamespacedName
	kind   Object
	copies []Object
	// onRequest: HNC copies the group's kind only where a source asks.
	onRequest bool
}

// PlanHNC translates each source HNC propagated — found from its copies, by their
// hnc.x-k8s.io/inherited-from label — into the explicit object that copies it into
// exactly the namespaces below it where its copies are now, and takes those copies
// over in place.
func PlanHNC(h HNC, namespaces []desired.Namespace, controller Controller) []Move {
	byKey := map[string]Object{}
	groups := map[string]*hncGroup{}
	for i, obj := range slices.Concat(h.Objects, h.OnRequest) {
		byKey[obj.kindKey()+"|"+key(obj).String()] = obj
		from := obj.GetLabels()[HNCInheritedFrom]
		if from == "" || desired.IsReplica(obj) {
			continue
		}
		src := types.NamespacedName{Namespace: from, Name: obj.GetName()}
		id := obj.kindKey() + "|" + src.String()
		if groups[id] == nil {
			groups[id] = &hncGroup{source: src, kind: obj, onRequest: i >= len(h.Objects)}
		}
		groups[id].copies = append(groups[id].copies, obj)
	}
	moves := make([]Move, 0, len(groups))
	for _, g := range groups {
		source, found := byKey[g.kind.kindKey()+"|"+g.source.String()]
		moves = append(moves, g.move(source, found, namespaces, controller))
	}
	sortMoves(moves)
	return moves
}

// move is the explicit object that says what HNC did with the group's source.
func (g *hncGroup) move(source Object, found bool, namespaces []desired.Namespace, controller Controller) Move {
	m := Move{Peer: HNCPeer, Kind: g.kind.Kind, APIVersion: g.kind.APIVersion, Source: g.source}
	if !found {
		m.Refused = fmt.Sprintf("the source %s %s its copies' %s label names does not exist", m.Kind, m.Source, HNCInheritedFrom)
		return m
	}
	if g.onRequest {
		m.Refused = fmt.Sprintf("HNC's configuration copies %s objects only where a source's %s* annotations ask (mode %s), "+
			"and anyone may write HNC's %s label on one: from the copies alone cmsync cannot tell one HNC made from one written: "+
			"write its ObjectSync (or ConfigMapSync, SecretSync) with the namespaces you mean", m.Kind, hncPropagatePrefix,
			hncAllowPropagate, HNCInheritedFrom)
		return m
	}
	if narrowed := hncNarrowing(source); narrowed != "" {
		m.Refused = fmt.Sprintf("its %s annotation chooses the namespaces HNC copies it into, and from the copies alone cmsync cannot "+
			"tell one HNC made from one written, with HNC's label, in a namespace HNC left out: write its ObjectSync (or "+
			"ConfigMapSync, SecretSync) with the namespaces you mean", narrowed)
		return m
	}
	var below []string
	var copies []Object
	for _, c := range g.copies {
		if !isBelow(namespaces, c.GetNamespace(), g.source.Namespace) {
			m.Left = append(m.Left, copyOf(c, "not below "+g.source.Namespace+" in HNC's hierarchy (its namespace has no label "+
				g.source.Namespace+HNCTreeDepth+" of a depth over 0)"))
			continue
		}
		below, copies = append(below, c.GetNamespace()), append(copies, c)
	}
	slices.Sort(below)
	switch {
	case len(below) == 0:
		m.Refused = "none of its copies is in a namespace below " + g.source.Namespace + " in HNC's hierarchy"
		return m
	case len(below) > maxDestinationNamespaces:
		m.Refused = fmt.Sprintf("its copies are in %d namespaces, more than destinationNamespaces holds (%d): write its ObjectSync with a "+
			"namespaceSelector (HNC's label %s%s selects the namespaces below it)", len(below), maxDestinationNamespaces,
			g.source.Namespace, HNCTreeDepth)
		return m
	}
	explicit := explicitOf(HNCPeer, source, source.GetName(), v1alpha1.ReplicaSpec{DestinationNamespaces: below})
	m.Dropped = hncDropped(source)
	r, ok := m.planExplicit(explicit, source, namespaces, controller)
	if !ok {
		return m
	}
	m.owner = r.owner
	m.classify(copies, r, nil)
	return m
}

// isBelow reports whether namespace is a descendant of ancestor in HNC's tree, as HNC
// labels the namespaces. The labels are HNC's say: they sit on Namespaces, which the
// editors of a namespace cannot change, whereas a HierarchyConfiguration's parent and
// a subnamespace's annotation are checked only by HNC's webhook, which the move from
// HNC removes.
func isBelow(namespaces []desired.Namespace, namespace, ancestor string) bool {
	for _, ns := range namespaces {
		if ns.Name == namespace {
			depth, ok := ns.Labels[ancestor+HNCTreeDepth]
			return ok && depth != "" && depth != "0"
		}
	}
	return false
}

// hncNarrowing is the first of source's annotations that narrow where HNC propagates
// it (select, treeSelect, none), or "".
func hncNarrowing(source Object) string {
	var found []string
	for k := range source.GetAnnotations() {
		if strings.HasPrefix(k, hncPropagatePrefix) {
			found = append(found, k)
		}
	}
	slices.Sort(found)
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// hncDropped names what of HNC's propagation an explicit object with a fixed list of
// namespaces does not do.
func hncDropped(source Object) []string {
	return []string{fmt.Sprintf(
		"HNC's hierarchy: a namespace created later below %s gets no copy; add it to destinationNamespaces, "+
			"or select HNC's namespace label %s%s with namespaceSelector while HNC's labels stay",
		source.GetNamespace(), source.GetNamespace(), ".tree."+HNCGroup+"/depth")}
}

// explicitOf is the explicit object that copies source, under name, as replicas says:
// a ConfigMapSync or SecretSync for those kinds, an ObjectSync for any other.
func explicitOf(peer string, source Object, name string, replicas v1alpha1.ReplicaSpec) v1alpha1.Sync {
	if name != source.GetName() {
		replicas.TargetName = name
	}
	meta := metav1.ObjectMeta{Name: syncName(peer, source, name)}
	switch {
	case source.APIVersion != "":
		meta.Name = objectSyncName(peer, source, name)
		return &v1alpha1.ObjectSync{ObjectMeta: meta, Spec: v1alpha1.ObjectSyncSpec{
			Source: v1alpha1.ObjectSource{
				APIVersion: source.APIVersion,
				Kind:       source.Kind,
				Namespace:  source.GetNamespace(),
				Name:       source.GetName(),
			},
			DestinationNamespace:  replicas.DestinationNamespace,
			DestinationNamespaces: replicas.DestinationNamespaces,
			NamespaceSelector:     replicas.NamespaceSelector,
			TargetName:            replicas.TargetName,
		}}
	case source.Kind == (desired.SecretKind{}).Name():
		return &v1alpha1.SecretSync{ObjectMeta: meta,
			Spec: v1alpha1.SecretSyncSpec{SourceNamespace: source.GetNamespace(), SecretName: source.GetName(), ReplicaSpec: replicas}}
	}
	return &v1alpha1.ConfigMapSync{ObjectMeta: meta,
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: source.GetNamespace(), ConfigMapName: source.GetName(), ReplicaSpec: replicas}}
}

// objectSyncName names an ObjectSync after its source's namespace, name and kind (one
// namespace may hold a NetworkPolicy and a Role of the same name), or after a hash of
// them where that is no valid name.
func objectSyncName(peer string, source Object, name string) string {
	parts := []string{source.GetNamespace(), source.GetName(), strings.ToLower(source.Kind)}
	if name != source.GetName() {
		parts = append(parts, name)
	}
	candidate := strings.Join(parts, ".")
	if len(validation.IsDNS1123Subdomain(candidate)) == 0 {
		return candidate
	}
	sum := sha256.Sum256([]byte(peer + "|" + source.kindKey() + "|" + candidate))
	return "migrated-" + hex.EncodeToString(sum[:])[:16]
}
