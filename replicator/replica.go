package replicator

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// SourceKey is the "<namespace>/<name>" a replica's source annotation holds.
func SourceKey(source types.NamespacedName) string {
	return source.Namespace + "/" + source.Name
}

// ParseSourceKey reads the value of a replica's source annotation.
func ParseSourceKey(value string) (types.NamespacedName, bool) {
	namespace, name, ok := strings.Cut(value, "/")
	if !ok || namespace == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}

// SourceID is the value of the source-id label on every replica of source: a hash,
// because a ConfigMap name (up to 253 characters) does not fit in a label value (63).
// It lets anyone list the replicas of one source with one label selector; ownership is
// decided by the source annotation alone (IsReplicaOf).
func SourceID(source types.NamespacedName) string {
	sum := sha256.Sum256([]byte(SourceKey(source)))
	return hex.EncodeToString(sum[:])[:40]
}

// IsReplica reports whether cm carries cmsync's replica markers, for any source.
func IsReplica(cm metav1.Object) bool {
	return cm.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue &&
		cm.GetAnnotations()[v1alpha1.SourceAnnotation] != ""
}

// ParseStripMetadata parses the strip-metadata annotation: a comma list of globs over
// label and annotation keys, where "*" also matches "/" (so "*" alone strips
// everything). A marker cmsync itself sets cannot be stripped by name.
func ParseStripMetadata(value string) ([]string, error) {
	var globs []string
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if _, err := path.Match(keyGlob(entry), ""); err != nil {
			return nil, fmt.Errorf("invalid strip-metadata entry %q: malformed glob", entry)
		}
		if entry == v1alpha1.ManagedByLabel || entry == v1alpha1.SourceAnnotation || entry == v1alpha1.SourceIDLabel {
			return nil, fmt.Errorf("invalid strip-metadata entry %q: cmsync sets this key on every replica to recognise it", entry)
		}
		globs = append(globs, entry)
	}
	if len(globs) == 0 {
		return nil, errors.New("invalid strip-metadata: the list is empty")
	}
	return globs, nil
}

// keyGlob lets "*" in a key glob cross the "/" between a key's prefix and name:
// path.Match treats "/" as a separator, so it is swapped for a character that cannot
// occur in a label or annotation key.
func keyGlob(s string) string { return strings.ReplaceAll(s, "/", "|") }

func isStripped(key string, strip []string) bool {
	for _, glob := range strip {
		if ok, _ := path.Match(keyGlob(glob), keyGlob(key)); ok {
			return true
		}
	}
	return false
}

// copiedMetadata returns the source's labels or annotations that a replica carries:
// all but cmsync's own keys, kubectl's last-applied record and the stripped keys.
func copiedMetadata(from map[string]string, strip []string) map[string]string {
	out := make(map[string]string, len(from)+2)
	for k, v := range from {
		if strings.HasPrefix(k, v1alpha1.Prefix) || k == v1alpha1.LastAppliedAnnotation || isStripped(k, strip) {
			continue
		}
		out[k] = v
	}
	return out
}

// DesiredReplica is the replica of source that must exist in namespace for owner: the
// source's name, data, binaryData and immutable flag, its copied labels and
// annotations, and the replica markers. It is the whole truth about the replica,
// suitable for comparison.
func DesiredReplica(source *corev1.ConfigMap, namespace string, strip []string, owner Owner) *corev1.ConfigMap {
	key := types.NamespacedName{Namespace: source.Namespace, Name: source.Name}
	labels := copiedMetadata(source.Labels, strip)
	labels[v1alpha1.ManagedByLabel] = v1alpha1.ManagedByValue
	labels[v1alpha1.SourceIDLabel] = SourceID(key)
	annotations := copiedMetadata(source.Annotations, strip)
	annotations[v1alpha1.SourceAnnotation] = SourceKey(key)
	replica := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        source.Name,
			Namespace:   namespace,
			Labels:      labels,
			Annotations: annotations,
		},
		Data:       maps.Clone(source.Data),
		BinaryData: maps.Clone(source.BinaryData),
	}
	if source.Immutable != nil {
		immutable := *source.Immutable
		replica.Immutable = &immutable
	}
	if owner.Sync != nil {
		replica.OwnerReferences = []metav1.OwnerReference{*owner.Sync}
	}
	return replica
}

// ReplicaDiff says how an existing replica differs from the desired one.
type ReplicaDiff struct {
	// Content: data, binaryData or the immutable flag differ.
	Content bool
	// Metadata: a desired label or annotation is missing or has another value.
	Metadata bool
	// Stale labels, annotations and data keys the replica must lose: data keys the
	// source does not have, and labels and annotations cmsync wrote that it no longer
	// wants. Labels and annotations others added to the replica are theirs to keep.
	StaleLabels, StaleAnnotations, StaleData, StaleBinaryData []string
}

