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
)

// Plugin runs kubectl-cmsync as the administrator and returns its standard output.
func Plugin(t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := PluginRun(t, args...)
	if err != nil {
		t.Fatalf("kubectl-cmsync %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return stdout
}

// PluginRun runs kubectl-cmsync as the administrator and returns its standard output,
// its standard error and how it exited (an *exec.ExitError when it failed).
func PluginRun(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin := os.Getenv("CMSYNC_PLUGIN")
	if bin == "" {
		t.Fatal("CMSYNC_PLUGIN is not set: run make e2e")
	}
	cmd := exec.Command(bin, append(args, "--kubeconfig", AdminKubeconfig)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// PluginJSON runs kubectl-cmsync with -o json and decodes its answer into v, a pointer
// it first sets to its zero value: json.Unmarshal into a value used before keeps, in the
// elements of a slice it reuses, the fields the new answer leaves out.
func PluginJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := Plugin(t, append(args, "-o", "json")...)
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("kubectl-cmsync %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
