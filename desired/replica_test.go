package desired

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

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
	got := NewTemplate(
		ConfigMapKind{},
		src,
		Shape{Strip: []string{"internal.example.com/*", "secret-*"}},
		AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "platform", Name: "settings"}),
	).In("team-a")
	key := types.NamespacedName{Namespace: "platform", Name: "settings"}
	wantLabels := map[string]string{
		"team": "platform", v1alpha1.ManagedByLabel: "cmsync", v1alpha1.SourceIDLabel: sourceID(key),
		v1alpha1.ContentHashLabel: contentHash(ConfigMapKind{}.Content(src)),
	}
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
	if !AnnotationOwner("ConfigMap", key).Owns(got) {
		t.Errorf("the desired replica is not recognised as a replica of its source")
	}
	if AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "platform", Name: "other"}).Owns(got) {
		t.Errorf("the desired replica is claimed by another source")
	}
	all := NewTemplate(ConfigMapKind{}, src, Shape{Strip: []string{"*"}}, AnnotationOwner("ConfigMap", key)).In("team-a")
	if len(all.Labels) != 3 || len(all.Annotations) != 1 {
		t.Errorf(`"*" should strip every copied key but keep the markers: %v %v`, all.Labels, all.Annotations)
	}
}

func TestSourceIDFitsALabelForLongNames(t *testing.T) {
	long := types.NamespacedName{Namespace: strings.Repeat("n", 63), Name: strings.Repeat("a", 253)}
	for _, key := range []types.NamespacedName{long, {Namespace: "a", Name: "b"}} {
		if errs := validation.IsValidLabelValue(sourceID(key)); len(errs) > 0 {
			t.Errorf("sourceID(%v) is not a label value: %v", key, errs)
		}
	}
	if sourceID(types.NamespacedName{Namespace: "a-b", Name: "c"}) == sourceID(types.NamespacedName{Namespace: "a", Name: "b-c"}) {
		t.Errorf("distinct sources share an ID")
	}
}