// InSync reports whether the replica needs no write.
func (d ReplicaDiff) InSync() bool {
	return !d.Content && !d.Metadata && len(d.StaleLabels)+len(d.StaleAnnotations)+len(d.StaleData)+len(d.StaleBinaryData) == 0
}

// DiffReplica compares an existing replica with the desired one. Which labels and
// annotations cmsync wrote is read from the replica's managedFields.
func DiffReplica(desired, actual *corev1.ConfigMap) ReplicaDiff {
	var d ReplicaDiff
	digested := isDigested(actual)
	d.Content = !dataEqual(desired.Data, actual.Data, digested) ||
		!binaryDataEqual(desired.BinaryData, actual.BinaryData, digested) ||
		isImmutable(desired) != isImmutable(actual)
	d.Metadata = !containsAll(actual.Labels, desired.Labels) || !containsAll(actual.Annotations, desired.Annotations)
	ownedLabels, ownedAnnotations := ownedMetadataKeys(actual)
	d.StaleLabels = missingFrom(desired.Labels, ownedLabels)
	// Status annotations are cmsync's only on a replica someone labelled as a source
	// (and that was refused); they report on that refusal and are not stale.
	d.StaleAnnotations = slices.DeleteFunc(missingFrom(desired.Annotations, ownedAnnotations), v1alpha1.IsStatusAnnotation)
	for k := range actual.Data {
		if _, ok := desired.Data[k]; !ok {
			d.StaleData = append(d.StaleData, k)
		}
	}
	for k := range actual.BinaryData {
		if _, ok := desired.BinaryData[k]; !ok {
			d.StaleBinaryData = append(d.StaleBinaryData, k)
		}
	}
	return d
}

func isImmutable(cm *corev1.ConfigMap) bool { return cm.Immutable != nil && *cm.Immutable }

func dataEqual(desired, actual map[string]string, digested bool) bool {
	if len(desired) != len(actual) {
		return false
	}
	for k, v := range desired {
		w, ok := actual[k]
		if !ok || !sameValue([]byte(v), []byte(w), digested) {
			return false
		}
	}
	return true
}

func binaryDataEqual(desired, actual map[string][]byte, digested bool) bool {
	if len(desired) != len(actual) {
		return false
	}
	for k, v := range desired {
		w, ok := actual[k]
		if !ok || !sameValue(v, w, digested) {
			return false
		}
	}
	return true
}

// containsAll reports whether every key of want is in have with the same value.
func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if w, ok := have[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func missingFrom(want map[string]string, keys []string) []string {
	var missing []string
	for _, k := range keys {
		if _, ok := want[k]; !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

// metadataKeysManagedBy lists the label and annotation keys that manager owns according
// to obj's managedFields, under any operation.
func metadataKeysManagedBy(obj metav1.Object, manager string) (labels, annotations []string) {
	for _, entry := range obj.GetManagedFields() {
		if entry.Manager != manager || entry.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels      map[string]json.RawMessage `json:"f:labels"`
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(entry.FieldsV1.Raw, &fields) != nil {
			continue
		}
		labels = appendFieldKeys(labels, fields.Metadata.Labels)
		annotations = appendFieldKeys(annotations, fields.Metadata.Annotations)
	}
	return labels, annotations
}

// appendFieldKeys turns managedFields map entries ("f:<key>") into keys.
func appendFieldKeys(keys []string, fields map[string]json.RawMessage) []string {
	for f := range fields {
		if k, ok := strings.CutPrefix(f, "f:"); ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// ReplacementReplica is the whole replica an update writes over actual, the replica it
// was compared with: actual's metadata, with the labels and annotations others added to
// it, plus the desired labels and annotations, minus the stale ones; the desired
// content; and actual's resourceVersion, so the write fails rather than overwrite a
// change it has not seen. Its managedFields are left empty, which makes the API server
// keep the recorded ones. It never modifies desired or actual (cached objects share
// their maps).
func ReplacementReplica(desired, actual *corev1.ConfigMap, diff ReplicaDiff) *corev1.ConfigMap {
	meta := actual.ObjectMeta.DeepCopy()
	meta.ManagedFields = nil
	meta.Labels = mergedMetadata(actual.Labels, desired.Labels, diff.StaleLabels)
	meta.Annotations = mergedMetadata(actual.Annotations, desired.Annotations, diff.StaleAnnotations)
	dropCacheMarks(meta.Annotations)
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: *meta,
		Data:       desired.Data,
		BinaryData: desired.BinaryData,
		Immutable:  desired.Immutable,
	}
}

// mergedMetadata is have with want's entries set and the stale keys removed, in a new map.
func mergedMetadata(have, want map[string]string, stale []string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	maps.Copy(out, have)
	maps.Copy(out, want)
	for _, k := range stale {
		delete(out, k)
	}
	return out
}
