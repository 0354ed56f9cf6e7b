package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cmsync/cmsync/desired"
)

// The reasons the docs name are the code's: docs/reference.md's table of reasons has a
// row for each reason of api/v1alpha1/keys.go and says where each is given as
// desired.Reasons declares it (the functions that choose reasons are tested against
// that table in desired/reasons_test.go), and every other page's list of reasons is one
// of those columns.

// codeReasonColumns are where the code gives each reason (desired.Reasons, the table
// every reason is declared in), by the heading of the column of docs/reference.md's
// table that says it. Every Reason constant of keys.go must be in the table.
func codeReasonColumns(t *testing.T) (all map[string]bool, columns map[string]map[string]bool) {
	t.Helper()
	all = map[string]bool{}
	for name, value := range keysConstants(t) {
		if strings.HasPrefix(name, "Reason") {
			all[value] = true
		}
	}
	declared := map[string]bool{}
	for _, r := range desired.Reasons {
		declared[r.Name] = true
	}
	if got, want := sortedKeys(declared), sortedKeys(all); !slices.Equal(got, want) {
		t.Fatalf("desired.Reasons declares %v; keys.go has the reasons %v", got, want)
	}
	given := func(where desired.Given) map[string]bool {
		set := map[string]bool{}
		for _, name := range desired.ReasonsGiven(where) {
			set[name] = true
		}
		return set
	}
	columns = map[string]map[string]bool{
		"source Event":                      given(desired.SourceEvent),
		"ConfigMapSync or SecretSync Event": given(desired.SyncEvent),
		"`Ready`":                           given(desired.ReadyCondition),
		"`failedNamespaces`":                given(desired.FailedNamespace),
		"`cmsync_sources_not_synced`":       given(desired.NotSyncedMetric),
	}
	return all, columns
}

func sortedKeys(set map[string]bool) []string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestReferenceReasonsAreTheCodes reads docs/reference.md's table of reasons: a row for
// every Reason constant of keys.go, and in each column "yes" exactly where the code
// gives that reason.
func TestReferenceReasonsAreTheCodes(t *testing.T) {
	all, columns := codeReasonColumns(t)
	_, section, ok := strings.Cut(reference(t), "\n## Reasons\n")
	if !ok {
		t.Fatal("docs/reference.md has no section ## Reasons")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var headings []string
	rows := map[string]bool{}
	documented := map[string]map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if headings == nil {
			headings = cells
			continue
		}
		reason := strings.Trim(cells[0], "`")
		rows[reason] = true
		for i, cell := range cells[1:] {
			if cell == "yes" {
				if documented[headings[i+1]] == nil {
					documented[headings[i+1]] = map[string]bool{}
				}
				documented[headings[i+1]][reason] = true
			}
		}
	}
	if got, want := sortedKeys(rows), sortedKeys(all); !slices.Equal(got, want) {
		t.Errorf("docs/reference.md#reasons has rows %v; keys.go has the reasons %v", got, want)
	}
	for heading, reasons := range columns {
		if got, want := sortedKeys(documented[heading]), sortedKeys(reasons); !slices.Equal(got, want) {
			t.Errorf("docs/reference.md#reasons, column %s: %v; the code gives %v", heading, got, want)
		}
	}
}

var (
	// reasonList is a list of reasons in prose: "reason `A`", "reasons: `A` (why), `B`
	// or `C`".
	reasonList = regexp.MustCompile("\\breasons?:? (`[A-Z][A-Za-z]+`( \\([^()]*\\))?((,? (or|and) |, )`[A-Z][A-Za-z]+`( \\([^()]*\\))?)*)")
	// reasonEvent is "a `Reason` Event".
	reasonEvent   = regexp.MustCompile("`([A-Z][A-Za-z]+)` [Ee]vents?\\b")
	quotedName    = regexp.MustCompile("`([A-Z][A-Za-z]+)`")
	parenthetical = regexp.MustCompile(`\([^()]*\)`)
	// reasonSubject is what a list of reasons is about: the last of these before it in
	// its sentence.
	reasonSubject = regexp.MustCompile("`Ready`|Events?\\b|`failedNamespaces`")
	blockStart    = regexp.MustCompile(`^(\s*[-*] |\s*\d+\. |#|\|)`)
)

// othersReasons are reasons of other programs' Events the docs name.
var othersReasons = map[string]bool{
	"Pulled": true, // the kubelet's, in development.md
}

// TestDocsReasonsAreTheCodes reads every list of reasons in the prose of the docs: each
// names reasons of keys.go only, and a list about a Ready condition, about the Events of
// a source or of a ConfigMapSync or SecretSync, or about failedNamespaces names exactly
// the reasons the code gives there (the columns of docs/reference.md#reasons).
func TestDocsReasonsAreTheCodes(t *testing.T) {
	all, columns := codeReasonColumns(t)
	lists := 0
	for _, page := range docPages(t) {
		_, prose := fencedBlocks(t, page)
		for _, block := range proseBlocks(prose) {
			for _, m := range reasonEvent.FindAllStringSubmatch(block, -1) {
				if !all[m[1]] && !othersReasons[m[1]] {
					t.Errorf("%s: %q: cmsync has no reason %s", page, m[0], m[1])
				}
			}
			for _, at := range reasonList.FindAllStringSubmatchIndex(block, -1) {
				lists++
				list := block[at[2]:at[3]]
				named := map[string]bool{}
				for _, m := range quotedName.FindAllStringSubmatch(parenthetical.ReplaceAllString(list, ""), -1) {
					named[m[1]] = true
					if !all[m[1]] {
						t.Errorf("%s: %q: cmsync has no reason %s", page, list, m[1])
					}
				}
				start := strings.LastIndex(block[:at[0]], ". ") + 1 // 0 without one
				sentence := block[start:at[0]]
				subjects := reasonSubject.FindAllString(sentence, -1)
				if len(subjects) == 0 {
					continue // one reason named in passing, not a list of where it is given
				}
				var column string
				switch subject := subjects[len(subjects)-1]; {
				case subject == "`Ready`":
					column = "`Ready`"
				case subject == "`failedNamespaces`":
					column = "`failedNamespaces`"
				case strings.Contains(sentence, "ConfigMapSync") || strings.Contains(sentence, "SecretSync"):
					column = "ConfigMapSync or SecretSync Event"
				default:
					column = "source Event"
				}
				if got, want := sortedKeys(named), sortedKeys(columns[column]); !slices.Equal(got, want) {
					t.Errorf("%s: %q names %v for the %s; the code gives %v", page, strings.TrimSpace(block[start:at[1]]), got, column, want)
				}
			}
		}
	}
	if lists < 5 {
		t.Errorf("found only %d lists of reasons in the docs", lists)
	}
}

// proseBlocks joins the lines of prose into paragraphs, list items, headings and table
// rows, each on one line with single spaces.
func proseBlocks(lines []string) []string {
	var blocks []string
	start := 0
	flush := func(end int) {
		if text := strings.Join(strings.Fields(strings.Join(lines[start:end], " ")), " "); text != "" {
			blocks = append(blocks, text)
		}
		start = end
	}
	for i, line := range lines {
		if strings.TrimSpace(line) == "" || blockStart.MatchString(line) {
			flush(i)
		}
	}
	flush(len(lines))
	return blocks
}
