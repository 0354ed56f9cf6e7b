//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"
)

// The suite's API server writes an audit log (auditLog); the checks read it through
// one record type: whole (eachAuditRecord) or as it grows (auditTail).

// auditRecord is one record of the API server's audit log.
type auditRecord struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		APIGroup    string `json:"apiGroup"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Received    time.Time         `json:"requestReceivedTimestamp"`
	Annotations map[string]string `json:"annotations"`
}

func (e auditRecord) isWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func (e auditRecord) code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// auditTail reads the records appended to the audit log since the last read.
type auditTail struct {
	offset int64
}

// newAuditTail starts at the log's current end.
func newAuditTail(t *testing.T) *auditTail {
	t.Helper()
	info, err := os.Stat(auditLog)
	must(t, err)
	return &auditTail{offset: info.Size()}
}

// next returns the complete records appended since the last call.
func (a *auditTail) next(t *testing.T) []auditRecord {
	t.Helper()
	var out []auditRecord
	offset, err := readAudit(a.offset, func(r auditRecord) { out = append(out, r) })
	must(t, err)
	a.offset = offset
	return out
}

// eachAuditRecord calls fn with every record of the suite's audit log.
func eachAuditRecord(fn func(auditRecord)) error {
	_, err := readAudit(0, fn)
	return err
}

// readAudit calls fn with every complete record from offset on, and returns the offset
// after the last one: a partial last line (still being written) is read next time.
func readAudit(offset int64, fn func(auditRecord)) (int64, error) {
	f, err := os.Open(auditLog)
	if err != nil {
		return offset, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			return offset, nil
		}
		if err != nil {
			return offset, err
		}
		offset += int64(len(line))
		var record auditRecord
		if json.Unmarshal(line, &record) == nil {
			fn(record)
		}
	}
}
