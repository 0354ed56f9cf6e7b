package desired

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Template is the replica a source wants, alike in every target namespace: built once
// per pass, then stamped into each target namespace (In) and compared with the replicas
// that exist there (Diff).
type Template[T Object] struct {
	kind        Kind[T]
	name        string
	labels      map[string]string
	annotations map[string]string
	owner       *metav1.OwnerReference
	content     Content
	// contentHash is the value of the replica's content-hash label.
	contentHash string
	// fingerprint names everything a comparison with a whole replica reads of the
	// template: its name, labels (the content hash among them), annotations and owner.
	fingerprint string
	// notice is what the status must say about the replicas' shape, or "".
	notice string
}

// NewTemplate is the replica of source for owner, shaped by shape: named as the shape
// says; the source's content, with the keys the shape keeps; its labels and
// annotations except cmsync's own keys, kubectl's last-applied record and the keys the
// shape strips; and the replica markers. source is not modified, and must not be while
// the template is in use.
func NewTemplate[T Object](kind Kind[T], source T, shape Shape, owner Owner) Template[T] {
	key := types.NamespacedName{Namespace: source.GetNamespace(), Name: source.GetName()}
	labels, annotations := replicaMetadata(key, source, shape.Strip)
	content, notice := shapedContent(kind, kind.Content(source), shape.Keys)
	hash := contentHash(content)
	labels[v1alpha1.ContentHashLabel] = hash
	name := shape.NameFor(source.GetName())
	return Template[T]{
		kind:        kind,
		name:        name,
		labels:      labels,
		annotations: annotations,
		owner:       owner.Sync,
		content:     content,
		contentHash: hash,
		fingerprint: fingerprintOf(name, labels, annotations, owner.Sync),
		notice:      notice,
	}
}

// replicaMetadata is the labels and annotations a replica of the source key, of
// metadata meta, carries but for its content hash: the source's own, but for those
// stripped, and cmsync's markers.
func replicaMetadata(key types.NamespacedName, meta metav1.Object, strip []string) (labels, annotations map[string]string) {
	labels = copiedMetadata(meta.GetLabels(), strip)
	labels[v1alpha1.ManagedByLabel] = v1alpha1.ManagedByValue
	labels[v1alpha1.SourceIDLabel] = sourceID(key)
	annotations = copiedMetadata(meta.GetAnnotations(), strip)
	annotations[v1alpha1.SourceAnnotation] = key.String()
	return labels, annotations
}

// Fingerprint names the replica this template describes: two templates of one
// fingerprint compare alike with any replica (their content hashes, labels,
// annotations, names and owners are equal). A verdict on a replica read whole can be kept
// under it.
func (t Template[T]) Fingerprint() string { return t.fingerprint }

// shapedContent is the source's content with the keys the filter keeps, fitted to the
// kind, and what the status must say about it: that no key is left, or what fitting
// changed.
func shapedContent[T Object](kind Kind[T], source Content, keys KeyFilter) (Content, string) {
	if !keys.IsSet() {
		return source, ""
	}
	content, notice := kind.Fit(filterKeys(source, keys))
	if len(content.Text)+len(content.Binary) == 0 {
		notice = joinNotices(fmt.Sprintf("keys %q match no key of the source: the replicas have no data", keys), notice)
	}
	return content, notice
}

// Notice is what the status message must also say about the replicas' shape (keys
// that match nothing, a Secret type the keys filter could not keep), or "".
func (t Template[T]) Notice() string { return t.notice }

