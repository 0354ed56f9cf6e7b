#!/usr/bin/env bash
# control-plane-binaries.sh builds the real kube-apiserver, kube-controller-manager and
# etcd that the tests and `make run` use, from the Go module proxy, into a cache outside
# the clone keyed by version. Prebuilt envtest binaries cannot be downloaded on the
# machines this project is developed on, and there is no Docker, so we build them.
#
# Prints the directory holding the binaries (usable as KUBEBUILDER_ASSETS).
# A second run finds them in the cache and returns at once.
#
# With the argument "kind" it also builds what the kind suite's node image needs on top
# (kube-scheduler, kubelet, kube-proxy, kubectl and kubeadm, same version; see
# hack/kind/node-image.sh).
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.1}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
CACHE="${CMSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cmsync}"
OUT="$CACHE/kubernetes-${K8S_VERSION}-etcd-${ETCD_VERSION}"

log() { echo "control-plane-binaries: $*" >&2; }

KUBE_CMDS=(kube-apiserver kube-controller-manager)
case "${1:-}" in
  kind) KUBE_CMDS+=(kube-scheduler kubelet kube-proxy kubectl kubeadm) ;;
esac

have_kube() { local c; for c in "${KUBE_CMDS[@]}"; do [ -x "$OUT/$c" ] || return 1; done; }
have() { have_kube && [ -x "$OUT/etcd" ]; }
if have; then echo "$OUT"; exit 0; fi

mkdir -p "$CACHE"
# One builder at a time per cache: parallel `make` invocations wait instead of racing.
exec 9>"$CACHE/.build.lock"
flock 9
if have; then echo "$OUT"; exit 0; fi

work="$(mktemp -d "$CACHE/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"
export GOFLAGS="-mod=mod" CGO_ENABLED=0

build_kubernetes() {
  log "building ${KUBE_CMDS[*]} ${K8S_VERSION} (first time only, ~5 min each)"
  local mod="$work/k8s" staging_version="v0${K8S_VERSION#v1}"
  mkdir -p "$mod"
  go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" >/dev/null
  local gomod
  gomod="$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/${K8S_VERSION}.mod"
  (
    cd "$mod"
    go mod init cmsync.local/control-plane >/dev/null 2>&1
    go mod edit -require="k8s.io/kubernetes@${K8S_VERSION}"
    # k8s.io/kubernetes replaces its staging modules with ./staging paths; a module that
    # requires it must replace each with the published module of the matching version.
    for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod"); do
      go mod edit -replace="$m=$m@${staging_version}"
    done
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      for c in "${KUBE_CMDS[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
      printf ')\n'
    } > tools.go
    go mod tidy >/dev/null 2>&1 || go mod tidy
    # The version the binaries report (kubectl version, the node's kubelet version), as
    # Kubernetes' own release build stamps it.
    local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
    local ldflags="-X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1"
    ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
    # Without DWARF (-s -w, as Kubernetes' own release build links them): stack traces
    # keep their symbols, and the links write far less. One go build for all the missing
    # commands, so that one's link runs while the next compiles.
    ldflags+=" -s -w"
    local c pkgs=()
    for c in "${KUBE_CMDS[@]}"; do [ -x "$OUT/$c" ] || pkgs+=("k8s.io/kubernetes/cmd/$c"); done
    # Built beside the cache and moved in, so that a binary is there whole or not at all
    # for callers that look before they take the lock.
    go build -trimpath -ldflags="$ldflags" -o "$work/bin/" "${pkgs[@]}"
    mv "$work"/bin/* "$OUT/"
  )
}

build_etcd() {
  log "building etcd ${ETCD_VERSION} (first time only, ~1 min)"
  local mod="$work/etcd"
  mkdir -p "$mod"
  (
    cd "$mod"
    go mod init cmsync.local/etcd >/dev/null 2>&1
    go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
    cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
    go mod tidy >/dev/null 2>&1 || go mod tidy
    go build -trimpath -ldflags="-s -w" -o "$work/etcd.bin" go.etcd.io/etcd/server/v3
    mv "$work/etcd.bin" "$OUT/etcd"
  )
}

[ -x "$OUT/etcd" ] || build_etcd
have_kube || build_kubernetes
have
log "ready in $OUT"
echo "$OUT"
