package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
)

// A tenant writes cmsync's status annotations on a source cmsync does not serve: the
// status table shows them escaped, one row per source, with nothing hidden.
func TestStatusEscapesWhatATenantWrote(t *testing.T) {
	forged := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app", Annotations: map[string]string{
		v1alpha1.StatusAnnotation:  "Synced",
		v1alpha1.SyncedAnnotation:  "3/3",
		v1alpha1.MessageAnnotation: "ok\nConfigMap\tteam-b/db\tSynced\t9/9\t-\tall good\x1b[8m hidden\x1b[0m",
	}}}
	plain := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team-c", Name: "größe", Annotations: map[string]string{
		v1alpha1.StatusAnnotation: "Degraded", v1alpha1.MessageAnnotation: `conflict in team-d: "größe" exists — ⚠ not cmsync's`,
	}}}
	var out bytes.Buffer
	w := tabwriter.NewWriter(&out, 0, 4, 2, ' ', 0)
	printStatus(w, []StatusRow{annotatedRow(configMapKind, forged), annotatedRow(configMapKind, plain)})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want the header and 2 rows:\n%s", len(lines), out.String())
	}
	if strings.ContainsAny(out.String(), "\x1b\t") {
		t.Errorf("an escape or a tab reached the terminal:\n%q", out.String())
	}
	for _, want := range []string{`ok\nConfigMap\tteam-b/db\tSynced`, `all good\x1b[8m hidden\x1b[0m`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row %q does not show %q", lines[1], want)
		}
	}
	if !strings.Contains(lines[2], `conflict in team-d: "größe" exists — ⚠ not cmsync's`) || !strings.Contains(lines[2], "team-c/größe") {
		t.Errorf("plain text changed: %q", lines[2])
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode and 日本語":        "plain text, ünïcode and 日本語",
		`a backslash \n stays`:               `a backslash \n stays`,
		"line\nbreak\r\ttab":                 `line\nbreak\r\ttab`,
		"\x1b[31mred\x1b[0m":                 `\x1b[31mred\x1b[0m`,
		"bidi \u202eoverride\u202c":          `bidi \u202eoverride\u202c`,
		"next line \u0085, separator \u2028": `next line \u0085, separator \u2028`,
		"not UTF-8 \xff\xfe":                 `not UTF-8 \xff\xfe`,
		"bell \a and NUL \x00":               `bell \a and NUL \x00`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
	var out bytes.Buffer
	printf(&out, "%s|%v|%d\n", errors.New("joined\nerror"), aStringer("list\x1b"), 7)
	if got := out.String(); got != `joined\nerror|list\x1b|7`+"\n" {
		t.Errorf("printf escaped its arguments as %q", got)
	}
}

// aStringer is a Stringer, as the permissions the plugin names are.
type aStringer string

func (s aStringer) String() string { return string(s) }
