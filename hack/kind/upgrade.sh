#!/usr/bin/env bash
# upgrade.sh arrange|check — the real cluster's part of the upgrade scenario
# (hack/kind-e2e.sh; test/upgrade has the rest): "arrange", while the first release
# runs, makes a replicated ConfigMap and a Pod that mounts its replica and
# prints it whenever it changes (hack/printfile); "check", after helm upgrade, says that
# the replicas were neither recreated nor written (same uid and resourceVersion) and
# that the Pod ran throughout: never restarted, its volume never failed, the file it
# printed once is the one it still has. KUBECTL, KUBECONFIG and STATE (a file the two
# steps share) come from kind-e2e.sh.
set -euo pipefail
log() { echo "upgrade: $*" >&2; }
replicas() {
  "$KUBECTL" -n upgrade-app get configmap settings -o jsonpath='{.metadata.uid} {.metadata.resourceVersion}{"\n"}'
  "$KUBECTL" -n cmsync-system get secret cmsync-pull -o jsonpath='{.metadata.uid} {.metadata.resourceVersion}{"\n"}'
}

case "$1" in
arrange)
  "$KUBECTL" create namespace upgrade-src >/dev/null
  "$KUBECTL" create namespace upgrade-app >/dev/null
  "$KUBECTL" -n upgrade-src create configmap settings --from-literal=mode=first-release >/dev/null
  "$KUBECTL" -n upgrade-src label configmap settings cmsync.io/replicate=true >/dev/null
  "$KUBECTL" -n upgrade-src annotate configmap settings cmsync.io/target-namespaces=upgrade-app >/dev/null
  for _ in $(seq 60); do "$KUBECTL" -n upgrade-app get configmap settings >/dev/null 2>&1 && break; sleep 1; done
  "$KUBECTL" apply -f - >/dev/null <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: reader, namespace: upgrade-app}
spec:
  containers:
    - name: reader
      image: localhost/cmsync-node/printfile:1
      imagePullPolicy: Never
      args: ["/config/mode"]
      volumeMounts: [{name: config, mountPath: /config}]
  volumes:
    - name: config
      configMap: {name: settings}
YAML
  "$KUBECTL" -n upgrade-app wait pod/reader --for=condition=Ready --timeout=120s >/dev/null
  # The first release's passes settle (a status write, Events); what stands then must stand.
  sleep 10
  replicas > "$STATE"
  log "the first release serves; the Pod reads its replica: $("$KUBECTL" -n upgrade-app logs reader | tail -1)"
  ;;
check)
  # The new release's Pods lead and pass over every source before the checks.
  sleep 20
  if ! diff <(cat "$STATE") <(replicas) >&2; then
    log "FAILED: a replica was recreated or written by the upgrade (uid and resourceVersion above: before, after)"
    exit 1
  fi
  restarts="$("$KUBECTL" -n upgrade-app get pod reader -o jsonpath='{.status.containerStatuses[0].restartCount} {.status.phase}')"
  printed="$("$KUBECTL" -n upgrade-app logs reader)"
  if [ "$restarts" != "0 Running" ] || [ "$printed" != "$(printf -- '--- /config/mode\nfirst-release')" ]; then
    log "FAILED: the Pod (restarts and phase: $restarts) printed:"
    echo "$printed" >&2
    exit 1
  fi
  "$KUBECTL" -n upgrade-src get configmap settings -o jsonpath='{.metadata.annotations.cmsync\.io/status}' | grep -qx Synced ||
    { log "FAILED: the source does not say Synced after the upgrade"; exit 1; }
  log "after helm upgrade: every replica in place (same uid and resourceVersion), the Pod read its volume throughout"
  ;;
*)
  echo "usage: upgrade.sh arrange|check" >&2
  exit 2
  ;;
esac
