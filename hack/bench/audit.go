package main

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

// auditEvent is what the bench reads of one line of the API server's audit log.
type auditEvent struct {
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

// auditedWrites calls fn with every completed write request in the audit log.
func (b *bench) auditedWrites(fn func(e auditEvent)) {
	tail := b.openAudit(false)
	defer tail.close()
	tail.read(fn)
}

// auditTail reads the audit log's completed requests, from its start or from where it
// ended when opened; a line still being written is kept for the next read. Lines
// without every match are skipped before they are parsed.
type auditTail struct {
	f       *os.File
	r       *bufio.Reader
	partial []byte
	match   [][]byte
}

func (b *bench) openAudit(fromEnd bool, match ...[]byte) *auditTail {
	f, err := os.Open(b.audit)
	must(err)
	if fromEnd {
		_, err = f.Seek(0, io.SeekEnd)
		must(err)
	}
	return &auditTail{f: f, r: bufio.NewReaderSize(f, 1<<20), match: match}
}

// lines calls fn with every whole line logged since the last read that holds every
// match. The line is the reader's buffer: fn keeps a copy if it keeps it. While cmsync
// writes, the bench reads each of its lines on the cores the API server needs, so
// nothing is copied or parsed here that the caller does not ask for.
func (t *auditTail) lines(fn func(line []byte)) {
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

func (t *auditTail) matches(line []byte) bool {
	for _, m := range t.match {
		if !bytes.Contains(line, m) {
			return false
		}
	}
	return true
}

// read calls fn with every completed request logged since the last read.
func (t *auditTail) read(fn func(e auditEvent)) {
	t.lines(func(line []byte) {
		if e, ok := parseAudit(line); ok {
			fn(e)
		}
	})
}

// parseAudit reads a line of the audit log, reporting whether it is a completed request.
func parseAudit(line []byte) (auditEvent, bool) {
	var e auditEvent
	return e, json.Unmarshal(line, &e) == nil && e.Stage == "ResponseComplete"
}

func (t *auditTail) close() { _ = t.f.Close() } // read-only: nothing to lose

// hasVerb reports whether an audit log line is of a request with one of verbs, as its
// encoding spells it: a test to skip lines before they are parsed, never the decision.
func hasVerb(line []byte, verbs []string) bool {
	for _, verb := range verbs {
		if bytes.Contains(line, []byte(`"verb":"`+verb+`"`)) {
			return true
		}
	}
	return false
}
