package replicator

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

func sampleSource() *corev1.ConfigMap {
	immutable := true
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "platform", Name: "settings", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{
				v1alpha1.ReplicateLabel: "true", "team": "platform", "internal.example.com/x": "1",
				v1alpha1.ManagedByLabel: "helm",
			},
			Annotations: map[string]string{
				v1alpha1.TargetNamespacesAnnotation: "*", v1alpha1.StatusAnnotation: "Synced",
				v1alpha1.LastAppliedAnnotation: "{}", "note": "n", "secret-a": "s",
			},
		},
		Data:       map[string]string{"k": "v"},
		BinaryData: map[string][]byte{"b": {1}},
		Immutable:  &immutable,
	}
}

func TestDesiredReplica(t *testing.T) {
	src := sampleSource()
	got := DesiredReplica(src, "team-a", []string{"internal.example.com/*", "secret-*"}, AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "settings"}))
	key := types.NamespacedName{Namespace: "platform", Name: "settings"}
	wantLabels := map[string]string{"team": "platform", v1alpha1.ManagedByLabel: "cmsync", v1alpha1.SourceIDLabel: SourceID(key)}
	wantAnnotations := map[string]string{"note": "n", v1alpha1.SourceAnnotation: "platform/settings"}
	if got.Namespace != "team-a" || got.Name != "settings" {
		t.Errorf("placed at %s/%s", got.Namespace, got.Name)
	}
	if !reflect.DeepEqual(got.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", got.Labels, wantLabels)
	}
	if !reflect.DeepEqual(got.Annotations, wantAnnotations) {
		t.Errorf("annotations %v, want %v", got.Annotations, wantAnnotations)
	}
	if !reflect.DeepEqual(got.Data, src.Data) || !reflect.DeepEqual(got.BinaryData, src.BinaryData) || !*got.Immutable {
		t.Errorf("content not copied: %+v", got)
	}
	if got.UID != "" || got.ResourceVersion != "" {
		t.Errorf("identity of the source leaked into the replica")
	}
	got.Data["k"] = "changed"
	if src.Data["k"] != "v" {
		t.Errorf("the desired replica shares its data map with the source")
	}
	if !AnnotationOwner(key).Owns(got) {
		t.Errorf("the desired replica is not recognised as a replica of its source")
	}
	if AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "other"}).Owns(got) {
		t.Errorf("the desired replica is claimed by another source")
	}
	all := DesiredReplica(src, "team-a", []string{"*"}, AnnotationOwner(key))
	if len(all.Labels) != 2 || len(all.Annotations) != 1 {
		t.Errorf(`"*" should strip every copied key but keep the markers: %v %v`, all.Labels, all.Annotations)
	}
}

func TestSourceIDFitsALabelForLongNames(t *testing.T) {
	long := types.NamespacedName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("a", 253)}
	for _, key := range []types.NamespacedName{long, {Namespace: "a", Name: "b"}} {
		if errs := validation.IsValidLabelValue(SourceID(key)); len(errs) > 0 {
			t.Errorf("SourceID(%v) is not a label value: %v", key, errs)
		}
	}
	if SourceID(types.NamespacedName{Namespace: "a-b", Name: "c"}) == SourceID(types.NamespacedName{Namespace: "a", Name: "b-c"}) {
		t.Errorf("distinct sources share an ID")
	}
}

func TestParseSourceKey(t *testing.T) {
	for value, ok := range map[string]bool{"ns/name": true, "ns/": false, "/name": false, "name": false, "": false} {
		if _, got := ParseSourceKey(value); got != ok {
			t.Errorf("ParseSourceKey(%q) ok = %v", value, got)
		}
	}
}

func TestParseStripMetadata(t *testing.T) {
	tests := []struct {
		value   string
		want    []string
		wantErr string
	}{
		{value: "a, example.com/*", want: []string{"a", "example.com/*"}},
		{value: "*", want: []string{"*"}},
		{value: "", wantErr: "the list is empty"},
		{value: " , ", wantErr: "the list is empty"},
		{value: "example.com/[", wantErr: `invalid strip-metadata entry "example.com/["`},
		{value: "app.kubernetes.io/managed-by", wantErr: "cmsync sets this key"},
		{value: "cmsync.io/source", wantErr: "cmsync sets this key"},
	}
	for _, tt := range tests {
		got, err := ParseStripMetadata(tt.value)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want %q", tt.value, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %v %v", tt.value, got, err)
		}
	}
	if !isStripped("a.example.com/deep/er", []string{"*.example.com/*"}) || isStripped("example.org/x", []string{"*.example.com/*"}) {
		t.Errorf("key globs must let * cross '/' and nothing else")
	}
}

func managedFields(manager string, operation metav1.ManagedFieldsOperationType, fields string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: manager, Operation: operation, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}}
}

