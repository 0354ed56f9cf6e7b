package desired

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseScope parses --namespaces, the namespaces cmsync serves: a comma list of
// namespace names, sorted and without repeats; empty serves every namespace. A glob
// is refused: the scope decides what cmsync may read and write, and each namespace
// of it needs its own grant (a Role), so it is listed name by name.
func ParseScope(value string) ([]string, error) {
	var names []string
	for _, entry := range nonEmptyEntries(value) {
		if strings.ContainsAny(entry, "*?[") {
			return nil, fmt.Errorf("entry %q is a glob: list each namespace by name (each needs its own Role)", entry)
		}
		if problems := validation.IsDNS1123Label(entry); len(problems) > 0 {
			return nil, fmt.Errorf("entry %q is not a namespace name: %s", entry, strings.Join(problems, "; "))
		}
		names = append(names, entry)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
