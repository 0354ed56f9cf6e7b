//go:build e2e

package harness

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// The suite's API server writes an audit log (auditLog); the checks read it through
// one record type: whole (eachAuditRecord) or as it grows (auditTail).

// AuditRecord is one record of the API server's audit log.
type AuditRecord struct {
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

// IsWrite tells whether the request is a write.
func (e AuditRecord) IsWrite() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Code is the answer's HTTP status, 0 when the record has none.
func (e AuditRecord) Code() int {
	if e.ResponseStatus == nil {
		return 0
	}
	return e.ResponseStatus.Code
}

// AuditTail reads the records appended to the audit log since the last read.
type AuditTail struct {
	offset int64
}

// NewAuditTail starts at the log's current end.
func NewAuditTail(t *testing.T) *AuditTail {
	t.Helper()
	info, err := os.Stat(AuditLog)
	testkit.Must(t, err)
	return &AuditTail{offset: info.Size()}
}

// Next returns the complete records appended since the last call.
func (a *AuditTail) Next(t *testing.T) []AuditRecord {
	t.Helper()
	var out []AuditRecord
	offset, err := readAudit(a.offset, func(r AuditRecord) { out = append(out, r) })
	testkit.Must(t, err)
	a.offset = offset
	return out
}

// EachAuditRecord calls fn with every record of the suite's audit log.
func EachAuditRecord(fn func(AuditRecord)) error {
	_, err := readAudit(0, fn)
	return err
}

// readAudit calls fn with every complete record from offset on, and returns the offset
// after the last one: a partial last line (still being written) is read next time.
func readAudit(offset int64, fn func(AuditRecord)) (int64, error) {
	f, err := os.Open(AuditLog)
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
		var record AuditRecord
		if json.Unmarshal(line, &record) == nil {
			fn(record)
		}
	}
}
