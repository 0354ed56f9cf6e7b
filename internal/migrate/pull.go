package migrate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// pullGroup is the copies a peer fills from one source in its pull form (objects that
// name their source: kubernetes-replicator's replicate-from, reflector's mirrors),
// under one name: one ConfigMapSync or SecretSync says the same.
type pullGroup struct {
	peer, kind, name string
	source           Object
	found            bool
	copies           []Object
}

// pullMoves translates the peers' pull forms into ConfigMapSyncs and SecretSyncs.
func pullMoves(objects []Object, namespaces []desired.Namespace, controller Controller) []Move {
	sources := map[string]Object{}
	for _, obj := range objects {
		sources[obj.Kind+"|"+key(obj).String()] = obj
	}
	groups := map[string]*pullGroup{}
	var order []string
	for _, obj := range objects {
		peer, source, ok := copyMarkers(obj)
		if !ok || desired.IsReplica(obj) || !isPull(peer, obj) {
			continue
		}
		id := strings.Join([]string{peer, obj.Kind, source.String(), obj.GetName()}, "|")
		if groups[id] == nil {
			src, found := sources[obj.Kind+"|"+source.String()]
			if !found {
				src = Object{
					Kind:                  obj.Kind,
					PartialObjectMetadata: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: source.Namespace, Name: source.Name}},
				}
			}
			groups[id] = &pullGroup{peer: peer, kind: obj.Kind, name: obj.GetName(), source: src, found: found}
			order = append(order, id)
		}
		groups[id].copies = append(groups[id].copies, obj)
	}
	moves := make([]Move, 0, len(order))
	for _, id := range order {
		moves = append(moves, groups[id].move(namespaces, controller))
	}
	return moves
}

// isPull: the copy is one the peer fills because it names its source (not one the
// peer's push form made, which reflector and config-syncer mark too).
func isPull(peer string, obj Object) bool {
	switch peer {
	case Replicator:
		return true
	case Reflector:
		return !isTrue(obj, reflectorAutoReflects)
	}
	return false
}

// move is the explicit object that says what the group's peer did: copy the source,
// under the group's name, into the namespaces of the copies the peer fills.
func (g *pullGroup) move(namespaces []desired.Namespace, controller Controller) Move {
	m := Move{Peer: g.peer, Kind: g.kind, Source: key(g.source)}
	if !g.found {
		m.Refused = fmt.Sprintf("the source %s %s its copies name does not exist", g.kind, m.Source)
		return m
	}
	var filled []string
	var copies []Object
	for _, c := range g.copies {
		if why := g.refusedBy(c); why != "" {
			m.Left = append(m.Left, copyOf(c, why))
			continue
		}
		filled, copies = append(filled, c.GetNamespace()), append(copies, c)
	}
	slices.Sort(filled)
	if len(filled) == 0 {
		m.Refused = "the peer fills none of its copies"
		return m
	}
	explicit := g.explicit(filled)
	m.Dropped = dropped(g.peer, g.source)
	r, ok := m.planExplicit(explicit, g.source, namespaces, controller)
	if !ok {
		return m
	}
	m.owner = r.owner
	m.classify(copies, r, nil)
	return m
}

// planExplicit sets explicit as the move's form, and resolves it as the controller
// would; not ok when the controller would keep no replica of it, or refuse it: the
// move is then refused, saying why, and has no form.
func (m *Move) planExplicit(explicit v1alpha1.Sync, source Object, namespaces []desired.Namespace, controller Controller) (resolved, bool) {
	m.setExplicit(explicit)
	if why := controller.refusal(m.Kind, explicit); why != "" {
		m.Refused = why
		m.setExplicit(nil)
		return resolved{}, false
	}
	r := resolve(m.Kind, m.Source, source, explicit, namespaces, controller.Policy)
	if r.invalid != nil {
		m.Refused = "cmsync would refuse it: " + r.invalid.Error()
		m.setExplicit(nil)
		return resolved{}, false
	}
	return r, true
}

// refusedBy says why the peer does not fill copy from its source ("" when it does):
// the source must allow it, as the peer checks.
func (g *pullGroup) refusedBy(copy Object) string {
	allowed, patterns := reflectorAllowed, g.source.GetAnnotations()[reflectorAllowedNamespaces]
	if g.peer == Replicator {
		allowed, patterns = replicatorAllowed, g.source.GetAnnotations()[replicatorAllowedNamespaces]
		if patterns == "" {
			return "the peer does not fill it: its source has no " + replicatorAllowedNamespaces
		}
	}
	if !isTrue(g.source, allowed) {
		return "the peer does not fill it: its source does not set " + allowed + "=true"
	}
	if patterns != "" && !matchesAny(patterns, copy.GetNamespace()) {
		return "the peer does not fill it: its source does not allow namespace " + copy.GetNamespace()
	}
	return ""
}

// matchesAny matches a namespace against a peer's comma list of regular expressions,
// each matched whole, as the peers do.
func matchesAny(patterns, namespace string) bool {
	for _, p := range strings.Split(patterns, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if matched, err := regexp.MatchString("^(?:"+strings.TrimSuffix(strings.TrimPrefix(p, "^"), "$")+")$", namespace); err == nil && matched {
			return true
		}
	}
	return false
}

// explicit is the ConfigMapSync or SecretSync of the group into namespaces.
func (g *pullGroup) explicit(namespaces []string) v1alpha1.Sync {
	return explicitOf(g.peer, g.source, g.name, v1alpha1.ReplicaSpec{DestinationNamespaces: namespaces})
}

// syncName names the explicit object after the source (and the copies' name, where it
// differs), or after a hash of them where that is no valid name.
func syncName(peer string, source Object, name string) string {
	parts := []string{source.GetNamespace(), source.GetName()}
	if name != source.GetName() {
		parts = append(parts, name)
	}
	candidate := strings.Join(parts, ".")
	if len(validation.IsDNS1123Subdomain(candidate)) == 0 {
		return candidate
	}
	sum := sha256.Sum256([]byte(peer + "|" + candidate))
	return "migrated-" + hex.EncodeToString(sum[:])[:16]
}
