//go:build release

package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cmsync/cmsync/internal/testsupport/controlplane"
	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// cluster is a real kube-apiserver and etcd (no kubelet: Pods are never run), the
// kubeconfig that reaches it as a cluster administrator, and kubectl.
type cluster struct {
	k8s     client.Client
	kubectl string
}

// startCluster starts the control plane and points KUBECONFIG at it for the test, as
// a user's kubeconfig points at their cluster.
func startCluster(t *testing.T) cluster {
	t.Helper()
	env, err := controlplane.Start()
	testkit.Must(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	testkit.Must(t, os.WriteFile(kubeconfig, env.KubeConfig, 0o600))
	t.Setenv("KUBECONFIG", kubeconfig)
	scheme := runtime.NewScheme()
	testkit.Must(t, corev1.AddToScheme(scheme))
	testkit.Must(t, appsv1.AddToScheme(scheme))
	testkit.Must(t, apiextensionsv1.AddToScheme(scheme))
	k8s, err := client.New(env.Config, client.Options{Scheme: scheme})
	testkit.Must(t, err)
	// kubectl itself (hack/kubectl), at the project's Kubernetes version.
	kubectl := filepath.Join(dir, "kubectl")
	if out, err := exec.Command("go", "build", "-C", "../../hack", "-o", kubectl, "./kubectl").CombinedOutput(); err != nil {
		t.Fatalf("building kubectl: %v\n%s", err, out)
	}
	return cluster{k8s: k8s, kubectl: kubectl}
}

// make install from this checkout, through the test's registry, onto a real API
// server: bad input changes nothing; the Deployment runs the image ko pushed, pinned
// by its digest; the CRDs are served; a second run keeps the values of the first; the
// release asset of the CRDs applies over what the install wrote.
func TestInstallFromCheckout(t *testing.T) {
	r := startRegistry(t)
	c := startCluster(t)
	vars := []string{"KUBECTL=" + c.kubectl, "IMAGE_TAG=install-test", "INSTALL_WAIT="}

	for _, bad := range [][]string{nil, {"REGISTRY=https://" + r.host + "/team"}, {"REGISTRY=" + r.host + "/team:v1"}} {
		out, err := r.makeTarget(t, "install", append(slices.Clone(vars), bad...)...)
		if err == nil || !strings.Contains(out, "make install REGISTRY=") && !strings.Contains(out, "host[:port]") {
			t.Errorf("make install %v: want a refusal that says how to name the registry, got %v:\n%s", bad, err, out)
		}
	}
	checkNothingInstalled(t, c)

	registry := "REGISTRY=" + r.host + "/team"
	start := time.Now()
	first := builtImage(r.mustMake(t, "install", append(slices.Clone(vars), registry, "HELM_ARGS=--set secrets.enabled=true")...))
	t.Logf("make install: %s", time.Since(start).Round(time.Second))
	checkInstalled(t, r, c, first, r.host+"/team/cmsync:install-test")

	// Again from the same checkout, without the value: the same image, and the value kept.
	start = time.Now()
	second := builtImage(r.mustMake(t, "install", append(slices.Clone(vars), registry)...))
	t.Logf("make install again: %s", time.Since(start).Round(time.Second))
	if second != first {
		t.Errorf("the second make install pinned %s, the first %s", second, first)
	}
	checkInstalled(t, r, c, second, r.host+"/team/cmsync:install-test")

	// The release asset that docs/upgrade.md applies, over the CRDs of the install.
	r.mustMake(t, "crds-dist", "BIN="+r.dir)
	if out, err := exec.Command(c.kubectl, "apply", "--server-side", "--force-conflicts", "-f",
		filepath.Join(r.dir, "crds", "cmsync-crds.yaml")).CombinedOutput(); err != nil {
		t.Fatalf("applying the CRDs' release asset: %v\n%s", err, out)
	}
	checkCRDsServed(t, c)
}

// checkNothingInstalled: no CRD of cmsync's, no namespace cmsync-system.
func checkNothingInstalled(t *testing.T, c cluster) {
	t.Helper()
	ctx := context.Background()
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	testkit.Must(t, c.k8s.List(ctx, crds))
	if len(crds.Items) > 0 {
		t.Errorf("a refused make install left %d CRDs", len(crds.Items))
	}
	err := c.k8s.Get(ctx, client.ObjectKey{Name: "cmsync-system"}, &corev1.Namespace{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("a refused make install left namespace cmsync-system (%v)", err)
	}
}

// checkInstalled: the Deployment's image is image, pinned by the digest the registry
// serves under tag, with the value of the first install (secrets.enabled) in force.
func checkInstalled(t *testing.T, r registry, c cluster, image, tag string) {
	t.Helper()
	deployment := &appsv1.Deployment{}
	testkit.Must(t, c.k8s.Get(context.Background(), client.ObjectKey{Namespace: "cmsync-system", Name: "cmsync"}, deployment))
	container := deployment.Spec.Template.Spec.Containers[0]
	if container.Image != image || !strings.Contains(image, "@sha256:") {
		t.Errorf("the Deployment runs %q, want %q (ko's image, by digest)", container.Image, image)
	}
	testkit.Must(t, r.withEnv(func() error {
		ref, err := name.ParseReference(tag)
		if err != nil {
			return err
		}
		pushed, err := remote.Head(ref, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(r.transport(t)))
		if err != nil {
			return err
		}
		if want := ref.Context().Name() + "@" + pushed.Digest.String(); image != want {
			t.Errorf("make install pinned %s, but the registry serves %s under %s", image, want, tag)
		}
		return nil
	}))
	if !slices.Contains(container.Args, "--secrets=enabled") {
		t.Errorf("the value given to the first make install is lost: args %v", container.Args)
	}
	checkCRDsServed(t, c)
}

// checkCRDsServed: the ConfigMapSync and SecretSync CRDs are established.
func checkCRDsServed(t *testing.T, c cluster) {
	t.Helper()
	for _, crdName := range []string{"configmapsyncs.cmsync.io", "secretsyncs.cmsync.io"} {
		testkit.Eventually(t, 30*time.Second, "CRD "+crdName+" established", func() error {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.k8s.Get(context.Background(), client.ObjectKey{Name: crdName}, crd); err != nil {
				return err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("conditions %v", crd.Status.Conditions)
		})
	}
}
