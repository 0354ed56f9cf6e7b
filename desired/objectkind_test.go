package desired

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

var networkPolicies = NewObjectKind(schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"})

// defaultDeny is a NetworkPolicy as the API server gives it back: policyTypes
// defaulted, a status, and metadata of its own.
func defaultDeny() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.k8s.io/v1",
		"kind":       "NetworkPolicy",
		"metadata": map[string]any{
			"name": "default-deny", "namespace": "platform", "uid": "source-uid", "resourceVersion": "7",
			"labels":      map[string]any{"team": "platform"},
			"annotations": map[string]any{v1alpha1.LastAppliedAnnotation: "{}", "note": "deny all"},
		},
		"spec": map[string]any{
			"podSelector": map[string]any{},
			"policyTypes": []any{"Ingress"},
			"ingress":     []any{map[string]any{"ports": []any{map[string]any{"port": int64(80), "protocol": "TCP"}}}},
		},
		"status": map[string]any{"conditions": []any{}},
	}}
}

var objectSyncOwner = Owner{
	Kind:   "NetworkPolicy",
	Source: types.NamespacedName{Namespace: "platform", Name: "default-deny"},
	Sync: &metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ObjectSyncKind, Name: "default-deny",
		UID: "osync-uid", Controller: ptr.To(true)},
}

// createdObjectByCmsync gives obj the managedFields the API server records when cmsync
// creates it: its labels, annotations and content, as one Update of cmsync's.
func createdObjectByCmsync(t testing.TB, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	fields := map[string]any{
		"f:metadata": map[string]any{"f:labels": fieldSet(obj.GetLabels()), "f:annotations": fieldSet(obj.GetAnnotations())},
	}
	for k, v := range networkPolicies.Content(obj).Fields {
		fields["f:"+k] = map[string]any{}
		if m, ok := v.(map[string]any); ok {
			fields["f:"+k] = specFieldSet(m)
		}
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	obj.SetManagedFields(managedFields(v1alpha1.FieldManager, string(raw)))
	return obj
}

func fieldSet(m map[string]string) map[string]any {
	out := map[string]any{".": map[string]any{}}
	for k := range m {
		out["f:"+k] = map[string]any{}
	}
	return out
}

// specFieldSet owns each field of a map, maps down to their keys, lists whole.
func specFieldSet(spec map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range spec {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			out["f:"+k] = specFieldSet(m)
			continue
		}
		out["f:"+k] = map[string]any{}
	}
	return out
}

func TestObjectKindContentIsEveryTopLevelFieldButTypeMetadataAndStatus(t *testing.T) {
	c := networkPolicies.Content(defaultDeny())
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range c.Fields {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"spec"}) {
		t.Errorf("content fields %v, want [spec]", got)
	}
	if c.Text != nil || c.Binary != nil || c.Type != "" || c.Immutable != nil {
		t.Errorf("an object's content has only fields: %+v", c)
	}
}

func TestObjectTemplateIsTheSourcesSpecWithTheReplicaMarkers(t *testing.T) {
	template := NewTemplate(networkPolicies, defaultDeny(), Shape{}, objectSyncOwner)
	replica := template.In("team-a")
	if replica.GroupVersionKind() != networkPolicies.GroupVersionKind() || replica.GetNamespace() != "team-a" || replica.GetName() != "default-deny" {
		t.Fatalf("replica %v %s/%s", replica.GroupVersionKind(), replica.GetNamespace(), replica.GetName())
	}
	if !reflect.DeepEqual(replica.Object["spec"], defaultDeny().Object["spec"]) {
		t.Errorf("spec %v", replica.Object["spec"])
	}
	if _, has := replica.Object["status"]; has {
		t.Error("the replica carries the source's status")
	}
	labels, annotations := replica.GetLabels(), replica.GetAnnotations()
	if labels["team"] != "platform" || labels[v1alpha1.ManagedByLabel] != v1alpha1.ManagedByValue || labels[v1alpha1.ContentHashLabel] == "" {
		t.Errorf("labels %v", labels)
	}
	if annotations["note"] != "deny all" || annotations[v1alpha1.SourceAnnotation] != "platform/default-deny" ||
		annotations[v1alpha1.LastAppliedAnnotation] != "" {
		t.Errorf("annotations %v", annotations)
	}
	if refs := replica.GetOwnerReferences(); len(refs) != 1 || refs[0].Kind != v1alpha1.ObjectSyncKind || !objectSyncOwner.Owns(replica) {
		t.Errorf("owner references %v", refs)
	}
	// The replica's content is its own: writing into it leaves the template alone.
	replica.Object["spec"].(map[string]any)["policyTypes"] = []any{"Egress"}
	if again := template.In("team-b"); !reflect.DeepEqual(again.Object["spec"], defaultDeny().Object["spec"]) {
		t.Errorf("the template changed with a replica: %v", again.Object["spec"])
	}
}

