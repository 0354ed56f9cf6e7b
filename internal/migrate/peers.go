package migrate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The peers migrate reads, and the keys of theirs it knows. Each key is named as the
// peer's own source names it.
const (
	// Replicator is mittwald's kubernetes-replicator (replicate/common/consts.go).
	Replicator = "kubernetes-replicator"
	// Reflector is emberstack's reflector (Core/Mirroring/Constants/Annotations.cs).
	Reflector = "reflector"
	// ConfigSyncer is AppsCode's kubed / config-syncer (pkg/syncer/syncer.go).
	ConfigSyncer = "config-syncer"

	replicatorPrefix              = "replicator.v1.mittwald.de/"
	replicatorReplicateTo         = replicatorPrefix + "replicate-to"
	replicatorReplicateToMatching = replicatorPrefix + "replicate-to-matching"
	replicatorReplicateFrom       = replicatorPrefix + "replicate-from"
	replicatorAllowed             = replicatorPrefix + "replication-allowed"
	replicatorAllowedNamespaces   = replicatorPrefix + "replication-allowed-namespaces"
	replicatorReplicatedKeys      = replicatorPrefix + "replicated-keys"
	replicatorReplicatedVersion   = replicatorPrefix + "replicated-from-version"

	reflectorPrefix            = "reflector.v1.k8s.emberstack.com/"
	reflectorAllowed           = reflectorPrefix + "reflection-allowed"
	reflectorAllowedNamespaces = reflectorPrefix + "reflection-allowed-namespaces"
	reflectorAutoEnabled       = reflectorPrefix + "reflection-auto-enabled"
	reflectorAutoNamespaces    = reflectorPrefix + "reflection-auto-namespaces"
	reflectorReflects          = reflectorPrefix + "reflects"
	reflectorAutoReflects      = reflectorPrefix + "auto-reflects"

	syncerSync            = "kubed.appscode.com/sync"
	syncerOrigin          = "kubed.appscode.com/origin"
	syncerOriginName      = "kubed.appscode.com/origin.name"
	syncerOriginNamespace = "kubed.appscode.com/origin.namespace"
)

// understood are the peers' keys migrate translates or reads as markers; any other key
// of a peer's prefix on a source is a feature cmsync has no equivalent of, and is named.
var understood = map[string]bool{
	replicatorReplicateTo: true, replicatorReplicateToMatching: true, replicatorReplicateFrom: true,
	replicatorAllowed: true, replicatorAllowedNamespaces: true, replicatorReplicatedKeys: true,
	replicatorReplicatedVersion: true, replicatorPrefix + "replicated-at": true,
	reflectorAllowed: true, reflectorAllowedNamespaces: true, reflectorAutoEnabled: true,
	reflectorAutoNamespaces: true, reflectorReflects: true, reflectorAutoReflects: true,
	reflectorPrefix + "reflected-version": true, reflectorPrefix + "reflected-at": true,
	syncerSync: true, syncerOrigin: true,
}

// peerKeys are the peers' annotation prefixes, by peer.
var peerKeys = map[string]string{Replicator: replicatorPrefix, Reflector: reflectorPrefix, ConfigSyncer: "kubed.appscode.com/"}

// dropped names the keys of peer's prefix on obj that migrate does not translate.
func dropped(peer string, obj metav1.Object) []string {
	var out []string
	for key, value := range obj.GetAnnotations() {
		if strings.HasPrefix(key, peerKeys[peer]) && !understood[key] {
			out = append(out, fmt.Sprintf("%s=%q (%s)", key, value, droppedWhy(key)))
		}
	}
	return out
}

// droppedWhy says what cmsync does instead of a peer feature it has no equivalent of.
func droppedWhy(key string) string {
	switch key {
	case replicatorPrefix + "strip-labels", replicatorPrefix + "strip-annotations":
		return "cmsync copies the source's labels and annotations; name the keys to keep off in cmsync.io/strip-metadata"
	case replicatorPrefix + "keep-owner-references":
		return "cmsync's replicas never carry the source's owner references"
	case "kubed.appscode.com/sync-contexts":
		return "cmsync copies within one cluster"
	}
	return "no cmsync equivalent"
}

// isTrue reads a peer's boolean annotation as the peer does (strconv.ParseBool, which
// also reads reflector's "True").
func isTrue(obj metav1.Object, key string) bool {
	v, err := strconv.ParseBool(obj.GetAnnotations()[key])
	return err == nil && v
}

// sourceRef reads "<namespace>/<name>" (or "<name>", in the object's own namespace,
// as reflector allows).
func sourceRef(obj metav1.Object, value string) (types.NamespacedName, bool) {
	ns, name, found := strings.Cut(value, "/")
	if !found {
		ns, name = obj.GetNamespace(), value
	}
	return types.NamespacedName{Namespace: ns, Name: name}, ns != "" && name != ""
}

// globsOf turns a peer's comma list of namespace regular expressions, matched whole
// as both peers match them, into cmsync's names and globs: a literal name stays, ".*"
// becomes "*" and "." becomes "?". Anything else is a regular expression no glob list
// expresses exactly, and is refused.
func globsOf(patterns string) ([]string, error) {
	var globs []string
	for _, p := range strings.Split(patterns, ",") {
		p = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(p), "^"), "$")
		if p == "" {
			continue
		}
		glob := strings.ReplaceAll(strings.ReplaceAll(p, ".*", "\x00"), ".", "?")
		glob = strings.ReplaceAll(glob, "\x00", "*")
		if !plainGlob.MatchString(glob) {
			return nil, fmt.Errorf("namespace pattern %q is a regular expression no list of names and globs expresses exactly", p)
		}
		globs = append(globs, glob)
	}
	return globs, nil
}

var plainGlob = regexp.MustCompile(`^[-a-z0-9*?]+$`)
