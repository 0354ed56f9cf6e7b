//go:build e2e

package e2e

import (
	"archive/zip"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cmsync/cmsync/test/harness"
)

const (
	// module is the plugin's Go module, as `go install` names it.
	module = "github.com/cmsync/cmsync"
	// installVersion is the release version the tests below install.
	installVersion = "v0.0.1-e2e"
	// releaseDownloads is where a GitHub release's assets are downloaded from.
	releaseDownloads = "https://github.com/cmsync/cmsync/releases/download/"
)

// The plugin's docs give `go install github.com/cmsync/cmsync/cmd/kubectl-cmsync@vX.Y.Z`.
// Served as the Go module proxy serves a tag — this checkout as a module zip at a
// release version, from a file proxy, with a module cache of its own — go install
// builds it (no replace directive in the way), the binary reports that version, and
// reads the cluster.
func TestPluginGoInstall(t *testing.T) {
	work := t.TempDir()
	proxy := moduleProxy(t, filepath.Join(work, "proxy"), installVersion)
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		must(t, err)
		return strings.TrimSpace(string(out))
	}
	cache := goEnv("GOMODCACHE")
	bin := filepath.Join(work, "bin")
	install := exec.Command("go", "install", module+"/cmd/kubectl-cmsync@"+installVersion)
	install.Dir = work
	install.Env = append(os.Environ(),
		"GOBIN="+bin, "GOMODCACHE="+filepath.Join(work, "modcache"), "GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0",
		// This module from the file proxy; its dependencies from the module cache's own
		// downloads, a proxy too: no network. They were checked against the project's
		// go.sum when that cache got them, and the checksum database is not reachable
		// through a file proxy, so it is not asked again.
		"GOPROXY=file://"+proxy+",file://"+filepath.Join(cache, "cache", "download")+",off",
		"GOSUMDB=off", "GOPRIVATE=", "GONOPROXY=", "GOFLAGS=-modcacherw -trimpath")
	start := time.Now()
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/kubectl-cmsync@%s: %v\n%s", module, installVersion, err, out)
	}
	t.Logf("go install %s/cmd/kubectl-cmsync@%s: %s", module, installVersion, time.Since(start).Round(time.Second))
	expectInstalledPlugin(t, filepath.Join(bin, "kubectl-cmsync"))
}

// make plugin-dist renders a krew manifest that krew-index's validator accepts, whose
// URIs are where the release workflow publishes the archives of the release's tag, and
// from which krew installs each platform's archive (checking its checksum); the host's
// reports the release's version and reads the cluster.
func TestPluginReleaseArchivesAndKrewManifest(t *testing.T) {
	out := t.TempDir()
	dist := filepath.Join(out, "dist")
	build := exec.Command("make", "-s", "plugin-dist", "VERSION="+installVersion, "BIN="+out)
	build.Dir = repoRoot(t)
	if log, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make plugin-dist: %v\n%s", err, log)
	}
	manifest := filepath.Join(dist, "cmsync.yaml")
	if log, err := exec.Command(hackTool(t, "validate-krew-manifest"), "-manifest", manifest, "-skip-install").CombinedOutput(); err != nil {
		t.Fatalf("validate-krew-manifest: %v\n%s", err, log)
	}
	platforms := krewPlatforms(t, manifest)
	assets := releaseAssets(t)
	krew := hackTool(t, "krew")
	for _, p := range platforms {
		archive := path.Base(p.URI)
		if p.URI != releaseDownloads+installVersion+"/"+archive || !slices.ContainsFunc(assets, func(glob string) bool {
			ok, _ := filepath.Match(glob, "bin/dist/"+archive)
			return ok
		}) {
			t.Errorf("%s/%s: %s is not an asset the release workflow publishes (%v) for %s", p.OS, p.Arch, p.URI, assets, installVersion)
		}
		root := t.TempDir()
		install := exec.Command(krew, "install", "--manifest="+manifest, "--archive="+filepath.Join(dist, archive))
		install.Env = append(os.Environ(), "KREW_ROOT="+root, "KREW_OS="+p.OS, "KREW_ARCH="+p.Arch, "KREW_NO_UPGRADE_CHECK=1")
		if log, err := install.CombinedOutput(); err != nil {
			t.Errorf("krew install %s/%s: %v\n%s", p.OS, p.Arch, err, log)
			continue
		}
		if p.OS == runtime.GOOS && p.Arch == runtime.GOARCH {
			expectInstalledPlugin(t, filepath.Join(root, "bin", "kubectl-cmsync"))
		}
	}
	if len(platforms) != 4 {
		t.Errorf("the manifest has %d platforms, want linux and darwin, amd64 and arm64", len(platforms))
	}
}

