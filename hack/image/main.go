// Command image writes a container image tarball (docker-archive, which containerd's
// `ctr images import` and `kind load image-archive` read) holding one static binary,
// without Docker: the printfile image of `make kind-e2e`. Like the Dockerfile's distroless
// image, it runs the binary as its entrypoint, as the given non-root user.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	binary := flag.String("binary", "", "static binary to put in the image")
	into := flag.String("path", "", "where the binary goes in the image (default /<its name>)")
	ref := flag.String("ref", "", "image name, e.g. ghcr.io/cmsync/cmsync:dev")
	user := flag.String("user", "65532:65532", "user:group the image runs as")
	out := flag.String("out", "", "tarball to write")
	flag.Parse()
	if *binary == "" || *ref == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "image: -binary, -ref and -out are required")
		os.Exit(2)
	}
	if *into == "" {
		*into = "/" + path.Base(*binary)
	}
	if err := build(*binary, *into, *ref, *user, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(binary, into, ref, user, out string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	content, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	layerTar, err := singleFileTar(into, content)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	// Without os and architecture, containerd imports nothing, silently.
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{into}
	cfg.Config.User = user
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	return tarball.WriteToFile(out, tag, img)
}

// singleFileTar is a layer with the binary, executable, owned by root.
func singleFileTar(into string, content []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: into[1:], Mode: 0o755, Size: int64(len(content)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
