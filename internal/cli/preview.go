package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/desired"
)

// Change is one replica a change of a source would create, delete or be refused.
type Change struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Why: the rule that wants the replica, the reason it goes, or who holds the name.
	Why string `json:"why"`
}

// Preview is what a change of a source would do, as the controller would decide it.
type Preview struct {
	Source string `json:"source"`
	// Invalid is why the controller would refuse the changed source: it would then
	// change nothing, and say so in the source's status.
	Invalid string `json:"invalid,omitempty"`
	// Inactive is why the changed object would be no source (not labelled, or being
	// deleted): every replica it has goes.
	Inactive string `json:"inactive,omitempty"`
	Policy   string `json:"policy"`
	// Gain are the replicas that would be created, Lose those that would be deleted,
	// Conflicts the targets where an object cmsync does not own for this source holds
	// the name (reported, never overwritten). Kept counts the replicas that stay.
	Gain      []Change `json:"gain"`
	Lose      []Change `json:"lose"`
	Conflicts []Change `json:"conflicts"`
	Kept      int      `json:"kept"`
	// Outside are the namespaces the source's targets match but the tenant boundary
	// keeps out (--tenant-label): no replica goes there.
	Outside []Change `json:"outside,omitempty"`
	// NotChecked names what the user's rights did not let the plugin read.
	NotChecked []NotChecked `json:"notChecked,omitempty"`
}

// previewOf computes what the changed source would do, given its replicas now.
func previewOf(ctx context.Context, s session, read input) (Preview, error) {
	near := nearby(read.key.Namespace)
	namespaces, _, err := s.namespaces(ctx, near...)
	if err != nil {
		return Preview{}, err
	}
	changed := resolve(read, namespaces, s.controller.policy)
	out := Preview{Source: changed.describe, Policy: s.controller.where, Gain: []Change{}, Lose: []Change{}, Conflicts: []Change{}}
	if changed.invalid != nil {
		out.Invalid = changed.invalid.Error()
		out.NotChecked = s.missed.list()
		return out, nil
	}
	existing, err := s.replicasOf(ctx, changed, near)
	if err != nil {
		return Preview{}, err
	}
	named := map[string]*metav1.PartialObjectMetadata{}
	if changed.inactive == nil {
		if named, _, err = s.objectsNamed(ctx, changed.kind, changed.replicaName, near); err != nil {
			return Preview{}, err
		}
	}
	w := world{namespaces: map[string]desired.Namespace{}, named: named, policy: s.controller.policy}
	for _, ns := range namespaces {
		w.namespaces[ns.Name] = ns
	}
	w.compare(&out, changed, existing)
	out.NotChecked = s.missed.list()
	return out, nil
}

// world is what a preview compares a changed source with: the namespaces by name, what
// holds the replica's name in each, and the controller's policy.
type world struct {
	namespaces map[string]desired.Namespace
	named      map[string]*metav1.PartialObjectMetadata
	policy     desired.Policy
}

// compare fills p with what changed would do, given its replicas now (existing).
func (w world) compare(p *Preview, changed source, existing []metav1.PartialObjectMetadata) {
	current := sets.New[string]()
	for _, r := range existing {
		current.Insert(r.Namespace + "/" + r.Name)
	}
	wanted := sets.New[string]()
	if changed.inactive != nil {
		p.Inactive = changed.inactive.Error()
	} else {
		wanted = w.gains(p, changed, current)
	}
	for _, key := range sets.List(current.Difference(wanted)) {
		ns, name, _ := strings.Cut(key, "/")
		why := "renamed to " + changed.replicaName
		namespace, ok := w.namespaces[ns]
		switch {
		case p.Inactive != "":
			why = p.Inactive
		case !ok:
			why = "the namespace is gone"
		default:
			if verdict := desired.ExplainTarget(changed.targets, changed.origin, namespace, w.policy); !verdict.Wanted {
				why = verdict.Rule
			}
		}
		p.Lose = append(p.Lose, Change{ns, name, why})
	}
}