func TestObjectContentHash(t *testing.T) {
	hash := func(obj *unstructured.Unstructured) string {
		return NewTemplate(networkPolicies, obj, Shape{}, objectSyncOwner).contentHash
	}
	base := hash(defaultDeny())
	reordered := defaultDeny()
	reordered.Object["spec"] = map[string]any{
		"ingress":     reordered.Object["spec"].(map[string]any)["ingress"],
		"policyTypes": []any{"Ingress"},
		"podSelector": map[string]any{},
	}
	if hash(reordered) != base {
		t.Error("the same fields built in another order hash differently")
	}
	metaOnly := defaultDeny()
	metaOnly.SetLabels(map[string]string{"other": "x"})
	metaOnly.Object["status"] = map[string]any{"x": "y"}
	if hash(metaOnly) != base {
		t.Error("metadata or status changed the content hash")
	}
	changed := defaultDeny()
	changed.Object["spec"].(map[string]any)["policyTypes"] = []any{"Ingress", "Egress"}
	if hash(changed) == base {
		t.Error("a changed spec hashes as before")
	}
	if contentHash(Content{Fields: map[string]any{}}) == contentHash(Content{}) {
		t.Error("an object with no content field hashes as an empty ConfigMap")
	}
}

func TestDiffObject(t *testing.T) {
	template := NewTemplate(networkPolicies, defaultDeny(), Shape{}, objectSyncOwner)
	spec := func(obj *unstructured.Unstructured) map[string]any { return obj.Object["spec"].(map[string]any) }
	tests := []struct {
		name    string
		edit    func(*unstructured.Unstructured)
		inSync  bool
		content bool
	}{
		{name: "as cmsync wrote it", edit: func(*unstructured.Unstructured) {}, inSync: true},
		{name: "a field the API server defaulted", inSync: true, edit: func(r *unstructured.Unstructured) {
			spec(r)["egress"] = []any{}
		}},
		{name: "a status", inSync: true, edit: func(r *unstructured.Unstructured) {
			r.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready"}}}
		}},
		{name: "a number decoded as a float", inSync: true, edit: func(r *unstructured.Unstructured) {
			spec(r)["ingress"] = []any{map[string]any{"ports": []any{map[string]any{"port": float64(80), "protocol": "TCP"}}}}
		}},
		{name: "a value changed", content: true, edit: func(r *unstructured.Unstructured) {
			spec(r)["policyTypes"] = []any{"Ingress", "Egress"}
		}},
		{name: "a field removed", content: true, edit: func(r *unstructured.Unstructured) {
			delete(spec(r), "ingress")
		}},
		{name: "a list item changed inside", content: true, edit: func(r *unstructured.Unstructured) {
			spec(r)["ingress"] = []any{map[string]any{"ports": []any{map[string]any{"port": int64(81), "protocol": "TCP"}}}}
		}},
		{name: "a map where a list was", content: true, edit: func(r *unstructured.Unstructured) {
			spec(r)["policyTypes"] = map[string]any{"Ingress": true}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			replica := createdObjectByCmsync(t, template.In("team-a"))
			tt.edit(replica)
			d := template.Diff(replica)
			if d.InSync() != tt.inSync || d.Content != tt.content || d.Recreate {
				t.Errorf("diff %+v: in sync %v, content %v; want %v, %v", d, d.InSync(), d.Content, tt.inSync, tt.content)
			}
		})
	}
}

