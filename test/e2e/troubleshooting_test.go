//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/test/harness"
)

// The commands docs/troubleshooting.md gives for a missing copy and for a replica that
// cannot be changed run as written, by kubectl and the plugin, against sources of each
// form the page names: a labelled ConfigMap and Secret and a ConfigMapSync (the page's
// names replaced with this test's random ones).
func TestTroubleshootingCommandsRun(t *testing.T) {
	harness.StartController(t, "--secrets=enabled")
	ctx := context.Background()
	platform, team := harness.NewNamespace(t, "trouble-src", nil), harness.NewNamespace(t, "trouble-to", nil)
	sync := "trouble-" + randomSuffix()
	harness.DeleteSourcesAtEnd(t, []string{platform}, sync)
	labelled := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: platform, Name: name,
			Labels:      map[string]string{v1alpha1.ReplicateLabel: v1alpha1.ReplicateLabelValue},
			Annotations: map[string]string{v1alpha1.TargetNamespacesAnnotation: team}}
	}
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: labelled("ca-bundle"), Data: map[string]string{"ca.crt": "x"}}))
	must(t, harness.K8s.Create(ctx, &corev1.Secret{ObjectMeta: labelled("db-credentials"), Data: map[string][]byte{"password": []byte("x")}}))
	must(t, harness.K8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: platform, Name: "ca"}, Data: map[string]string{"ca.crt": "x"}}))
	must(t, harness.K8s.Create(ctx, &v1alpha1.ConfigMapSync{ObjectMeta: metav1.ObjectMeta{Name: sync},
		Spec: v1alpha1.ConfigMapSyncSpec{SourceNamespace: platform, ConfigMapName: "ca", ReplicaSpec: v1alpha1.ReplicaSpec{DestinationNamespace: team}}}))
	harness.WaitForReplicas(t, platform, "ca-bundle", 30*time.Second, team)

	names := strings.NewReplacer("platform/", platform+"/", "-n platform", "-n "+platform, "-n team-a", "-n "+team,
		"--in team-a", "--in "+team, "ca-for-teams", sync)
	env := troubleshootingTools(t)
	for _, section := range []string{"My namespace has no copy", "I cannot edit or delete this ConfigMap"} {
		blocks := sectionBlocks(t, "../../docs/troubleshooting.md", section)
		if len(blocks) == 0 {
			t.Fatalf("docs/troubleshooting.md has no shell block under ## %s", section)
		}
		for _, block := range blocks {
			script := names.Replace(block)
			if regexp.MustCompile(`\b(platform|team-a)\b`).MatchString(script) {
				t.Fatalf("a name of the page is left in the script, which would read another namespace:\n%s", script)
			}
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Errorf("docs/troubleshooting.md, ## %s:\n%s\n%v\n%s", section, script, err, out)
			}
			if strings.Contains(script, `{.metadata.annotations.cmsync\.io/source}`) && !strings.Contains(string(out), platform+"/ca-bundle\n") {
				t.Errorf("the replica's source annotation, read as the page reads it, is not %s/ca-bundle:\n%s", platform, out)
			}
		}
	}
}

// troubleshootingTools is the environment the page's commands run in: kubectl (hack/kubectl)
// and the plugin on the PATH, as the administrator.
func troubleshootingTools(t *testing.T) []string {
	t.Helper()
	kubectl := buildKubectl(t)
	plugin := filepath.Join(filepath.Dir(kubectl), "kubectl-cmsync")
	if _, err := os.Lstat(plugin); err != nil {
		must(t, os.Symlink(os.Getenv("CMSYNC_PLUGIN"), plugin))
	}
	return append(os.Environ(), "PATH="+filepath.Dir(kubectl)+":"+os.Getenv("PATH"), "KUBECONFIG="+harness.AdminKubeconfig)
}

// sectionBlocks returns the shell blocks under the heading "## section" of page.
func sectionBlocks(t *testing.T, page, section string) []string {
	t.Helper()
	raw, err := os.ReadFile(page)
	must(t, err)
	_, text, found := strings.Cut(string(raw), "\n## "+section+"\n")
	if !found {
		return nil
	}
	text, _, _ = strings.Cut(text, "\n## ")
	var blocks []string
	for _, part := range strings.Split(text, "```sh\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		blocks = append(blocks, block)
	}
	return blocks
}
