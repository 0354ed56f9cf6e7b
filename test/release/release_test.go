//go:build release

// Package release runs cmsync's release path against a registry of its own: the CNCF
// distribution registry on loopback, with TLS and htpasswd authentication. Every step is
// the Makefile target the release workflow runs: the base image, ko's multi-arch image
// with its SBOM, the OCI chart, cosign signatures and their verification.
package release

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/bcrypt"
	"k8s.io/apimachinery/pkg/api/equality"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	certutil "k8s.io/client-go/util/cert"

	"github.com/cmsync/cmsync/internal/testsupport/testkit"
)

// registry is the test's registry and the environment that reaches it.
type registry struct {
	host string   // 127.0.0.1:port
	env  []string // DOCKER_CONFIG and SSL_CERT_FILE for the tools
	ca   string   // its certificate, for helm's --ca-file
	dir  string
}

func startRegistry(t *testing.T) registry {
	t.Helper()
	bin := os.Getenv("REGISTRY_BIN")
	if bin == "" {
		t.Fatal("REGISTRY_BIN is not set: run make test-release")
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	testkit.Must(t, err)
	host := l.Addr().String()
	_ = l.Close()
	cert, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	testkit.Must(t, err)
	password := testkit.RandomSuffix() + testkit.RandomSuffix()
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	testkit.Must(t, err)
	files := map[string][]byte{
		"tls.crt": cert, "tls.key": key, "htpasswd": []byte("release:" + string(hash) + "\n"),
		"config.yml": []byte(fmt.Sprintf(`version: 0.1
log: {level: warn}
storage: {filesystem: {rootdirectory: %q}, delete: {enabled: true}}
http: {addr: %q, tls: {certificate: %q, key: %q}}
auth: {htpasswd: {realm: cmsync-release-test, path: %q}}
`, filepath.Join(dir, "data"), host, filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "htpasswd"))),
		"docker/config.json": []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte("release:"+password)))),
	}
	testkit.Must(t, os.MkdirAll(filepath.Join(dir, "docker"), 0o700))
	for file, content := range files {
		testkit.Must(t, os.WriteFile(filepath.Join(dir, file), content, 0o600))
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	testkit.Must(t, err)
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = log, log
	testkit.Must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		_ = log.Close()
	})
	r := registry{host: host, ca: filepath.Join(dir, "tls.crt"), dir: dir,
		env: []string{"DOCKER_CONFIG=" + filepath.Join(dir, "docker"), "SSL_CERT_FILE=" + filepath.Join(dir, "tls.crt")}}
	// The registry answers 401 to an anonymous client: it is up, and it wants credentials.
	testkit.Eventually(t, 30*time.Second, "registry up", func() error {
		return r.withEnv(func() error {
			resp, err := (&http.Client{Transport: r.transport(t)}).Get("https://" + host + "/v2/")
			if err != nil {
				return err
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				return fmt.Errorf("GET /v2/: %d, want 401", resp.StatusCode)
			}
			return nil
		})
	})
	return r
}

// transport trusts the registry's certificate alone. Not SSL_CERT_FILE: Go reads the
// system's roots once per process, and the next test's registry has another certificate.
func (r registry) transport(t *testing.T) http.RoundTripper {
	t.Helper()
	ca, err := os.ReadFile(r.ca)
	testkit.Must(t, err)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatalf("no certificate in %s", r.ca)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return transport
}

// withEnv runs fn with the registry's environment set in this process too (ggcr reads
// DOCKER_CONFIG like the tools do).
func (r registry) withEnv(fn func() error) error {
	for _, kv := range r.env {
		k, v, _ := strings.Cut(kv, "=")
		old, had := os.LookupEnv(k)
		if err := os.Setenv(k, v); err != nil {
			return err
		}
		defer func() {
			if had {
				_ = os.Setenv(k, old)
			} else {
				_ = os.Unsetenv(k)
			}
		}()
	}
	return fn()
}