func joinNotices(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// In returns the whole replica for namespace, with maps of its own: a client may
// decode a response into it.
func (t Template[T]) In(namespace string) T {
	obj := t.kind.New()
	obj.SetName(t.name)
	obj.SetNamespace(namespace)
	obj.SetLabels(maps.Clone(t.labels))
	obj.SetAnnotations(maps.Clone(t.annotations))
	if t.owner != nil {
		obj.SetOwnerReferences([]metav1.OwnerReference{*t.owner})
	}
	t.kind.SetContent(obj, t.contentCopy())
	return obj
}

func (t Template[T]) contentCopy() Content {
	c := t.content
	c.Text, c.Binary = maps.Clone(c.Text), maps.Clone(c.Binary)
	if c.Fields != nil {
		c.Fields = runtime.DeepCopyJSON(c.Fields)
	}
	if c.Immutable != nil {
		c.Immutable = ptr.To(*c.Immutable)
	}
	return c
}

// Name is the name of the replicas.
func (t Template[T]) Name() string { return t.name }

// parseStripMetadata parses the strip-metadata annotation: a comma list of globs over
// label and annotation keys, where "*" also matches "/" (so "*" alone strips
// everything), of at most v1alpha1.MaxListEntries entries. A marker cmsync itself sets
// cannot be stripped by name.
func parseStripMetadata(value string) ([]string, error) {
	if err := checkListLength(v1alpha1.StripMetadataAnnotation, value, "strip many keys with one glob"); err != nil {
		return nil, err
	}
	var globs []string
	for _, entry := range nonEmptyEntries(value) {
		if _, err := path.Match(keyGlob(entry), ""); err != nil {
			return nil, fmt.Errorf("invalid strip-metadata entry %q: malformed glob", entry)
		}
		if entry == v1alpha1.ManagedByLabel || entry == v1alpha1.SourceAnnotation || entry == v1alpha1.SourceIDLabel {
			return nil, fmt.Errorf("invalid strip-metadata entry %q: cmsync sets this key on every replica to recognise it", entry)
		}
		// Every label and annotation key is matched against each glob: one repeated
		// costs nothing more.
		if !slices.Contains(globs, entry) {
			globs = append(globs, entry)
		}
	}
	if len(globs) == 0 {
		return nil, errors.New("invalid strip-metadata: the list is empty")
	}
	return globs, nil
}

// StripMetadataOf parses the strip-metadata annotation of a source; absent, nothing is
// stripped.
func StripMetadataOf(source metav1.Object) ([]string, error) {
	value, ok := source.GetAnnotations()[v1alpha1.StripMetadataAnnotation]
	if !ok {
		return nil, nil
	}
	return parseStripMetadata(value)
}

// keyGlob lets "*" in a key glob cross the "/" between a key's prefix and name:
// path.Match treats "/" as a separator, so it is swapped for a character that cannot
// occur in a label or annotation key.
func keyGlob(s string) string { return strings.ReplaceAll(s, "/", "|") }

// stripGlobs are strip-metadata globs made key globs once, not once per key matched.
type stripGlobs []string

func stripGlobsOf(strip []string) stripGlobs {
	globs := make(stripGlobs, len(strip))
	for i, glob := range strip {
		globs[i] = keyGlob(glob)
	}
	return globs
}

func (globs stripGlobs) match(key string) bool {
	if len(globs) == 0 {
		return false
	}
	key = keyGlob(key)
	for _, glob := range globs {
		if ok, _ := path.Match(glob, key); ok {
			return true
		}
	}
	return false
}

// copiedMetadata returns the source's labels or annotations that a replica carries:
// all but cmsync's own keys, kubectl's last-applied record and the stripped keys.
func copiedMetadata(from map[string]string, strip []string) map[string]string {
	out := make(map[string]string, len(from)+2)
	stripped := stripGlobsOf(strip)
	for k, v := range from {
		if strings.HasPrefix(k, v1alpha1.Prefix) || k == v1alpha1.LastAppliedAnnotation || stripped.match(k) {
			continue
		}
		out[k] = v
	}
	return out
}

// parseSourceKey reads the value of a replica's source annotation.
func parseSourceKey(value string) (types.NamespacedName, bool) {
	namespace, name, ok := strings.Cut(value, "/")
	if !ok || namespace == "" || name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}
