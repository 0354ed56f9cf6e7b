package migrate

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// contestedWorld is a peer's copies in every kind of namespace the controller's policy
// can keep out: reflector's auto-reflection of platform/ca into every namespace, a
// config-syncer Secret and a kubernetes-replicator pull copy (the ConfigMapSync form).
func contestedWorld() ([]Object, []desired.Namespace) {
	objects := make([]Object, 0, 16)
	objects = append(objects,
		object("ConfigMap", "platform", "ca", nil, map[string]string{reflectorAllowed: "true", reflectorAutoEnabled: "true"}),
		object("Secret", "platform", "token", nil, map[string]string{syncerSync: ""}),
		object("Secret", "team-a", "token", map[string]string{syncerOriginName: "token", syncerOriginNamespace: "platform"}, nil),
		object("ConfigMap", "platform", "settings", nil, map[string]string{replicatorAllowed: "true", replicatorAllowedNamespaces: "team-.*"}),
		object("ConfigMap", "team-a", "settings", nil, map[string]string{replicatorReplicateFrom: "platform/settings"}),
	)
	namespaces := []desired.Namespace{
		{Name: "platform", Labels: map[string]string{"tenant": "a"}},
		{Name: "team-a", Labels: map[string]string{"tenant": "a"}},
		{Name: "team-b", Labels: map[string]string{"tenant": "b"}},
		{Name: "kube-system"},
		{Name: "quiet", Labels: map[string]string{v1alpha1.IgnoreNamespaceLabel: v1alpha1.IgnoreNamespaceLabelValue}},
		{Name: "leaving", Terminating: true},
	}
	for _, ns := range namespaces[1:] {
		objects = append(objects, object("ConfigMap", ns.Name, "ca", nil, reflectorCopy("platform/ca", "True")))
	}
	return objects, namespaces
}

// migrate --apply takes over a copy only where the controller, under the policy the
// plugin read, would keep it as its replica: every rule of that policy keeps copies out
// (they are left, with the rule that keeps them out), and a kind or form the
// controller does not run is refused whole.
func TestPlanTakesOverOnlyWhatTheControllerKeeps(t *testing.T) {
	excluded := []string{"kube-system", "kube-public", "kube-node-lease"}
	for _, tc := range []struct {
		name       string
		controller Controller
		// take are the namespaces whose platform/ca copy is taken over; left those left,
		// with a fragment of why.
		take    []string
		left    map[string]string
		refused map[string]string // "Kind namespace/name" of a move: a fragment of why it is refused
	}{{
		name:       "the controller's defaults",
		controller: runningAll(desired.Policy{ExcludeNamespaces: excluded, SourceNamespaces: []string{"*"}}),
		take:       []string{"team-a", "team-b"},
		left: map[string]string{
			"kube-system": `excluded by the controller's --exclude-namespaces ("kube-system")`,
			"quiet":       "labelled cmsync.io/ignore=true",
			"leaving":     "terminating",
		},
	}, {
		name:       "a policy that excludes nothing (a look-alike's), were it the controller's",
		controller: runningAll(desired.Policy{SourceNamespaces: []string{"*"}}),
		take:       []string{"kube-system", "team-a", "team-b"},
		left:       map[string]string{"quiet": "ignore", "leaving": "terminating"},
	}, {
		name:       "the tenant boundary",
		controller: runningAll(desired.Policy{ExcludeNamespaces: excluded, SourceNamespaces: []string{"*"}, TenantLabel: "tenant"}),
		take:       []string{"team-a"},
		left:       map[string]string{"team-b": `outside tenant "a"`, "kube-system": "--exclude-namespaces"},
	}, {
		name:       "scoped mode",
		controller: runningAll(desired.Policy{SourceNamespaces: []string{"*"}, Scope: []string{"platform", "team-a"}}),
		take:       []string{"team-a"},
		left:       map[string]string{"team-b": "outside the namespaces cmsync serves", "kube-system": "outside the namespaces"},
	}, {
		name:       "sources not allowed in the namespace",
		controller: runningAll(desired.Policy{SourceNamespaces: []string{"shared-*"}}),
		refused: map[string]string{
			"ConfigMap platform/ca": "--source-namespaces", "Secret platform/token": "--source-namespaces",
			"ConfigMap platform/settings": "--source-namespaces",
		},
	}, {
		name:       "a reserved name",
		controller: runningAll(desired.Policy{SourceNamespaces: []string{"*"}, ReservedNames: []string{"ca"}}),
		refused:    map[string]string{"ConfigMap platform/ca": "a reserved name"},
	}, {
		name:       "Secrets off",
		controller: Controller{Policy: desired.Policy{ExcludeNamespaces: excluded, SourceNamespaces: []string{"*"}}, ConfigMapSyncs: true},
		take:       []string{"team-a", "team-b"},
		refused:    map[string]string{"Secret platform/token": "--secrets=disabled"},
	}, {
		name:       "ConfigMapSync off",
		controller: Controller{Policy: desired.Policy{ExcludeNamespaces: excluded, SourceNamespaces: []string{"*"}}, Secrets: true, SecretSyncs: true},
		take:       []string{"team-a", "team-b"},
		refused:    map[string]string{"ConfigMap platform/settings": "--configmapsync=disabled"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objects, namespaces := contestedWorld()
			moves := Plan(objects, namespaces, tc.controller)
			expectTakeOverWithinResolve(t, moves, objects, namespaces, tc.controller.Policy)
			for _, m := range moves {
				id := m.Kind + " " + m.Source.String()
				if want, ok := tc.refused[id]; ok {
					if !strings.Contains(m.Refused, want) || len(m.TakeOver) > 0 || m.Explicit() != nil {
						t.Errorf("%s: refused %q (want %q), takes over %v", id, m.Refused, want, m.TakeOver)
					}
					delete(tc.refused, id)
					continue
				}
				if m.Refused != "" {
					t.Errorf("%s refused: %s", id, m.Refused)
				}
				if id != "ConfigMap platform/ca" {
					continue
				}
				if got := namespacesIn(m.TakeOver); !slices.Equal(got, tc.take) {
					t.Errorf("takes over %v, want %v", got, tc.take)
				}
				for _, c := range m.Left {
					if want, ok := tc.left[c.Namespace]; ok && !strings.Contains(c.Why, want) {
						t.Errorf("left %s: %q, want it to say %q", c.Namespace, c.Why, want)
					}
				}
				if got, want := namespacesIn(m.Left), slices.Sorted(maps.Keys(tc.left)); !isSubset(want, got) {
					t.Errorf("left %v, want %v among them", got, want)
				}
			}
			if len(tc.refused) > 0 {
				t.Errorf("no refused move for %v", tc.refused)
			}
		})
	}
}