func TestDiffReplica(t *testing.T) {
	desired := DesiredReplica(sampleSource(), "team-a", nil, AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "settings"}))
	ours := `{"f:metadata":{"f:labels":{"f:old":{},"f:team":{}},"f:annotations":{"f:gone":{},"f:note":{},"f:cmsync.io/status":{}}}}`
	tests := []struct {
		name   string
		change func(cm *corev1.ConfigMap)
		check  func(d ReplicaDiff) bool
	}{
		{name: "identical", change: func(*corev1.ConfigMap) {}, check: ReplicaDiff.InSync},
		{name: "others' extra label is theirs", change: func(cm *corev1.ConfigMap) { cm.Labels["x"] = "y" }, check: ReplicaDiff.InSync},
		{name: "data value", change: func(cm *corev1.ConfigMap) { cm.Data["k"] = "w" }, check: func(d ReplicaDiff) bool { return d.Content }},
		{name: "binary value", change: func(cm *corev1.ConfigMap) { cm.BinaryData["b"] = []byte{2} }, check: func(d ReplicaDiff) bool { return d.Content }},
		{name: "immutable flag", change: func(cm *corev1.ConfigMap) { cm.Immutable = nil }, check: func(d ReplicaDiff) bool { return d.Content }},
		{name: "extra data key", change: func(cm *corev1.ConfigMap) { cm.Data["extra"] = "" },
			check: func(d ReplicaDiff) bool { return d.Content && slices.Equal(d.StaleData, []string{"extra"}) }},
		{name: "extra binary key", change: func(cm *corev1.ConfigMap) { cm.BinaryData["extra"] = nil },
			check: func(d ReplicaDiff) bool { return slices.Equal(d.StaleBinaryData, []string{"extra"}) }},
		{name: "label changed", change: func(cm *corev1.ConfigMap) { cm.Labels["team"] = "x" }, check: func(d ReplicaDiff) bool { return d.Metadata && !d.Content }},
		{name: "marker removed", change: func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.SourceAnnotation) }, check: func(d ReplicaDiff) bool { return d.Metadata }},
		{name: "keys cmsync wrote and no longer wants are stale, status keys are not", change: func(cm *corev1.ConfigMap) {
			cm.Labels["old"] = "1"
			cm.Annotations["gone"] = "1"
			cm.Annotations[v1alpha1.StatusAnnotation] = "Invalid"
			cm.ManagedFields = managedFields(v1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate, ours)
		}, check: func(d ReplicaDiff) bool {
			return slices.Equal(d.StaleLabels, []string{"old"}) && slices.Equal(d.StaleAnnotations, []string{"gone"})
		}},
		{name: "keys another manager wrote are not stale", change: func(cm *corev1.ConfigMap) {
			cm.Labels["old"] = "1"
			cm.ManagedFields = managedFields("kubectl", metav1.ManagedFieldsOperationUpdate, ours)
		}, check: ReplicaDiff.InSync},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actual := desired.DeepCopy()
			tt.change(actual)
			if d := DiffReplica(desired, actual); !tt.check(d) {
				t.Errorf("unexpected diff %+v", d)
			}
		})
	}
}

func TestOwnersNeverShareAReplica(t *testing.T) {
	key := types.NamespacedName{Namespace: "platform", Name: "settings"}
	syncA := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: "platform", ConfigMapName: "settings"}}
	syncB := syncA.DeepCopy()
	syncB.Name, syncB.UID = "b", "uid-b"
	owners := map[string]Owner{"annotations": AnnotationOwner(key), "sync a": SyncOwner(syncA), "sync b": SyncOwner(syncB)}
	for name, owner := range owners {
		replica := DesiredReplica(sampleSource(), "team-a", nil, owner)
		for other, o := range owners {
			if got := o.Owns(replica); got != (other == name) {
				t.Errorf("replica of %s: Owns by %s = %v", name, other, got)
			}
		}
		if OwnerKeyOf(replica) != owner.Key() {
			t.Errorf("%s: OwnerKeyOf %q, want %q", name, OwnerKeyOf(replica), owner.Key())
		}
	}
	replica := DesiredReplica(sampleSource(), "team-a", nil, SyncOwner(syncA))
	if len(replica.OwnerReferences) != 1 || replica.OwnerReferences[0].Name != "a" || !*replica.OwnerReferences[0].Controller {
		t.Errorf("owner reference %+v", replica.OwnerReferences)
	}
	if n, ok := SyncNameOf(replica); !ok || n != "a" {
		t.Errorf("SyncNameOf = %q %v", n, ok)
	}
	unmanaged := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "team-a"}}
	for name, o := range owners {
		if o.Owns(unmanaged) {
			t.Errorf("%s owns an unmanaged ConfigMap", name)
		}
	}
	if describeOwner(unmanaged) != "a ConfigMap not managed by cmsync exists" || !strings.Contains(describeOwner(replica), "ConfigMapSync a") {
		t.Errorf("conflict texts: %q / %q", describeOwner(unmanaged), describeOwner(replica))
	}
}

