#!/usr/bin/env bash
# node-e2e.sh test|up — a real single-node cluster (internal/testsupport/node, through hack/localnode),
# the cmsync image built without Docker and imported into the node's containerd, and
# the chart installed with helm pointing at it. "test" then runs the e2e suite against
# the in-cluster Pod and tears everything down; "up" keeps the cluster until Ctrl-C.
# Everything lives under .cache/node; logs stay in .cache/node/logs.
set -euo pipefail
mode="${1:-test}"
log() { echo "node-e2e: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
  if [ -n "${CMSYNC_NODE_E2E_OPTIONAL:-}" ]; then
    log "SKIPPED: a real node needs root (network namespace, mounts, cgroups); run make node-e2e as root"
    exit 0
  fi
  log "a real node needs root (network namespace, mounts, cgroups)"
  exit 1
fi

# From Debian: runc, the CNI plugins, iptables and conntrack for kube-proxy, nsenter.
need=()
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v nsenter >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
    { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
fi

KUBE_BIN="$(hack/control-plane-binaries.sh node)"
CONTAINERD_BIN="$(dirname "$(hack/tool.sh containerd)")"
HELM="${HELM:-$(hack/tool.sh helm)}"
KUBECTL="$KUBE_BIN/kubectl"

dir="$PWD/.cache/node"
images="$PWD/.cache/node-images"
image_repo=ghcr.io/cmsync/cmsync image_tag=node-e2e
mkdir -p "$images"
log "building the images (no Docker: hack/image)"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$images/cmsync" .
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$images/pause" ./hack/pause
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$images/printfile" ./hack/printfile
go build -o .cache/image ./hack/image
go build -o .cache/localnode ./hack/localnode
.cache/image -binary "$images/cmsync" -ref "$image_repo:$image_tag" -out "$images/cmsync.tar"
.cache/image -binary "$images/pause" -ref localhost/cmsync-node/pause:1 -out "$images/pause.tar"
.cache/image -binary "$images/printfile" -ref localhost/cmsync-node/printfile:1 -out "$images/printfile.tar"

.cache/localnode -dir "$dir" -kube-bin "$KUBE_BIN" -containerd-bin "$CONTAINERD_BIN" \
  -images "$images/pause.tar,$images/cmsync.tar,$images/printfile.tar" &
node=$!
# Stop the node (it cleans up after itself) however this script ends.
trap 'kill -TERM "$node" 2>/dev/null; wait "$node" 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM
until [ -f "$dir/ready" ]; do
  kill -0 "$node" 2>/dev/null || { wait "$node" || true; log "the node failed to start; logs in $dir/logs"; exit 1; }
  sleep 1
done
export KUBECONFIG="$dir/kubeconfig"

log "helm install (2 replicas: leader election for real; Secrets on)"
"$HELM" install cmsync deploy/chart/cmsync --namespace cmsync-system --create-namespace \
  --set image.repository="$image_repo" --set image.tag="$image_tag" --set image.pullPolicy=Never \
  --set replicaCount=2 --set secrets.enabled=true --wait --timeout 180s ||
  { "$KUBECTL" get pods -A -o wide; "$KUBECTL" describe pods -n cmsync-system | tail -40; exit 1; }
"$KUBECTL" get pods -n cmsync-system -o wide >&2

if [ "$mode" = up ]; then
  log "the node runs cmsync; in another shell: export KUBECONFIG=$KUBECONFIG; kubectl is $KUBECTL. Ctrl-C stops and cleans up."
  wait "$node"
  exit 0
fi

CGO_ENABLED=0 go build -trimpath -o .cache/kubectl-cmsync ./cmd/kubectl-cmsync
CMSYNC_E2E_EXISTING_CLUSTER=1 CMSYNC_PLUGIN="$PWD/.cache/kubectl-cmsync" HELM="$HELM" go test -tags e2e -count=1 -timeout 30m ./test/e2e/... -v
