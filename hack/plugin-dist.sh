#!/usr/bin/env bash
# plugin-dist.sh VERSION DIR OS/ARCH... builds kubectl-cmsync for each platform into
# DIR/kubectl-cmsync_<os>_<arch>.tar.gz and renders the krew manifest
# (deploy/krew/cmsync.yaml) into DIR/cmsync.yaml with VERSION and each archive's
# checksum. The release workflow attaches DIR's archives and manifest to the GitHub
# release VERSION, which is where the manifest's URIs point. The archives are the same
# bytes for the same commit: no timestamps, owners or gzip name in them.
set -euo pipefail
version="$1"
mkdir -p "$2"
dir="$(cd "$2" && pwd)"
shift 2
# krew and the Go module proxy both want a semantic version with its v.
if ! [[ "$version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "plugin-dist: VERSION=$version is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
rm -rf "${dir:?}"/*
manifest="$dir/cmsync.yaml"
# The template's comments are for its maintainers; the rendered manifest goes to users.
grep -v '^#' "$root/deploy/krew/cmsync.yaml" | sed "s/VERSION/$version/g" > "$manifest"
for platform in "$@"; do
  os="${platform%/*}" arch="${platform#*/}"
  stage="$dir/$os-$arch"
  mkdir -p "$stage"
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -C "$root" -trimpath \
    -ldflags="-s -w -X main.version=$version" -o "$stage/kubectl-cmsync" ./cmd/kubectl-cmsync
  archive="$dir/kubectl-cmsync_${os}_${arch}.tar.gz"
  tar -C "$stage" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c kubectl-cmsync | gzip -n -9 > "$archive"
  rm -rf "$stage"
  sum="$(sha256sum "$archive" | cut -d' ' -f1)"
  sed -i "s/SHA256_${os}_${arch}\$/$sum/" "$manifest"
done
if left="$(grep -o 'SHA256_[a-z0-9_]*' "$manifest")"; then
  echo "plugin-dist: the manifest lists platforms not built: ${left//$'\n'/ }" >&2
  exit 1
fi
echo "$manifest"
