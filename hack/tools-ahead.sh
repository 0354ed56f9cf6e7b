#!/usr/bin/env bash
# tools-ahead.sh LOG PID — make test's first step. On a fresh machine make test builds about
# 28 minutes of tools on 2 cores, and each used to wait for the step that needs it while
# the integration and end-to-end suites, which mostly wait on the API server, left the
# CPU idle. This starts one background builder, at the lowest CPU priority so that it
# takes only what the steps in front leave, that builds the tools of the later steps in
# the order they are needed.
# A step that reaches its tool first waits on the tool's lock (hack/tool.sh,
# hack/control-plane-binaries.sh) rather than building it twice, and a tool the builder
# failed to build is built again by the step that needs it, which shows the error.
#
# The builder stops, after the tool in hand, once process PID (the make) has ended.
# Its output goes to LOG. On a warm machine it finds every tool and ends at once.
set -euo pipefail
log="$1" make_pid="$2"
cd "$(dirname "$0")/.."
mkdir -p "$(dirname "$log")"

# In the order make test needs them (see its prerequisites): the control plane for the
# integration suite; the linters, controller-gen, helm and promtool for the steps after
# it; Prometheus for the end-to-end suite; the release path's registry, cosign and ko;
# and, for the kind suite's node image where the suite builds one (as root without a
# Docker engine), the rest of Kubernetes, containerd, crictl and CoreDNS, then kind.
steps=("hack/control-plane-binaries.sh")
for tool in golangci-lint actionlint controller-gen helm promtool prometheus registry cosign ko; do
  steps+=("hack/tool.sh $tool")
done
if [ "$(id -u)" = 0 ] && ! docker info >/dev/null 2>&1; then
  steps+=("hack/control-plane-binaries.sh kind" "hack/tool.sh containerd" "hack/tool.sh crictl" "hack/tool.sh coredns")
fi
steps+=("hack/tool.sh kind")

build_ahead() {
  local step start
  for step in "${steps[@]}"; do
    kill -0 "$make_pid" 2>/dev/null || { echo "tools-ahead: make has ended; stopping"; return 0; }
    start=$SECONDS
    # shellcheck disable=SC2086 # a step is a command and its argument
    if $step >/dev/null; then
      echo "tools-ahead: $step ready ($((SECONDS - start)) s)"
    else
      echo "tools-ahead: $step FAILED; the step that needs it builds it again"
    fi
  done
}

# nice 19: the steps in front keep the CPU. Its output goes to the log only, so that it
# never holds make's (or CI's) pipes open; in make's process group, so that a Ctrl-C
# stops it with make.
nice -n 19 bash -c "$(declare -p steps make_pid); $(declare -f build_ahead); build_ahead" \
  >"$log" 2>&1 </dev/null &
echo "tools-ahead: building the later steps' tools in the background (log: $log)"
