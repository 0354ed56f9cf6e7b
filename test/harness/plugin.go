//go:build e2e

package harness

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// PluginUser runs kubectl-cmsync as one identity: the connection flags that make it
// that identity are written here once, not in every test.
type PluginUser struct {
	flags []string
}

// PluginAdmin is the cluster administrator.
func PluginAdmin() PluginUser {
	return PluginUser{flags: []string{"--kubeconfig", AdminKubeconfig}}
}

// PluginAs is someone the administrator impersonates (kubectl's --as and --as-group),
// as their own kubeconfig would authenticate them: every request is authorized as
// theirs.
func PluginAs(as rest.ImpersonationConfig) PluginUser {
	u := PluginAdmin()
	u.flags = append(u.flags, "--as", as.UserName)
	for _, g := range as.Groups {
		u.flags = append(u.flags, "--as-group", g)
	}
	return u
}

// Run runs kubectl-cmsync and returns its standard output, its standard error and how
// it exited (an *exec.ExitError when it failed).
func (u PluginUser) Run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return RunPlugin(t, PluginBinary(t), append(args, u.flags...)...)
}

// Out runs kubectl-cmsync and returns its standard output; the test fails if it fails.
func (u PluginUser) Out(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := u.Run(t, args...)
	if err != nil {
		t.Fatalf("kubectl-cmsync %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout
}

// JSON runs kubectl-cmsync with -o json and decodes its answer into v, a pointer it
// first sets to its zero value: json.Unmarshal into a value used before keeps, in the
// elements of a slice it reuses, the fields the new answer leaves out.
func (u PluginUser) JSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := u.Out(t, append(args, "-o", "json")...)
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl-cmsync %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// PluginBinary is the kubectl-cmsync under test ($CMSYNC_PLUGIN).
func PluginBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("CMSYNC_PLUGIN")
	if bin == "" {
		t.Fatal("CMSYNC_PLUGIN is not set: run make e2e")
	}
	return bin
}

// RunPlugin runs the kubectl-cmsync at bin (one built as a user would get it, too).
func RunPlugin(t *testing.T, bin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// Plugin runs kubectl-cmsync as the administrator and returns its standard output.
func Plugin(t *testing.T, args ...string) string {
	t.Helper()
	return PluginAdmin().Out(t, args...)
}

// PluginRun runs kubectl-cmsync as the administrator (PluginUser.Run).
func PluginRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return PluginAdmin().Run(t, args...)
}

// PluginJSON runs kubectl-cmsync as the administrator with -o json (PluginUser.JSON).
func PluginJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	PluginAdmin().JSON(t, v, args...)
}
