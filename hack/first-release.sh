#!/usr/bin/env bash
# first-release.sh COMMIT prints a directory holding cmsync as it was at COMMIT: its
# binary (cmsync), its chart (chart/) and its source (src/, which ko builds the image
# from), built once from this repository's history and cached outside the clone, keyed
# by the commit. The upgrade suite installs it, then
# upgrades to the working tree's chart and binary, and rolls back.
set -euo pipefail
commit="$1"
cd "$(dirname "$0")/.."
CACHE="${CMSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cmsync}/releases"
dir="$CACHE/$commit"
if [ -x "$dir/cmsync" ] && [ -d "$dir/src" ]; then echo "$dir"; exit 0; fi

mkdir -p "$CACHE"
exec 9>"$CACHE/.$commit.lock"
flock 9
if [ -x "$dir/cmsync" ] && [ -d "$dir/src" ]; then echo "$dir"; exit 0; fi

echo "first-release.sh: building cmsync at $commit (first time only)" >&2
partial="$dir.partial"
rm -rf "$partial"
mkdir -p "$partial/src"
git archive "$commit" | tar -x -C "$partial/src"
CGO_ENABLED=0 go build -C "$partial/src" -trimpath -o "$partial/cmsync" .
cp -r "$partial/src/deploy/chart/cmsync" "$partial/chart"
rm -rf "$dir"
mv "$partial" "$dir"
echo "$dir"
