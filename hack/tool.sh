#!/usr/bin/env bash
# tool.sh NAME builds (once) and prints the path of a pinned Go tool, cached outside
# the clone keyed by version, so fresh clones on the same machine reuse it.
set -euo pipefail
CACHE="${CMSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cmsync}/tools"
case "$1" in
  controller-gen) pkg=sigs.k8s.io/controller-tools/cmd/controller-gen; version=v0.23.0 ;;
  helm)           pkg=helm.sh/helm/v3/cmd/helm; version=v3.22.0 ;;
  kind)           pkg=sigs.k8s.io/kind; version=v0.33.0 ;;
  golangci-lint)  pkg=github.com/golangci/golangci-lint/v2/cmd/golangci-lint; version=v2.15.0 ;;
  # containerd for the kind suite's node image (hack/kind/node-image.sh): the daemon,
  # its runc shim and ctr (to import images). Built static, like its release binaries.
  containerd)     pkg="github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr"
                  version=v2.4.2 ;;
  # The kind suite's node image (hack/kind/node-image.sh): crictl, which kind's nodes
  # carry, and CoreDNS at the version kubeadm v1.37 deploys.
  crictl)         pkg=sigs.k8s.io/cri-tools/cmd/crictl; version=v1.37.0 ;;
  coredns)        pkg=github.com/coredns/coredns; version=v1.14.6 ;;
  # The release path: ko builds the images, the CNCF distribution registry serves them
  # (and the OCI chart) in the tests, cosign signs and verifies, actionlint checks the
  # GitHub workflows.
  ko)             pkg=github.com/google/ko; version=v0.19.1 ;;
  registry)       pkg=github.com/distribution/distribution/v3/cmd/registry; version=v3.1.2 ;;
  cosign)         pkg=github.com/sigstore/cosign/v3/cmd/cosign; version=v3.1.3 ;;
  actionlint)     pkg=github.com/rhysd/actionlint/cmd/actionlint; version=v1.7.12 ;;
  # promtool (alert rule tests) and prometheus (the e2e suite scrapes cmsync with it).
  # Not go-installable at this version: a dependency's pinned pseudo-version is refused
  # by the module proxy, so they are built from a throwaway module that replaces it.
  # Built without the service-discovery plugins (Prometheus' remove_all_sd tag): the
  # tests scrape static targets only, and the cloud providers' SDKs doubled the
  # binaries' size.
  promtool|prometheus) pkg="github.com/prometheus/prometheus/cmd/$1"; version=v0.316.0 ;;
  # The kubectl plugin's release (make plugin-dist): krew installs it from the rendered
  # manifest and archives, and krew-index's own validator checks the manifest.
  krew)           pkg=sigs.k8s.io/krew/cmd/krew; version=v0.4.3 ;;
  validate-krew-manifest) pkg=sigs.k8s.io/krew/cmd/validate-krew-manifest; version=v0.4.3 ;;
  *) echo "tool.sh: unknown tool $1" >&2; exit 2 ;;
esac
dir="$CACHE/$1-$version"
if [ -x "$dir/$1" ]; then echo "$dir/$1"; exit 0; fi

# One builder per tool: a caller that comes while another builds it (make test's
# background builder, hack/tools-ahead.sh, or the step that needs the tool) waits for
# that build instead of starting its own.
mkdir -p "$CACHE"
exec 9>"$CACHE/.$1.lock"
flock 9
if [ -x "$dir/$1" ]; then echo "$dir/$1"; exit 0; fi

echo "tool.sh: building $1 $version (first time only)" >&2
# Built beside the cache and renamed in, so that a tool is there whole or not at all for
# callers that look before they take the lock. Linked without DWARF (-s -w): the tools
# are run, never debugged, and the big ones (golangci-lint, cosign, Prometheus) link
# faster.
partial="$dir.partial"
rm -rf "$partial"
case "$1" in
  promtool|prometheus)
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    (
      cd "$work"
      go mod init cmsync.local/prometheus >/dev/null 2>&1
      go mod edit -require="github.com/prometheus/prometheus@$version" \
        -replace=github.com/hashicorp/nomad/api=github.com/hashicorp/nomad/api@v0.0.0-20230605233119-67e39d5d248f
      printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" > tools.go
      GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod tidy
      GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -tags remove_all_sd -ldflags="-s -w" -o "$partial/$1" "$pkg"
    ) ;;
  *)
    # shellcheck disable=SC2086 # pkg may list several packages of one module
    GOBIN="$partial" GOFLAGS= CGO_ENABLED=0 go install -ldflags="-s -w" $(printf "%s@$version " $pkg) ;;
esac
rm -rf "$dir"
mv "$partial" "$dir"
echo "$dir/$1"
