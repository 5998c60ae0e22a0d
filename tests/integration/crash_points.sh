#!/usr/bin/env bash
# timeout: 240
# Crashes at chosen points of the commit protocol and of a checkpoint: two
# durable memory servers run `lotus bank`; server 1 is restarted with
# LOTUS_CRASH_AT set, so it kills itself (SIGKILL) at that point:
#   prepared       its PREPARE is durable but its vote was never sent
#                  (a PREPARE on one participant only, as far as the client knows)
#   before_commit  every participant prepared and the COMMIT arrived; nothing applied
#   checkpoint     a checkpoint's pages are written, its manifest is not
# Then it is restarted normally; its resolver settles what it left prepared,
# and `lotus bank --verify` must find the total unchanged and every
# acknowledged transfer present.
set -u
fail() { echo "FAIL: $*"; exit 1; }
L=${LOTUS_BIN:?}
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
top=$(mktemp -d)
trap 'cluster_stop; rm -rf "$top"' EXIT

for point in prepared:20 before_commit:20 checkpoint:1; do
  dir=$top/${point%%:*}; mkdir -p "$dir"
  CLUSTER_DATA=$dir/data CLUSTER_DURABILITY=sync CLUSTER_CC=wait_die
  cluster_start "$dir" 2 --threads 1 --memory 64M --durability sync --checkpoint-log 64K \
    || fail "$point: servers did not start"
  led=$dir/bank.ledger
  "$L" bank --config "$CLUSTER_INI" --accounts 40 --opening 1000 --seconds 0.2 --threads 1 \
      --ledger "$led" --quiet >/dev/null 2>"$dir/bank0.err" || fail "$point: setup run failed"
  cluster_kill 1 2>/dev/null
  export LOTUS_CRASH_AT=$point
  cluster_restart 1 || fail "$point: server 1 did not restart with the crash point"
  unset LOTUS_CRASH_AT
  "$L" bank --config "$CLUSTER_INI" --seconds 20 --threads 2 --inflight 2 --ledger "$led" \
      --quiet >"$dir/bank.out" 2>"$dir/bank.err"
  rc=$?
  grep -q "crash point ${point%%:*} reached" "$dir/ms1.err" \
    || fail "$point: the crash point was never reached (bank exit $rc)"
  [ $rc -eq 3 ] || [ $rc -eq 0 ] || fail "$point: bank exited $rc: $(tail -n 20 "$dir/bank.err")"
  cluster_restart 1 || fail "$point: server 1 did not come back"
  ok=""
  for i in $(seq 20); do   # prepared transactions hold their locks until resolved
    ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$dir/verify.err") \
      && { ok=1; break; }
    sleep 0.5
  done
  [ -n "$ok" ] || fail "$point: verify failed: $ver $(cat "$dir/verify.err")"
  [ "$(echo "$ver" | field total)" = 40000 ] || fail "$point: total changed: $ver"
  echo "$point: bank exit $rc; $(cat "$dir"/ms*.err | grep -c resolved) resolutions; verify: $ver"
  cluster_stop
done
echo ok
