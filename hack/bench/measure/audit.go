package measure

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"
)

// The bench reads the API server's audit log to learn when each write completed and
// whose it was: the clock of cmsync's phases stops at its last write's completion, as
// LIMIT's does at its last answer.

// AuditEvent is what the bench reads of one line of the API server's audit log.
type AuditEvent struct {
	UserAgent string    `json:"userAgent"`
	Verb      string    `json:"verb"`
	Stage     string    `json:"stage"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	Completed time.Time `json:"stageTimestamp"`
	// ResponseStatus is the HTTP status of the response.
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	ObjectRef struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"objectRef"`
}

// AuditTail reads the audit log's completed requests, from its start or from where it
// ended when opened; a line still being written is kept for the next read. Lines
// without every match are skipped before they are parsed.
type AuditTail struct {
	f       *os.File
	r       *bufio.Reader
	partial []byte
	match   [][]byte
}

// OpenAudit opens the audit log at path, from its start or from its end, for the
// lines that hold every match.
func OpenAudit(path string, fromEnd bool, match ...[]byte) (*AuditTail, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if fromEnd {
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			_ = f.Close() // read-only: nothing to lose
			return nil, err
		}
	}
	return &AuditTail{f: f, r: bufio.NewReaderSize(f, 1<<20), match: match}, nil
}

// EachWrite calls fn with every completed write request in the audit log at path.
func EachWrite(path string, fn func(e AuditEvent)) error {
	tail, err := OpenAudit(path, false)
	if err != nil {
		return err
	}
	defer tail.Close()
	tail.Read(fn)
	return nil
}

// Lines calls fn with every whole line logged since the last read that holds every
// match. The line is the reader's buffer: fn keeps a copy if it keeps it. While cmsync
// writes, the bench reads each of its lines on the cores the API server needs, so
// nothing is copied or parsed here that the caller does not ask for.
func (t *AuditTail) Lines(fn func(line []byte)) {
	for {
		chunk, err := t.r.ReadSlice('\n')
		if err != nil {
			// bufio.ErrBufferFull: a line longer than the buffer; io.EOF: the rest of
			// the line is not written yet.
			t.partial = append(t.partial, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			return
		}
		line := chunk
		if len(t.partial) > 0 {
			t.partial = append(t.partial, chunk...)
			line = t.partial
		}
		if t.matches(line) {
			fn(line)
		}
		t.partial = t.partial[:0]
	}
}

func (t *AuditTail) matches(line []byte) bool {
	for _, m := range t.match {
		if !bytes.Contains(line, m) {
			return false
		}
	}
	return true
}

// Read calls fn with every completed request logged since the last read.
func (t *AuditTail) Read(fn func(e AuditEvent)) {
	t.Lines(func(line []byte) {
		if e, ok := ParseAudit(line); ok {
			fn(e)
		}
	})
}

// ParseAudit reads a line of the audit log, reporting whether it is a completed request.
func ParseAudit(line []byte) (AuditEvent, bool) {
	var e AuditEvent
	return e, json.Unmarshal(line, &e) == nil && e.Stage == "ResponseComplete"
}

// Close closes the log.
func (t *AuditTail) Close() { _ = t.f.Close() } // read-only: nothing to lose

// HasVerb reports whether an audit log line is of a request with one of verbs, as its
// encoding spells it: a test to skip lines before they are parsed, never the decision.
func HasVerb(line []byte, verbs []string) bool {
	for _, verb := range verbs {
		if bytes.Contains(line, []byte(`"verb":"`+verb+`"`)) {
			return true
		}
	}
	return false
}

// Landed reports whether a write reached the API server's storage: a success, or a
// delete answered 404 (a retry of a delete that had completed but timed out).
func Landed(e AuditEvent) bool {
	return e.ResponseStatus.Code < 300 || e.Verb == "delete" && e.ResponseStatus.Code == 404
}
