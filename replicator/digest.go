package replicator

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// The replica cache keeps a digest in place of every long data value: replicas are
// copies of sources, so holding their content again would make memory grow with the
// size times the number of target namespaces. A digest is enough to tell whether a
// replica equals the desired one. Objects read from the API server directly carry
// their values, and compare as such.
const (
	// digestThreshold: values up to this length are kept as they are; a digest would
	// save nothing.
	digestThreshold = 64
)

// compactOwnership replaces a replica's managedFields by the list of label and
// annotation keys cmsync owns, in place. Idempotent, like digestValues.
func compactOwnership(cm *corev1.ConfigMap) {
	if isOwnershipCompacted(cm) {
		return
	}
	labels, annotations := metadataKeysManagedBy(cm, v1alpha1.FieldManager)
	lines := make([]string, 0, len(labels)+len(annotations))
	for _, k := range labels {
		lines = append(lines, "l:"+k)
	}
	for _, k := range annotations {
		lines = append(lines, "a:"+k)
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[v1alpha1.CacheOwnedKeysAnnotation] = strings.Join(lines, "\n")
	cm.ManagedFields = nil
}

// dropCacheMarks removes from annotations the marks compactOwnership and digestValues
// add to cached replicas: they never belong on a replica written to the API server.
func dropCacheMarks(annotations map[string]string) {
	delete(annotations, v1alpha1.CacheDigestedAnnotation)
	delete(annotations, v1alpha1.CacheOwnedKeysAnnotation)
}

func isOwnershipCompacted(cm *corev1.ConfigMap) bool {
	_, done := cm.Annotations[v1alpha1.CacheOwnedKeysAnnotation]
	return done
}

// ownedMetadataKeys returns the label and annotation keys cmsync owns on a replica, from
// the cache's compact list when there is one, else from managedFields.
func ownedMetadataKeys(cm *corev1.ConfigMap) (labels, annotations []string) {
	list, compact := cm.Annotations[v1alpha1.CacheOwnedKeysAnnotation]
	if !compact {
		return metadataKeysManagedBy(cm, v1alpha1.FieldManager)
	}
	for _, line := range strings.Split(list, "\n") {
		if k, ok := strings.CutPrefix(line, "l:"); ok {
			labels = append(labels, k)
		} else if k, ok := strings.CutPrefix(line, "a:"); ok {
			annotations = append(annotations, k)
		}
	}
	return labels, annotations
}

// digestValues replaces the long data and binaryData values of a replica with digests,
// in place, and marks it. Informers may transform an object more than once, so an
// object already marked is left as it is.
func digestValues(cm *corev1.ConfigMap) {
	if isDigested(cm) {
		return
	}
	for k, v := range cm.Data {
		if len(v) > digestThreshold {
			cm.Data[k] = digestOf([]byte(v))
		}
	}
	for k, v := range cm.BinaryData {
		if len(v) > digestThreshold {
			cm.BinaryData[k] = []byte(digestOf(v))
		}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[v1alpha1.CacheDigestedAnnotation] = "true"
}

func digestOf(v []byte) string {
	sum := sha256.Sum256(v)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sameValue reports whether a desired value equals an actual one, which is a digest
// when the actual replica came from the cache and the value is long.
func sameValue(desired, actual []byte, actualDigested bool) bool {
	if actualDigested && len(desired) > digestThreshold {
		return digestOf(desired) == string(actual)
	}
	return string(desired) == string(actual)
}

func isDigested(cm *corev1.ConfigMap) bool {
	return cm.Annotations[v1alpha1.CacheDigestedAnnotation] == "true"
}
