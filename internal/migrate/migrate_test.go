package migrate

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// object is a ConfigMap's or Secret's metadata.
func object(kind, namespace, name string, labels, annotations map[string]string) Object {
	return Object{Kind: kind, PartialObjectMetadata: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: types.UID(kind + "/" + namespace + "/" + name), Labels: labels, Annotations: annotations,
	}}}
}

// The copies below carry the metadata the peers' releases write on them:
//   - kubernetes-replicator push copies: replicated-at, replicated-from-version and
//     replicated-keys, and the source's labels (replicate/configmap/configmaps.go,
//     ReplicateObjectTo); pull targets keep their replicate-from
//     (replicate/common/generic-replicator.go, resourceAddedReplicateFrom).
//   - reflector: auto-reflects ("True" or "False", C#'s bool.ToString()), reflects,
//     reflected-version and reflected-at (Core/Mirroring/ResourceMirror.cs, the
//     patchAnnotations of a reflection).
//   - config-syncer: the origin.name, origin.namespace and origin.cluster labels and
//     the origin annotation, the JSON of the source's ObjectReference
//     (pkg/syncer/syncer.go, syncerLabels and syncerAnnotations).
func peersWorld() []Object {
	return []Object{
		object("ConfigMap", "platform", "ca", map[string]string{"team": "platform"}, map[string]string{
			replicatorReplicateTo: "team-a,team-.*", replicatorPrefix + "strip-labels": "true",
		}),
		object("ConfigMap", "team-a", "ca", map[string]string{"team": "platform"}, replicatorCopy("ca.crt")),
		object("ConfigMap", "team-b", "ca", nil, replicatorCopy("ca.crt")),
		object("ConfigMap", "kube-system", "ca", nil, replicatorCopy("ca.crt")),

		object("Secret", "platform", "db", nil, map[string]string{replicatorAllowed: "true", replicatorAllowedNamespaces: "app-.*"}),
		object("Secret", "app-1", "db-credentials", nil, map[string]string{replicatorReplicateFrom: "platform/db"}),
		object("Secret", "other", "db-credentials", nil, map[string]string{replicatorReplicateFrom: "platform/db"}),

		object("ConfigMap", "platform", "settings", nil, map[string]string{
			reflectorAllowed: "true", reflectorAutoEnabled: "true", reflectorAllowedNamespaces: "team-.*",
		}),
		object("ConfigMap", "team-a", "settings", nil, reflectorCopy("platform/settings", "True")),
		object("ConfigMap", "shop", "settings-mirror", nil, reflectorCopy("platform/settings", "False")),

		object("Secret", "registry", "pull", nil, map[string]string{syncerSync: ""}),
		object(
			"Secret",
			"team-b",
			"pull",
			map[string]string{syncerOriginName: "pull", syncerOriginNamespace: "registry", "kubed.appscode.com/origin.cluster": ""},
			map[string]string{syncerOrigin: `{"kind":"Secret","namespace":"registry","name":"pull","uid":"u","apiVersion":"v1","resourceVersion":"1"}`},
		),
		object("Secret", "team-a", "pull", nil, nil), // in the way: not the peer's

		object("ConfigMap", "platform", "two-peers", nil, map[string]string{replicatorReplicateTo: "team-a", syncerSync: ""}),
		object("ConfigMap", "platform", "regex", nil, map[string]string{replicatorReplicateTo: "team-[ab]"}),
	}
}

func replicatorCopy(keys string) map[string]string {
	return map[string]string{
		replicatorPrefix + "replicated-at": "2026-11-28T10:00:00Z", replicatorReplicatedVersion: "41", replicatorReplicatedKeys: keys,
	}
}

func reflectorCopy(source, auto string) map[string]string {
	return map[string]string{
		reflectorReflects: source, reflectorAutoReflects: auto,
		reflectorPrefix + "reflected-version": "41", reflectorPrefix + "reflected-at": "2026-11-28T10:00:00.0000000+00:00",
	}
}

// runningAll is a controller with policy that runs Secrets and both explicit forms.
func runningAll(policy desired.Policy) Controller {
	return Controller{Policy: policy, Secrets: true, ConfigMapSyncs: true, SecretSyncs: true}
}

