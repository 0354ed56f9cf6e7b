package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"testing"
)

// The suite's API server writes an audit log of every write, and of every request,
// reads and watches included, of one identity: auditedUser. A controller started under
// that identity (startAuditedController) is seen as the API server saw it, whatever
// client it built its requests with.

// auditedUser is the identity whose every request the API server audits.
const auditedUser = "cmsync-audited"

// auditLog is the API server's audit log (set by TestMain).
var auditLog string

// auditRecord is what these tests read of one record of the audit log.
type auditRecord struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
}

// auditedController is a controller running as auditedUser, and where the audit log
// stood when it started.
type auditedController struct {
	*controllerUnderTest
	from int64
}

// startAuditedController runs the controller as auditedUser, a cluster administrator
// (system:masters). One test at a time may use it: the identity is shared.
func startAuditedController(t *testing.T, opts ...controllerOption) *auditedController {
	t.Helper()
	_, cfg, err := controlPlane.AddUser(auditedUser, "system:masters")
	must(t, err)
	info, err := os.Stat(auditLog)
	must(t, err)
	return &auditedController{controllerUnderTest: startControllerAs(t, cfg, 0, opts...), from: info.Size()}
}

// Audited returns the records of the controller's requests in the audit log.
func (c *auditedController) Audited(t *testing.T) []auditRecord {
	t.Helper()
	f, err := os.Open(auditLog)
	must(t, err)
	defer func() { _ = f.Close() }()
	_, err = f.Seek(c.from, io.SeekStart)
	must(t, err)
	var records []auditRecord
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for lines.Scan() {
		var r auditRecord
		if json.Unmarshal(lines.Bytes(), &r) == nil && r.User.Username == auditedUser {
			records = append(records, r)
		}
	}
	must(t, lines.Err())
	return records
}

// about returns the verb and URI of every record about resource (its plural:
// "limitranges").
func about(records []auditRecord, resource string) []string {
	var out []string
	for _, r := range records {
		if r.ObjectRef != nil && r.ObjectRef.Resource == resource {
			out = append(out, r.Verb+" "+r.RequestURI)
		}
	}
	return out
}
