//go:build e2e

package uninstall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/api/v1alpha1"
	"github.com/cmsync/cmsync/internal/testsupport/testkit"
	"github.com/cmsync/cmsync/test/harness"
)

// The sections of docs/uninstall.md the tests follow, by heading.
const (
	removeEverything = "Remove cmsync and every copy"
	keepTheCopies    = "Remove cmsync and keep the copies"
	alreadyGone      = "When cmsync is already gone"
)

// With cmsync running, the page's first section deletes every copy and every status,
// and leaves nothing of cmsync but the keys users wrote.
func TestUninstallRemovesEverything(t *testing.T) {
	c := install(t)
	copies := makeCopies(t)
	follow(t, removeEverything, c.Stop)
	expectNothingOfCmsync(t)
	expectNoReplicas(t, copies)
	expectSourcesKept(t, copies)
}

// The page's second section, then its third: the copies stay, as plain objects with
// their content and without cmsync's markers, and survive the deletion of their
// ConfigMapSync or SecretSync.
func TestUninstallKeepsTheCopies(t *testing.T) {
	c := install(t)
	copies := makeCopies(t)
	follow(t, keepTheCopies, c.Stop)
	follow(t, alreadyGone, nil)
	expectNothingOfCmsync(t)
	expectSourcesKept(t, copies)
	// The ConfigMapSync and SecretSync are gone: the garbage collector deletes anything
	// that still names them, so the copies are watched for a while.
	consistently(t, 5*time.Second, "the kept copies stay, plain and whole", func() error {
		for _, r := range copies.replicas {
			obj := emptyOf(r.kind)
			if err := harness.K8s.Get(context.Background(), r.key, obj); err != nil {
				return fmt.Errorf("kept copy %s %s: %w", r.kindName(), r.key, err)
			}
			if got := contentOf(obj); got != r.content || len(obj.GetOwnerReferences()) != 0 {
				return fmt.Errorf("kept copy %s %s holds %q (want %q), owner references %v", r.kindName(), r.key, got, r.content, obj.GetOwnerReferences())
			}
		}
		return nil
	})
}

// cmsync stopped without a word and its release uninstalled: the page's third section
// still leaves nothing of cmsync, the finalizers of the ConfigMapSyncs and SecretSyncs
// left included.
func TestUninstallAfterCmsyncIsGone(t *testing.T) {
	c := install(t)
	copies := makeCopies(t)
	c.Stop()
	if out, err := harness.Helm("uninstall", harness.Release, "--namespace", harness.ReleaseNamespace, "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	var syncs v1alpha1.ConfigMapSyncList
	must(t, harness.K8s.List(context.Background(), &syncs))
	if len(syncs.Items) == 0 || len(syncs.Items[0].Finalizers) == 0 {
		t.Fatalf("want ConfigMapSyncs left with cmsync's finalizer, got %v", syncs.Items)
	}
	follow(t, alreadyGone, nil)
	expectNothingOfCmsync(t)
	expectNoReplicas(t, copies)
}

// install installs the chart as the suite does, unless it is installed, and runs cmsync
// as its ServiceAccount until the test ends.
func install(t *testing.T) *harness.Controller {
	t.Helper()
	ctx := context.Background()
	err := harness.K8s.Get(ctx, client.ObjectKey{Namespace: harness.ReleaseNamespace, Name: harness.Release}, &appsv1.Deployment{})
	if apierrors.IsNotFound(err) {
		eventually(t, 2*time.Minute, "namespace "+harness.ReleaseNamespace+" not terminating", func() error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harness.ReleaseNamespace}}
			if err := gone(ns); err != nil && ns.DeletionTimestamp != nil {
				return err
			}
			return nil
		})
		must(t, harness.HelmChart("install", "--create-namespace", chartValues...))
		harness.WaitForProtection(t, true)
		harness.CmsyncKubeconfig, err = harness.ServiceAccountKubeconfig(harness.ServiceAccount)
	}
	must(t, err)
	return harness.StartController(t, "--secrets=enabled")
}

// follow runs the shell blocks of a section of docs/uninstall.md in order, with kubectl
// and helm as the administrator; beforeUninstall runs before the block that uninstalls
// the release, where the Deployment's Pods would stop.
func follow(t *testing.T, section string, beforeUninstall func()) {
	t.Helper()
	blocks := pageSections(t)[section]
	if len(blocks) == 0 {
		t.Fatalf("docs/uninstall.md has no shell block under ## %s", section)
	}
	env := toolsEnv(t)
	for _, block := range blocks {
		if strings.Contains(block, "helm uninstall") && beforeUninstall != nil {
			beforeUninstall()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("docs/uninstall.md, ## %s:\n%s\n%v\n%s", section, block, err, out)
		}
		t.Logf("## %s:\n%s%s", section, block, out)
	}
}