// gains fills p's replicas gained, kept, in conflict and outside the tenant, and
// returns the replicas changed wants ("namespace/name").
func (w world) gains(p *Preview, changed source, current sets.Set[string]) sets.Set[string] {
	wanted := sets.New[string]()
	origin, targets := changed.origin, changed.resolved
	for _, ns := range targets.Outside {
		p.Outside = append(p.Outside, Change{ns, changed.replicaName, desired.ExplainTarget(changed.targets, origin, w.namespaces[ns], w.policy).Rule})
	}
	for _, ns := range targets.Namespaces {
		key := ns + "/" + changed.replicaName
		wanted.Insert(key)
		obj := w.named[ns]
		switch {
		case obj != nil && !changed.owner.Owns(obj):
			p.Conflicts = append(p.Conflicts, Change{ns, changed.replicaName, desired.DescribeHolder(kindName(changed.kind), obj)})
		case current.Has(key):
			p.Kept++
		default:
			p.Gain = append(p.Gain, Change{ns, changed.replicaName, desired.ExplainTarget(changed.targets, origin, w.namespaces[ns], w.policy).Rule})
		}
	}
	return wanted
}

// changedFromFile reads the changed source from a manifest: a ConfigMap or Secret of
// the annotation form, or a ConfigMapSync, SecretSync or ObjectSync (with the object
// it names, from the cluster, where the controller serves its kind: kinds).
func changedFromFile(ctx context.Context, c cluster, path string, kinds desired.ObjectKinds) (input, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return input{}, err
	}
	var typed metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &typed); err != nil {
		return input{}, fmt.Errorf("%s: %w", path, err)
	}
	switch typed.Kind {
	case configMapKind, secretKind:
		obj := newObject(typed.Kind)
		if err := yaml.Unmarshal(raw, obj); err != nil {
			return input{}, fmt.Errorf("%s: %w", path, err)
		}
		if obj.GetNamespace() == "" {
			return input{}, fmt.Errorf("%s: set metadata.namespace: where the source lives decides its targets", path)
		}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		return input{kind: typed.Kind, key: key, meta: obj, whole: obj}, nil
	case v1alpha1.ConfigMapSyncKind, v1alpha1.SecretSyncKind, v1alpha1.ObjectSyncKind:
		sync := newSync(typed.Kind)
		if err := yaml.UnmarshalStrict(raw, sync); err != nil {
			return input{}, fmt.Errorf("%s: %w", path, err)
		}
		// An existing explicit object's replicas are found by its UID.
		existing := newSync(typed.Kind)
		if err := c.client.Get(ctx, client.ObjectKey{Name: sync.GetName()}, existing); client.IgnoreNotFound(err) != nil {
			return input{}, readError(typed.Kind, sync.GetName(), mayGet(typed.Kind, ""), err)
		}
		sync.SetUID(existing.GetUID())
		return c.syncInput(ctx, sync, kinds)
	}
	return input{}, fmt.Errorf("%s: kind %q is not a source: give a ConfigMap, a Secret, a ConfigMapSync, a SecretSync or an ObjectSync", path, typed.Kind)
}

// changedAnnotations reads an existing ConfigMap or Secret source and applies
// "key=value" (set) and "key-" (remove) to its annotations, as kubectl annotate would.
func changedAnnotations(ctx context.Context, c cluster, kind, ref string, changes []string) (input, error) {
	key, err := parseSourceRef(kind, ref)
	if err != nil {
		return input{}, err
	}
	switch {
	case newSync(kind) != nil:
		return input{}, fmt.Errorf("--set-annotation changes a ConfigMap or Secret; preview a changed %s with -f", kind)
	case isObjectKind(kind):
		return input{}, fmt.Errorf("--set-annotation changes a ConfigMap or Secret; preview a changed %s with -f", v1alpha1.ObjectSyncKind)
	}
	in, err := c.sourceObject(ctx, kind, key)
	if err != nil {
		return input{}, err
	}
	if in.meta == nil {
		return input{}, fmt.Errorf("%s %s not found (preview a new source with -f)", kind, key)
	}
	annotations := map[string]string{}
	for k, v := range in.meta.GetAnnotations() {
		annotations[k] = v
	}
	for _, change := range changes {
		if name, ok := strings.CutSuffix(change, "-"); ok && !strings.Contains(change, "=") {
			delete(annotations, name)
			continue
		}
		name, value, ok := strings.Cut(change, "=")
		if !ok || name == "" {
			return input{}, fmt.Errorf("--set-annotation %q: give KEY=VALUE, or KEY- to remove it", change)
		}
		annotations[name] = value
	}
	in.meta.SetAnnotations(annotations)
	return in, nil
}
