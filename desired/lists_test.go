package desired

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// listOf is a comma list of n entries made by entry.
func listOf(n int, entry func(i int) string) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = entry(i)
	}
	return strings.Join(entries, ",")
}

// A source whose list annotation has more than MaxListEntries entries is Invalid,
// naming the annotation, its count and the limit, before anything is matched: no
// targets, no template. One at the limit works.
func TestListAnnotationsAreBounded(t *testing.T) {
	limit := v1alpha1.MaxListEntries
	data := map[string]string{}
	for i := range 20000 {
		data[fmt.Sprintf("z%05d", i)] = "v"
	}
	namespaces := []Namespace{{Name: "platform"}, {Name: "ns-000"}, {Name: "team-a"}}
	policy := Policy{SourceNamespaces: []string{"*"}}
	tests := []struct {
		annotation string
		entry      func(i int) string
	}{
		{v1alpha1.TargetNamespacesAnnotation, func(i int) string { return fmt.Sprintf("ns-%03d", i) }},
		{v1alpha1.KeysAnnotation, func(int) string { return "!z*" }},
		{v1alpha1.StripMetadataAnnotation, func(i int) string { return fmt.Sprintf("example.com/k%03d", i) }},
		{v1alpha1.TargetSelectorAnnotation, func(i int) string { return fmt.Sprintf("l%03d", i) }},
	}
	for _, tt := range tests {
		resolve := func(n int) Intent[*corev1.ConfigMap] {
			annotations := map[string]string{v1alpha1.TargetNamespacesAnnotation: "ns-000", tt.annotation: listOf(n, tt.entry)}
			return Resolve(ConfigMapKind{}, AnnotatedSource(sourceConfigMap("platform", "app", annotations, data)), namespaces, policy)
		}
		t.Run(tt.annotation+" over the limit", func(t *testing.T) {
			intent := resolve(limit + 1)
			want := fmt.Sprintf("%s has %d entries, over the limit of %d", tt.annotation, limit+1, limit)
			if intent.Invalid == nil || !strings.Contains(intent.Invalid.Error(), want) {
				t.Fatalf("Invalid %v, want one saying %q", intent.Invalid, want)
			}
			if len(intent.Invalid.Error()) > 300 {
				t.Errorf("the message repeats the list: %d bytes", len(intent.Invalid.Error()))
			}
			if len(intent.Targets.Namespaces) > 0 || intent.Template.Name() != "" {
				t.Errorf("an Invalid source was matched: targets %v, template %q", intent.Targets.Namespaces, intent.Template.Name())
			}
		})
		t.Run(tt.annotation+" at the limit", func(t *testing.T) {
			intent := resolve(limit)
			if intent.Invalid != nil {
				t.Fatalf("Invalid: %v", intent.Invalid)
			}
			if !slices.Equal(intent.Targets.Namespaces, []string{"ns-000"}) || intent.Template.Name() != "app" {
				t.Errorf("targets %v, template %q", intent.Targets.Namespaces, intent.Template.Name())
			}
		})
	}
}

// The entries counted are those the list names: empty ones (a trailing comma in
// strip-metadata, which skips them) do not count.
func TestListLengthCountsEntries(t *testing.T) {
	names := listOf(v1alpha1.MaxListEntries, func(i int) string { return fmt.Sprintf("example.com/k%03d", i) })
	if _, err := parseStripMetadata(names + ",,, ,"); err != nil {
		t.Errorf("%d entries and empty ones: %v", v1alpha1.MaxListEntries, err)
	}
	if _, err := parseStripMetadata(names + ",x"); err == nil || !strings.Contains(err.Error(), "257 entries") {
		t.Errorf("%d entries: %v", v1alpha1.MaxListEntries+1, err)
	}
}

