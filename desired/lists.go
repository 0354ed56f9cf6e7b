package desired

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// checkListLength says why the comma list value of a list annotation has too many
// entries, or nil. Every pass matches each entry against every namespace, data key or
// metadata key, so a source's lists are bounded (v1alpha1.MaxListEntries, the bound
// the CRDs put on the explicit form's lists) before anything is matched; hint says
// how to name many items in fewer entries.
func checkListLength(annotation, value, hint string) error {
	// A list with fewer commas than the bound has no more entries than it: the common
	// case costs no split.
	if strings.Count(value, ",") < v1alpha1.MaxListEntries {
		return nil
	}
	n := len(nonEmptyEntries(value))
	if n <= v1alpha1.MaxListEntries {
		return nil
	}
	return fmt.Errorf("%s has %d entries, over the limit of %d: %s", annotation, n, v1alpha1.MaxListEntries, hint)
}

// namePatterns are the include or the exclude entries of a list of namespaces or of
// keys: exact names, looked up in a set, and globs, each matched once. Every pass asks
// about every namespace or key, so a list of names costs one lookup per item, not one
// match per entry, and an entry repeated costs nothing more.
type namePatterns struct {
	names sets.Set[string]
	globs []string
}

// namePatternsOf sorts validated entries into names and globs. An entry without "*",
// "?", "[" or "\\" matches only itself: path.Match reads every other character
// literally.
func namePatternsOf(entries []string) namePatterns {
	var p namePatterns
	for _, entry := range entries {
		switch {
		case strings.ContainsAny(entry, `*?[\`):
			if !slices.Contains(p.globs, entry) {
				p.globs = append(p.globs, entry)
			}
		case p.names == nil:
			p.names = sets.New(entry)
		default:
			p.names.Insert(entry)
		}
	}
	return p
}

func (p namePatterns) isEmpty() bool { return p.names.Len() == 0 && len(p.globs) == 0 }

// match returns the entry that matches name: name itself when it is listed, else the
// first glob that matches it.
func (p namePatterns) match(name string) (string, bool) {
	if p.names.Has(name) {
		return name, true
	}
	for _, glob := range p.globs {
		if globMatch(glob, name) {
			return glob, true
		}
	}
	return "", false
}