func TestDiffReplicaAgainstADigestedCacheCopy(t *testing.T) {
	src := sampleSource()
	long := strings.Repeat("v", 10*digestThreshold)
	src.Data["long"] = long
	src.BinaryData["long"] = []byte(long)
	desired := DesiredReplica(src, "team-a", nil, AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "settings"}))
	cached := desired.DeepCopy()
	digestValues(cached)
	if cached.Data["long"] == long || cached.Data["k"] != "v" {
		t.Fatalf("digest kept the long value or changed a short one: %q", cached.Data)
	}
	twice := cached.DeepCopy()
	digestValues(twice) // informers may transform an object again
	if !reflect.DeepEqual(twice, cached) {
		t.Fatalf("digestValues is not idempotent")
	}
	if d := DiffReplica(desired, cached); !d.InSync() {
		t.Errorf("an equal replica differs from its digested copy: %+v", d)
	}
	edited := desired.DeepCopy()
	edited.Data["long"] = long + "!"
	digestValues(edited)
	if d := DiffReplica(desired, edited); !d.Content {
		t.Errorf("an edited long value was not noticed through its digest")
	}
	// A value the API server returns (not digested) compares as it is.
	if d := DiffReplica(desired, desired.DeepCopy()); !d.InSync() {
		t.Errorf("undigested copy differs: %+v", d)
	}
}

func keyOf(cm *corev1.ConfigMap) types.NamespacedName {
	return types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name}
}

func TestDiffReplicaAgainstCompactOwnership(t *testing.T) {
	desired := DesiredReplica(sampleSource(), "team-a", nil, AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "settings"}))
	actual := desired.DeepCopy()
	actual.Labels["old"] = "1"
	actual.Labels["theirs"] = "1"
	actual.ManagedFields = managedFields(v1alpha1.FieldManager, metav1.ManagedFieldsOperationUpdate,
		`{"f:metadata":{"f:labels":{"f:old":{},"f:team":{}},"f:annotations":{"f:note":{}}}}`)
	full := DiffReplica(desired, actual)
	compactOwnership(actual)
	if actual.ManagedFields != nil {
		t.Fatalf("managedFields kept")
	}
	again := actual.DeepCopy()
	compactOwnership(again)
	if !reflect.DeepEqual(again, actual) {
		t.Fatalf("compactOwnership is not idempotent")
	}
	compact := DiffReplica(desired, actual)
	if !slices.Equal(compact.StaleLabels, []string{"old"}) || !reflect.DeepEqual(full.StaleLabels, compact.StaleLabels) {
		t.Errorf("stale labels from the compact form %v, from managedFields %v", compact.StaleLabels, full.StaleLabels)
	}
}

func TestReplacementReplicaKeepsWhatIsNotCmsyncs(t *testing.T) {
	owner := AnnotationOwner(types.NamespacedName{Namespace: "platform", Name: "settings"})
	desired := DesiredReplica(sampleSource(), "team-a", nil, owner)
	actual := desired.DeepCopy()
	actual.UID, actual.ResourceVersion = "r1", "42"
	actual.Finalizers = []string{"example.com/hold"}
	actual.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "someone"}}
	actual.Labels["added-by-user"] = "yes"
	actual.Labels["old-cmsync-label"] = "x"
	actual.Annotations["note"] = "outdated"
	actual.Annotations[v1alpha1.CacheDigestedAnnotation] = "true"
	actual.Annotations[v1alpha1.CacheOwnedKeysAnnotation] = "l:old-cmsync-label"
	actual.Data = map[string]string{"k": "old", "added-key": "z"}
	before := actual.DeepCopy()
	diff := DiffReplica(desired, actual)

	got := ReplacementReplica(desired, actual, diff)

	if got.ResourceVersion != "42" || got.UID != "r1" || !slices.Equal(got.Finalizers, []string{"example.com/hold"}) {
		t.Errorf("identity and finalizers: got uid %q rv %q finalizers %v", got.UID, got.ResourceVersion, got.Finalizers)
	}
	if got.ManagedFields != nil {
		t.Errorf("managedFields must be left to the API server, got %v", got.ManagedFields)
	}
	if got.Labels["added-by-user"] != "yes" {
		t.Errorf("a label someone else added was dropped: %v", got.Labels)
	}
	if _, ok := got.Labels["old-cmsync-label"]; ok {
		t.Errorf("a stale label cmsync owns was kept: %v", got.Labels)
	}
	for k, v := range desired.Labels {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	if got.Annotations["note"] != "n" {
		t.Errorf("annotation note = %q, want the source's value", got.Annotations["note"])
	}
	for _, k := range []string{v1alpha1.CacheDigestedAnnotation, v1alpha1.CacheOwnedKeysAnnotation} {
		if _, ok := got.Annotations[k]; ok {
			t.Errorf("the cache's own annotation %s would be written", k)
		}
	}
	if !reflect.DeepEqual(got.Data, desired.Data) || !reflect.DeepEqual(got.BinaryData, desired.BinaryData) || !isImmutable(got) {
		t.Errorf("content: got %v %v immutable %v, want the desired", got.Data, got.BinaryData, isImmutable(got))
	}
	if !reflect.DeepEqual(actual, before) {
		t.Error("ReplacementReplica modified the cached replica")
	}
}