// makeTarget runs a Makefile target of the repository with vars, and returns its output.
func (r registry) makeTarget(t *testing.T, target string, vars ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "-C", "../..", target}, vars...)...)
	cmd.Env = append(append(os.Environ(), r.env...), "COSIGN_PASSWORD=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (r registry) mustMake(t *testing.T, target string, vars ...string) string {
	t.Helper()
	out, err := r.makeTarget(t, target, vars...)
	if err != nil {
		t.Fatalf("make %s: %v\n%s", target, err, out)
	}
	return out
}

var digestRef = regexp.MustCompile(`\S+@sha256:[0-9a-f]{64}`)

// builtImage is the image ko printed last (its log names the base image too).
func builtImage(out string) string {
	refs := digestRef.FindAllString(out, -1)
	if len(refs) == 0 {
		return ""
	}
	return refs[len(refs)-1]
}

// The whole release path, on loopback: base image, image, SBOM, reproducibility,
// signatures, a tampered image refused, the chart as a signed OCI artifact, and the
// CRDs as the release asset.
func TestReleasePath(t *testing.T) {
	r := startRegistry(t)
	vars := []string{"REGISTRY=" + r.host + "/cmsync", "IMAGE_TAG=release-test", "CHART_VERSION=0.1.0-release-test",
		"HELM_PUSH_ARGS=--ca-file " + r.ca + " --registry-config " + filepath.Join(r.dir, "docker", "config.json")}
	r.mustMake(t, "base-image", vars...)

	// ko builds both architectures on the project's base; the same source gives the
	// same digest.
	first, second := builtImage(r.mustMake(t, "image", vars...)), builtImage(r.mustMake(t, "image", vars...))
	if first == "" || first != second {
		t.Fatalf("image digests %q and %q: the build is not reproducible", first, second)
	}
	checkImage(t, r, first)

	// Signed with a key pair made for the test (no transparency log: nothing here
	// reaches the internet), and verified.
	keys := r.dir
	cmd := exec.Command(os.Getenv("COSIGN_BIN"), "generate-key-pair")
	cmd.Dir, cmd.Env = keys, append(os.Environ(), "COSIGN_PASSWORD=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
	}
	key, pub := "COSIGN_KEY="+filepath.Join(keys, "cosign.key"), "COSIGN_PUB="+filepath.Join(keys, "cosign.pub")
	r.mustMake(t, "sign", key, "REF="+first)
	tagged := r.host + "/cmsync/cmsync:release-test"
	r.mustMake(t, "verify-signature", pub, "REF="+tagged)

	// One byte changed and pushed under the same tag: the signature no longer verifies.
	tamper := exec.Command("go", "run", "-C", "../../hack", "./tamper", "-ref", tagged)
	tamper.Env = append(os.Environ(), r.env...)
	if out, err := tamper.CombinedOutput(); err != nil {
		t.Fatalf("tamper: %v\n%s", err, out)
	}
	if out, err := r.makeTarget(t, "verify-signature", pub, "REF="+tagged); err == nil {
		t.Errorf("a tampered image passed verification:\n%s", out)
	}

	// The chart, as an OCI artifact: pushed, signed, verified, pulled and rendered.
	out := r.mustMake(t, "chart-push", vars...)
	chartDigest := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(out)
	if chartDigest == "" {
		t.Fatalf("no digest in helm push's output:\n%s", out)
	}
	chart := r.host + "/cmsync/charts/cmsync"
	r.mustMake(t, "sign", key, "REF="+chart+"@"+chartDigest)
	r.mustMake(t, "verify-signature", pub, "REF="+chart+":0.1.0-release-test")
	helm := exec.Command(os.Getenv("HELM"), "template", "cmsync", "oci://"+chart, "--version", "0.1.0-release-test", "--ca-file", r.ca,
		"--registry-config", filepath.Join(r.dir, "docker", "config.json"), "--set", "image.repository="+r.host+"/cmsync/cmsync")
	helm.Env = append(os.Environ(), r.env...)
	rendered, err := helm.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template oci://%s: %v\n%s", chart, err, rendered)
	}
	if !strings.Contains(string(rendered), "image: \""+r.host+"/cmsync/cmsync:release-test\"") {
		t.Errorf("the pulled chart does not name the released image:\n%s", rendered)
	}
	checkCRDAsset(t, r, chart, "0.1.0-release-test")
}

