#!/usr/bin/env bash
# dockerd.sh start|host|stop DIR — a Docker engine of the kind suite's own, from Debian's
# docker.io, that touches nothing else on the machine: its data root and PID file are
# under DIR, its exec root and socket in a directory of its own in /run, and it is told
# to leave the host's firewall, IP forwarding and default bridge alone (the kind nodes
# reach each other and the host on their own bridge; nothing in the suite leaves the
# machine). Its socket is root's alone, not the docker group's: whoever reaches it is
# root on the machine. Its default runtime is runcwrap (hack/runcwrap), for VMs that
# withhold CAP_SYS_RESOURCE.
#
# start starts it and prints the DOCKER_HOST to use; host prints that only; stop stops
# the engine by its PID, unmounts what it left mounted and removes both directories.
set -euo pipefail
mode="$1" dir="$2"
# Sockets' paths must stay under 108 bytes whatever DIR is: they go in a short
# directory in /run named after DIR.
exec_root="/run/cmsync-kind-$(echo "$dir" | sha256sum | cut -c1-12)"
log() { echo "dockerd: $*" >&2; }

start() {
  mkdir -p "$dir/data" "$exec_root" "$dir/bin"
  go build -C "$(dirname "$0")/.." -o "$dir/bin/runcwrap" ./runcwrap
  cat > "$dir/daemon.json" <<JSON
{
  "data-root": "$dir/data",
  "exec-root": "$exec_root",
  "pidfile": "$dir/dockerd.pid",
  "hosts": ["unix://$exec_root/docker.sock"],
  "group": "root",
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
    if DOCKER_HOST="unix://$exec_root/docker.sock" docker version >/dev/null 2>&1; then
      echo "unix://$exec_root/docker.sock"
      return
    fi
    sleep 1
  done
  log "the engine did not answer within 60 s; its log:"
  tail -20 "$dir/dockerd.log" >&2
  exit 1
}

stop() {
  [ -d "$dir" ] || [ -d "$exec_root" ] || return 0
  if [ -f "$dir/dockerd.pid" ]; then
    local pid
    pid="$(cat "$dir/dockerd.pid")"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  # Whatever the engine or its containers left mounted under its directories, deepest
  # first.
  awk -v d="$dir/" -v e="$exec_root/" 'index($5, d) == 1 || index($5, e) == 1 { print $5 }' /proc/self/mountinfo |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
  rm -rf "$dir" "$exec_root"
}

case "$mode" in
  start) start ;;
  host) echo "unix://$exec_root/docker.sock" ;;
  stop) stop ;;
  *) echo "usage: dockerd.sh start|host|stop DIR" >&2; exit 2 ;;
esac
