package desired

import (
	"strings"
	"testing"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// BenchmarkDiff measures one comparison of a desired replica with a cached one: a pass
// makes one per target namespace.
func BenchmarkDiff(b *testing.B) {
	src := sampleSource()
	src.Data["long"] = strings.Repeat("v", 1024)
	template := NewTemplate(ConfigMapKind{}, src, Shape{}, settingsOwner)
	cached := template.In("team-a")
	cached.ManagedFields = managedFields(v1alpha1.FieldManager,
		`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:cmsync.io/source-id":{},"f:team":{}},`+
			`"f:annotations":{"f:cmsync.io/source":{},"f:note":{}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if !template.Diff(cached).InSync() {
			b.Fatal("not in sync")
		}
	}
}
