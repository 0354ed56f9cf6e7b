//go:build e2e

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cmsync/cmsync/test/harness"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The model checker: random histories of what users do, run against the real control
// plane with two leader-elected cmsync processes, interleaved with faults; after each
// history the cluster must match what a small model of docs/reference.md — written here, sharing
// no code with cmsync — says it should be. CHAOS_SEED makes a run reproducible; a
// failing history prints its seed and the shortest prefix of its operations that
// still fails.
//
// One history owns a world: a source namespace and a pool of target namespaces under a
// prefix of its own, so histories never see each other's objects (label values carry
// the prefix too).

// --- the model ---

// mcNamespace is a target namespace of the pool.
type mcNamespace struct {
	name    string
	exists  bool
	deleted bool   // deleted by a user: terminating, then gone
	tier    string // the tier label's value, "" for none
	ignored bool
	// tenant is the tenant label's value, "" for none; accepts: its accept-from names
	// the world's source namespace.
	tenant  string
	accepts bool
}

// mcSource is a source of the annotation form, or (kind "") the plain ConfigMap a
// ConfigMapSync copies.
type mcSource struct {
	kind     string // "ConfigMap" or "Secret"
	name     string
	exists   bool
	labelled bool
	entries  []string // target-namespaces entries
	tier     string   // target-selector tier=<tier>, "" for none
	value    string
	broken   bool // its target-selector is malformed, or (reserved) its target-name is reserved: Invalid
	reserved bool
	// frozen holds, while the source is Invalid, the replicas it had when it became
	// Invalid: cmsync creates and updates nothing for an Invalid source, so they stay as
	// they were (users may still edit or delete them) — but for those in a namespace
	// that stops admitting the source (ignored, excluded), which go; prevSynced is its
	// synced count then.
	frozen     map[mcObject]mcReplica
	prevSynced string
}

// mcSync is the world's ConfigMapSync; it copies the plain ConfigMap syncSource.
type mcSync struct {
	name    string
	deleted int // ConfigMapSyncs deleted so far: each one created after a delete gets a new name
	exists  bool
	entries []string // destinationNamespaces
	tier    string   // namespaceSelector matchLabels tier=<tier>
	frozen  map[mcObject]mcReplica
}

// mcObject names an object in a target namespace.
type mcObject struct{ kind, namespace, name string }

func (o mcObject) String() string { return o.kind + " " + o.namespace + "/" + o.name }

type mcWorld struct {
	prefix     string
	srcNS      string
	pool       []*mcNamespace
	sources    []*mcSource // annotated: two ConfigMaps and a Secret
	syncSource *mcSource   // the plain ConfigMap the ConfigMapSync copies
	sync       *mcSync
	// unmanaged are objects in the way of replicas: created by users, or replicas a
	// user disowned (managed-by label removed); their resourceVersions must not move.
	unmanaged map[mcObject]string
	// excluded is the glob the controller's --exclude-namespaces adds, and
	// sourcesBarred tells whether --source-namespaces leaves the worlds' source
	// namespaces out (the policy, shared by every world).
	excluded      *string
	sourcesBarred *bool
	// srcTenant is the tenant of the source namespace, "" for none: then its sources
	// reach every namespace, else only that tenant's and those accepting it.
	srcTenant string
}

// invalid tells whether cmsync must treat the source as Invalid.
func (w *mcWorld) invalid(s *mcSource) bool { return s.broken || *w.sourcesBarred }

const (
	kindConfigMap = "ConfigMap"
	kindSecret    = "Secret"
	tierLabel     = "tier"
	// tenantLabel is the --tenant-label the checker's processes run with.
	tenantLabel = "mc-tenant"
	poolSize    = 5
)

func newWorld(t *testing.T, excluded *string, sourcesBarred *bool) *mcWorld {
	t.Helper()
	w := &mcWorld{prefix: "mc-" + randomSuffix(), unmanaged: map[mcObject]string{}, excluded: excluded, sourcesBarred: sourcesBarred}
	w.srcNS = w.prefix + "-src"
	must(t, harness.K8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.srcNS}}))
	for i := range poolSize {
		w.pool = append(w.pool, &mcNamespace{name: fmt.Sprintf("%s-n%d", w.prefix, i)})
	}
	w.sources = []*mcSource{{kind: kindConfigMap, name: "a"}, {kind: kindConfigMap, name: "b"}, {kind: kindSecret, name: "c"}}
	w.syncSource = &mcSource{kind: kindConfigMap, name: "d"}
	w.sync = &mcSync{name: w.prefix}
	return w
}

// tierValue makes a tier label value unique to the world.
func (w *mcWorld) tierValue(tier string) string { return w.prefix + "-" + tier }

