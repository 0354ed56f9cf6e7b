// Command tamper changes one byte of an image in a registry and pushes it under the
// same tag, for the tests that show a tampered image fails signature verification: the
// user of the first image's config ("65532:65532" becomes "65532:65533"). It prints the
// digest the tag pointed to before, so a test can put it back. Credentials come from
// the Docker config (DOCKER_CONFIG), trust from the system's (SSL_CERT_FILE).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func main() {
	ref := flag.String("ref", "", "the image index to tamper with (registry/repository:tag)")
	flag.Parse()
	if err := run(*ref); err != nil {
		fmt.Fprintln(os.Stderr, "tamper:", err)
		os.Exit(1)
	}
}

func run(ref string) error {
	tag, err := name.ParseReference(ref)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", ref, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	index, err := remote.Index(tag, auth)
	if err != nil {
		return err
	}
	before, err := index.Digest()
	if err != nil {
		return err
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return err
	}
	m := manifest.Manifests[0]
	img, err := index.Image(m.Digest)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	if cfg.Config.User != "65532:65532" {
		return fmt.Errorf("unexpected user %q: not cmsync's image", cfg.Config.User)
	}
	cfg.Config.User = "65532:65533" // one byte
	changed, err := mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	tampered := mutate.AppendManifests(
		mutate.RemoveManifests(index, func(d v1.Descriptor) bool { return d.Digest == m.Digest }),
		mutate.IndexAddendum{Add: changed, Descriptor: v1.Descriptor{Platform: m.Platform}},
	)
	if err := remote.WriteIndex(tag, tampered, auth); err != nil {
		return err
	}
	fmt.Println(tag.Context().Digest(before.String()).String())
	return nil
}
