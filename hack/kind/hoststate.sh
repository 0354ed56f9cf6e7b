#!/usr/bin/env bash
# hoststate.sh prints what the kind suite must leave as it found it on the machine: the
# firewall rules (every iptables backend, IPv4 and IPv6, without packet counters), the
# network links and routes, the mounts, and IP forwarding. kind-e2e.sh compares a
# print taken before the suite with one taken after it.
set -uo pipefail
section() { echo "== $1"; }
for save in iptables-legacy-save iptables-nft-save ip6tables-legacy-save ip6tables-nft-save; do
  command -v "$save" >/dev/null || continue
  section "$save"
  "$save" 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//'
done
section links
ip -o link show | awk -F': ' '{ print $2 }' | sort
section routes
ip route show table all | sort
section mounts
awk '{ print $5, $9 }' /proc/self/mountinfo | sort
section forwarding
cat /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv6/conf/all/forwarding
