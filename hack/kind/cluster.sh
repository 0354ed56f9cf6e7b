#!/usr/bin/env bash
# cluster.sh up|down DIR — the kind cluster of make kind-e2e, with the registry its
# nodes pull from. Sourced by hack/kind-e2e.sh, which sets:
#   KIND          the kind CLI (hack/tool.sh kind)
#   KIND_IMAGE    the node image: kind's published one, or hack/kind/node-image.sh's
#   KIND_OFFLINE  1 with the offline image (no kindnetd: static routes, see below)
#   KIND_NODES    how many nodes: 1 (a control plane) or 2 (and a worker)
#   DIR           where everything is written: the kubeconfig, the registry's files
#
# The registry (hack/registry, the CNCF distribution registry over TLS with htpasswd)
# listens on the gateway of the cluster's Docker network, so the host pushes to and the
# nodes pull from one address; each node mounts the registry's directory at the same
# path for containerd's hosts.toml and CA.
set -euo pipefail

KIND_CLUSTER="${KIND_CLUSTER:-cmsync-e2e}"
KIND_SUBNET="${KIND_SUBNET:-172.29.0.0/24}"
KIND_GATEWAY="${KIND_SUBNET%.*}.1"
# kind puts its nodes on the network this variable names.
export KIND_EXPERIMENTAL_DOCKER_NETWORK="${KIND_EXPERIMENTAL_DOCKER_NETWORK:-cmsync-kind}"

# cluster_config writes the kind configuration: deploy/kind/cluster.yaml's nodes (the
# first KIND_NODES of them), each with the registry's directory mounted, and what the
# registry and the machine need. Two settings are made only where the machine needs
# them: kubelet's failCgroupV1 on cgroup v1 hosts (Kubernetes ≥ 1.35 refuses cgroup v1
# otherwise), and containerd's restrict_oom_score_adj where root lacks CAP_SYS_RESOURCE
# (a negative oom_score_adj needs it).
cluster_config() {
  local mounts="    extraMounts: [{hostPath: \"$DIR/registry\", containerPath: \"$DIR/registry\", readOnly: true}]"
  awk -v nodes="$KIND_NODES" -v mounts="$mounts" '
    /^  - role: / { n++; skip = n > nodes; if (!skip) { print; print mounts }; next }
    skip && /^    / { next }
    { skip = 0; print }' "$ROOT/deploy/kind/cluster.yaml"
  [ "$KIND_OFFLINE" = 1 ] && printf 'networking:\n  disableDefaultCNI: true\n'
  printf 'containerdConfigPatches:\n  - |-\n    [plugins."io.containerd.grpc.v1.cri".registry]\n      config_path = "%s/registry/certs.d"\n' "$DIR"
  # CapBnd bit 24 is CAP_SYS_RESOURCE.
  if (( (0x$(awk '/^CapBnd/ { print $2 }' /proc/self/status) >> 24 & 1) == 0 )); then
    printf '  - |-\n    [plugins."io.containerd.grpc.v1.cri"]\n      restrict_oom_score_adj = true\n'
  fi
  echo "kubeadmConfigPatches:"
  [ -f /sys/fs/cgroup/cgroup.controllers ] || printf '  - |\n    kind: KubeletConfiguration\n    failCgroupV1: false\n'
  # The offline image carries the project's pinned etcd under its own tag.
  [ "$KIND_OFFLINE" = 1 ] && printf '  - |\n    kind: ClusterConfiguration\n    etcd:\n      local:\n        imageTag: %s\n' "$KIND_ETCD_TAG"
  return 0
}

# pod_network gives the offline image's nodes what kindnetd gives published ones: a ptp
# CNI configuration for each node's Pod CIDR, and a route on every node to every other
# node's Pods through that node.
pod_network() {
  local nodes name ip cidr other oip ocidr
  for _ in $(seq 120); do
    nodes="$("$KUBECTL" get nodes -o jsonpath='{range .items[*]}{.metadata.name} {.status.addresses[?(@.type=="InternalIP")].address} {.spec.podCIDR}{"\n"}{end}')" || nodes=""
    [ "$(echo "$nodes" | awk 'NF == 3' | wc -l)" -ge "$KIND_NODES" ] && break
    sleep 1
  done
  while read -r name ip cidr; do
    docker exec -i "$name" sh -c 'cat > /etc/cni/net.d/10-ptp.conflist' <<JSON
{"cniVersion": "1.0.0", "name": "cmsync-kind", "plugins": [
  {"type": "ptp", "ipMasq": false, "mtu": 1500,
   "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state", "routes": [{"dst": "0.0.0.0/0"}], "ranges": [[{"subnet": "$cidr"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
    while read -r other oip ocidr; do
      [ "$other" = "$name" ] || docker exec "$name" ip route replace "$ocidr" via "$oip"
    done <<< "$nodes"
  done <<< "$nodes"
}

# api_server_ready waits until the API server answers /readyz through the host's port.
# kind create returns once the control plane has answered, but on a loaded machine its
# port can still reset connections for a while after; what follows needs it answering.
api_server_ready() {
  for _ in $(seq 180); do
    "$KUBECTL" get --raw /readyz >/dev/null 2>&1 && return 0
    sleep 1
  done
  log "the API server did not answer /readyz within 3 minutes after kind create; its containers and last log lines:"
  docker exec "$KIND_CLUSTER-control-plane" crictl ps -a >&2 || true
  docker exec "$KIND_CLUSTER-control-plane" sh -c 'crictl logs --tail 40 "$(crictl ps -a --name kube-apiserver -q | head -1)"' >&2 || true
  return 1
}

up() {
  mkdir -p "$DIR/registry"
  # The cluster's network, made here so that its gateway (the registry's address) is
  # known before kind starts. Its own network, not kind's shared "kind" one, so that
  # removing it touches no other cluster.
  docker network create "$KIND_EXPERIMENTAL_DOCKER_NETWORK" --subnet "$KIND_SUBNET" --gateway "$KIND_GATEWAY" >/dev/null
  "$REGISTRY_CMD" -dir "$DIR/registry" -addr "$KIND_GATEWAY:5000" -bin "$("$ROOT/hack/tool.sh" registry)" \
    > "$DIR/logs/registry.log" 2>&1 &
  echo $! > "$DIR/registry.pid"
  for _ in $(seq 60); do [ -f "$DIR/registry/ready" ] && break; sleep 1; done
  [ -f "$DIR/registry/ready" ] || { cat "$DIR/logs/registry.log" >&2; return 1; }
  cluster_config > "$DIR/cluster.yaml"
  local image=()
  [ -z "$KIND_IMAGE" ] || image=(--image "$KIND_IMAGE")
  "$KIND" create cluster --name "$KIND_CLUSTER" "${image[@]}" --config "$DIR/cluster.yaml" \
    --kubeconfig "$DIR/kubeconfig" --retain >&2
  api_server_ready
  if [ "$KIND_OFFLINE" = 1 ]; then pod_network; fi
  "$KUBECTL" wait --for=condition=Ready nodes --all --timeout=300s >&2
}

down() {
  if [ -f "$DIR/kubeconfig" ] || docker ps -a --format '{{.Names}}' 2>/dev/null | grep -q "^$KIND_CLUSTER-"; then
    "$KIND" export logs "$DIR/logs/kind" --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
    "$KIND" delete cluster --name "$KIND_CLUSTER" >&2 || true
  fi
  if [ -f "$DIR/registry.pid" ]; then
    kill -TERM "$(cat "$DIR/registry.pid")" 2>/dev/null || true
    rm -f "$DIR/registry.pid"
  fi
  docker network rm "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null 2>&1 || true
}
