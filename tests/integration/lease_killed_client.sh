#!/usr/bin/env bash
# timeout: 120
# A client killed with -9 frees its locks within its lease + 1 s, with each
# cc protocol, on tcp (issue 12: a wound_wait client killed after its
# COMMITTING round used to keep its locks for good).  Two standalone memory
# servers (one thread each, lease_ms LEASE_MS, default 2000); `lotus bank
# --threads 4 --inflight 4` killed -9 after 1.5 s, KILLS (default 3) times
# per protocol.  From the kill, `lotus bank --verify` is retried until it
# passes: it must within lease + 1 s, with the total preserved.  The
# measured times are printed.
set -u
fail() { echo "FAIL: $*"; exit 1; }
L=${LOTUS_BIN:?}
dir=$(mktemp -d)
lease=${LEASE_MS:-2000}
lease_cfg=$lease
[ "$lease" != default ] || { lease=3000; lease_cfg=; }
kills=${KILLS:-3}
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
bank=
trap '[ -z "$bank" ] || kill -9 $bank 2>/dev/null; cluster_stop; rm -rf "$dir"' EXIT
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
accounts=20

for cc in ${CCS:-no_wait wait_die wound_wait}; do
  cluster_stop
  mkdir -p "$dir/$cc"
  CLUSTER_LEASE_MS=$lease_cfg cluster_start "$dir/$cc" 2 --threads 1 --memory 64M \
    || fail "$cc: servers did not start"
  led=$dir/$cc/ledger
  "$L" bank --config "$CLUSTER_INI" --cc $cc --accounts $accounts --seconds 0.2 --threads 1 \
      --ledger "$led" --quiet >/dev/null 2>"$dir/b0.err" || fail "$cc: first bank run: $(cat "$dir/b0.err")"
  times=
  for ((k = 1; k <= kills; k++)); do
    "$L" bank --config "$CLUSTER_INI" --cc $cc --seconds 30 --threads 4 --inflight 4 \
        --ledger "$led" --quiet >/dev/null 2>"$dir/b.err" &
    bank=$!
    sleep 1.5
    kill -0 $bank 2>/dev/null || fail "$cc: bank ended early: $(tail -n 3 "$dir/b.err")"
    kill -9 $bank; t0=$(date +%s%N)
    wait $bank 2>/dev/null
    bank=
    [ -z "$(tail -c1 "$led")" ] || sed -i '$ d' "$led"   # a torn last line
    ok=
    while [ $((($(date +%s%N) - t0) / 1000000)) -le $((lease + 5000)) ]; do
      ver=$(timeout -s KILL 10 "$L" bank --config "$CLUSTER_INI" --cc $cc --ledger "$led" \
            --verify --json 2>"$dir/v.err") && { ok=1; break; }
      sleep 0.05
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    [ -n "$ok" ] || fail "$cc kill $k: locks still held $ms ms after the kill: $ver $(tail -n 2 "$dir/v.err")"
    [ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] || fail "$cc kill $k: total changed: $ver"
    [ $ms -le $((lease + 1000)) ] || fail "$cc kill $k: locks free only after $ms ms (lease $lease ms)"
    times="$times ${ms}"
  done
  echo "$cc: verify passed (total $((accounts * 1000))) after:$times ms from the kill (lease $lease ms);" \
       "losses seen by the servers: $(cat "$dir/$cc"/ms*.err | grep -c "client .* lost")"
done
echo ok