// pageSections reads the shell blocks of docs/uninstall.md by the heading they are under.
func pageSections(t *testing.T) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile("../../../docs/uninstall.md")
	must(t, err)
	sections := map[string][]string{}
	heading, block, open := "", []string(nil), false
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case !open && line == "```sh":
			open, block = true, make([]string, 0, 1)
		case open && line == "```":
			open, sections[heading] = false, append(sections[heading], strings.Join(block, "\n")+"\n")
		case open:
			block = append(block, line)
		case strings.HasPrefix(line, "## "):
			heading = strings.TrimPrefix(line, "## ")
		}
	}
	return sections
}

// toolsEnv is the environment the page's commands run in: kubectl (built from
// hack/kubectl) and helm on the PATH, the administrator's kubeconfig, helm's homes in
// the suite's directory.
func toolsEnv(t *testing.T) []string {
	t.Helper()
	bin := filepath.Join(harness.WorkDir, "bin")
	kubectl := filepath.Join(bin, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		build := exec.Command("go", "build", "-C", "../../../hack", "-o", kubectl, "./kubectl")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building kubectl: %v\n%s", err, out)
		}
		must(t, os.Symlink(harness.HelmBinary, filepath.Join(bin, "helm")))
	}
	return append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+harness.AdminKubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(harness.WorkDir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(harness.WorkDir, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(harness.WorkDir, "helm-data"))
}

// expectNothingOfCmsync checks that the cluster holds nothing of cmsync: no CRD (and so
// no object with its finalizer), no object of the release, not its namespace (with the
// Lease), and on no ConfigMap or Secret a key cmsync writes.
func expectNothingOfCmsync(t *testing.T) {
	t.Helper()
	for _, name := range []string{"configmapsyncs.cmsync.io", "secretsyncs.cmsync.io"} {
		if err := gone(&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Errorf("CRD %s: %v", name, err)
		}
	}
	eventually(t, 2*time.Minute, "namespace "+harness.ReleaseNamespace+" gone", func() error {
		return gone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: harness.ReleaseNamespace}})
	})
	for _, left := range releaseObjects(t) {
		t.Errorf("left by the release: %s", left)
	}
	for _, obj := range configMapsAndSecrets(t) {
		for key := range obj.GetAnnotations() {
			if v1alpha1.IsStatusAnnotation(key) || key == v1alpha1.SourceAnnotation {
				t.Errorf("%s %s/%s still carries %s", kindOf(obj), obj.GetNamespace(), obj.GetName(), key)
			}
		}
		for _, key := range []string{v1alpha1.SourceIDLabel, v1alpha1.ContentHashLabel} {
			if _, ok := obj.GetLabels()[key]; ok {
				t.Errorf("%s %s/%s still carries the label %s", kindOf(obj), obj.GetNamespace(), obj.GetName(), key)
			}
		}
		if obj.GetLabels()[v1alpha1.ManagedByLabel] == v1alpha1.ManagedByValue {
			t.Errorf("%s %s/%s is still labelled as a replica", kindOf(obj), obj.GetNamespace(), obj.GetName())
		}
	}
}

// expectNoReplicas checks that no copy is left in its target namespace.
func expectNoReplicas(t *testing.T, c copies) {
	t.Helper()
	for _, r := range c.replicas {
		err := harness.K8s.Get(context.Background(), r.key, emptyOf(r.kind))
		if !apierrors.IsNotFound(err) {
			t.Errorf("copy %s %s: want it deleted, got %v", r.kindName(), r.key, err)
		}
	}
}

// expectSourcesKept checks that the sources are still there, with their content: the
// page never deletes what users wrote.
func expectSourcesKept(t *testing.T, c copies) {
	t.Helper()
	for _, s := range c.sources {
		obj := emptyOf(s.kind)
		if err := harness.K8s.Get(context.Background(), s.key, obj); err != nil {
			t.Errorf("source %s %s: %v", s.kindName(), s.key, err)
		} else if got := contentOf(obj); got != s.content {
			t.Errorf("source %s %s holds %q, want %q", s.kindName(), s.key, got, s.content)
		}
	}
}

func gone(obj client.Object) error {
	err := harness.K8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("still there (deletion %v, finalizers %v)", obj.GetDeletionTimestamp(), obj.GetFinalizers())
}

// The shared helpers, under the names these tests use.
var (
	eventually   = testkit.Eventually
	consistently = testkit.Consistently
	must         = testkit.Must
)
