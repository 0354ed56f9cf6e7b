#!/usr/bin/env bash
# node-image.sh prints the name of the kind node image for the project's Kubernetes
# version, loaded into the Docker engine at DOCKER_HOST, building it offline the first
# time. `kind build node-image` cannot run here: it downloads the images it does not
# build. This script assembles the same image from what the project already builds from
# the Go module proxy and from Debian's packages, and caches it (docker save) outside
# the clone keyed by the versions and the recipe, so later runs only load it.
#
# The steps:
#   1. a Debian bookworm rootfs (mmdebstrap) with systemd, the network tools, runc and
#      the CNI plugins, imported as the base;
#   2. kind's base-image files and steps (hack/kind/node/Dockerfile), with kubeadm,
#      kubelet and kubectl (hack/control-plane-binaries.sh kind), containerd and ctr
#      (hack/tool.sh containerd) and crictl (hack/tool.sh crictl);
#   3. the images kubeadm runs, named as `kubeadm config images list` prints them:
#      the control plane, kube-proxy (over the base rootfs, for iptables), etcd, CoreDNS
#      and pause, each built from its binary;
#   4. those images imported into the node's containerd and the result committed with
#      kind's entrypoint.
set -euo pipefail
log() { echo "node-image: $*" >&2; }
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

K8S_VERSION="${K8S_VERSION:-v1.37.1}"
KIND_VERSION="$(sed -n 's/^ *kind) *pkg=sigs.k8s.io\/kind; version=\(v[0-9.]*\) ;;$/\1/p' "$root/hack/tool.sh")"
CACHE="${CMSYNC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cmsync}"
recipe="$(cat "$0" "$here/node/Dockerfile" | sha256sum | cut -c1-12)"
image="cmsync.local/kind-node:$K8S_VERSION-$recipe"
archive="$CACHE/kind-node-$K8S_VERSION-kind-$KIND_VERSION-$recipe.tar"

if docker image inspect "$image" >/dev/null 2>&1; then echo "$image"; exit 0; fi
if [ -f "$archive" ]; then
  docker load -i "$archive" >/dev/null
  echo "$image"
  exit 0
fi

mkdir -p "$CACHE"
work="$(mktemp -d "$CACHE/.kind-node.XXXXXX")"
builder=""
cleanup() {
  [ -z "$builder" ] || docker rm -f "$builder" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
log "building $image (first time only)"

# 1. The base rootfs.
log "Debian rootfs (mmdebstrap)"
mmdebstrap --quiet --variant=minbase \
  --include=systemd,dbus,iptables,nftables,iproute2,conntrack,ethtool,util-linux,mount,kmod,libseccomp2,ca-certificates,jq,procps,runc,containernetworking-plugins \
  bookworm "$work/rootfs.tar"
base="cmsync.local/kind-base:bookworm-$recipe"
docker import "$work/rootfs.tar" "$base" >/dev/null

# 2. The node: kind's base steps with the project's binaries.
kube_bin="$("$root/hack/control-plane-binaries.sh" kind)"
containerd_bin="$(dirname "$("$root/hack/tool.sh" containerd)")"
ctx="$work/context"
mkdir -p "$ctx/bin"
cp -r "$(go env GOMODCACHE)/sigs.k8s.io/kind@$KIND_VERSION/images/base/files" "$ctx/files" 2>/dev/null ||
  { go mod download "sigs.k8s.io/kind@$KIND_VERSION" && cp -r "$(go env GOMODCACHE)/sigs.k8s.io/kind@$KIND_VERSION/images/base/files" "$ctx/files"; }
chmod -R u+w "$ctx/files"
cp "$kube_bin"/{kubeadm,kubelet,kubectl} "$containerd_bin"/{containerd,containerd-shim-runc-v2,ctr} "$ctx/bin/"
cp "$("$root/hack/tool.sh" crictl)" "$ctx/bin/"
echo "$K8S_VERSION" > "$ctx/version"
cp "$here/node/Dockerfile" "$ctx/"

# The images kubeadm will run, as it names them.
mapfile -t wanted < <("$kube_bin/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
name_of() { printf '%s\n' "${wanted[@]}" | grep "/$1:"; }
sandbox="$(name_of pause)"
docker build -q --build-arg BASE="$base" --build-arg SANDBOX_IMAGE="$sandbox" -t "$image-partial" "$ctx" >/dev/null

# 3. One image per binary, FROM scratch (kube-proxy FROM the base rootfs: it runs iptables).
log "images: ${wanted[*]}"
images="$work/images"
mkdir -p "$images"
binary_image() { # NAME BINARY [BASE] [USER]
  local dir="$images/$(basename "$1")"
  mkdir -p "$dir"
  cp "$2" "$dir/"
  printf 'FROM %s\nCOPY %s /usr/local/bin/\nUSER %s\nENTRYPOINT ["/usr/local/bin/%s"]\n' \
    "${3:-scratch}" "$(basename "$2")" "${4:-0:0}" "$(basename "$2")" > "$dir/Dockerfile"
  docker build -q -t "$1" "$dir" >/dev/null
}
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  binary_image "$(name_of "$c")" "$kube_bin/$c"
done
binary_image "$(name_of kube-proxy)" "$kube_bin/kube-proxy" "$base"
# etcd: the project's pinned etcd, which kubeadm is told to run by its own tag
# (etcd.local.imageTag in the cluster's kubeadm patch, hack/kind/cluster.sh).
etcd_image="$(name_of etcd)"
etcd_image="${etcd_image%:*}:$("$kube_bin/etcd" --version | sed -n 's/^etcd Version: \(.*\)/\1-0/p')"
binary_image "$etcd_image" "$kube_bin/etcd"
binary_image "$(name_of coredns)" "$("$root/hack/tool.sh" coredns)" scratch 65532:65532
CGO_ENABLED=0 go build -C "$root/hack" -trimpath -ldflags="-s -w" -o "$images/pause-bin/pause" ./pause
binary_image "$sandbox" "$images/pause-bin/pause" scratch 65535:65535

# 4. Into the node's containerd, pinned as kind pins its images, then committed with
# kind's entrypoint (the Dockerfile set its environment and stop signal).
log "importing the images into the node's containerd"
builder="cmsync-kind-node-build-$$"
docker run -d --init --privileged --name "$builder" --entrypoint=sleep "$image-partial" infinity >/dev/null
docker exec "$builder" sh -c 'containerd >/var/log/containerd-build.log 2>&1 &'
docker exec "$builder" sh -c 'for i in $(seq 30); do ctr version >/dev/null 2>&1 && exit 0; sleep 1; done; exit 1'
refs=()
for n in "${wanted[@]}"; do case "$n" in */etcd:*) refs+=("$etcd_image") ;; *) refs+=("$n") ;; esac; done
docker save "${refs[@]}" | docker exec -i "$builder" ctr --namespace=k8s.io images import \
  --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests - >/dev/null
docker exec "$builder" sh -c 'pkill -x containerd; while pgrep -x containerd >/dev/null; do sleep 0.2; done; rm -f /var/log/containerd-build.log'
docker commit \
  --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' --change 'CMD []' \
  "$builder" "$image" >/dev/null
docker rmi "$image-partial" "${refs[@]}" "$base" >/dev/null 2>&1 || true
docker save "$image" > "$archive.partial"
mv "$archive.partial" "$archive"
log "cached in $archive"
echo "$image"