// checkCRDAsset: the CRDs the release attaches (make crds-dist) are exactly those of
// the chart it pushed, and those are deploy/crds'.
func checkCRDAsset(t *testing.T, r registry, chart, version string) {
	t.Helper()
	r.mustMake(t, "crds-dist", "BIN="+r.dir)
	asset, err := os.ReadFile(filepath.Join(r.dir, "crds", "cmsync-crds.yaml"))
	testkit.Must(t, err)
	show := exec.Command(os.Getenv("HELM"), "show", "crds", "oci://"+chart, "--version", version, "--ca-file", r.ca,
		"--registry-config", filepath.Join(r.dir, "docker", "config.json"))
	show.Env = append(os.Environ(), r.env...)
	shown, err := show.Output()
	if err != nil {
		t.Fatalf("helm show crds oci://%s: %v", chart, err)
	}
	files, err := filepath.Glob("../../deploy/crds/*.yaml")
	testkit.Must(t, err)
	var tree []byte
	for _, file := range files {
		raw, err := os.ReadFile(file)
		testkit.Must(t, err)
		tree = append(append(tree, "\n---\n"...), raw...)
	}
	want := crdsIn(t, tree)
	if len(want) < 2 {
		t.Fatalf("deploy/crds holds %d CRDs", len(want))
	}
	if got := crdsIn(t, asset); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("cmsync-crds.yaml holds CRDs %v, deploy/crds %v, or their contents differ", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if got := crdsIn(t, shown); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("the pushed chart holds CRDs %v, deploy/crds %v, or their contents differ", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
}

// crdsIn decodes a stream of YAML documents, by metadata.name.
func crdsIn(t *testing.T, stream []byte) map[string]map[string]any {
	t.Helper()
	crds := map[string]map[string]any{}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var doc map[string]any
		if err := decoder.Decode(&doc); errors.Is(err, io.EOF) {
			return crds
		} else if err != nil {
			t.Fatalf("decoding CRDs: %v", err)
		}
		if doc == nil {
			continue
		}
		metadata, _ := doc["metadata"].(map[string]any)
		crdName, _ := metadata["name"].(string)
		crds[crdName] = doc
	}
}

// checkImage: an index of linux/amd64 and linux/arm64, each running as 65532 on the
// project's base, with an SPDX SBOM attached.
func checkImage(t *testing.T, r registry, ref string) {
	t.Helper()
	testkit.Must(t, r.withEnv(func() error {
		digest, err := name.NewDigest(ref)
		if err != nil {
			return err
		}
		index, err := remote.Index(digest, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(r.transport(t)),
			remote.WithContext(context.Background()))
		if err != nil {
			return err
		}
		manifest, err := index.IndexManifest()
		if err != nil {
			return err
		}
		var platforms []string
		for _, m := range manifest.Manifests {
			img, err := index.Image(m.Digest)
			if err != nil {
				return err
			}
			cfg, err := img.ConfigFile()
			if err != nil {
				return err
			}
			if cfg.Config.User != "65532:65532" {
				return fmt.Errorf("%s runs as %q", m.Platform, cfg.Config.User)
			}
			platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
		}
		if !testkit.SameSet(platforms, []string{"linux/amd64", "linux/arm64"}) {
			return fmt.Errorf("platforms %v", platforms)
		}
		sbom, err := name.ParseReference(digest.Context().String() + ":" + strings.Replace(digest.DigestStr(), ":", "-", 1) + ".sbom")
		if err != nil {
			return err
		}
		img, err := remote.Image(sbom, remote.WithAuthFromKeychain(authn.DefaultKeychain), remote.WithTransport(r.transport(t)))
		if err != nil {
			return fmt.Errorf("no SBOM attached: %w", err)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) == 0 {
			return fmt.Errorf("SBOM without content: %v", err)
		}
		mt, err := layers[0].MediaType()
		if err != nil || !strings.Contains(string(mt), "spdx") {
			return fmt.Errorf("SBOM media type %q (%v), want SPDX", mt, err)
		}
		return nil
	}))
}
