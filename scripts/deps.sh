#!/usr/bin/env bash
# Installs the Debian packages lotus needs, only those that are missing.
# Runs `apt-get update` once, and only when something must be installed.
set -euo pipefail
case ${1:-} in
  -h|--help) echo "usage: scripts/deps.sh      (as root, or with sudo)"; sed -n '2,3p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
# fio, jq: scripts/compare-fio; gnuplot-nox, jq: scripts/plot-iobench and the
# plots of scripts/bench-ycsb; python3 (/usr/bin/python3): the tests' JSON checks.
need=(build-essential pkg-config libucx-dev liburing-dev libaio-dev libsodium-dev fio gnuplot-nox jq python3
      iproute2 procps util-linux coreutils  # iproute2 (ip netns, tc): the netns_* tests
      redis-tools python3-redis redis-server  # the lotus serve tests and bench-resp
      python3-prometheus-client  # the status test parses lotus status --prometheus
      e2fsprogs mount  # mkfs.ext4 and loop mounts: the disk_full test
      libzookeeper-mt-dev zookeeper  # replicas > 1: the ZooKeeper C client; the server for the repl_* tests
      cppcheck)  # make cppcheck (a CI stage)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}" >&2
SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