// targets is the model of docs/annotations.md: the pool's namespaces matched by an entry or the
// selector, minus `!` exclusions, the controller's exclusions, ignored, terminating and
// missing namespaces (the source namespace is never in the pool).
func (w *mcWorld) targets(entries []string, tier string, bound bool) []string {
	var out []string
	for _, ns := range w.pool {
		if !w.admits(ns, bound) {
			continue
		}
		included, excluded := tier != "" && ns.tier == tier, false
		for _, e := range entries {
			if pattern, ok := strings.CutPrefix(e, "!"); ok {
				excluded = excluded || globMatches(pattern, ns.name)
			} else {
				included = included || globMatches(e, ns.name)
			}
		}
		if included && !excluded {
			out = append(out, ns.name)
		}
	}
	return out
}

// admits is the model of docs/security.md: whether ns may hold a replica of a source of
// the world at all, whatever the source names — the controller's exclusions, ignored,
// terminating and missing namespaces aside, and, for a source bound by the tenant
// boundary (the annotation form), within the source namespace's tenant or accepting it.
func (w *mcWorld) admits(ns *mcNamespace, bound bool) bool {
	if !ns.exists || ns.deleted || ns.ignored || (*w.excluded != "" && globMatches(*w.excluded, ns.name)) {
		return false
	}
	return !bound || w.srcTenant == "" || ns.tenant == w.srcTenant || ns.accepts
}

// dropUnadmitted forgets the frozen replicas of Invalid sources in namespaces that no
// longer admit them: consent outranks a broken source.
func (w *mcWorld) dropUnadmitted() {
	byName := map[string]*mcNamespace{}
	for _, ns := range w.pool {
		byName[ns.name] = ns
	}
	for _, s := range w.sources {
		maps.DeleteFunc(s.frozen, func(obj mcObject, _ mcReplica) bool { return !w.admitsAt(byName, obj.namespace, true) })
	}
	maps.DeleteFunc(w.sync.frozen, func(obj mcObject, _ mcReplica) bool { return !w.admitsAt(byName, obj.namespace, false) })
}

func (w *mcWorld) admitsAt(byName map[string]*mcNamespace, namespace string, bound bool) bool {
	ns, ok := byName[namespace]
	return ok && w.admits(ns, bound)
}