// The explicit form's strip-metadata is the source's annotation: bounded alike.
func TestSyncSourceStripMetadataIsBounded(t *testing.T) {
	strip := listOf(v1alpha1.MaxListEntries+1, func(i int) string { return fmt.Sprintf("k%03d", i) })
	src := sourceConfigMap("team-a", "app", map[string]string{v1alpha1.StripMetadataAnnotation: strip}, map[string]string{"k": "v"})
	sync := &v1alpha1.ConfigMapSync{
		ObjectMeta: metav1.ObjectMeta{Name: "s"},
		Spec: v1alpha1.ConfigMapSyncSpec{
			SourceNamespace: "team-a", ConfigMapName: "app",
			ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespaces: []string{"team-b"}},
		},
	}
	source := Source[*corev1.ConfigMap]{Key: types.NamespacedName{Namespace: "team-a", Name: "app"}, Meta: src, Object: src, Whole: true, Sync: sync}
	intent := Resolve(ConfigMapKind{}, source, []Namespace{{Name: "team-a"}, {Name: "team-b"}}, Policy{SourceNamespaces: []string{"*"}})
	want := "cmsync.io/strip-metadata has 257 entries, over the limit of 256"
	if intent.Invalid == nil || !strings.Contains(intent.Invalid.Error(), want) || intent.Template.Name() != "" {
		t.Fatalf("Invalid %v (template %q), want one saying %q", intent.Invalid, intent.Template.Name(), want)
	}
}

// Exact names in target-namespaces are looked up, not matched one by one; the answer,
// and the entry explain names, are those of the globs.
func TestTargetNamesAreLookedUp(t *testing.T) {
	spec, err := parseTargetAnnotations(strPtr("team-a,shared,team-*,!team-legacy,!old-[0-9]"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(spec.include.globs, []string{"team-*"}) || spec.include.names.Len() != 2 ||
		!slices.Equal(spec.exclude.globs, []string{"old-[0-9]"}) || spec.exclude.names.Len() != 1 {
		t.Fatalf("names and globs not told apart: include %+v, exclude %+v", spec.include, spec.exclude)
	}
	for name, want := range map[string]decision{
		"team-a":      {rule: includedByEntry, pattern: "team-a"},
		"shared":      {rule: includedByEntry, pattern: "shared"},
		"shared-2":    {rule: notNamed},
		"team-b":      {rule: includedByEntry, pattern: "team-*"},
		"team-legacy": {rule: excludedByEntry, pattern: "team-legacy"},
		"old-1":       {rule: excludedByEntry, pattern: "old-[0-9]"},
	} {
		if got := spec.match(Namespace{Name: name}); got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
}

// A list of validated entries matches a name exactly when one of its entries, as a
// glob, does.
func FuzzNamePatternsMatchLikeGlobs(f *testing.F) {
	for _, seed := range [][2]string{{"team-a,team-*", "team-b"}, {"a]", "a]"}, {"a^b,[^a]", "b"}, {"x?,y", "xy"}, {"team-a", "team-ab"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, list, name string) {
		entries, err := ParseGlobList(list)
		if err != nil {
			return
		}
		want := slices.ContainsFunc(entries, func(e string) bool { ok, _ := path.Match(e, name); return ok })
		if _, got := namePatternsOf(entries).match(name); got != want {
			t.Fatalf("%q against %q: %v, want %v", entries, name, got, want)
		}
	})
}

// BenchmarkResolveAtTheListBound measures the costliest pass a source's lists allow:
// 256 distinct key globs over 100,000 data keys and 256 strip-metadata globs over
// 10,000 annotations, every glob matched against every item.
func BenchmarkResolveAtTheListBound(b *testing.B) {
	data := map[string]string{}
	for i := range 100000 {
		data[fmt.Sprintf("%c%05d", 'a'+i%26, i)] = ""
	}
	annotations := map[string]string{
		v1alpha1.TargetNamespacesAnnotation: "team-a",
		v1alpha1.KeysAnnotation:             listOf(v1alpha1.MaxListEntries, func(i int) string { return fmt.Sprintf("!%c%c*[0-9]?", 'a'+i%26, 'a'+i/26) }),
		v1alpha1.StripMetadataAnnotation:    listOf(v1alpha1.MaxListEntries, func(i int) string { return fmt.Sprintf("%c%c*/x*", 'a'+i%26, 'a'+i/26) }),
	}
	for i := range 10000 {
		annotations[fmt.Sprintf("example.com/a%05d", i)] = ""
	}
	src := AnnotatedSource(sourceConfigMap("platform", "app", annotations, data))
	namespaces := []Namespace{{Name: "platform"}, {Name: "team-a"}}
	for b.Loop() {
		if intent := Resolve(ConfigMapKind{}, src, namespaces, Policy{SourceNamespaces: []string{"*"}}); intent.Invalid != nil {
			b.Fatal(intent.Invalid)
		}
	}
}