func namespacesOf(names ...string) []desired.Namespace {
	out := make([]desired.Namespace, 0, len(names))
	for _, n := range names {
		out = append(out, desired.Namespace{Name: n})
	}
	return out
}

func moveOf(t *testing.T, moves []Move, kind, source, peer string) Move {
	t.Helper()
	for _, m := range moves {
		if m.Kind == kind && m.Source.String() == source && m.Peer == peer {
			return m
		}
	}
	t.Fatalf("no move of %s %s by %s in %+v", kind, source, peer, moves)
	return Move{}
}

func namespacesIn(copies []Copy) []string {
	out := make([]string, 0, len(copies))
	for _, c := range copies {
		out = append(out, c.Namespace)
	}
	slices.Sort(out)
	return out
}

func TestPlanTranslatesEachPeer(t *testing.T) {
	policy := desired.Policy{ExcludeNamespaces: []string{"kube-system"}, SourceNamespaces: []string{"*"}}
	moves := Plan(peersWorld(), namespacesOf("platform", "registry", "team-a", "team-b", "app-1", "other", "shop", "kube-system"), runningAll(policy))

	push := moveOf(t, moves, "ConfigMap", "platform/ca", Replicator)
	if push.Annotations[v1alpha1.TargetNamespacesAnnotation] != "team-a,team-*" || push.Refused != "" {
		t.Errorf("replicator push: %+v", push)
	}
	if !slices.Equal(namespacesIn(push.TakeOver), []string{"team-a", "team-b"}) || !slices.Equal(namespacesIn(push.Left), []string{"kube-system"}) {
		t.Errorf("replicator push copies: take over %v, left %v", push.TakeOver, push.Left)
	}
	if len(push.Dropped) != 1 || !strings.Contains(push.Dropped[0], "strip-labels") {
		t.Errorf("replicator push dropped %v", push.Dropped)
	}

	pull := moveOf(t, moves, "Secret", "platform/db", Replicator)
	sync := pull.SecretSync
	if sync == nil || sync.Spec.SecretName != "db" || !slices.Equal(sync.Spec.DestinationNamespaces, []string{"app-1"}) ||
		sync.Spec.TargetName != "db-credentials" {
		t.Errorf("replicator pull: %+v", pull.SecretSync)
	}
	if !slices.Equal(namespacesIn(pull.TakeOver), []string{"app-1"}) || !slices.Equal(namespacesIn(pull.Left), []string{"other"}) {
		t.Errorf("replicator pull copies: take over %v, left %v", pull.TakeOver, pull.Left)
	}

	auto := moveOf(t, moves, "ConfigMap", "platform/settings", Reflector)
	if auto.Annotations[v1alpha1.TargetNamespacesAnnotation] != "team-*" || !slices.Equal(namespacesIn(auto.TakeOver), []string{"team-a"}) ||
		!slices.Equal(auto.New, []string{"team-b"}) {
		t.Errorf("reflector auto: %+v", auto)
	}
	syncer := moveOf(t, moves, "Secret", "registry/pull", ConfigSyncer)
	if syncer.Annotations[v1alpha1.TargetNamespacesAnnotation] != "*" || !slices.Equal(namespacesIn(syncer.TakeOver), []string{"team-b"}) {
		t.Errorf("config-syncer: %+v", syncer)
	}
	if left := namespacesIn(syncer.Left); !slices.Contains(left, "team-a") {
		t.Errorf("config-syncer: the Secret in the way in team-a is not listed as left: %v", syncer.Left)
	}

	if m := moveOf(
		t,
		moves,
		"ConfigMap",
		"platform/two-peers",
		Replicator+", "+ConfigSyncer,
	); !strings.Contains(m.Refused, "disagree") ||
		m.Annotations != nil {
		t.Errorf("two peers: %+v", m)
	}
	if m := moveOf(t, moves, "ConfigMap", "platform/regex", Replicator); !strings.Contains(m.Refused, `"team-[ab]" is a regular expression`) {
		t.Errorf("regex: %+v", m)
	}
}