func globMatches(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// mcReplica is what the model expects in one target namespace.
type mcReplica struct {
	object mcObject
	source string // <namespace>/<name>
	value  string
	sync   string // the owning ConfigMapSync, "" for the annotation form
}

// expectation is the state the cluster must reach.
type expectation struct {
	replicas   map[mcObject]mcReplica
	statuses   map[string][2]string // source name -> status, synced ("" "" when no status)
	syncReady  string               // "True"/"False"; "" without a ConfigMapSync
	syncReason string               // with an Invalid ConfigMapSync, "Invalid" (its counts are not checked)
	syncCount  [2]int               // targets, synced
}

func (w *mcWorld) expect() expectation {
	e := expectation{replicas: map[mcObject]mcReplica{}, statuses: map[string][2]string{}}
	want := func(kind, source string, value, sync string, targets []string) (synced int) {
		name := source[strings.Index(source, "/")+1:]
		for _, ns := range targets {
			obj := mcObject{kind, ns, name}
			if _, inTheWay := w.unmanaged[obj]; inTheWay {
				continue
			}
			e.replicas[obj] = mcReplica{object: obj, source: source, value: value, sync: sync}
			synced++
		}
		return synced
	}
	for _, s := range w.sources {
		switch {
		case !s.exists:
		case !s.labelled:
			e.statuses[s.name] = [2]string{"", ""}
		case w.invalid(s):
			maps.Copy(e.replicas, s.frozen)
			e.statuses[s.name] = [2]string{v1alpha1.StatusInvalid, s.prevSynced}
		default:
			targets := w.targets(s.entries, s.tier, true)
			synced := want(s.kind, w.srcNS+"/"+s.name, s.value, "", targets)
			state := v1alpha1.StatusSynced
			if synced < len(targets) {
				state = v1alpha1.StatusDegraded
			}
			e.statuses[s.name] = [2]string{state, fmt.Sprintf("%d/%d", synced, len(targets))}
		}
	}
	if w.sync.exists && *w.sourcesBarred {
		maps.Copy(e.replicas, w.sync.frozen)
		e.syncReady, e.syncReason = "False", v1alpha1.ReasonInvalid
	} else if w.sync.exists && w.syncSource.exists {
		targets := w.targets(w.sync.entries, w.sync.tier, false)
		synced := want(kindConfigMap, w.srcNS+"/"+w.syncSource.name, w.syncSource.value, w.sync.name, targets)
		e.syncReady, e.syncCount = "True", [2]int{len(targets), synced}
		if synced < len(targets) {
			e.syncReady = "False"
		}
	}
	return e
}

// freeze records, for a source about to turn Invalid, the replicas and count the
// converged cluster holds for it.
func (w *mcWorld) freeze(s *mcSource) {
	e := w.expect()
	s.frozen, s.prevSynced = map[mcObject]mcReplica{}, e.statuses[s.name][1]
	if s.prevSynced == "" {
		s.prevSynced = "0/0"
	}
	for obj, r := range e.replicas {
		if r.sync == "" && r.source == w.srcNS+"/"+s.name {
			s.frozen[obj] = r
		}
	}
}

// freezeSync is freeze for the ConfigMapSync.
func (w *mcWorld) freezeSync() {
	e := w.expect()
	w.sync.frozen = map[mcObject]mcReplica{}
	for obj, r := range e.replicas {
		if r.sync != "" {
			w.sync.frozen[obj] = r
		}
	}
}

// bar and unbar follow --source-namespaces leaving the source namespaces out, and
// letting them in again. The cluster must have converged before bar.
func (w *mcWorld) bar() {
	for _, s := range w.sources {
		if s.exists && s.labelled && !s.broken {
			w.freeze(s)
		}
	}
	if w.sync.exists {
		w.freezeSync()
	}
}

func (w *mcWorld) unbar() {
	for _, s := range w.sources {
		if !s.broken {
			s.frozen = nil
		}
	}
	w.sync.frozen = nil
}

// forgetFrozen drops the frozen replicas that match: deleted with their namespace, or
// by a user.
func (w *mcWorld) forgetFrozen(match func(mcObject) bool) {
	for _, frozen := range w.frozenSets() {
		maps.DeleteFunc(frozen, func(obj mcObject, _ mcReplica) bool { return match(obj) })
	}
}

func (w *mcWorld) frozenSets() []map[mcObject]mcReplica {
	out := make([]map[mcObject]mcReplica, 0, 1+len(w.sources))
	out = append(out, w.sync.frozen)
	for _, s := range w.sources {
		out = append(out, s.frozen)
	}
	return out
}

// --- the operations ---

// mcOp is one thing a user does. Ops name namespaces by their index in the pool, so a
// history can be replayed in a fresh world.
type mcOp struct {
	Kind    string   `json:"kind"`
	Slot    int      `json:"slot,omitempty"` // a source, or a namespace of the pool
	Value   string   `json:"value,omitempty"`
	Entries []string `json:"entries,omitempty"` // pool indexes or globs: "n3", "!n1", "*"
	Tier    string   `json:"tier,omitempty"`
}

func (o mcOp) String() string {
	b, _ := json.Marshal(o)
	return string(b)
}

// entryNames turns an op's entries into the world's names and globs.
func (w *mcWorld) entryNames(entries []string) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		neg, rest := "", e
		if r, ok := strings.CutPrefix(e, "!"); ok {
			neg, rest = "!", r
		}
		out = append(out, neg+w.prefix+"-"+rest)
	}
	return out
}

