package desired

import (
	"errors"
	"fmt"
	"strings"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// Shape is how a source's replicas differ from the source itself: the name they take,
// the labels and annotations they leave out, and the content keys they keep. The zero
// value copies the source as it is, under its own name.
type Shape struct {
	// Name is the replicas' name; empty means the source's name.
	Name string
	// Strip are globs of label and annotation keys not copied (strip-metadata).
	Strip []string
	// Keys says which keys of data and binaryData are copied.
	Keys KeyFilter
}

// NameFor is the replicas' name for a source named sourceName.
func (s Shape) NameFor(sourceName string) string {
	if s.Name != "" {
		return s.Name
	}
	return sourceName
}

// ShapeOf parses the annotations of a source that shape its replicas: strip-metadata,
// target-name and keys. Every malformed one is named in the error.
func ShapeOf(source metav1.Object) (Shape, error) {
	var shape Shape
	var errs []error
	var err error
	if shape.Strip, err = StripMetadataOf(source); err != nil {
		errs = append(errs, err)
	}
	if value := annotationOf(source, v1alpha1.TargetNameAnnotation); value != nil {
		if shape.Name, err = parseTargetName(*value); err != nil {
			errs = append(errs, fmt.Errorf("invalid target-name %q: %w", *value, err))
		}
	}
	if value := annotationOf(source, v1alpha1.KeysAnnotation); value != nil {
		if shape.Keys, err = parseKeysAnnotation(*value); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Shape{}, err
	}
	return shape, nil
}

// ParseSyncShape parses the fields of an explicit object's spec that shape its replicas:
// targetName and keys. The CRD schema bounds only their lengths, so that a bad value
// is reported as the annotations' is (Invalid, naming the field) rather than refused
// at create time: this judges the name, the globs and an empty list. Strip is left to
// the caller, who reads it from the source.
func ParseSyncShape(spec v1alpha1.SyncSpec) (Shape, error) {
	var shape Shape
	if spec.TargetName != "" {
		name, err := parseTargetName(spec.TargetName)
		if err != nil {
			return Shape{}, fmt.Errorf("spec.targetName %q: %w", spec.TargetName, err)
		}
		shape.Name = name
	}
	if spec.Keys != nil {
		if len(spec.Keys) == 0 {
			return Shape{}, errors.New("spec.keys is empty; remove it to copy every key")
		}
		keys, err := parseKeyEntries(spec.Keys, func(i int) string { return fmt.Sprintf("spec.keys[%d]", i) })
		if err != nil {
			return Shape{}, err
		}
		shape.Keys = keys
	}
	return shape, nil
}

// SyncReplicaName is the name of a ConfigMapSync's or SecretSync's replicas as its spec
// gives it, whether or not the rest of the spec is valid.
func SyncReplicaName(spec v1alpha1.SyncSpec) string {
	if spec.TargetName != "" {
		return spec.TargetName
	}
	return spec.SourceName
}

// parseTargetName checks a replica name. ConfigMaps and Secrets share the API server's
// rule for names: a DNS-1123 subdomain of at most 253 characters.
func parseTargetName(value string) (string, error) {
	if value == "" {
		return "", errors.New("the name is empty")
	}
	if problems := apimachineryvalidation.NameIsDNSSubdomain(value, false); len(problems) > 0 {
		return "", fmt.Errorf("not a valid name: %s", strings.Join(problems, "; "))
	}
	return value, nil
}

// KeyFilter selects the keys of data and binaryData a replica keeps: those that match an
// include glob, or every key when there is none, minus those that match an exclude
// glob. The zero value keeps every key.
type KeyFilter struct {
	include, exclude namePatterns
	// text is the filter as the user wrote it, for messages.
	text string
}

// IsSet reports whether the filter can leave a key out.
func (f KeyFilter) IsSet() bool { return !f.include.isEmpty() || !f.exclude.isEmpty() }

// Keeps reports whether a key is copied.
func (f KeyFilter) Keeps(key string) bool {
	if _, excluded := f.exclude.match(key); excluded {
		return false
	}
	_, included := f.include.match(key)
	return included || f.include.isEmpty()
}

// String is the filter as the user wrote it.
func (f KeyFilter) String() string { return f.text }

// parseKeysAnnotation parses the keys annotation, once its number of entries is within
// the bound.
func parseKeysAnnotation(value string) (KeyFilter, error) {
	if err := checkListLength(v1alpha1.KeysAnnotation, value, "name many keys with one glob"); err != nil {
		return KeyFilter{}, err
	}
	keys, err := parseKeyList(value)
	if err != nil {
		return KeyFilter{}, fmt.Errorf("invalid keys %q: %w", value, err)
	}
	return keys, nil
}

// parseKeyList parses the keys annotation: a comma list of key globs, "!" excluding.
func parseKeyList(value string) (KeyFilter, error) {
	if strings.TrimSpace(value) == "" {
		return KeyFilter{}, errors.New("the list is empty; remove the annotation to copy every key")
	}
	entries := strings.Split(value, ",")
	return parseKeyEntries(entries, func(i int) string { return fmt.Sprintf("entry %q", strings.TrimSpace(entries[i])) })
}

// parseKeyEntries parses key globs; name says which entry an error is about.
func parseKeyEntries(entries []string, name func(i int) string) (KeyFilter, error) {
	var include, exclude, shown []string
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		pattern, excluded := strings.CutPrefix(entry, "!")
		if err := validateKeyGlob(pattern); err != nil {
			return KeyFilter{}, fmt.Errorf("%s: %w", name(i), err)
		}
		if excluded {
			exclude = append(exclude, pattern)
		} else {
			include = append(include, pattern)
		}
		shown = append(shown, entry)
	}
	return KeyFilter{include: namePatternsOf(include), exclude: namePatternsOf(exclude), text: strings.Join(shown, ",")}, nil
}

// keyGlobs are keys of data and binaryData and globs that can match one: letters,
// digits, "-", "_" and ".", plus the glob syntax.
var keyGlobs = globAlphabet{
	empty: "empty key", in: "a key or key glob", rule: "keys are letters, digits, '-', '_' and '.'",
	allows: func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
	},
}

func validateKeyGlob(pattern string) error { return keyGlobs.validate(pattern) }

// filterKeys returns the content with only the keys f keeps, in new maps; a map left
// empty stays nil, as the API server would return it.
func filterKeys(c Content, f KeyFilter) Content {
	if !f.IsSet() {
		return c
	}
	c.Text = filterMap(c.Text, f)
	c.Binary = filterMap(c.Binary, f)
	return c
}

func filterMap[V any](m map[string]V, f KeyFilter) map[string]V {
	var out map[string]V
	for k, v := range m {
		if f.Keeps(k) {
			if out == nil {
				out = make(map[string]V, len(m))
			}
			out[k] = v
		}
	}
	return out
}
