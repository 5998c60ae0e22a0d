#!/usr/bin/env bash
# timeout: 60
# A memory server stopped (SIGTERM) while clients are still connected frees
# what it held for them: one durable server, `lotus bank` (two threads, two
# transactions in flight each) in the middle of a run, then the server is
# stopped.  It must exit 0, and on the ASan build
# (leak detection on, this script's own report file) its exit must report no
# leak: the connections the net worker closes at teardown never get an
# on_close, so their state is freed by the teardown itself.  The bank that ran
# must then end by itself (it lost its server: exit 3).  On the normal build
# only the exit codes are checked.
. "$(dirname "$0")/lib.sh"
lib_use cluster
at_exit '[ -z "$bank" ] || kill -9 $bank 2>/dev/null; cluster_stop'
bank=
asan=0; case ${LOTUS_BUILD:-} in *asan*) asan=1 ;; esac
if [ $asan = 1 ]; then
  # the server's reports go to this script's file (tests/run's own log_path,
  # if any, stays with the clients); UCX's own known leak is suppressed
  ASAN_SAVED=${ASAN_OPTIONS:-}
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=1:log_path=$T/ms.asan"
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0}
fi
CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync
cluster_start "$T" 1 --threads 2 --memory 32M || fail "server did not start: $(tail -n 3 "$T/ms0.err")"
[ $asan = 1 ] && export ASAN_OPTIONS=$ASAN_SAVED
led=$T/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts 20 --seconds 0.2 --threads 1 --ledger "$led" \
    --quiet >/dev/null 2>"$T/bank0.err" || fail "first bank run failed: $(tail -n 3 "$T/bank0.err")"
"$L" bank --config "$CLUSTER_INI" --seconds 30 --threads 2 --inflight 2 --ledger "$led" \
    --quiet >/dev/null 2>"$T/bank1.err" &
bank=$!
# running (the ledger has its second "# run" line), bounded in time
for i in $(seq 200); do
  [ "$(grep -c '^# run' "$led")" -gt 1 ] && break
  kill -0 $bank 2>/dev/null || fail "the bank ended early: $(tail -n 3 "$T/bank1.err")"
  sleep 0.05
done
sleep 0.3
kill -TERM "${CLUSTER_PIDS[0]}"
wait "${CLUSTER_PIDS[0]}"; rc=$?
CLUSTER_PIDS=()
if [ $asan = 1 ] && grep -qs 'ERROR: LeakSanitizer' "$T"/ms.asan.*; then
  fail "the server leaked at its exit: $(grep -h -m12 -A6 'leak of' "$T"/ms.asan.* | head -n 40)"
fi
[ $rc -eq 0 ] || fail "the server exited $rc when stopped with a client connected: $(grep -v UCX "$T/ms0.err" | tail -n 5)"
echo "ok: the server stopped with a client connected, exit 0$([ $asan = 1 ] && echo ', no leak reported')"
wait $bank; rc=$?
bank=
[ $rc -eq 3 ] || [ $rc -eq 0 ] || fail "the running bank exited $rc: $(tail -n 3 "$T/bank1.err")"
echo "ok: the running bank ended by itself (exit $rc)"
