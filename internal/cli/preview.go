package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
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
	Policy  string `json:"policy"`
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
}

// previewOf computes what the changed source would do, given its replicas now.
func previewOf(ctx context.Context, c cluster, read input, policy desired.Policy) (Preview, error) {
	namespaces, err := c.namespaces(ctx)
	if err != nil {
		return Preview{}, err
	}
	changed := resolve(read, namespaces, policy)
	out := Preview{Source: changed.describe, Gain: []Change{}, Lose: []Change{}, Conflicts: []Change{}}
	if changed.invalid != nil {
		out.Invalid = changed.invalid.Error()
		return out, nil
	}
	existing, err := c.replicasOf(ctx, changed.kind, changed.owner)
	if err != nil {
		return Preview{}, err
	}
	current := sets.New[string]()
	for _, r := range existing {
		current.Insert(r.Namespace + "/" + r.Name)
	}
	byName := map[string]desired.Namespace{}
	for _, ns := range namespaces {
		byName[ns.Name] = ns
	}
	named, err := c.objectsNamed(ctx, changed.kind, changed.replicaName)
	if err != nil {
		return Preview{}, err
	}
	wanted := sets.New[string]()
	origin, targets := changed.origin, changed.resolved
	for _, ns := range targets.Outside {
		out.Outside = append(out.Outside, Change{ns, changed.replicaName, desired.ExplainTarget(changed.targets, origin, byName[ns], policy).Rule})
	}
	for _, ns := range targets.Namespaces {
		key := ns + "/" + changed.replicaName
		wanted.Insert(key)
		obj := named[ns]
		rule := desired.ExplainTarget(changed.targets, origin, byName[ns], policy).Rule
		switch {
		case obj != nil && !changed.owner.Owns(obj):
			out.Conflicts = append(out.Conflicts, Change{ns, changed.replicaName, desired.DescribeHolder(changed.kind, obj)})
		case current.Has(key):
			out.Kept++
		default:
			out.Gain = append(out.Gain, Change{ns, changed.replicaName, rule})
		}
	}
	for _, key := range sets.List(current.Difference(wanted)) {
		ns, name, _ := strings.Cut(key, "/")
		why := "renamed to " + changed.replicaName
		if namespace, ok := byName[ns]; !ok {
			why = "the namespace is gone"
		} else if verdict := desired.ExplainTarget(changed.targets, origin, namespace, policy); !verdict.Wanted {
			why = verdict.Rule
		}
		out.Lose = append(out.Lose, Change{ns, name, why})
	}
	return out, nil
}

// changedFromFile reads the changed source from a manifest: a ConfigMap or Secret of
// the annotation form, or a ConfigMapSync or SecretSync (with the object it names,
// from the cluster).
func changedFromFile(ctx context.Context, c cluster, path string) (input, error) {
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
		var obj client.Object = &corev1.ConfigMap{}
		if typed.Kind == secretKind {
			obj = &corev1.Secret{}
		}
		if err := yaml.Unmarshal(raw, obj); err != nil {
			return input{}, fmt.Errorf("%s: %w", path, err)
		}
		if obj.GetNamespace() == "" {
			return input{}, fmt.Errorf("%s: set metadata.namespace: where the source lives decides its targets", path)
		}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
		return input{kind: typed.Kind, key: key, meta: obj, whole: obj}, nil
	case v1alpha1.ConfigMapSyncKind, v1alpha1.SecretSyncKind:
		sync := newSync(typed.Kind)
		if err := yaml.UnmarshalStrict(raw, sync); err != nil {
			return input{}, fmt.Errorf("%s: %w", path, err)
		}
		// An existing explicit object's replicas are found by its UID.
		existing := newSync(typed.Kind)
		if err := c.client.Get(ctx, client.ObjectKey{Name: sync.GetName()}, existing); client.IgnoreNotFound(err) != nil {
			return input{}, err
		}
		sync.SetUID(existing.GetUID())
		return c.syncInput(ctx, sync)
	}
	return input{}, fmt.Errorf("%s: kind %q is not a source: give a ConfigMap, a Secret, a ConfigMapSync or a SecretSync", path, typed.Kind)
}

// changedAnnotations reads an existing ConfigMap or Secret source and applies
// "key=value" (set) and "key-" (remove) to its annotations, as kubectl annotate would.
func changedAnnotations(ctx context.Context, c cluster, kind, ref string, changes []string) (input, error) {
	key, err := parseSourceRef(kind, ref)
	if err != nil {
		return input{}, err
	}
	if newSync(kind) != nil {
		return input{}, fmt.Errorf("--set-annotation changes a ConfigMap or Secret; preview a %s with -f", kind)
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
