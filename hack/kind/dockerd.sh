#!/usr/bin/env bash
# dockerd.sh start|stop DIR — a Docker engine of the kind suite's own, from Debian's
# docker.io, that touches nothing else on the machine: its data root, exec root, PID
# file and socket are under DIR, and it is told to leave the host's firewall, IP
# forwarding and default bridge alone (the kind nodes reach each other and the host on
# their own bridge; nothing in the suite leaves the machine). Its default runtime is
# runcwrap (hack/runcwrap), for VMs that withhold CAP_SYS_RESOURCE.
#
# start prints the DOCKER_HOST to use; stop stops the engine by its PID, unmounts what
# it left mounted under DIR and removes DIR.
set -euo pipefail
mode="$1" dir="$2"
log() { echo "dockerd: $*" >&2; }

start() {
  mkdir -p "$dir/data" "$dir/exec" "$dir/bin"
  go build -C "$(dirname "$0")/.." -o "$dir/bin/runcwrap" ./runcwrap
  cat > "$dir/daemon.json" <<JSON
{
  "data-root": "$dir/data",
  "exec-root": "$dir/exec",
  "pidfile": "$dir/dockerd.pid",
  "hosts": ["unix://$dir/docker.sock"],
  "iptables": false,
  "ip-forward": false,
  "ip-masq": false,
  "bridge": "none",
  "runtimes": {"runcwrap": {"path": "$dir/bin/runcwrap"}},
  "default-runtime": "runcwrap"
}
JSON
  # dockerd finds runc, containerd and docker-proxy on PATH; Debian puts them in /usr/sbin.
  PATH="/usr/sbin:/usr/bin:/sbin:/bin" setsid dockerd --config-file "$dir/daemon.json" > "$dir/dockerd.log" 2>&1 < /dev/null &
  for _ in $(seq 60); do
    if DOCKER_HOST="unix://$dir/docker.sock" docker version >/dev/null 2>&1; then
      echo "unix://$dir/docker.sock"
      return
    fi
    sleep 1
  done
  log "the engine did not answer within 60 s; its log:"
  tail -20 "$dir/dockerd.log" >&2
  exit 1
}

stop() {
  [ -d "$dir" ] || return 0
  if [ -f "$dir/dockerd.pid" ]; then
    local pid
    pid="$(cat "$dir/dockerd.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Whatever the engine or its containers left mounted under DIR, deepest first.
  awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$dir"
}

case "$mode" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: dockerd.sh start|stop DIR" >&2; exit 2 ;;
esac
