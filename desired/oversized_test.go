package desired

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// What the replica store keeps of an object labelled as a replica is bounded whoever
// wrote it: a replica as cmsync writes it is kept as it is; one that others gave more
// labels, or managedFields naming many thousands of keys, keeps only cmsync's markers,
// and its metadata can then no longer tell whether it is in sync (it is read whole).
func TestCompactOversized(t *testing.T) {
	src := sampleSource()
	src.Immutable = nil
	template := NewTemplate(ConfigMapKind{}, src, Shape{}, settingsOwner)
	written := func() *metav1.PartialObjectMetadata {
		return meta.AsPartialObjectMetadata(createdByCmsync(template.In("team-a")))
	}

	t.Run("as cmsync writes it", func(t *testing.T) {
		replica := written()
		labels := maps.Clone(replica.Labels)
		if CompactOversized(ConfigMapKind{}, replica) {
			t.Fatal("compacted a replica as cmsync writes it")
		}
		if !maps.Equal(replica.Labels, labels) {
			t.Errorf("labels changed: %v", replica.Labels)
		}
		if _, known := template.DiffMetadata(replica); !known || IsCompacted(replica) {
			t.Error("its metadata no longer tells whether it is in sync")
		}
	})

	oversized := map[string]func(*metav1.PartialObjectMetadata){
		"labels others added": func(r *metav1.PartialObjectMetadata) {
			addLabels(r, "added-", MaxReplicaMetadataBytes/64+oversizedSlack/64+1)
		},
		"an annotation of 256 KiB": func(r *metav1.PartialObjectMetadata) {
			r.Annotations["note"] = strings.Repeat("x", 256<<10)
		},
		"many owner references": func(r *metav1.PartialObjectMetadata) {
			for i := range 4000 {
				r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("p%06d", i), UID: "u"})
			}
		},
		"managedFields naming many keys": func(r *metav1.PartialObjectMetadata) {
			keys := make([]string, 10000)
			for i := range keys {
				keys[i] = fmt.Sprintf(`"f:key-%06d":{}`, i)
			}
			r.ManagedFields = managedFields(v1alpha1.FieldManager, `{"f:data":{`+strings.Join(keys, ",")+`}}`)
		},
	}
	for name, grow := range oversized {
		t.Run(name, func(t *testing.T) {
			replica := written()
			grow(replica)
			if !CompactOversized(ConfigMapKind{}, replica) {
				t.Fatal("not compacted")
			}
			if n := metadataBytesOf(replica) + int64(managedFieldsBytes(replica.ManagedFields)); n > 1024 {
				t.Errorf("%d bytes of metadata kept: %v %v", n, replica.Labels, replica.Annotations)
			}
			if !IsReplica(replica) || OwnerKeyOf("ConfigMap", replica) != settingsOwner.Key() ||
				replica.Labels[v1alpha1.ContentHashLabel] == "" || replica.Labels[v1alpha1.SourceIDLabel] == "" {
				t.Errorf("cmsync's markers not kept: %v %v", replica.Labels, replica.Annotations)
			}
			if _, known := template.DiffMetadata(replica); known {
				t.Error("the compacted metadata claims to tell whether the replica is in sync")
			}
			if !IsCompacted(replica) {
				t.Error("not known as compacted")
			}
			if CompactOversized(ConfigMapKind{}, replica) || !IsReduced(replica.ManagedFields) {
				t.Error("a second pass compacts again, or the managedFields are not in reduced form")
			}
		})
	}

	t.Run("a forged source annotation is not kept", func(t *testing.T) {
		replica := written()
		replica.Annotations[v1alpha1.SourceAnnotation] = strings.Repeat("a", 100<<10)
		if !CompactOversized(ConfigMapKind{}, replica) {
			t.Fatal("not compacted")
		}
		if IsReplica(replica) {
			t.Errorf("kept as a replica of a source named by %d bytes", len(replica.Annotations[v1alpha1.SourceAnnotation]))
		}
	})
}
