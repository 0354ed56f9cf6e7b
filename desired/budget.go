package desired

import (
	"fmt"
	"strconv"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// DefaultMaxReplicatedBytes is the default of --max-replicated-bytes: half of etcd's
// default backend quota (2 GiB), so that one pass of a single source cannot fill etcd,
// while 1,000 copies of a ConfigMap near its 1 MiB limit still fit. It bounds one
// pass of one source: not how often its owner edits it (each edit writes its replicas
// again, and etcd keeps each version until compaction), and not many sources each
// under it, which the namespaces' quotas on ConfigMaps and Secrets bound, not cmsync.
const DefaultMaxReplicatedBytes = 1 << 30

// Size is the bytes cmsync writes into each replica: its name, the keys and values of
// its content (and a Secret's type; an object's fields as JSON), and every label and annotation it carries — those
// copied from the source as much as cmsync's markers. Metadata counts like data: a
// source with no data and a 250 KB annotation writes 250 KB into every target.
func (t Template[T]) Size() int64 {
	n := int64(len(t.name)+len(t.content.Type)) + metadataBytes(t.labels, t.annotations)
	for k, v := range t.content.Text {
		n += int64(len(k) + len(v))
	}
	for k, v := range t.content.Binary {
		n += int64(len(k) + len(v))
	}
	if t.content.Fields != nil {
		n += int64(len(fieldsJSON(t.content.Fields)))
	}
	return n
}

// MaxReplicaMetadataBytes bounds the labels and annotations of a replica, cmsync's
// markers included: a quarter of the API server's limit on annotations (256 KiB). The
// replica store keeps every replica's metadata, and the replicas of different sources
// share none of it, so without a bound a tenant who may label ConfigMaps could fill
// cmsync's memory with labels (the API server bounds each label, not their number).
// A source whose replicas would carry more is Invalid; an object labelled as a replica
// that carries more was not written so by cmsync, and the store keeps only cmsync's
// markers of it (CompactOversized).
const MaxReplicaMetadataBytes = 64 << 10

// metadataBytes is the bytes of labels and annotations: their keys and values.
func metadataBytes(labels, annotations map[string]string) int64 {
	var n int64
	for k, v := range labels {
		n += int64(len(k) + len(v))
	}
	for k, v := range annotations {
		n += int64(len(k) + len(v))
	}
	return n
}

// contentHashBytes is what the content-hash label adds to a replica's metadata.
const contentHashBytes = int64(len(v1alpha1.ContentHashLabel) + contentHashLength)

// checkReplicaMetadata says why a replica whose labels and annotations take n bytes
// cannot be written: more than MaxReplicaMetadataBytes; or nil.
func checkReplicaMetadata(n int64) error {
	if n <= MaxReplicaMetadataBytes {
		return nil
	}
	return fmt.Errorf(
		"the labels and annotations a replica would carry take %s, over cmsync's limit of %s per replica: "+
			"keep the large ones out of the copies with the source's %s annotation; existing replicas are kept",
		bytesOf(n), bytesOf(MaxReplicaMetadataBytes), v1alpha1.StripMetadataAnnotation)
}

// CheckWriteBudget says why a source whose replicas carry size bytes may not be copied
// into targets namespaces under the controller's budget (0: no budget), or nil.
func (p Policy) CheckWriteBudget(size int64, targets int) error {
	total := size * int64(targets)
	if p.MaxReplicatedBytes <= 0 || total <= p.MaxReplicatedBytes {
		return nil
	}
	return fmt.Errorf(
		"the replicas would write %s (%s, data and metadata, in each of %d target namespaces), over the controller's --max-replicated-bytes of %s: "+
			"narrow the targets or the keys, or raise the budget; existing replicas are kept",
		bytesOf(total),
		bytesOf(size),
		targets,
		bytesOf(p.MaxReplicatedBytes),
	)
}

// bytesOf writes n in binary units, whole when exact (10Ki) and to a tenth otherwise
// (12.6Ki): a replica's size is rarely a round figure, and resource.Quantity, the
// apimachinery formatter, writes any size that is not a whole unit in bytes (12858).
func bytesOf(n int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti"}
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	unit, scale := units[0], int64(1024)
	for _, next := range units[1:] {
		if n < scale*1024 {
			break
		}
		unit, scale = next, scale*1024
	}
	if n%scale == 0 {
		return strconv.FormatInt(n/scale, 10) + unit
	}
	return strconv.FormatFloat(float64(n)/float64(scale), 'f', 1, 64) + unit
}
