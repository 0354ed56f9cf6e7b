package measure

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// A line of the audit log as kube-apiserver writes it (level Metadata), of a create of
// cmsync's.
const auditedCreate = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete",` +
	`"requestURI":"/api/v1/namespaces/bench-0994/configmaps?fieldManager=cmsync","verb":"create","userAgent":"cmsync",` +
	`"objectRef":{"resource":"configmaps","namespace":"bench-0994","name":"p-r03-000","apiVersion":"v1"},` +
	`"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-11-27T23:39:50.706578Z",` +
	`"stageTimestamp":"2026-11-27T23:39:50.718198Z"}`

func TestAuditTailGivesWholeLinesWithEveryMatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	log, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = log.Close() }()
	write := func(s string) {
		t.Helper()
		if _, err := log.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	tail, err := OpenAudit(path, false, []byte(`"userAgent":"cmsync`), []byte(`"name":"p-`))
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	tail.r = bufio.NewReaderSize(tail.f, 16) // bufio's smallest: most lines are longer
	var got []string
	read := func() []string {
		got = got[:0]
		tail.Lines(func(line []byte) { got = append(got, string(line)) })
		return got
	}

	write(`{"userAgent":"cmsync","objectRef":{"name":"p-1"}}` + "\n" +
		`{"userAgent":"kubectl","objectRef":{"name":"p-2"}}` + "\n" +
		`{"userAgent":"cmsync","objectRef":{"name":"q-3"}}` + "\n" +
		`{"userAgent":"cmsync","objec`)
	if want := []string{`{"userAgent":"cmsync","objectRef":{"name":"p-1"}}` + "\n"}; !slices.Equal(read(), want) {
		t.Fatalf("first read: got %q, want %q", got, want)
	}
	write(`tRef":{"name":"p-4"}}` + "\n")
	if want := []string{`{"userAgent":"cmsync","objectRef":{"name":"p-4"}}` + "\n"}; !slices.Equal(read(), want) {
		t.Fatalf("the line finished since: got %q, want %q", got, want)
	}
	if read(); len(got) != 0 {
		t.Fatalf("nothing new written: got %q", got)
	}
}

func TestParseAuditReadsACompletedWrite(t *testing.T) {
	e, ok := ParseAudit([]byte(auditedCreate + "\n"))
	if !ok {
		t.Fatal("a completed request's line was not read")
	}
	completed := time.Date(2026, 11, 27, 23, 39, 50, 718198000, time.UTC)
	if e.UserAgent != "cmsync" || e.Verb != "create" || e.ResponseStatus.Code != 201 || !e.Completed.Equal(completed) ||
		e.ObjectRef.Resource != "configmaps" || e.ObjectRef.Namespace != "bench-0994" || e.ObjectRef.Name != "p-r03-000" {
		t.Fatalf("read %+v", e)
	}
	if !HasVerb([]byte(auditedCreate), []string{"update", "create"}) || HasVerb([]byte(auditedCreate), []string{"delete"}) {
		t.Fatal("HasVerb does not tell the line's verb")
	}
	if _, ok := ParseAudit([]byte(`{"stage":"RequestReceived","verb":"create"}`)); ok {
		t.Fatal("a request not yet completed was read as completed")
	}
}