func TestDiffObjectRemovesWhatTheSourceDroppedAndKeepsWhatOthersWrote(t *testing.T) {
	old := NewTemplate(networkPolicies, defaultDeny(), Shape{}, objectSyncOwner)
	replica := createdObjectByCmsync(t, old.In("team-a"))
	// Another writer set a field of its own into the spec.
	replica.Object["spec"].(map[string]any)["egress"] = []any{map[string]any{}}
	replica.SetManagedFields(append(replica.GetManagedFields(), managedFields("someone", `{"f:spec":{"f:egress":{}}}`)...))
	replica.SetResourceVersion("12")
	replica.SetUID("replica-uid")

	// The source drops its ingress rules.
	src := defaultDeny()
	delete(src.Object["spec"].(map[string]any), "ingress")
	template := NewTemplate(networkPolicies, src, Shape{}, objectSyncOwner)
	if _, known := template.DiffMetadata(replica); known {
		t.Fatal("the metadata told a content another manager wrote into")
	}
	d := template.Diff(replica)
	if d.InSync() || !slices.EqualFunc(d.StaleFields, []FieldPath{{"spec", "ingress"}}, slices.Equal) {
		t.Fatalf("diff %+v", d)
	}
	update := template.Replacement(metaOf(replica), d)
	want := map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}, "egress": []any{map[string]any{}}}
	if !reflect.DeepEqual(update.Object["spec"], want) || update.GetResourceVersion() != "12" {
		t.Errorf("replacement spec %v (resourceVersion %s), want %v", update.Object["spec"], update.GetResourceVersion(), want)
	}
	if update.GroupVersionKind() != networkPolicies.GroupVersionKind() || update.GetLabels()[v1alpha1.ContentHashLabel] != template.contentHash {
		t.Errorf("replacement %v, labels %v", update.GroupVersionKind(), update.GetLabels())
	}

	raw, err := template.UpdatePatch("replica-uid", d)
	if err != nil {
		t.Fatal(err)
	}
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil {
		t.Fatal(err)
	}
	wantPatch := map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}, "ingress": nil}
	if !reflect.DeepEqual(patch["spec"], wantPatch) || patch["metadata"].(map[string]any)["uid"] != "replica-uid" {
		t.Errorf("patch %s", raw)
	}
}

func TestDiffMetadataOfAnObjectOnlyCmsyncWrote(t *testing.T) {
	template := NewTemplate(networkPolicies, defaultDeny(), Shape{}, objectSyncOwner)
	replica := createdObjectByCmsync(t, template.In("team-a"))
	// The replica store holds the reduced managedFields: the judgement is the same.
	reduced := metaOf(replica)
	reduced.ManagedFields = ReducedManagedFields(networkPolicies, replica)
	for name, have := range map[string]metav1.Object{"whole": replica, "reduced": reduced} {
		if d, known := template.DiffMetadata(have); !known || !d.InSync() {
			t.Errorf("%s: the replica cmsync wrote: known %v, diff %+v", name, known, d)
		}
	}

	src := defaultDeny()
	delete(src.Object["spec"].(map[string]any), "ingress")
	changed := NewTemplate(networkPolicies, src, Shape{}, objectSyncOwner)
	for name, have := range map[string]metav1.Object{"whole": replica, "reduced": reduced} {
		d, known := changed.DiffMetadata(have)
		if !known || !d.Content || !slices.EqualFunc(d.StaleFields, []FieldPath{{"spec", "ingress"}}, slices.Equal) {
			t.Errorf("%s: after the source dropped a field: known %v, diff %+v", name, known, d)
		}
	}

	// Another manager's write into the spec: only the whole replica can tell.
	replica.SetManagedFields(append(replica.GetManagedFields(), managedFields("kubectl-edit", `{"f:spec":{"f:policyTypes":{}}}`)...))
	reduced.ManagedFields = ReducedManagedFields(networkPolicies, replica)
	for name, have := range map[string]metav1.Object{"whole": replica, "reduced": reduced} {
		if _, known := template.DiffMetadata(have); known {
			t.Errorf("%s: the metadata told a content another manager wrote into", name)
		}
	}
	// A status written by a controller is not content.
	status := createdObjectByCmsync(t, template.In("team-a"))
	status.SetManagedFields(append(status.GetManagedFields(), managedFields("quota-controller", `{"f:status":{"f:used":{}}}`)...))
	if d, known := template.DiffMetadata(status); !known || !d.InSync() {
		t.Errorf("a status by another manager: known %v, diff %+v", known, d)
	}
}

