package desired

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The content of an object of a kind known only at run time (ObjectKind) is a tree of
// JSON values. cmsync writes the source's fields; the API server adds its defaults and
// other writers may add fields of their own. A replica holds the source when every
// value the source sets is there, whatever else is (fieldsHold); the fields cmsync
// wrote and no longer wants are found from managedFields (staleFieldPaths).

// fieldsHold reports whether have holds every value of want: each key of a map with a
// value that holds want's, lists of the same length whose items hold want's item by
// item, and equal scalars. What have holds beyond want does not count.
func fieldsHold(have, want map[string]any) bool {
	for k, w := range want {
		h, ok := have[k]
		if !ok && w != nil {
			return false
		}
		if ok && !valueHolds(h, w) {
			return false
		}
	}
	return true
}

func valueHolds(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		return ok && fieldsHold(h, w)
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !valueHolds(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	if hn, ok := number(have); ok {
		wn, ok := number(want)
		return ok && hn == wn
	}
	return have == want
}

// number reads a JSON number, which a decoder may give as an int64 or a float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	}
	return 0, false
}

// FieldPath is a path through nested maps of an object's content, from a top-level
// field down.
type FieldPath []string

// staleFieldPaths are the paths of the fields cmsync owns (in managedFields) that want
// does not have: what the source no longer sets, and an update must remove. Only the
// map keys of a path count: a list is written whole, so what is stale inside one goes
// with it. Sorted, and none inside another.
func staleFieldPaths(owned *fieldpath.Set, want map[string]any) []FieldPath {
	if owned == nil {
		return nil
	}
	var stale []FieldPath
	owned.Iterate(func(p fieldpath.Path) {
		if path, found := missingPrefix(p, want); found && !notContent[path[0]] {
			stale = append(stale, path)
		}
	})
	slices.SortFunc(stale, func(a, b FieldPath) int { return strings.Compare(strings.Join(a, "\x00"), strings.Join(b, "\x00")) })
	stale = slices.CompactFunc(stale, func(a, b FieldPath) bool { return slices.Equal(a, b) })
	return slices.DeleteFunc(stale, func(p FieldPath) bool {
		return slices.ContainsFunc(stale, func(q FieldPath) bool { return len(q) < len(p) && slices.Equal(q, p[:len(q)]) })
	})
}

// missingPrefix walks p's field names through want and returns the path to the first
// one want lacks; found is false when want has every one, or p leaves the maps first.
func missingPrefix(p fieldpath.Path, want map[string]any) (FieldPath, bool) {
	var path FieldPath
	at := want
	for _, pe := range p {
		if pe.FieldName == nil || at == nil {
			return nil, false
		}
		path = append(path, *pe.FieldName)
		next, ok := at[*pe.FieldName]
		if !ok {
			return path, true
		}
		at, _ = next.(map[string]any)
	}
	return nil, false
}

// withoutPaths is a deep copy of fields without the values at paths.
func withoutPaths(fields map[string]any, paths []FieldPath) map[string]any {
	out := runtime.DeepCopyJSON(fields)
	for _, p := range paths {
		at := out
		for _, name := range p[:len(p)-1] {
			if at, _ = at[name].(map[string]any); at == nil {
				break
			}
		}
		if at != nil {
			delete(at, p[len(p)-1])
		}
	}
	return out
}

// overlay sets want's values into into, merging maps key by key and replacing any
// other value; into is modified, want's values are copied.
func overlay(into, want map[string]any) map[string]any {
	for k, w := range want {
		wm, isMap := w.(map[string]any)
		im, intoMap := into[k].(map[string]any)
		if isMap && intoMap {
			into[k] = overlay(im, wm)
			continue
		}
		into[k] = runtime.DeepCopyJSONValue(w)
	}
	return into
}

// nullsAt is patch (a JSON merge patch's content) with a null at each path, so that
// the patch removes those fields; patch is modified.
func nullsAt(patch map[string]any, paths []FieldPath) map[string]any {
	for _, p := range paths {
		at := patch
		for _, name := range p[:len(p)-1] {
			next, ok := at[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				at[name] = next
			}
			at = next
		}
		at[p[len(p)-1]] = nil
	}
	return patch
}

// fieldsJSON is fields in JSON, with map keys sorted (encoding/json's order): the same
// fields always write the same bytes.
func fieldsJSON(fields map[string]any) []byte {
	raw, err := json.Marshal(fields)
	if err != nil {
		// Fields decoded from the API server are JSON values. Anything else (a NaN)
		// is written in its Go form, whose maps fmt also prints sorted.
		return fmt.Appendf(nil, "%#v", fields)
	}
	return raw
}
