#!/usr/bin/env bash
# install.sh — make install: this checkout onto the cluster of the current kubeconfig.
# ko builds the image (make base-image, make image) and pushes it to REGISTRY, the CRDs
# are applied, and the chart of this checkout is installed, or upgraded, with its image
# pinned to the digest ko pushed: the cluster runs exactly what was built, whatever
# happens to the tag later.
#
# Set by the Makefile: REGISTRY (and REGISTRY_ORIGIN, where make took it from), CHART,
# INSTALL_NAMESPACE, KUBECTL, HELM_ARGS, INSTALL_WAIT, MAKE; HELM may be set too.
set -euo pipefail
set -f # HELM_ARGS is split into words, never expanded as file names ("imagePullSecrets[0]…")
cd "$(dirname "$0")/.."
log() { echo "install: $*" >&2; }
fail() { log "$*"; exit 2; }

# Bad input is refused before anything is built, pushed or applied.
case "$REGISTRY_ORIGIN" in
  "command line" | environment | "environment override") ;;
  *) fail "name the registry to push the image to, one your cluster pulls from: make install REGISTRY=registry.example.com/team" ;;
esac
# host[:port] or host[:port]/path: no scheme, tag, digest, space or trailing slash.
path=""
[[ "$REGISTRY" == */* ]] && path="${REGISTRY#*/}"
if [[ -z "$REGISTRY" || "$REGISTRY" == */ || "$REGISTRY" == *://* || "$REGISTRY" =~ [[:space:]@] || "$path" == *:* ]]; then
  fail "REGISTRY=$REGISTRY: give the registry as host[:port] or host[:port]/path, with no scheme, tag or trailing slash (e.g. registry.example.com/team, localhost:5001)"
fi
command -v "$KUBECTL" >/dev/null || fail "no $KUBECTL: install kubectl, or name it with KUBECTL=..."
"$KUBECTL" get --raw /version >/dev/null ||
  fail "the cluster of the current kubeconfig does not answer (kubectl get --raw /version failed above): nothing was built or pushed"
HELM="${HELM:-$(hack/tool.sh helm)}"

log "building the image with ko and pushing it to $REGISTRY/cmsync"
"$MAKE" -s base-image >&2
built="$("$MAKE" -s image | grep -o '[^ ]*@sha256:[0-9a-f]\{64\}' | tail -1 || true)"
[ -n "$built" ] || fail "ko printed no image digest: see its output above"
# ko prints repository:tag@digest; the chart takes the repository and the digest.
repository="${built%@*}" digest="${built#*@}"
[[ "${repository##*/}" == *:* ]] && repository="${repository%:*}"
image="$repository@$digest"

# Helm installs a chart's CRDs only on its first install: applied here, a newer
# checkout's CRDs reach an existing release too (server-side, taking over the fields an
# earlier helm install wrote).
log "applying the CRDs ($CHART/crds)"
"$KUBECTL" apply --server-side --force-conflicts -f "$CHART/crds/" >&2

# --reset-then-reuse-values: a re-run keeps the values given before (HELM_ARGS of an
# earlier run) and takes this checkout's defaults for the rest.
log "helm upgrade --install cmsync in $INSTALL_NAMESPACE, image $image"
# shellcheck disable=SC2086 # HELM_ARGS and INSTALL_WAIT are lists of flags
"$HELM" upgrade --install cmsync "$CHART" --namespace "$INSTALL_NAMESPACE" --create-namespace \
  --reset-then-reuse-values --skip-crds \
  --set image.repository="$repository" --set image.digest="$digest" $HELM_ARGS $INSTALL_WAIT >&2
echo "$image"
