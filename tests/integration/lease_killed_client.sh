#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# A client killed with -9 frees its locks within its lease + 2 s, with each
# cc protocol, on tcp (issue 12: a wound_wait client killed after its
# COMMITTING round used to keep its locks for good).  Two standalone memory
# servers (one thread each, lease_ms LEASE_MS, default 2000); `lotus bank
# --threads 4 --inflight 4` killed -9 after 1.5 s, KILLS (default 3) times
# per protocol, and once more SIGSTOPped instead (a client cut off without
# FIN or RST; killed afterwards).  From the fault, `lotus bank --verify` is
# retried until it passes: it must within lease + 2 s, with the total
# preserved.  FAULTS (default "kill stop") picks the faults; the measured
# times are printed.  (On main the kill -9 case already passes; the stopped
# client's locks stay held for good there.)
. "$(dirname "$0")/lib.sh"
dir=$T
lease=${LEASE_MS:-2000}
lease_cfg=$lease
[ "$lease" != default ] || { lease=3000; lease_cfg=; }
kills=${KILLS:-3}
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
bank=
at_exit '[ -z "$bank" ] || kill -9 $bank 2>/dev/null; cluster_stop'
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
  for fault in ${FAULTS:-kill stop}; do
  times=
  n=$([ $fault = kill ] && echo $kills || echo 1)
  for ((k = 1; k <= n; k++)); do
    "$L" bank --config "$CLUSTER_INI" --cc $cc --seconds 30 --threads 4 --inflight 4 \
        --ledger "$led" --quiet >/dev/null 2>"$dir/b.err" &
    bank=$!
    sleep 1.5
    kill -0 $bank 2>/dev/null || fail "$cc: bank ended early: $(tail -n 3 "$dir/b.err")"
    if [ $fault = kill ]; then
      kill -9 $bank; t0=$(date +%s%N)
      wait $bank 2>/dev/null
      bank=
    else
      kill -STOP $bank; t0=$(date +%s%N)
    fi
    ok=
    while [ $((($(date +%s%N) - t0) / 1000000)) -le $((lease + 5000)) ]; do
      [ -z "$(tail -c1 "$led")" ] || sed '$ d' "$led" >"$led.v"   # a torn last line
      [ -n "$(tail -c1 "$led")" ] || cp "$led" "$led.v"
      ver=$(timeout -s KILL 10 "$L" bank --config "$CLUSTER_INI" --cc $cc --ledger "$led.v" \
            --verify --json 2>"$dir/v.err") && { ok=1; break; }
      sleep 0.05
    done
    ms=$((($(date +%s%N) - t0) / 1000000))
    if [ -n "$bank" ]; then kill -9 $bank; wait $bank 2>/dev/null; bank=; fi
    [ -z "$(tail -c1 "$led")" ] || sed -i '$ d' "$led"
    [ -n "$ok" ] || fail "$cc $fault $k: locks still held $ms ms after the fault: $ver $(tail -n 2 "$dir/v.err")"
    [ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] || fail "$cc $fault $k: total changed: $ver"
    # 2 s over the lease: the time counted ends when a verify process (start,
    # connect, read every account) has passed, which takes over 1 s on a
    # loaded 2-core machine; locks held for good still fail at once.
    [ $ms -le $((lease + 2000)) ] || fail "$cc $fault $k: locks free only after $ms ms (lease $lease ms)"
    times="$times ${ms}"
  done
  echo "$cc $fault: verify passed (total $((accounts * 1000))) after:$times ms (lease $lease ms)"
  done
  echo "$cc: client losses seen by the servers: $(cat "$dir/$cc"/ms*.err | grep -c "client .* lost")"
done
echo ok
