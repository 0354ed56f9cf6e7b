package replicastore

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/cmsync/cmsync/desired"
)

// The cost of the replica store's watch per replica, apart from the API server (make
// bench measures the whole process): go test -run x -bench . ./replicator/replicastore/

// encodedReplica is a replica of source as the API server sends it to the store's
// watch: metadata only.
func encodedReplica(b *testing.B, source *corev1.ConfigMap) []byte {
	b.Helper()
	owner := desired.AnnotationOwner("ConfigMap", types.NamespacedName{Namespace: source.Namespace, Name: source.Name})
	replica := desired.NewTemplate(desired.ConfigMapKind{}, source, desired.Shape{}, owner).In("team-x")
	managedByCmsync(replica)
	replica.UID, replica.ResourceVersion = uuid.NewUUID(), "12345678"
	raw, err := json.Marshal(meta.AsPartialObjectMetadata(replica))
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkTransform is the work of one replica event: compacting and sharing.
func BenchmarkTransform(b *testing.B) {
	raw := encodedReplica(b, sampleSource())
	objs := make([]*metav1.PartialObjectMetadata, b.N)
	for i := range objs {
		objs[i] = &metav1.PartialObjectMetadata{}
		if err := json.Unmarshal(raw, objs[i]); err != nil {
			b.Fatal(err)
		}
	}
	transform := transform(desired.ConfigMapKind{}, newMapSharer())
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := transform(objs[i]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHeldBytesPerReplica is the heap the cache holds per replica of 100 sources
// in 1,000 namespaces: the object, its store key and its owner index entry.
func BenchmarkHeldBytesPerReplica(b *testing.B) {
	const sources, namespaces = 100, 1000
	raws := make([][]byte, sources)
	for s := range raws {
		source := sampleSource()
		source.Name = fmt.Sprintf("source-%03d", s)
		raws[s] = encodedReplica(b, source)
	}
	kind := desired.ConfigMapKind{}
	for range b.N {
		informer := ownerIndexedInformer(kind)(nil, kind.New(), 0, nil)
		store, transform := informer.GetIndexer(), transform(kind, newMapSharer())
		before := liveHeap()
		for s := range sources {
			for n := range namespaces {
				cm := &metav1.PartialObjectMetadata{}
				if err := json.Unmarshal(raws[s], cm); err != nil {
					b.Fatal(err)
				}
				cm.Namespace, cm.UID = fmt.Sprintf("bench-ns-%04d", n), uuid.NewUUID()
				held, _ := transform(cm)
				if err := store.Add(held); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(liveHeap()-before)/(sources*namespaces), "B/replica")
		runtime.KeepAlive(store)
	}
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