func uniqueEntries(entries []string) []string {
	var out []string
	for _, e := range entries {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// randomEntries names 1-3 namespaces, a glob, sometimes an exclusion.
func randomEntries(rng *rand.Rand) []string {
	var out []string
	for range 1 + rng.IntN(3) {
		switch rng.IntN(6) {
		case 0:
			out = append(out, "n*")
		case 1:
			out = append(out, "n["+strconv.Itoa(rng.IntN(3))+"-4]")
		default:
			out = append(out, "n"+strconv.Itoa(rng.IntN(poolSize)))
		}
	}
	if rng.IntN(3) == 0 {
		out = append(out, "!n"+strconv.Itoa(rng.IntN(poolSize)))
	}
	return out
}

// randomTenant is a tenant of the world, or none ("").
func randomTenant(rng *rand.Rand) string {
	return []string{"", "t1", "t2"}[rng.IntN(3)]
}

func randomTier(rng *rand.Rand) string {
	return []string{"", "", "x", "y"}[rng.IntN(4)]
}

// randomOp picks an operation that makes sense in the model's state; breakable allows
// breaking a source's annotations (and mending them), which needs a converged cluster
// first.
func (w *mcWorld) randomOp(rng *rand.Rand, breakable bool) mcOp {
	value := "v" + strconv.Itoa(rng.IntN(1000))
	for {
		switch pick := rng.IntN(19); pick {
		case 0, 1, 2, 3, 4, 5:
			if op, ok := w.randomSourceOp(rng, pick, value, breakable); ok {
				return op
			}
		case 6:
			if !w.sync.exists {
				return mcOp{Kind: "create-sync", Entries: randomEntries(rng), Tier: randomTier(rng)}
			}
			return mcOp{Kind: "retarget-sync", Entries: randomEntries(rng), Tier: randomTier(rng)}
		case 7:
			if w.sync.exists {
				return mcOp{Kind: "delete-sync"}
			}
		case 8:
			return mcOp{Kind: "update-sync-source", Value: value}
		case 9, 10:
			slot := rng.IntN(poolSize)
			if ns := w.pool[slot]; !ns.exists {
				return mcOp{Kind: "create-namespace", Slot: slot, Tier: randomTier(rng)}
			} else if !ns.deleted {
				return mcOp{Kind: "label-namespace", Slot: slot, Tier: randomTier(rng)}
			}
		case 11:
			if slot := rng.IntN(poolSize); w.pool[slot].exists && !w.pool[slot].deleted {
				return mcOp{Kind: "ignore-namespace", Slot: slot}
			}
		case 12:
			if slot := rng.IntN(poolSize); w.pool[slot].exists && !w.pool[slot].deleted {
				return mcOp{Kind: "delete-namespace", Slot: slot}
			}
		case 13:
			return mcOp{Kind: "edit-replica", Slot: rng.IntN(len(w.sources)), Value: value, Entries: []string{"n" + strconv.Itoa(rng.IntN(poolSize))}}
		case 14:
			op := []string{"delete-replica", "disown-replica"}[rng.IntN(2)]
			return mcOp{Kind: op, Slot: rng.IntN(len(w.sources)), Entries: []string{"n" + strconv.Itoa(rng.IntN(poolSize))}}
		case 15:
			op := []string{"create-unmanaged", "delete-unmanaged"}[rng.IntN(2)]
			return mcOp{Kind: op, Slot: rng.IntN(len(w.sources)), Entries: []string{"n" + strconv.Itoa(rng.IntN(poolSize))}}
		case 16:
			if slot := rng.IntN(poolSize); w.pool[slot].exists && !w.pool[slot].deleted {
				return mcOp{Kind: "tenant-namespace", Slot: slot, Tier: randomTenant(rng)}
			}
		case 17:
			if slot := rng.IntN(poolSize); w.pool[slot].exists && !w.pool[slot].deleted {
				return mcOp{Kind: "accept-namespace", Slot: slot}
			}
		case 18:
			return mcOp{Kind: "tenant-source-namespace", Tier: randomTenant(rng)}
		}
	}
}

// randomSourceOp picks an op on an annotated source: pick 0-2 creates or updates one,
// 3 retargets, 4 relabels, 5 breaks, mends or deletes.
func (w *mcWorld) randomSourceOp(rng *rand.Rand, pick int, value string, breakable bool) (mcOp, bool) {
	slot := rng.IntN(len(w.sources))
	s := w.sources[slot]
	switch {
	case pick <= 2 && !s.exists:
		return mcOp{Kind: "create-source", Slot: slot, Value: value, Entries: randomEntries(rng), Tier: randomTier(rng)}, true
	case pick <= 2:
		return mcOp{Kind: "update-source", Slot: slot, Value: value}, true
	case !s.exists:
		return mcOp{}, false
	case pick == 3:
		return mcOp{Kind: "retarget-source", Slot: slot, Entries: randomEntries(rng), Tier: randomTier(rng)}, true
	case pick == 4:
		return mcOp{Kind: "relabel-source", Slot: slot}, true
	case breakable && !s.broken && rng.IntN(2) == 0:
		return mcOp{Kind: []string{"break-source", "reserve-source"}[rng.IntN(2)], Slot: slot}, true
	case breakable && s.broken:
		return mcOp{Kind: "fix-source", Slot: slot}, true
	default:
		return mcOp{Kind: "delete-source", Slot: slot}, true
	}
}

// apply does op against the cluster as a user would, and updates the model with what
// happened. An op the cluster's state does not allow any more (the object is gone, the
// namespace still terminating) does nothing.
func (w *mcWorld) apply(t *testing.T, op mcOp) {
	t.Helper()
	switch {
	case strings.HasSuffix(op.Kind, "-source") || strings.HasSuffix(op.Kind, "-sync"):
		w.applyToSource(t, op)
	case strings.HasSuffix(op.Kind, "-namespace"):
		w.applyToNamespace(t, op)
	default:
		w.applyInTarget(t, op)
	}
}

// applyToSource does an op on a source or the ConfigMapSync.
func (w *mcWorld) applyToSource(t *testing.T, op mcOp) {
	t.Helper()
	ctx := context.Background()
	switch op.Kind {
	case "create-source":
		s := w.sources[op.Slot]
		s.exists, s.labelled, s.entries, s.tier, s.value = true, true, w.entryNames(op.Entries), w.tierOrEmpty(op.Tier), op.Value
		s.broken, s.frozen, s.prevSynced = false, map[mcObject]mcReplica{}, "0/0"
		must(t, harness.K8s.Create(ctx, w.sourceObject(s)))
	case "update-source":
		s := w.sources[op.Slot]
		s.value = op.Value
		w.patchSource(t, s, s.dataPatch(op.Value))
	case "retarget-source":
		s := w.sources[op.Slot]
		s.entries, s.tier = w.entryNames(op.Entries), w.tierOrEmpty(op.Tier)
		w.patchSource(t, s, map[string]any{"metadata": map[string]any{"annotations": s.targetAnnotations()}})
	case "relabel-source":
		s := w.sources[op.Slot]
		s.labelled = !s.labelled
		// Unlabelled, even an Invalid source's replicas go; labelled again while
		// Invalid, it has none and no earlier count.
		s.frozen, s.prevSynced = map[mcObject]mcReplica{}, "0/0"
		w.patchSource(t, s, map[string]any{"metadata": map[string]any{"labels": map[string]any{
			v1alpha1.ReplicateLabel: harness.LabelValue(map[bool]string{true: v1alpha1.ReplicateLabelValue}[s.labelled])}}})
	case "delete-source":
		s := w.sources[op.Slot]
		s.exists, s.frozen = false, nil // an Invalid source's replicas go with it too
		must(t, client.IgnoreNotFound(harness.K8s.Delete(ctx, w.sourceObject(s))))
	case "break-source", "reserve-source", "fix-source":
		s := w.sources[op.Slot]
		if op.Kind != "fix-source" && !w.invalid(s) && s.labelled {
			w.freeze(s)
		}
		s.broken, s.reserved = op.Kind != "fix-source", op.Kind == "reserve-source"
		if !w.invalid(s) {
			s.frozen = nil
		}
		w.patchSource(t, s, map[string]any{"metadata": map[string]any{"annotations": s.targetAnnotations()}})
	case "create-sync", "retarget-sync":
		// The annotation takes an entry twice; the ConfigMapSync's list is a set.
		w.sync.entries, w.sync.tier = uniqueEntries(w.entryNames(op.Entries)), w.tierOrEmpty(op.Tier)
		spec := v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: w.srcNS,
			ConfigMapName:   w.syncSource.name,
			ReplicaSpec:     v1alpha1.ReplicaSpec{DestinationNamespaces: w.sync.entries},
		}
		if w.sync.tier != "" {
			spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{tierLabel: w.sync.tier}}
		}
		if op.Kind == "create-sync" {
			w.sync.exists, w.sync.frozen = true, map[mcObject]mcReplica{}
			must(t, harness.K8s.Create(ctx, &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: w.sync.name}, Spec: spec}))
			return
		}
		// A merge patch of the spec: cmsync writes the object's finalizer meanwhile.
		w.patch(t, &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: w.sync.name}}, map[string]any{"spec": map[string]any{
			"destinationNamespaces": spec.DestinationNamespaces, "namespaceSelector": spec.NamespaceSelector}})
	case "delete-sync":
		w.sync.exists, w.sync.frozen = false, nil
		must(t, client.IgnoreNotFound(harness.K8s.Delete(ctx, &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: w.sync.name}})))
		// The deleted one stays until cmsync takes its finalizer off, which may be later
		// (cmsync down): a new one, as a user's would, gets a name of its own.
		w.sync.deleted++
		w.sync.name = fmt.Sprintf("%s-%d", w.prefix, w.sync.deleted)
	case "update-sync-source":
		s := w.syncSource
		s.value = op.Value
		if !s.exists {
			s.exists = true
			must(t, harness.K8s.Create(ctx, w.sourceObject(s)))
			return
		}
		w.patchSource(t, s, s.dataPatch(op.Value))
	default:
		t.Fatalf("unknown op %s", op)
	}
}

