#!/usr/bin/env bash
# run.sh runs the cmsync binary against the current kubeconfig when it reaches a cluster;
# otherwise it starts the project's local control plane (a real kube-apiserver, etcd and
# kube-controller-manager), points cmsync at it, and stops it again when cmsync exits.
set -euo pipefail
bin="$1"; shift

mkdir -p .cache
go build -C hack -o "$PWD/.cache/localcluster" ./localcluster
if .cache/localcluster -reachable; then
  echo "run: using the cluster of the current kubeconfig" >&2
  # cmsync prefers an in-cluster config to $KUBECONFIG (run in a Pod, it would manage
  # that Pod's cluster): name the current kubeconfig when it is one file.
  if [ -n "${KUBECONFIG:-}" ] && [[ "$KUBECONFIG" != *:* ]]; then
    exec "$bin" --kubeconfig="$KUBECONFIG" "$@"
  fi
  exec "$bin" "$@"
fi

echo "run: no cluster reachable; starting the local control plane (the first time builds kube-apiserver, kube-controller-manager and etcd, ~10 min)" >&2
export KUBEBUILDER_ASSETS="$(hack/control-plane-binaries.sh)"
kubeconfig="$PWD/.cache/local/kubeconfig"
rm -f "$kubeconfig"
.cache/localcluster -kubeconfig-out "$kubeconfig" &
cluster=$!
trap 'kill "$cluster" 2>/dev/null; wait "$cluster" 2>/dev/null || true' EXIT
for _ in $(seq 120); do
  [ -s "$kubeconfig" ] && break
  kill -0 "$cluster" 2>/dev/null || { echo "run: the local control plane failed to start" >&2; exit 1; }
  sleep 0.5
done
echo "run: local control plane up; in another shell: export KUBECONFIG=$kubeconfig" >&2
"$bin" --kubeconfig="$kubeconfig" "$@"