func TestParseSourceKey(t *testing.T) {
	for value, ok := range map[string]bool{"ns/name": true, "ns/": false, "/name": false, "name": false, "": false} {
		if _, got := parseSourceKey(value); got != ok {
			t.Errorf("parseSourceKey(%q) ok = %v", value, got)
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
		got, err := parseStripMetadata(tt.value)
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

func managedFields(manager, fields string) []metav1.ManagedFieldsEntry {
	return []metav1.ManagedFieldsEntry{{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(fields)}}
}

func TestDiffReplica(t *testing.T) {
	template := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, settingsOwner)
	ours := `{"f:metadata":{"f:labels":{"f:old":{},"f:team":{}},"f:annotations":{"f:gone":{},"f:note":{},"f:cmsync.io/status":{}}}}`
	tests := []struct {
		name   string
		change func(cm *corev1.ConfigMap)
		check  func(d Diff) bool
	}{
		{name: "identical", change: func(*corev1.ConfigMap) {}, check: Diff.InSync},
		{name: "others' extra label is theirs", change: func(cm *corev1.ConfigMap) { cm.Labels["x"] = "y" }, check: Diff.InSync},
		{name: "data value", change: func(cm *corev1.ConfigMap) { cm.Data["k"] = "w" }, check: func(d Diff) bool { return d.Content }},
		{name: "binary value", change: func(cm *corev1.ConfigMap) { cm.BinaryData["b"] = []byte{2} }, check: func(d Diff) bool { return d.Content }},
		{name: "immutable flag", change: func(cm *corev1.ConfigMap) { cm.Immutable = nil }, check: func(d Diff) bool { return d.Content }},
		{name: "extra data key", change: func(cm *corev1.ConfigMap) { cm.Data["extra"] = "" },
			check: func(d Diff) bool { return d.Content && slices.Equal(d.StaleText, []string{"extra"}) }},
		{name: "extra binary key", change: func(cm *corev1.ConfigMap) { cm.BinaryData["extra"] = nil },
			check: func(d Diff) bool { return slices.Equal(d.StaleBinary, []string{"extra"}) }},
		{name: "label changed", change: func(cm *corev1.ConfigMap) { cm.Labels["team"] = "x" }, check: func(d Diff) bool { return d.Metadata && !d.Content }},
		{
			name:   "marker removed",
			change: func(cm *corev1.ConfigMap) { delete(cm.Annotations, v1alpha1.SourceAnnotation) },
			check:  func(d Diff) bool { return d.Metadata },
		},
		{name: "keys cmsync wrote and no longer wants are stale, status keys are not", change: func(cm *corev1.ConfigMap) {
			cm.Labels["old"] = "1"
			cm.Annotations["gone"] = "1"
			cm.Annotations[v1alpha1.StatusAnnotation] = "Invalid"
			cm.ManagedFields = managedFields(v1alpha1.FieldManager, ours)
		}, check: func(d Diff) bool {
			return slices.Equal(d.StaleLabels, []string{"old"}) && slices.Equal(d.StaleAnnotations, []string{"gone"})
		}},
		{name: "keys another manager wrote are not stale", change: func(cm *corev1.ConfigMap) {
			cm.Labels["old"] = "1"
			cm.ManagedFields = managedFields("kubectl", ours)
		}, check: Diff.InSync},
		{
			name:   "a replica of a release before the content-hash label, in sync, is left without it",
			change: func(cm *corev1.ConfigMap) { delete(cm.Labels, v1alpha1.ContentHashLabel) },
			check:  Diff.InSync,
		},
		{name: "a replica of a release before the content-hash label gets it with new content", change: func(cm *corev1.ConfigMap) {
			delete(cm.Labels, v1alpha1.ContentHashLabel)
			cm.Data["k"] = "old"
		}, check: func(d Diff) bool { return d.Content && d.Metadata }},
		{
			name:   "a wrong content hash is written anew",
			change: func(cm *corev1.ConfigMap) { cm.Labels[v1alpha1.ContentHashLabel] = "stale" },
			check:  func(d Diff) bool { return d.Metadata && !d.Content },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actual := template.In("team-a")
			tt.change(actual)
			if d := template.Diff(actual); !tt.check(d) {
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
	owners := map[string]Owner{"annotations": AnnotationOwner("ConfigMap", key), "sync a": SyncOwner(syncA), "sync b": SyncOwner(syncB)}
	for name, owner := range owners {
		replica := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, owner).In("team-a")
		for other, o := range owners {
			if got := o.Owns(replica); got != (other == name) {
				t.Errorf("replica of %s: Owns by %s = %v", name, other, got)
			}
		}
		if OwnerKeyOf("ConfigMap", replica) != owner.Key() {
			t.Errorf("%s: OwnerKeyOf %q, want %q", name, OwnerKeyOf("ConfigMap", replica), owner.Key())
		}
	}
	replica := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, SyncOwner(syncA)).In("team-a")
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
	if DescribeHolder("ConfigMap", unmanaged) != "a ConfigMap not managed by cmsync exists" ||
		!strings.Contains(DescribeHolder("ConfigMap", replica), "ConfigMapSync a") {
		t.Errorf("conflict texts: %q / %q", DescribeHolder("ConfigMap", unmanaged), DescribeHolder("ConfigMap", replica))
	}
}

// Owns decides without building keys; it must say what the keys say, for replicas
// whose markers were edited too.
func TestOwnsIsTheOwnerKeyWithTheSourceAnnotation(t *testing.T) {
	key := types.NamespacedName{Namespace: "platform", Name: "settings"}
	sync := &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: "platform", ConfigMapName: "settings"}}
	owners := []Owner{
		AnnotationOwner("ConfigMap", key), AnnotationOwner("Secret", key), SyncOwner(sync),
		AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "platform", Name: "settings/x"}),
		AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "platform", Name: ""}),
	}
	edits := map[string]func(*corev1.ConfigMap){
		"as written":              func(*corev1.ConfigMap) {},
		"another source":          func(r *corev1.ConfigMap) { r.Annotations[v1alpha1.SourceAnnotation] = "platform/other" },
		"a longer source":         func(r *corev1.ConfigMap) { r.Annotations[v1alpha1.SourceAnnotation] = "platform/settings/x" },
		"a prefix of the source":  func(r *corev1.ConfigMap) { r.Annotations[v1alpha1.SourceAnnotation] = "platform/" },
		"no separator":            func(r *corev1.ConfigMap) { r.Annotations[v1alpha1.SourceAnnotation] = "platformsettings" },
		"no source annotation":    func(r *corev1.ConfigMap) { delete(r.Annotations, v1alpha1.SourceAnnotation) },
		"managed-by removed":      func(r *corev1.ConfigMap) { delete(r.Labels, v1alpha1.ManagedByLabel) },
		"another sync's UID":      func(r *corev1.ConfigMap) { setSyncRef(r, "uid-b", true) },
		"this sync's UID":         func(r *corev1.ConfigMap) { setSyncRef(r, "uid-a", true) },
		"sync not the controller": func(r *corev1.ConfigMap) { setSyncRef(r, "uid-a", false) },
	}
	for _, writer := range owners[:3] {
		for edit, apply := range edits {
			replica := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, writer).In("team-a")
			apply(replica)
			for _, o := range owners {
				want := IsReplica(replica) && replica.Annotations[v1alpha1.SourceAnnotation] == o.Source.String() &&
					OwnerKeyOf(o.Kind, replica) == o.Key()
				if got := o.Owns(replica); got != want {
					t.Errorf("replica of %s, %s: Owns by %s = %v, want %v", writer.Key(), edit, o.Key(), got, want)
				}
			}
		}
	}
}

