#!/usr/bin/env bash
# kind-e2e.sh test|up — the chart's Pods on a real kind cluster, installed as users
# install: ko's image and the OCI chart pushed to a registry, signed, verified, pulled
# by the cluster. "test" runs the in-cluster suites against it (the e2e suite with a
# Pod on each node mounting replicas and a replicated default-deny NetworkPolicy between
# two Pods, an upgrade from the first release, then make install from this checkout
# over it with ObjectSync copying NetworkPolicies, scoped mode, a tampered image) and deletes
# everything; "up" installs with make install, as docs/install.md says, and keeps the
# cluster until Ctrl-C.
#
# Where it runs:
#   - with a Docker engine this user can reach (a laptop): that engine and kind's
#     published node image;
#   - as root without one (these CI machines): a Docker engine of the suite's own from
#     Debian's docker.io (hack/kind/dockerd.sh) and a node image built offline from what
#     the project builds (hack/kind/node-image.sh). The machine is left as found: the
#     suite compares its firewall, links, routes and mounts before and after
#     (hack/kind/hoststate.sh) and fails on any difference;
#   - otherwise it says why and skips (make test) or fails (make kind-e2e).
# CMSYNC_KIND_PRIVATE_ENGINE=1 takes the second way even where Docker answers (as root),
# to run what CI runs.
# Everything lives under .cache/kind; logs (the nodes' too) stay in .cache/kind/logs.
set -euo pipefail
mode="${1:-test}"
log() { echo "kind-e2e: $*" >&2; }
skip_or_fail() {
  if [ -n "${CMSYNC_KIND_E2E_OPTIONAL:-}" ]; then log "SKIPPED: $*"; exit 0; fi
  log "$*"; exit 1
}

ROOT="$PWD"
DIR="$PWD/.cache/kind"
KIND="$(hack/tool.sh kind)"
HELM="${HELM:-$(hack/tool.sh helm)}"
engine=""
if [ -z "${CMSYNC_KIND_PRIVATE_ENGINE:-}" ] && docker info >/dev/null 2>&1; then
  engine=yours
elif [ "$(id -u)" = 0 ]; then
  engine=private
else
  skip_or_fail "no Docker engine answers, and without root the suite cannot run one of its own (run make kind-e2e as root, or with Docker)"
fi

