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
  # containerd for the single-node cluster (make node-e2e): the daemon, its runc shim
  # and ctr (to import images). Built static, like its release binaries.
  containerd)     pkg="github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr"
                  version=v2.4.2 ;;
  *) echo "tool.sh: unknown tool $1" >&2; exit 2 ;;
esac
dir="$CACHE/$1-$version"
if [ ! -x "$dir/$1" ]; then
  echo "tool.sh: building $1 $version (first time only)" >&2
  # shellcheck disable=SC2086 # pkg may list several packages of one module
  GOBIN="$dir" GOFLAGS= CGO_ENABLED=0 go install $(printf "%s@$version " $pkg)
fi
echo "$dir/$1"