// setSyncRef makes a ConfigMapSync with uid the only owner reference of r.
func setSyncRef(r *corev1.ConfigMap, uid types.UID, controller bool) {
	r.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: v1alpha1.ConfigMapSyncKind, Name: "x", UID: uid, Controller: ptr.To(controller),
	}}
}

// settingsOwner owns the replicas of sampleSource's annotations.
var settingsOwner = AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: "platform", Name: "settings"})

// createdByCmsync gives obj the managedFields the API server records when cmsync
// creates it: every label, annotation and content key it holds.
func createdByCmsync(obj *corev1.ConfigMap) *corev1.ConfigMap {
	keys := func(field string, names []string) string {
		inner := make([]string, 0, len(names)+1)
		inner = append(inner, `".":{}`)
		for _, k := range names {
			inner = append(inner, fmt.Sprintf("%q:{}", "f:"+k))
		}
		return fmt.Sprintf(`"f:%s":{%s}`, field, strings.Join(inner, ","))
	}
	fields := []string{
		keys("data", slices.Sorted(maps.Keys(obj.Data))),
		keys("binaryData", slices.Sorted(maps.Keys(obj.BinaryData))),
		`"f:metadata":{` + keys("labels", slices.Sorted(maps.Keys(obj.Labels))) + "," +
			keys("annotations", slices.Sorted(maps.Keys(obj.Annotations))) + "}",
	}
	if obj.Immutable != nil {
		fields = append(fields, `"f:immutable":{}`)
	}
	obj.ManagedFields = managedFields(v1alpha1.FieldManager, "{"+strings.Join(fields, ",")+"}")
	return obj
}

func TestDiffMetadataOfAReplicaOnlyCmsyncWrote(t *testing.T) {
	src := sampleSource()
	src.Immutable = nil
	template := NewTemplate(ConfigMapKind{}, src, Shape{}, settingsOwner)
	replica := createdByCmsync(template.In("team-a"))
	if d, known := template.DiffMetadata(replica); !known || !d.InSync() {
		t.Fatalf("the replica cmsync wrote: known %v, diff %+v", known, d)
	}

	// The source changes: a value, and a key is dropped.
	changed := src.DeepCopy()
	changed.Data["k"] = "v2"
	delete(changed.BinaryData, "b")
	newTemplate := NewTemplate(ConfigMapKind{}, changed, Shape{}, settingsOwner)
	d, known := newTemplate.DiffMetadata(replica)
	if !known || !d.Content || d.Recreate || !slices.Equal(d.StaleBinary, []string{"b"}) || len(d.StaleText) != 0 {
		t.Errorf("after a change of the source: known %v, diff %+v", known, d)
	}

	// Someone deletes a key: its field leaves every manager.
	deleted := replica.DeepCopy()
	delete(deleted.Data, "k")
	createdByCmsync(deleted)
	if d, known := template.DiffMetadata(deleted); !known || !d.Content {
		t.Errorf("a deleted key: known %v, diff %+v", known, d)
	}
}