// expectTakeOverWithinResolve: every copy taken over bears the replica name and lies in
// a target that desired.Resolve, called here on its own, gives the move's form under
// policy; nothing else is ever taken over.
func expectTakeOverWithinResolve(t *testing.T, moves []Move, objects []Object, namespaces []desired.Namespace, policy desired.Policy) {
	t.Helper()
	for _, m := range moves {
		if len(m.TakeOver) == 0 {
			continue
		}
		var meta metav1.Object
		for _, obj := range objects {
			if obj.Kind == m.Kind && key(obj) == m.Source {
				meta = obj.DeepCopy()
			}
		}
		explicit := m.Explicit()
		if explicit == nil {
			meta.SetLabels(withEntries(meta.GetLabels(), map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}))
			meta.SetAnnotations(withEntries(meta.GetAnnotations(), m.Annotations))
		}
		var name string
		var targets []string
		if m.Kind == "Secret" {
			i := desired.Resolve(desired.SecretKind{}, desired.Source[*corev1.Secret]{Key: m.Source, Meta: meta, Sync: explicit}, namespaces, policy)
			name, targets = i.ReplicaName, i.Targets.Namespaces
		} else {
			i := desired.Resolve(desired.ConfigMapKind{}, desired.Source[*corev1.ConfigMap]{Key: m.Source, Meta: meta, Sync: explicit}, namespaces, policy)
			name, targets = i.ReplicaName, i.Targets.Namespaces
		}
		for _, c := range m.TakeOver {
			if c.Name != name || !slices.Contains(targets, c.Namespace) {
				t.Errorf("%s %s takes over %s/%s: Resolve names the replicas %s and targets %v", m.Kind, m.Source, c.Namespace, c.Name, name, targets)
			}
		}
	}
}

func isSubset(small, big []string) bool {
	for _, s := range small {
		if !slices.Contains(big, s) {
			return false
		}
	}
	return true
}

// A copy that carries a finalizer or an owner reference of its own is left: once a
// replica, the admission policy would keep anyone from taking a tenant's finalizer off
// it, and its owner's deletion would delete it behind cmsync's back.
func TestPlanLeavesCopiesWithFinalizersOrOwners(t *testing.T) {
	objects, namespaces := contestedWorld()
	for _, o := range objects {
		switch {
		case o.GetNamespace() == "team-a" && o.GetName() == "ca":
			o.SetFinalizers([]string{"tenant.example.com/block"})
		case o.GetNamespace() == "team-b" && o.GetName() == "ca":
			o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "anchor", UID: "u"}})
		}
	}
	policy := desired.Policy{SourceNamespaces: []string{"*"}}
	for _, m := range Plan(objects, namespaces, runningAll(policy)) {
		if m.Kind+" "+m.Source.String() != "ConfigMap platform/ca" {
			continue
		}
		for _, c := range m.TakeOver {
			if c.Namespace == "team-a" || c.Namespace == "team-b" {
				t.Errorf("takes over the copy in %s", c.Namespace)
			}
		}
		left := 0
		for _, c := range m.Left {
			if (c.Namespace == "team-a" || c.Namespace == "team-b") && strings.Contains(c.Why, "finalizers or owner references") {
				left++
			}
		}
		if left != 2 {
			t.Errorf("left %+v", m.Left)
		}
	}
}