// expectInstalledPlugin: the plugin at bin reports installVersion, and reads the
// cluster's sources.
func expectInstalledPlugin(t *testing.T, bin string) {
	t.Helper()
	stdout, stderr, err := harness.RunPlugin(t, bin, "version")
	if err != nil || strings.TrimSpace(stdout) != "kubectl-cmsync "+installVersion {
		t.Errorf("%s version: %q, want kubectl-cmsync %s: %v %s", bin, stdout, installVersion, err, stderr)
	}
	ns := harness.NewNamespace(t, "installed", nil)
	stdout, stderr, err = harness.RunPlugin(t, bin, "status", "-n", ns, "--kubeconfig", harness.AdminKubeconfig)
	if err != nil || !strings.HasPrefix(stdout, "KIND") {
		t.Errorf("%s status -n %s: %v\n%s%s", bin, ns, err, stdout, stderr)
	}
}

// krewPlatform is what the tests read of a krew manifest's platform.
type krewPlatform struct {
	OS, Arch string
	URI      string
}

func krewPlatforms(t *testing.T, manifest string) []krewPlatform {
	t.Helper()
	raw, err := os.ReadFile(manifest)
	must(t, err)
	var m struct {
		Spec struct {
			Version   string `json:"version"`
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI string `json:"uri"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	must(t, yaml.Unmarshal(raw, &m))
	if m.Spec.Version != installVersion {
		t.Errorf("the manifest's version %q, want %s", m.Spec.Version, installVersion)
	}
	out := make([]krewPlatform, 0, len(m.Spec.Platforms))
	for _, p := range m.Spec.Platforms {
		out = append(out, krewPlatform{OS: p.Selector.MatchLabels["os"], Arch: p.Selector.MatchLabels["arch"], URI: p.URI})
	}
	return out
}

// releaseAssets reads the release workflow: on a tag v*, it runs make plugin-dist for
// that tag and creates the GitHub release of that tag with the assets it returns (paths
// and globs relative to the checkout).
func releaseAssets(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "workflows", "release.yaml"))
	must(t, err)
	type trigger struct {
		Push struct {
			Tags []string `json:"tags"`
		} `json:"push"`
	}
	var workflow struct {
		On trigger `json:"on"`
		// YAML 1.1, as sigs.k8s.io/yaml reads it, takes the key on for true.
		OnAsRead trigger `json:"true"`
		Jobs     map[string]struct {
			Env   map[string]string `json:"env"`
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	must(t, yaml.Unmarshal(raw, &workflow))
	tags := slices.Concat(workflow.On.Push.Tags, workflow.OnAsRead.Push.Tags)
	job := workflow.Jobs["release"]
	if !slices.Equal(tags, []string{"v*"}) || job.Env["IMAGE_TAG"] != "${{ github.ref_name }}" {
		t.Fatalf("the release workflow runs on tags %v with IMAGE_TAG %q, want v* and the tag", tags, job.Env["IMAGE_TAG"])
	}
	var dist bool
	for _, step := range job.Steps {
		dist = dist || strings.Contains(step.Run, `make plugin-dist VERSION="$IMAGE_TAG"`)
		if rest, ok := strings.CutPrefix(strings.TrimSpace(step.Run), `gh release create "$IMAGE_TAG" `); ok && dist {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("the release workflow does not run make plugin-dist for its tag, then gh release create with its assets")
	return nil
}

// moduleProxy writes a Go module proxy (the GOPROXY protocol's files) at dir that
// serves this checkout as module at version: its tracked and new files, as the module
// zip of a tag would hold them, without the nested modules (hack/). It returns dir.
func moduleProxy(t *testing.T, dir, version string) string {
	t.Helper()
	root := repoRoot(t)
	listed, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	must(t, err)
	files := strings.Fields(string(listed))
	var nested []string
	for _, f := range files {
		if path.Base(f) == "go.mod" && f != "go.mod" {
			nested = append(nested, path.Dir(f)+"/")
		}
	}
	at := filepath.Join(dir, filepath.FromSlash(module), "@v")
	must(t, os.MkdirAll(at, 0o755))
	archive, err := os.Create(filepath.Join(at, version+".zip"))
	must(t, err)
	defer func() { must(t, archive.Close()) }()
	z := zip.NewWriter(archive)
	for _, f := range files {
		if slices.ContainsFunc(nested, func(prefix string) bool { return strings.HasPrefix(f, prefix) }) {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, f))
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the working tree, or a link: not in a module zip
		}
		w, err := z.Create(module + "@" + version + "/" + f)
		must(t, err)
		raw, err := os.ReadFile(filepath.Join(root, f))
		must(t, err)
		_, err = w.Write(raw)
		must(t, err)
	}
	must(t, z.Close())
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(at, version+".mod"), goMod, 0o644))
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	must(t, os.WriteFile(filepath.Join(at, version+".info"), []byte(info), 0o644))
	must(t, os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644))
	return dir
}

// repoRoot is the checkout the suite runs in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	must(t, err)
	return root
}

// hackTool builds (once, cached outside the checkout) and returns a pinned tool of
// hack/tool.sh.
func hackTool(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot(t), "hack", "tool.sh"), name).Output()
	if err != nil {
		t.Fatalf("hack/tool.sh %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}