// applyToNamespace does an op on a namespace of the pool.
func (w *mcWorld) applyToNamespace(t *testing.T, op mcOp) {
	t.Helper()
	ctx := context.Background()
	switch op.Kind {
	case "create-namespace":
		ns := w.pool[op.Slot]
		err := harness.K8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: w.tierLabels(op.Tier)}})
		if apierrors.IsAlreadyExists(err) {
			return // still terminating
		}
		must(t, err)
		ns.exists, ns.deleted, ns.tier, ns.ignored, ns.tenant, ns.accepts = true, false, w.tierOrEmpty(op.Tier), false, "", false
	case "label-namespace":
		ns := w.pool[op.Slot]
		ns.tier = w.tierOrEmpty(op.Tier)
		w.patchNamespace(t, ns, map[string]any{tierLabel: harness.LabelValue(ns.tier)})
	case "ignore-namespace":
		ns := w.pool[op.Slot]
		ns.ignored = !ns.ignored
		w.patchNamespace(
			t,
			ns,
			map[string]any{v1alpha1.IgnoreNamespaceLabel: harness.LabelValue(map[bool]string{true: v1alpha1.IgnoreNamespaceLabelValue}[ns.ignored])},
		)
	case "tenant-namespace":
		ns := w.pool[op.Slot]
		ns.tenant = w.tierOrEmpty(op.Tier)
		w.patchNamespace(t, ns, map[string]any{tenantLabel: harness.LabelValue(ns.tenant)})
	case "accept-namespace":
		ns := w.pool[op.Slot]
		ns.accepts = !ns.accepts
		w.annotateNamespace(t, ns, map[string]any{v1alpha1.AcceptFromAnnotation: harness.LabelValue(map[bool]string{true: w.srcNS}[ns.accepts])})
	case "tenant-source-namespace":
		w.srcTenant = w.tierOrEmpty(op.Tier)
		w.patch(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.srcNS}},
			map[string]any{"metadata": map[string]any{"labels": map[string]any{tenantLabel: harness.LabelValue(w.srcTenant)}}})
	case "delete-namespace":
		ns := w.pool[op.Slot]
		ns.deleted = true
		inNamespace := func(obj mcObject) bool { return obj.namespace == ns.name }
		maps.DeleteFunc(w.unmanaged, func(obj mcObject, _ string) bool { return inNamespace(obj) })
		w.forgetFrozen(inNamespace)
		must(t, client.IgnoreNotFound(harness.K8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name}})))
	default:
		t.Fatalf("unknown op %s", op)
	}
	// An Invalid source keeps its replicas only where they are still admitted.
	w.dropUnadmitted()
}

