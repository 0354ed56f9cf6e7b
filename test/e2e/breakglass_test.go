//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// The break-glass of docs/protected-replicas.md, run as written by kubectl: its first
// command lets an administrator delete a replica, its second puts the protection back,
// and cmsync restores the replica.
func TestBreakGlass(t *testing.T) {
	harness.StartController(t)
	ctx := context.Background()
	off, on := breakGlassCommands(t)
	src, target := harness.NewNamespace(t, "glass-src", nil), harness.NewNamespace(t, "glass-to", nil)
	harness.DeleteSourcesAtEnd(t, []string{src})
	source := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src, Name: "glass",
		Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
		Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: target}}, Data: map[string]string{"v": "1"}}
	must(t, harness.K8s.Create(ctx, source))
	harness.WaitForReplicas(t, src, "glass", 30*time.Second, target)
	replica := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target, Name: "glass"}}
	expectRefused(t, "deleting a replica", harness.K8s.Delete(ctx, replica), "is a replica of "+src+"/glass")

	kubectl := buildKubectl(t)
	run := func(script string) {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+harness.AdminKubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the break-glass's commands:\n%s\n%v\n%s", script, err, out)
		}
	}
	run(off)
	restored := false
	defer func() { // the protection back for the next scenarios, also when this one fails
		if !restored {
			run(on)
		}
	}()
	harness.WaitForProtection(t, false)
	must(t, harness.K8s.Delete(ctx, replica))
	run(on)
	restored = true
	harness.WaitForProtection(t, true)
	harness.WaitForReplicas(t, src, "glass", 30*time.Second, target)
}

// breakGlassCommands reads the break-glass block of docs/protected-replicas.md: the
// commands before its "# ... the change ..." line, and those after it.
func breakGlassCommands(t *testing.T) (off, on string) {
	t.Helper()
	raw, err := os.ReadFile("../../docs/protected-replicas.md")
	must(t, err)
	_, section, found := strings.Cut(string(raw), "\n## Break-glass\n")
	_, block, _ := strings.Cut(section, "```sh\n")
	block, _, closed := strings.Cut(block, "```")
	off, on, change := strings.Cut(block, "# ... the change ...\n")
	if !found || !closed || !change || !strings.Contains(off, "kubectl") || !strings.Contains(on, "kubectl") {
		t.Fatalf("docs/protected-replicas.md has no break-glass block split by its change: %q", block)
	}
	return off, on
}