// A reflector mirror the source does not allow is left, and nothing is created for it.
func TestPlanLeavesWhatThePeerDoesNotFill(t *testing.T) {
	moves := Plan(peersWorld(), namespacesOf("platform", "team-a", "team-b", "shop"), runningAll(desired.Policy{SourceNamespaces: []string{"*"}}))
	mirrors := 0
	for _, m := range moves {
		if m.Peer != Reflector || m.Annotations != nil {
			continue
		}
		mirrors++
		if m.Explicit() != nil || m.Refused == "" || !slices.Equal(namespacesIn(m.Left), []string{"shop"}) ||
			!strings.Contains(m.Left[0].Why, "does not allow namespace shop") {
			t.Errorf("the mirror in shop, which reflector does not fill: %+v", m)
		}
	}
	if mirrors != 1 {
		t.Errorf("%d moves of reflector's mirror, want 1: %+v", mirrors, moves)
	}
}

func TestGlobsOf(t *testing.T) {
	for pattern, want := range map[string]string{
		"team-a": "team-a", "^team-.*$": "team-*", ".*": "*", "app-.": "app-?", "a,b": "a,b",
	} {
		got, err := globsOf(pattern)
		if err != nil || strings.Join(got, ",") != want {
			t.Errorf("globsOf(%q) = %v %v, want %s", pattern, got, err, want)
		}
	}
	for _, bad := range []string{"team-[ab]", "a|b", "team-\\d+", "(x)"} {
		if _, err := globsOf(bad); err == nil {
			t.Errorf("globsOf(%q) accepted a regular expression", bad)
		}
	}
}

func TestMarkersMakeAReplicaOfTheMove(t *testing.T) {
	moves := Plan(peersWorld(), namespacesOf("platform", "team-a", "team-b"), runningAll(desired.Policy{SourceNamespaces: []string{"*"}}))
	m := moveOf(t, moves, "ConfigMap", "platform/ca", Replicator)
	labels, annotations, ref := m.Markers()
	copied := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ca", Labels: labels, Annotations: annotations}}
	if ref != nil || !m.owner.Owns(copied) {
		t.Errorf("the markers %v %v make no replica of %s", labels, annotations, m.Source)
	}
}

// The chart's admission policy admits a take-over that writes exactly these markers and
// no other key (deploy/chart/cmsync/templates/admission.yaml, onlyMarkersAdded): the
// managed-by and source-id labels, the source annotation, and for the explicit form one
// controller reference to the ConfigMapSync or SecretSync, without blockOwnerDeletion.
// Never cmsync.io/content-hash, from which cmsync would believe the copy in sync
// without reading it.
func TestMarkersAreWhatTheAdmissionPolicyAdmits(t *testing.T) {
	moves := Plan(peersWorld(), namespacesOf("platform", "team-a", "team-b", "app-1", "registry"), runningAll(desired.Policy{SourceNamespaces: []string{"*"}}))
	annotationForm := moveOf(t, moves, "ConfigMap", "platform/ca", Replicator)
	pull := moveOf(t, moves, "Secret", "platform/db", Replicator)
	if pull.Explicit() == nil {
		t.Fatalf("the pull form makes no SecretSync: %+v", pull)
	}
	sync := pull.Explicit()
	sync.SetUID("sync-uid")
	for _, m := range []Move{annotationForm, pull.Created(sync)} {
		labels, annotations, ref := m.Markers()
		if !slices.Equal(slices.Sorted(maps.Keys(labels)), []string{v1alpha1.ManagedByLabel, v1alpha1.SourceIDLabel}) ||
			labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(labels[v1alpha1.SourceIDLabel]) {
			t.Errorf("%s %s: labels %v", m.Kind, m.Source, labels)
		}
		if len(annotations) != 1 || annotations[v1alpha1.SourceAnnotation] != m.Source.String() {
			t.Errorf("%s %s: annotations %v", m.Kind, m.Source, annotations)
		}
		if m.Explicit() == nil {
			if ref != nil {
				t.Errorf("%s %s: the annotation form writes an owner reference %+v", m.Kind, m.Source, ref)
			}
			continue
		}
		if ref == nil || ref.APIVersion != v1alpha1.GroupVersion.String() || ref.Kind != m.Kind+"Sync" ||
			ref.Controller == nil || !*ref.Controller || ref.BlockOwnerDeletion != nil || ref.UID != "sync-uid" {
			t.Errorf("%s %s: owner reference %+v", m.Kind, m.Source, ref)
		}
	}
}
