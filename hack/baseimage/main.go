// Command baseimage builds the base image cmsync's images are built on (ko's
// defaultBaseImage), so that no base is pulled from the internet: one layer holding the
// passwd and group entries of the non-root user 65532 and an empty /tmp, for
// linux/amd64 and linux/arm64, with fixed timestamps (the same input gives the same
// digest), pushed to -ref as an image index. Registry credentials come from the Docker
// config (DOCKER_CONFIG), trust from the system's (SSL_CERT_FILE).
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// nonRoot is the user the image runs as, as the chart's securityContext expects.
const nonRoot = 65532

var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

func main() {
	ref := flag.String("ref", "", "where to push the base image index (registry/repository:tag)")
	flag.Parse()
	if err := run(*ref); err != nil {
		fmt.Fprintln(os.Stderr, "baseimage:", err)
		os.Exit(1)
	}
}

func run(ref string) error {
	tag, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	layer, err := tarball.LayerFromOpener(filesLayer)
	if err != nil {
		return err
	}
	index := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
		if err != nil {
			return err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cfg, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cfg = cfg.DeepCopy()
		cfg.OS, cfg.Architecture = p.OS, p.Architecture
		cfg.Config.User = fmt.Sprintf("%d:%d", nonRoot, nonRoot)
		cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		cfg.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			return err
		}
		platform := p
		index = mutate.AppendManifests(index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	if err := remote.WriteIndex(tag, index, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
		return fmt.Errorf("pushing %s: %w", tag, err)
	}
	digest, err := index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", tag.Context(), digest)
	return nil
}

// filesLayer is the tar of /etc/passwd, /etc/group and /tmp, with fixed times and owners.
func filesLayer() (io.ReadCloser, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	entries := []struct {
		name    string
		mode    int64
		content string
	}{
		{"etc/", 0o755, ""},
		{"etc/passwd", 0o644, fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRoot, nonRoot)},
		{"etc/group", 0o644, fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRoot)},
		{"tmp/", 0o1777, ""},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		if e.name[len(e.name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(e.content)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
}
