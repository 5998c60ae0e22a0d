#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# A stopped memory server makes its clients fail with a timeout, not hang and
# not crash (issue 12), on the netns test bed (scripts/netns-cluster): two
# memory servers, `lotus bank` on host c0 and `lotus ycsb` on host c1.  Two
# seconds in, server ms1 gets SIGSTOP.  While it stays stopped, both clients
# must end by themselves within EXIT_S (default 15) seconds with a non-zero
# status (not 2, not a signal: no abort in UCX's cleanup) and say why.  Then
# the server gets SIGCONT and `lotus bank --verify` must pass: total
# preserved, nothing acknowledged lost.  Two rounds (MODES): "late" continues
# the server once the clients ended, "early" 4.5 s after the stop, while they
# are still giving up on it (the issue saw rc 134 at SIGCONT then: an
# assertion in ucp_cleanup).  timeout_ms is 3000 in the config.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
. scripts/lib-netns.sh
lease=$(lease_ms)
exit_s=${EXIT_S:-15}
tmpl=$(mktemp)
{
  echo "[cluster]"
  echo "cc = wait_die"
  echo "timeout_ms = 3000"
  ! lotus_knows lease_ms "$lease" || echo "lease_ms = $lease"
} >"$tmpl"
bed_up 2 "$tmpl" --clients 2 -- --threads 1 --memory 64M
rm -f "$tmpl"
stopped=
bank= ycsb=
at_exit '[ -z "$stopped" ] || kill -CONT "$stopped" 2>/dev/null; bed_down'
led=$WORK/bank.ledger

on c0 "$L" bank --config "$INI" --accounts 20 --seconds 0.2 --threads 1 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank0.err" || fail "first bank run failed: $(cat "$WORK/bank0.err")"
on c1 "$L" ycsb --config "$INI" --compute-id 1 --compute-count 8 --records 2000 --record-size 100 --ops-per-txn 4 \
  --threads 1 --no-run >/dev/null 2>"$WORK/load.err" || fail "ycsb load failed: $(tail -n 3 "$WORK/load.err")"
declare -A rc took
# stop_round MODE: MODE "late" continues ms1 once both clients ended (or
# EXIT_S passed); "early" continues it 4.5 s after the stop, while the
# clients are giving up on it (timeout_ms + 1.5 s)
stop_round() {
  local mode=$1 c p i hung= t0 t_cont why
  rc=() took=()
  on_bg c0 "$L" bank --config "$INI" --seconds 30 --threads 2 --inflight 2 --ledger "$led" --quiet \
    >/dev/null 2>"$WORK/bank.err"
  bank=$BG_PID
  on_bg c1 "$L" ycsb --config "$INI" --compute-id 1 --compute-count 8 --no-load --records 2000 \
    --record-size 100 --ops-per-txn 4 --threads 1 --warmup 0 --seconds 30 \
    >"$WORK/ycsb.out" 2>"$WORK/ycsb.err"
  ycsb=$BG_PID
  sleep 2
  kill -0 $bank 2>/dev/null && kill -0 $ycsb 2>/dev/null \
    || fail "$mode: a client ended before the stop: $(tail -n 2 "$WORK/bank.err" "$WORK/ycsb.err")"
  stopped=$(nc pid ms1) || fail "no pid for ms1"
  kill -STOP "$stopped"
  t0=$(date +%s%N)
  for i in $(seq $((exit_s * 10))); do
    for c in bank ycsb; do
      [ -z "${took[$c]:-}" ] || continue
      p=${!c}
      if ! kill -0 "$p" 2>/dev/null; then wait "$p"; rc[$c]=$?; took[$c]="$(ms_since "$t0") s"; fi
    done
    [ -n "${took[bank]:-}" ] && [ -n "${took[ycsb]:-}" ] && break
    if [ $mode = early ] && [ -n "$stopped" ] && [ $i -ge ${CONT_AT_DS:-45} ]; then
      kill -CONT "$stopped"; stopped=
    fi
    sleep 0.1
  done
  for c in bank ycsb; do
    if [ -z "${took[$c]:-}" ]; then
      echo "$mode: $c still running ${exit_s} s after the stop"
      hung="$hung $c"
    fi
  done
  [ -z "$stopped" ] || kill -CONT "$stopped"
  stopped=
  t_cont=$(date +%s%N)
  for c in $hung; do   # continued, it gets its answers: how does it end?
    p=${!c}
    for i in $(seq 400); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p"
    wait "$p"; rc[$c]=$?
    took[$c]="$(ms_since "$t_cont") s after SIGCONT"
  done
  BED_PIDS=()
  for c in bank ycsb; do
    why=$(grep -v ': warn: ' "$WORK/$c.err" | tail -n 1)
    echo "$mode: $c exit ${rc[$c]} after ${took[$c]}: $why"
  done
  for c in bank ycsb; do
    [ "${rc[$c]}" -lt 128 ] || fail "$mode: $c died of signal $((rc[$c] - 128)) (stopped server): $(grep -i 'assert\|abort' "$WORK/$c.err" | head -n 2)"
  done
  [ -z "$hung" ] || fail "$mode: client(s)$hung did not give up on the stopped server within ${exit_s} s"
  for c in bank ycsb; do
    [ "${rc[$c]}" -ne 0 ] && [ "${rc[$c]}" -ne 2 ] || fail "$mode: $c exited ${rc[$c]} although a server stopped answering"
  done
  [ -z "$(tail -c1 "$led")" ] || fail "$mode: the bank's ledger ends in a torn line although it exited by itself"
  verify c1 "$led" wait_die
  echo "$mode: verify ok after SIGCONT: $VERIFY_OUT"
}

for mode in ${MODES:-late early}; do stop_round $mode; done
echo ok