# From Debian, for the suite's own engine and the offline node image.
if [ "$engine" = private ]; then
  need=()
  command -v dockerd >/dev/null || [ -x /usr/sbin/dockerd ] || need+=(docker.io)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]} from Debian"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
      { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
  fi
fi

# shellcheck source=hack/kind/cluster.sh
. hack/kind/cluster.sh
finish() {
  local rc=$?
  trap - EXIT INT TERM
  log "deleting the cluster"
  down
  if [ "$engine" = private ]; then
    hack/kind/dockerd.sh stop "$DIR/engine"
    hack/kind/hoststate.sh > "$DIR/logs/host-after.txt"
    if ! diff -u "$DIR/logs/host-before.txt" "$DIR/logs/host-after.txt" >&2; then
      log "FAILED: the machine is not as the suite found it (the diff above)"
      rc=1
    fi
  fi
  exit "$rc"
}

# A run that was killed may have left its cluster, registry and engine: clear them first.
if [ "$engine" = private ] && [ -d "$DIR/engine" ]; then
  DOCKER_HOST="$(hack/kind/dockerd.sh host "$DIR/engine")"
  export DOCKER_HOST
fi
[ -d "$DIR" ] && down
[ "$engine" = private ] && hack/kind/dockerd.sh stop "$DIR/engine"
rm -rf "$DIR"
mkdir -p "$DIR/logs" "$DIR/images"
images="$DIR/images"
# kubectl, and for the offline image kubeadm, kubelet and etcd (hack/kind/node-image.sh).
KUBE_BIN="$(hack/control-plane-binaries.sh kind)"
KUBECTL="$KUBE_BIN/kubectl"
[ "$engine" = private ] && hack/kind/hoststate.sh > "$DIR/logs/host-before.txt"
trap finish EXIT
trap 'exit 130' INT TERM
KIND_IMAGE="" KIND_OFFLINE=0 KIND_ETCD_TAG=""
if [ "$engine" = private ]; then
  log "a Docker engine of the suite's own (hack/kind/dockerd.sh)"
  DOCKER_HOST="$(hack/kind/dockerd.sh start "$DIR/engine")"
  export DOCKER_HOST
  KIND_IMAGE="$(hack/kind/node-image.sh)" KIND_OFFLINE=1
  KIND_ETCD_TAG="$("$KUBE_BIN/etcd" --version | sed -n 's/^etcd Version: \(.*\)/\1-0/p')"
fi
KIND_NODES="${KIND_NODES:-2}"
export KIND_IMAGE KIND_OFFLINE KIND_NODES KIND_ETCD_TAG
export KUBECONFIG="$DIR/kubeconfig"

go build -C hack -o "$DIR/registry-cmd" ./registry
REGISTRY_CMD="$DIR/registry-cmd"
log "the cluster (${KIND_NODES} kind nodes, image ${KIND_IMAGE:-the published one}) and its registry"
up

# The tests' printfile and netprobe images are fixtures loaded into the nodes; cmsync
# itself goes the way users' images go: built by ko, pushed to the registry, signed, and
# pulled by the kubelet.
CGO_ENABLED=0 go build -trimpath -o "$DIR/cmsync-host" .
go build -C hack -o "$DIR/image" ./image
for fixture in printfile netprobe; do
  CGO_ENABLED=0 go build -C hack -trimpath -ldflags="-s -w" -o "$images/$fixture" "./$fixture"
  "$DIR/image" -binary "$images/$fixture" -ref "localhost/cmsync-node/$fixture:1" -out "$images/$fixture.tar"
done
"$KIND" load image-archive "$images/printfile.tar" "$images/netprobe.tar" --name "$KIND_CLUSTER" >&2

# Whether the Pod network enforces NetworkPolicy, for the test of a replicated
# default-deny policy: kind's published image runs kindnetd, whose policy agent
# (kube-network-policies) enforces it; the offline image's ptp network enforces none.
if [ "$KIND_OFFLINE" = 1 ]; then
  CMSYNC_KIND_NETWORK_POLICY="the offline node image has no kindnetd, and its Pod network (a ptp CNI configuration and static routes, hack/kind/cluster.sh) enforces no NetworkPolicy"
else
  CMSYNC_KIND_NETWORK_POLICY=enforced
fi
export CMSYNC_KIND_NETWORK_POLICY
log "NetworkPolicy on this cluster's Pod network: $CMSYNC_KIND_NETWORK_POLICY"

# The release path of make test-release, against the cluster's registry (TLS from its
# own CA, htpasswd): ko's image, the OCI chart, cosign signatures verified before
# anything is installed.
# shellcheck disable=SC1091 # written by hack/registry
. "$DIR/registry/registry.env"
export DOCKER_CONFIG="$DIR/docker" SSL_CERT_FILE="$REGISTRY_CA" COSIGN_PASSWORD=
mkdir -p "$DOCKER_CONFIG" "$DIR/cosign"
printf '{"auths":{"%s":{"auth":"%s"}}}' "$REGISTRY_HOST" "$(printf '%s:%s' "$REGISTRY_USER" "$REGISTRY_PASSWORD" | base64 -w0)" > "$DOCKER_CONFIG/config.json"
release=(REGISTRY="$REGISTRY_HOST/cmsync" IMAGE_TAG=kind-e2e CHART_VERSION=0.1.0-kind-e2e
  HELM_PUSH_ARGS="--ca-file $REGISTRY_CA --registry-config $DOCKER_CONFIG/config.json")
log "ko: the image, pushed to the cluster's registry $REGISTRY_HOST"
make -s base-image "${release[@]}" >&2
image="$(make -s image "${release[@]}" | grep -o '[^ ]*@sha256:[0-9a-f]*' | tail -1)"
chart_digest="$(make -s chart-push "${release[@]}" 2>&1 | grep -o 'sha256:[0-9a-f]*' | tail -1)"
cosign="$(hack/tool.sh cosign)"
(cd "$DIR/cosign" && rm -f cosign.key cosign.pub && "$cosign" generate-key-pair >/dev/null)
keys=(COSIGN_KEY="$DIR/cosign/cosign.key" COSIGN_PUB="$DIR/cosign/cosign.pub")
make -s sign "${keys[@]}" REF="$image" >&2
make -s sign "${keys[@]}" REF="$REGISTRY_HOST/cmsync/charts/cmsync@$chart_digest" >&2
log "verifying the signatures of the image and the chart before installing"
make -s verify-signature "${keys[@]}" REF="$REGISTRY_HOST/cmsync/cmsync:kind-e2e"
make -s verify-signature "${keys[@]}" REF="$REGISTRY_HOST/cmsync/charts/cmsync:0.1.0-kind-e2e"

# The kubelet pulls with the credentials of an imagePullSecrets entry, and that Secret is
# a cmsync replica of a source kept in another namespace: cmsync delivers its own
# credentials. Its Pods cannot pull before the replica exists, so the first replica is
# written by the release's binary run once from here as the chart's ServiceAccount (the
# only identity the admission policy lets write replicas); then the Pods pull and lead.
"$KUBECTL" create namespace registry-credentials >/dev/null
"$KUBECTL" -n registry-credentials create secret docker-registry cmsync-pull --docker-server="$REGISTRY_HOST" \
  --docker-username="$REGISTRY_USER" --docker-password="$REGISTRY_PASSWORD" >/dev/null
"$KUBECTL" -n registry-credentials label secret cmsync-pull cmsync.io/replicate=true >/dev/null
"$KUBECTL" -n registry-credentials annotate secret cmsync-pull cmsync.io/target-namespaces=cmsync-system >/dev/null
chart_values=(--namespace cmsync-system --set image.repository="$REGISTRY_HOST/cmsync/cmsync" --set 'imagePullSecrets[0].name=cmsync-pull'
  --set replicaCount=2 --set secrets.enabled=true)
oci_chart=("oci://$REGISTRY_HOST/cmsync/charts/cmsync" --version 0.1.0-kind-e2e --ca-file "$REGISTRY_CA" --registry-config "$DOCKER_CONFIG/config.json")

# bootstrap BINARY: the pull secret's first replica, written by BINARY.
bootstrap() {
  local token
  token="$("$KUBECTL" -n cmsync-system create token cmsync)"
  "$KUBECTL" config view --raw --minify --flatten > "$DIR/bootstrap.kubeconfig"
  KUBECONFIG="$DIR/bootstrap.kubeconfig" "$KUBECTL" config set-credentials bootstrap --token="$token" >/dev/null
  KUBECONFIG="$DIR/bootstrap.kubeconfig" "$KUBECTL" config set-context --current --user=bootstrap >/dev/null
  "$1" --kubeconfig="$DIR/bootstrap.kubeconfig" --secrets=enabled --leader-elect=true \
    --leader-election-namespace=cmsync-system --metrics-bind-address=0 --health-probe-bind-address=0 \
    >"$DIR/logs/cmsync-bootstrap.log" 2>&1 &
  local pid=$!
  for _ in $(seq 120); do "$KUBECTL" -n cmsync-system get secret cmsync-pull >/dev/null 2>&1 && break; sleep 1; done
  kill -TERM "$pid"; wait "$pid" || true
  "$KUBECTL" -n cmsync-system get secret cmsync-pull -o jsonpath='{.metadata.annotations.cmsync\.io/source}{"\n"}' >&2
}
rolled_out() {
  "$KUBECTL" -n cmsync-system rollout status deployment/cmsync --timeout=300s ||
    { "$KUBECTL" get pods -A -o wide; "$KUBECTL" describe pods -n cmsync-system | tail -40; exit 1; }
}

# make install as a user runs it from a checkout (docs/install.md): this checkout's image
# through the cluster's registry, the chart pinned to its digest. Its Pods pull only once
# the pull secret's replica exists, so it does not wait for them.
make_install() {
  make -s install REGISTRY="$REGISTRY_HOST/cmsync" IMAGE_TAG=kind-e2e KUBECTL="$KUBECTL" INSTALL_WAIT= "$@" >/dev/null
}

if [ "$mode" = up ]; then
  log "the pull secret's source, and make install REGISTRY=$REGISTRY_HOST/cmsync"
  make_install HELM_ARGS="--set imagePullSecrets[0].name=cmsync-pull --set replicaCount=2 --set secrets.enabled=true --set objectSync.kinds[0]=networking.k8s.io/v1/NetworkPolicy"
  bootstrap "$DIR/cmsync-host"
  rolled_out
else
  # The first release (test/upgrade's, built from this repository's history: its binary
  # and chart by hack/first-release.sh, its image by ko from its source), then helm
  # upgrade to this chart and image while a Pod on the node mounts a replica.
  first_commit="$(sed -n 's/^const firstRelease = "\([0-9a-f]*\)"$/\1/p' test/upgrade/main_test.go)"
  first="$(hack/first-release.sh "$first_commit")"
  log "ko: the first release ($first_commit), pushed to the cluster's registry"
  ko="$(hack/tool.sh ko)"
  (cd "$first/src" && KO_DOCKER_REPO="$REGISTRY_HOST/cmsync/cmsync" KO_DEFAULTBASEIMAGE="$REGISTRY_HOST/cmsync/base:nonroot" \
    "$ko" build --bare --platform=linux/amd64 --tags=first-release . >&2)
  log "the pull secret's source, and helm install of the first release"
  "$HELM" install cmsync "$first/chart" --create-namespace "${chart_values[@]}" --set image.tag=first-release >/dev/null
  bootstrap "$first/cmsync"
  rolled_out
  KUBECTL="$KUBECTL" STATE="$DIR/upgrade.state" hack/kind/upgrade.sh arrange
  log "helm upgrade to oci://$REGISTRY_HOST/cmsync/charts/cmsync, then its CRDs (Helm leaves CRDs as they are)"
  "$HELM" upgrade cmsync "${oci_chart[@]}" "${chart_values[@]}" >/dev/null
  "$KUBECTL" apply --server-side --force-conflicts -f deploy/crds/ >/dev/null
  rolled_out
  KUBECTL="$KUBECTL" STATE="$DIR/upgrade.state" hack/kind/upgrade.sh check
  log "make install over the release: this checkout, pinned to the digest ko pushed, with ObjectSync copying NetworkPolicies"
  make_install HELM_ARGS="--set objectSync.kinds[0]=networking.k8s.io/v1/NetworkPolicy"
  rolled_out
fi
pinned="$("$KUBECTL" -n cmsync-system get deployment cmsync -o jsonpath='{.spec.template.spec.containers[0].image}')"
[[ "$pinned" == "$REGISTRY_HOST/cmsync/cmsync@sha256:"* ]] ||
  { log "FAILED: make install left the Deployment on image $pinned, not pinned by digest"; exit 1; }
log "the kubelet pulled the image:"
"$KUBECTL" -n cmsync-system get events --field-selector reason=Pulled -o custom-columns=MESSAGE:.message --no-headers >&2
"$KUBECTL" get pods -n cmsync-system -o wide >&2

if [ "$mode" = up ]; then
  log "the node runs cmsync; in another shell: export KUBECONFIG=$KUBECONFIG; kubectl is $KUBECTL. Ctrl-C stops and cleans up."
  while sleep 3600; do :; done
  exit 0
fi

# The plugin as the release ships it: plugin-dist's archives and manifest (every platform:
# the manifest names them all), this machine's archive unpacked.
make -s plugin-dist VERSION=v0.0.0-kind-e2e BIN="$DIR/plugin" >&2
grep -q "sha256: $(sha256sum "$DIR"/plugin/dist/kubectl-cmsync_linux_amd64.tar.gz | cut -d' ' -f1)" "$DIR"/plugin/dist/cmsync.yaml
mkdir -p "$DIR"/plugin/unpacked && tar -C "$DIR"/plugin/unpacked -xzf "$DIR"/plugin/dist/kubectl-cmsync_linux_amd64.tar.gz
CMSYNC_E2E_EXISTING_CLUSTER=1 CMSYNC_PLUGIN="$DIR/plugin/unpacked/kubectl-cmsync" HELM="$HELM" go test -tags e2e -count=1 -timeout 30m ./test/e2e/... -v

# Scoped mode, once: the release upgraded to serve a list of namespaces (its own and the
# pull secret's among them; scoped-later does not exist, so it gets no Role and the Pods
# serve the others), then the scoped suite against its Pods.
log "helm upgrade to scoped mode, and the scoped suite"
for ns in scoped-src scoped-a scoped-b scoped-out unlisted-src; do "$KUBECTL" create namespace "$ns" >/dev/null; done
"$HELM" upgrade cmsync "oci://$REGISTRY_HOST/cmsync/charts/cmsync" --version 0.1.0-kind-e2e \
  --ca-file "$REGISTRY_CA" --registry-config "$DOCKER_CONFIG/config.json" --namespace cmsync-system --reuse-values \
  --set-json 'scope.namespaces=["cmsync-system","registry-credentials","scoped-src","scoped-a","scoped-b","scoped-later"]' >&2
"$KUBECTL" -n cmsync-system rollout status deployment/cmsync --timeout=300s ||
  { "$KUBECTL" get pods -A -o wide; "$KUBECTL" describe pods -n cmsync-system | tail -40; exit 1; }
"$KUBECTL" get clusterrole cmsync -o jsonpath='{range .rules[*]}{.resources}{"\n"}{end}' | grep -q -E '"(configmaps|secrets)"' &&
  { log "FAILED: the scoped ClusterRole still grants ConfigMaps or Secrets"; exit 1; }
CMSYNC_E2E_EXISTING_CLUSTER=1 CMSYNC_PLUGIN="$DIR/plugin/unpacked/kubectl-cmsync" HELM="$HELM" go test -tags e2e -count=1 -timeout 15m ./test/scoped/... -v

# A tampered image: one byte changed and pushed under the same tag. Its signature does
# not verify, so it is not installed (the gate is the same verify-signature as above);
# then the signed image is put back under the tag.
log "a tampered image under the same tag"
signed="$(go run -C hack ./tamper -ref "$REGISTRY_HOST/cmsync/cmsync:kind-e2e")"
if make -s verify-signature "${keys[@]}" REF="$REGISTRY_HOST/cmsync/cmsync:kind-e2e" 2>/dev/null; then
  log "FAILED: a tampered image passed signature verification"
  exit 1
fi
log "the tampered image fails verification and is not installed"
go run github.com/google/go-containerregistry/cmd/crane copy "$signed" "$REGISTRY_HOST/cmsync/cmsync:kind-e2e" 2>/dev/null
make -s verify-signature "${keys[@]}" REF="$REGISTRY_HOST/cmsync/cmsync:kind-e2e"
log "the signed image is back under its tag and verifies"