// applyInTarget does an op on a replica or an unmanaged object in a target namespace.
func (w *mcWorld) applyInTarget(t *testing.T, op mcOp) {
	t.Helper()
	ctx := context.Background()
	switch op.Kind {
	case "edit-replica", "delete-replica", "disown-replica":
		w.tamper(t, op)
	case "create-unmanaged":
		s, ns := w.sources[op.Slot], w.pool[w.poolIndex(op.Entries[0])]
		if !ns.exists || ns.deleted {
			return
		}
		obj := mcObject{s.kind, ns.name, s.name}
		o := newObject(obj.kind)
		o.SetNamespace(obj.namespace)
		o.SetName(obj.name)
		o.SetLabels(map[string]string{"owner": "someone-else"})
		if err := harness.K8s.Create(ctx, o); err == nil {
			w.unmanaged[obj] = o.GetResourceVersion()
		} else if !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			t.Fatalf("create-unmanaged %s: %v", obj, err)
		}
	case "delete-unmanaged":
		s, ns := w.sources[op.Slot], w.pool[w.poolIndex(op.Entries[0])]
		obj := mcObject{s.kind, ns.name, s.name}
		if _, ok := w.unmanaged[obj]; !ok {
			return
		}
		delete(w.unmanaged, obj)
		o := newObject(obj.kind)
		o.SetNamespace(obj.namespace)
		o.SetName(obj.name)
		must(t, client.IgnoreNotFound(harness.K8s.Delete(ctx, o)))
	default:
		t.Fatalf("unknown op %s", op)
	}
}

// tamper edits, deletes or disowns (removes the managed-by label of) whatever replica
// of an annotated source stands in a namespace; with none there, it does nothing.
func (w *mcWorld) tamper(t *testing.T, op mcOp) {
	ctx := context.Background()
	s, ns := w.sources[op.Slot], w.pool[w.poolIndex(op.Entries[0])]
	obj := mcObject{s.kind, ns.name, s.name}
	if _, inTheWay := w.unmanaged[obj]; inTheWay {
		return
	}
	o := newObject(obj.kind)
	if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: obj.namespace, Name: obj.name}, o); err != nil {
		return
	}
	if o.GetLabels()[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue {
		return
	}
	var err error
	switch op.Kind {
	case "edit-replica":
		err = harness.K8s.Patch(ctx, o, client.RawPatch(types.MergePatchType, harness.MustJSON(s.dataPatch(op.Value))))
		if r, frozen := s.frozen[obj]; frozen && err == nil {
			r.value = op.Value // an Invalid source's replica is not repaired
			s.frozen[obj] = r
		}
	case "delete-replica":
		err = harness.K8s.Delete(ctx, o, client.Preconditions{ResourceVersion: harness.Ptr(o.GetResourceVersion())})
		if err == nil {
			delete(s.frozen, obj)
		}
	case "disown-replica":
		err = harness.K8s.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+v1alpha1.ManagedByLabel+`":null}}}`)))
		if err == nil {
			w.unmanaged[obj] = o.GetResourceVersion()
			delete(s.frozen, obj)
		}
	}
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		t.Fatalf("%s %s: %v", op.Kind, obj, err)
	}
}