func TestDiffMetadataCannotTellWhatOthersWrote(t *testing.T) {
	template := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, settingsOwner)
	replica := createdByCmsync(template.In("team-a"))
	tests := map[string]func(cm *corev1.ConfigMap){
		"another manager wrote a value": func(cm *corev1.ConfigMap) {
			cm.ManagedFields = append(cm.ManagedFields, managedFields("kubectl-edit", `{"f:data":{"f:k":{}}}`)...)
		},
		"another manager wrote the immutable flag": func(cm *corev1.ConfigMap) {
			cm.ManagedFields = append(cm.ManagedFields, managedFields("kubectl-edit", `{"f:immutable":{}}`)...)
		},
		"another manager took the content-hash label": func(cm *corev1.ConfigMap) {
			cm.ManagedFields = managedFields(v1alpha1.FieldManager, `{"f:data":{"f:k":{}},"f:binaryData":{"f:b":{}}}`)
		},
		"no managedFields": func(cm *corev1.ConfigMap) { cm.ManagedFields = nil },
	}
	for name, edit := range tests {
		t.Run(name, func(t *testing.T) {
			cm := replica.DeepCopy()
			edit(cm)
			if d, known := template.DiffMetadata(cm); known {
				t.Errorf("known, diff %+v", d)
			}
		})
	}

	// An immutable replica whose content must change may have to be recreated: only the
	// whole replica says.
	immutable := sampleSource()
	immutable.Immutable = ptr.To(true)
	immutableTemplate := NewTemplate(ConfigMapKind{}, immutable, Shape{}, settingsOwner)
	written := createdByCmsync(immutableTemplate.In("team-a"))
	if d, known := immutableTemplate.DiffMetadata(written); !known || !d.InSync() {
		t.Errorf("an immutable replica in sync: known %v, diff %+v", known, d)
	}
	immutable.Data["k"] = "v2"
	if d, known := NewTemplate(ConfigMapKind{}, immutable, Shape{}, settingsOwner).DiffMetadata(written); known {
		t.Errorf("an immutable replica to change: known, diff %+v", d)
	}
}

// The content hash tells every content apart, however its parts are cut.
func TestContentHash(t *testing.T) {
	contents := []Content{
		{},
		{Text: map[string]string{"a": "bc"}},
		{Text: map[string]string{"ab": "c"}},
		{Binary: map[string][]byte{"a": []byte("bc")}},
		{Text: map[string]string{"a": "b", "c": "d"}},
		{Text: map[string]string{"a": "b"}, Binary: map[string][]byte{"c": []byte("d")}},
		{Immutable: ptr.To(false)},
		{Immutable: ptr.To(true)},
		{Type: "Opaque"},
	}
	seen := map[string]int{}
	for i, c := range contents {
		h := contentHash(c)
		if j, ok := seen[h]; ok {
			t.Errorf("contents %d and %d hash alike: %s", j, i, h)
		}
		seen[h] = i
		if len(h) > 63 || h != contentHash(c) {
			t.Errorf("hash %q is not a stable label value", h)
		}
	}
}

func TestDiffReadsOwnershipFromManagedFields(t *testing.T) {
	template := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, settingsOwner)
	actual := template.In("team-a")
	actual.Labels["old"] = "1"
	actual.Labels["theirs"] = "1"
	actual.ManagedFields = append(managedFields(v1alpha1.FieldManager, `{"f:metadata":{"f:labels":{"f:old":{},"f:team":{}},"f:annotations":{"f:note":{}}}}`),
		managedFields("kubectl", `{"f:metadata":{"f:labels":{"f:theirs":{}}}}`)...)
	if d := template.Diff(actual); !slices.Equal(d.StaleLabels, []string{"old"}) {
		t.Errorf("stale labels %v, want [old]", d.StaleLabels)
	}
	own := OwnershipOf(ConfigMapKind{}, actual)
	if !own.Labels.Equal(sets.New("old", "team")) || !own.Annotations.Equal(sets.New("note")) || own.OthersWroteContent {
		t.Errorf("ownership: labels %v annotations %v others %v", sets.List(own.Labels), sets.List(own.Annotations), own.OthersWroteContent)
	}
}