func TestObjectOwnershipIsNotAConfigMaps(t *testing.T) {
	// The same managedFields read for a ConfigMap and for an object: the ownership memo
	// must keep them apart.
	entries := managedFields("someone", `{"f:spec":{"f:x":{}}}`)
	obj := &metav1.ObjectMeta{ManagedFields: entries}
	if OwnershipOf(ConfigMapKind{}, obj).OthersWroteContent {
		t.Error("a ConfigMap's spec counted as content")
	}
	if !OwnershipOf(networkPolicies, obj).OthersWroteContent {
		t.Error("an object's spec did not count as content")
	}
}

func TestMetadataHelpersKnowTheGroup(t *testing.T) {
	if got := NewMetadata(networkPolicies).GroupVersionKind(); got != networkPolicies.GroupVersionKind() {
		t.Errorf("object metadata %v", got)
	}
	if got := NewMetadataList(networkPolicies).GroupVersionKind(); got.Group != "networking.k8s.io" || got.Kind != "NetworkPolicyList" {
		t.Errorf("object metadata list %v", got)
	}
	if got := NewMetadata(ConfigMapKind{}).GroupVersionKind(); got != (schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) {
		t.Errorf("ConfigMap metadata %v", got)
	}
	if got := networkPolicies.NewList().GetObjectKind().GroupVersionKind(); got.Kind != "NetworkPolicyList" || got.Group != "networking.k8s.io" {
		t.Errorf("list %v", got)
	}
}

func metaOf(obj *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: obj.GetName(), Namespace: obj.GetNamespace(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(), OwnerReferences: obj.GetOwnerReferences(), ManagedFields: obj.GetManagedFields(),
	}}
	m.SetGroupVersionKind(obj.GroupVersionKind())
	return m
}

func TestRoleBindingWithAnotherRoleRefIsRecreated(t *testing.T) {
	bindings := NewObjectKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"})
	binding := func(role string, users ...any) *unstructured.Unstructured {
		subjects := make([]any, 0, len(users))
		for _, u := range users {
			subjects = append(subjects, map[string]any{"kind": "User", "name": u, "apiGroup": "rbac.authorization.k8s.io"})
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
			"metadata": map[string]any{"name": "readers", "namespace": "platform"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
			"subjects": subjects,
		}}
	}
	owner := objectSyncOwner
	owner.Kind = "RoleBinding"
	replica := NewTemplate(bindings, binding("view", "ann"), Shape{}, owner).In("team-a")
	replica.SetManagedFields(
		managedFields(v1alpha1.FieldManager, `{"f:metadata":{"f:labels":{"f:`+v1alpha1.ContentHashLabel+`":{}}},"f:roleRef":{},"f:subjects":{}}`),
	)
	tests := []struct {
		name     string
		source   *unstructured.Unstructured
		recreate bool
	}{
		{"another subject: updated in place", binding("view", "ann", "bob"), false},
		{"another role: recreated", binding("edit", "ann"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			template := NewTemplate(bindings, tt.source, Shape{}, owner)
			if _, known := template.DiffMetadata(replica); known {
				t.Error("the metadata told a RoleBinding's change, which may need a new object")
			}
			if d := template.Diff(replica); !d.Content || d.Recreate != tt.recreate {
				t.Errorf("diff %+v, want recreate %v", d, tt.recreate)
			}
		})
	}
}

// BenchmarkDiffMetadataObject measures the comparison a pass makes for each replica of
// an object kind in sync, from the replica store's metadata.
func BenchmarkDiffMetadataObject(b *testing.B) {
	template := NewTemplate(networkPolicies, defaultDeny(), Shape{}, objectSyncOwner)
	replica := createdObjectByCmsync(b, template.In("team-a"))
	reduced := metaOf(replica)
	reduced.ManagedFields = ReducedManagedFields(networkPolicies, replica)
	b.ReportAllocs()
	for b.Loop() {
		if d, known := template.DiffMetadata(reduced); !known || !d.InSync() {
			b.Fatal("not in sync")
		}
	}
}