func (w *mcWorld) poolIndex(entry string) int {
	i, _ := strconv.Atoi(strings.TrimPrefix(entry, "n"))
	return i
}

func (w *mcWorld) tierOrEmpty(tier string) string {
	if tier == "" {
		return ""
	}
	return w.tierValue(tier)
}

func (w *mcWorld) tierLabels(tier string) map[string]string {
	if tier == "" {
		return nil
	}
	return map[string]string{tierLabel: w.tierValue(tier)}
}

func (s *mcSource) targetAnnotations() map[string]any {
	a := map[string]any{
		v1alpha1.TargetNamespacesAnnotation: strings.Join(s.entries, ","),
		v1alpha1.TargetSelectorAnnotation:   nil,
		v1alpha1.TargetNameAnnotation:       nil,
	}
	if s.reserved {
		// Replicas named like the cluster's CA: a reserved name, so Invalid.
		a[v1alpha1.TargetNameAnnotation] = v1alpha1.RootCAConfigMapName
	}
	switch {
	case s.broken && !s.reserved:
		a[v1alpha1.TargetSelectorAnnotation] = "=" + tierLabel // a selector with no key: Invalid
	case s.tier != "":
		a[v1alpha1.TargetSelectorAnnotation] = tierLabel + "=" + s.tier
	}
	return a
}

func (s *mcSource) dataPatch(value string) map[string]any {
	if s.kind == kindSecret {
		return map[string]any{"stringData": map[string]string{"v": value}}
	}
	return map[string]any{"data": map[string]string{"v": value}}
}

func (w *mcWorld) sourceObject(s *mcSource) client.Object {
	objMeta := metav1.ObjectMeta{Namespace: w.srcNS, Name: s.name}
	if s.labelled {
		objMeta.Labels = map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue}
		objMeta.Annotations = map[string]string{}
		for k, v := range s.targetAnnotations() {
			if v != nil {
				objMeta.Annotations[k] = v.(string)
			}
		}
	}
	if s.kind == kindSecret {
		return &corev1.Secret{ObjectMeta: objMeta, Data: map[string][]byte{"v": []byte(s.value)}}
	}
	return &corev1.ConfigMap{ObjectMeta: objMeta, Data: map[string]string{"v": s.value}}
}

func (w *mcWorld) patchSource(t *testing.T, s *mcSource, patch map[string]any) {
	w.patch(t, w.sourceObject(s), patch)
}

func (w *mcWorld) patch(t *testing.T, obj client.Object, patch map[string]any) {
	t.Helper()
	must(t, harness.K8s.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, harness.MustJSON(patch))))
}

// patchNamespace changes a namespace's labels; one that finished deleting meanwhile is
// gone from the model.
func (w *mcWorld) patchNamespace(t *testing.T, ns *mcNamespace, labels map[string]any) {
	t.Helper()
	w.patchNamespaceMetadata(t, ns, map[string]any{"labels": labels})
}

// annotateNamespace is patchNamespace for annotations.
func (w *mcWorld) annotateNamespace(t *testing.T, ns *mcNamespace, annotations map[string]any) {
	t.Helper()
	w.patchNamespaceMetadata(t, ns, map[string]any{"annotations": annotations})
}

func (w *mcWorld) patchNamespaceMetadata(t *testing.T, ns *mcNamespace, metadata map[string]any) {
	t.Helper()
	err := harness.K8s.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name}},
		client.RawPatch(types.MergePatchType, harness.MustJSON(map[string]any{"metadata": metadata})))
	if apierrors.IsNotFound(err) {
		ns.exists, ns.deleted = false, false
		return
	}
	must(t, err)
}

func newObject(kind string) client.Object {
	if kind == kindSecret {
		return &corev1.Secret{}
	}
	return &corev1.ConfigMap{}
}

// --- the invariants, read from the cluster ---