// The ownership parsed from managedFields is remembered by their raw form; the memo
// must never answer for other fields, also once it has started over.
func TestOwnershipIsRememberedByTheRawFields(t *testing.T) {
	withKeys := func(label string, entries ...string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		for _, raw := range entries {
			cm.ManagedFields = append(cm.ManagedFields, managedFields(v1alpha1.FieldManager, raw)...)
		}
		cm.ManagedFields = append(cm.ManagedFields, managedFields("kubectl", `{"f:metadata":{"f:labels":{"f:`+label+`-theirs":{}}}}`)...)
		return cm
	}
	ownershipOf := func(obj *corev1.ConfigMap) (labels, annotations sets.Set[string]) {
		own := OwnershipOf(ConfigMapKind{}, obj)
		return own.Labels, own.Annotations
	}
	for i := range ownershipMemoSize + 10 { // past the memo's size: it starts over
		label := fmt.Sprintf("l%d", i)
		obj := withKeys(label, `{"f:metadata":{"f:labels":{"f:`+label+`":{}}}}`, `{"f:metadata":{"f:annotations":{"f:a":{}}}}`)
		for range 2 { // parsed, then remembered
			labels, annotations := ownershipOf(obj)
			if !labels.Equal(sets.New(label)) || !annotations.Equal(sets.New("a")) {
				t.Fatalf("entry %d: labels %v annotations %v", i, sets.List(labels), sets.List(annotations))
			}
		}
	}
	// Long managedFields fill the memo by bytes before entries.
	for i := range 3 * ownershipMemoBytes / (64 << 10) {
		label := fmt.Sprintf("long%d", i)
		data := strings.Repeat(`"f:kx":{},`, (64<<10)/10) + `"f:k":{}` // 64 KiB of a data key's fields
		obj := withKeys(label, `{"f:data":{`+data+`},"f:metadata":{"f:labels":{"f:`+label+`":{}}}}`)
		if labels, _ := ownershipOf(obj); !labels.Equal(sets.New(label)) {
			t.Fatalf("long entry %d: labels %v", i, sets.List(labels))
		}
	}
	if ownerships.bytes > ownershipMemoBytes {
		t.Errorf("the memo holds %d bytes of keys, more than %d", ownerships.bytes, ownershipMemoBytes)
	}
	if labels, annotations := ownershipOf(withKeys("x")); labels.Len()+annotations.Len() != 0 {
		t.Errorf("no entry of cmsync: labels %v annotations %v", sets.List(labels), sets.List(annotations))
	}
}

func TestReplacementKeepsWhatIsNotCmsyncs(t *testing.T) {
	template := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, settingsOwner)
	want := template.In("team-a")
	actual := template.In("team-a")
	actual.UID, actual.ResourceVersion = "r1", "42"
	actual.Finalizers = []string{"example.com/hold"}
	actual.ManagedFields = managedFields(v1alpha1.FieldManager, `{"f:metadata":{"f:labels":{"f:old-cmsync-label":{}}}}`)
	actual.Labels["added-by-user"] = "yes"
	actual.Labels["old-cmsync-label"] = "x"
	actual.Annotations["note"] = "outdated"
	actual.Data = map[string]string{"k": "old", "added-key": "z"}
	before := actual.DeepCopy()
	diff := template.Diff(actual)

	got := template.Replacement(meta.AsPartialObjectMetadata(actual), diff)

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
	for k, v := range want.Labels {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	if got.Annotations["note"] != "n" {
		t.Errorf("annotation note = %q, want the source's value", got.Annotations["note"])
	}
	if !reflect.DeepEqual(got.Data, want.Data) || !reflect.DeepEqual(got.BinaryData, want.BinaryData) || !ptr.Deref(got.Immutable, false) {
		t.Errorf("content: got %v %v immutable %v, want the desired", got.Data, got.BinaryData, got.Immutable)
	}
	if !reflect.DeepEqual(actual, before) {
		t.Error("Replacement modified the cached replica")
	}
}

func TestUpdatePatch(t *testing.T) {
	template := NewTemplate(ConfigMapKind{}, sampleSource(), Shape{}, settingsOwner)
	patch, err := template.UpdatePatch("u9", Diff{StaleLabels: []string{"old"}, StaleText: []string{"gone"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	metadata := got["metadata"].(map[string]any)
	if metadata["uid"] != "u9" || metadata["labels"].(map[string]any)["old"] != nil || metadata["labels"].(map[string]any)["team"] != "platform" {
		t.Errorf("metadata %v", metadata)
	}
	data := got["data"].(map[string]any)
	if _, ok := data["gone"]; !ok || data["gone"] != nil || data["k"] != "v" {
		t.Errorf("data %v: want k and a null for gone", data)
	}
	if got["binaryData"].(map[string]any)["b"] != "AQ==" || got["immutable"] != true {
		t.Errorf("binaryData or immutable: %v", got)
	}
}

// isStripped reports whether strip-metadata globs strip key.
func isStripped(key string, strip []string) bool { return stripGlobsOf(strip).match(key) }