// violations compares the cluster with the model and returns what differs.
func (w *mcWorld) violations(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	e := w.expect()
	var out []string
	// Every object carrying cmsync's marker in the world is an expected replica, with
	// the expected content.
	seen := map[mcObject]bool{}
	marked := client.MatchingLabels{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}
	var cms corev1.ConfigMapList
	var secrets corev1.SecretList
	must(t, harness.K8s.List(ctx, &cms, marked))
	must(t, harness.K8s.List(ctx, &secrets, marked))
	check := func(obj mcObject, o metav1.Object, value string) {
		if !strings.HasPrefix(obj.namespace, w.prefix+"-") {
			return
		}
		seen[obj] = true
		want, ok := e.replicas[obj]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s carries cmsync's marker but is not wanted (source %q)", obj, o.GetAnnotations()[v1alpha1.SourceAnnotation]))
		case o.GetAnnotations()[v1alpha1.SourceAnnotation] != want.source:
			out = append(out, fmt.Sprintf("%s names source %q, want %q", obj, o.GetAnnotations()[v1alpha1.SourceAnnotation], want.source))
		case value != want.value:
			out = append(out, fmt.Sprintf("%s holds %q, want %q", obj, value, want.value))
		case want.sync != "" && !ownedBySync(o, want.sync):
			out = append(out, fmt.Sprintf("%s has no owner reference to ConfigMapSync %s", obj, want.sync))
		}
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		check(mcObject{kindConfigMap, cm.Namespace, cm.Name}, cm, cm.Data["v"])
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		check(mcObject{kindSecret, s.Namespace, s.Name}, s, string(s.Data["v"]))
	}
	for obj := range e.replicas {
		if !seen[obj] {
			out = append(out, fmt.Sprintf("%s: replica missing", obj))
		}
	}
	// Nothing cmsync does not own changed.
	for obj, rv := range w.unmanaged {
		o := newObject(obj.kind)
		err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: obj.namespace, Name: obj.name}, o)
		if err != nil || o.GetResourceVersion() != rv {
			out = append(out, fmt.Sprintf("%s is not cmsync's and changed (resourceVersion %s, error %v)", obj, rv, err))
		}
	}
	// Every status tells the truth.
	for _, s := range w.sources {
		want, ok := e.statuses[s.name]
		if !ok {
			continue
		}
		o := newObject(s.kind)
		if err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: w.srcNS, Name: s.name}, o); err != nil {
			out = append(out, fmt.Sprintf("source %s: %v", s.name, err))
			continue
		}
		a := o.GetAnnotations()
		if got := [2]string{a[v1alpha1.StatusAnnotation], a[v1alpha1.SyncedAnnotation]}; got != want {
			out = append(
				out,
				fmt.Sprintf("source %s %s says %s %s (%q), want %s %s", s.kind, s.name, got[0], got[1], a[v1alpha1.MessageAnnotation], want[0], want[1]),
			)
		}
	}
	if e.syncReady != "" {
		sync := &v1alpha1.ConfigMapSync{}
		if err := harness.K8s.Get(ctx, client.ObjectKey{Name: w.sync.name}, sync); err != nil {
			out = append(out, fmt.Sprintf("ConfigMapSync %s: %v", w.sync.name, err))
		} else {
			ready := meta.FindStatusCondition(sync.Status.Conditions, "Ready")
			got := fmt.Sprintf("%d/%d", sync.Status.SyncedNamespaces, sync.Status.TargetNamespaces)
			wantCount := fmt.Sprintf("%d/%d", e.syncCount[1], e.syncCount[0])
			countWrong := e.syncReason == "" && got != wantCount
			reasonWrong := e.syncReason != "" && (ready == nil || ready.Reason != e.syncReason)
			if ready == nil || string(ready.Status) != e.syncReady || countWrong || reasonWrong || sync.Status.ObservedGeneration != sync.Generation {
				out = append(out, fmt.Sprintf("ConfigMapSync %s says ready=%v %s (generation %d of %d), want %s %s",
					w.sync.name, ready, got, sync.Status.ObservedGeneration, sync.Generation, e.syncReady, wantCount))
			}
		}
	}
	sort.Strings(out)
	return out
}

func ownedBySync(o metav1.Object, name string) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Kind == v1alpha1.ConfigMapSyncKind && ref.Name == name {
			return true
		}
	}
	return false
}

// remove deletes the world's sources and ConfigMapSync: its replicas must go, and the
// model then wants nothing but the unmanaged objects.
func (w *mcWorld) remove(t *testing.T) {
	for slot, s := range w.sources {
		if s.exists {
			w.apply(t, mcOp{Kind: "delete-source", Slot: slot})
		}
	}
	if w.sync.exists {
		w.apply(t, mcOp{Kind: "delete-sync"})
	}
}
