#!/usr/bin/env bash
# timeout: 300
# sanitizers: skip (a durable load of 660k rows, two runs and the lease and
# settling waits after each kill)
# TPC-C's consistency conditions survive crashes: two durable memory servers
# (--durability sync) from a config, one warehouse loaded.  (1) `lotus tpcc
# --no-load` runs and one memory server is killed with -9 mid-run: the run
# must end (exit 3, server lost); the server is restarted on its port and
# `lotus tpcc --check` must pass (it waits until no server holds a prepared
# transaction: the INSERTs of one the restarted server has not settled yet
# are not in its index, so a scan would miss them while the other server
# shows the same transaction's other rows; it then retries reads that meet
# locks).  (2) the
# client itself is killed with -9 mid-run, and --check must pass again (the
# servers free its unprepared transactions when its lease runs out).
# The load runs on servers with --durability async (a sync per commit made it
# most of the test's time, waiting on fdatasync); they are then stopped
# cleanly and restarted with --durability sync, which the crashes meet.  The
# run that loses a server has timeout_ms = 3000 (tpcc.ini): its commits whose
# vote went with the victim ask the survivor that long before it gives up
# (the victim is restarted only after it exits), not the default 10 s.
. "$(dirname "$0")/lib.sh"
lib_use cluster
at_exit 'cluster_stop'
at_exit '[ -z "${tp:-}" ] || kill -9 $tp 2>/dev/null'
CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync CLUSTER_CC=wait_die CLUSTER_LEASE_MS=1000
cluster_start "$T" 2 --threads 1 --memory 512M --durability async \
  || fail "servers did not start: $(tail -n 2 "$T"/ms*.err)"
"$L" tpcc --config "$CLUSTER_INI" --warehouses 1 --load-only --quiet >/dev/null 2>"$T/load.err" \
  || fail "load failed: $(tail -n 3 "$T/load.err")"
CLUSTER_ARGS=(--threads 1 --memory 512M --durability sync)
for id in 0 1; do
  kill "${CLUSTER_PIDS[$id]}"; wait "${CLUSTER_PIDS[$id]}"
  cluster_restart $id || fail "server $id did not restart with --durability sync"
  grep -q '"durability":"sync"' "$T/ms$id.out" || fail "server $id is not sync: $(cat "$T/ms$id.out")"
done
sed 's/^\[cluster\]$/&\ntimeout_ms = 3000/' "$CLUSTER_INI" >"$T/tpcc.ini"
grep -q '^timeout_ms = 3000$' "$T/tpcc.ini" || fail "no [cluster] in $CLUSTER_INI"

check() {   # check LABEL: --check must pass
  local out rc
  out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/check.err"); rc=$?
  echo "$1: --check exit $rc: $out"
  grep "prepared transaction" "$T/check.err" || true   # it waited for them to settle
  [ $rc -eq 0 ] || fail "$1: --check exited $rc: $(tail -n 3 "$T/check.err")"
  echo "$out" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert all(d["checks"][k] for k in "1234")' \
    || fail "$1: a condition failed: $out"
}

# (1) a memory server dies mid-run
"$L" tpcc --config "$T/tpcc.ini" --no-load --threads 3 --seconds 60 --quiet \
    >"$T/run1.out" 2>"$T/run1.err" &
tp=$!
sleep 2
kill -0 $tp 2>/dev/null || fail "the run ended early: $(tail -n 3 "$T/run1.err")"
victim=$((RANDOM % 2))
cluster_kill $victim
wait $tp; rc=$?; tp=
echo "killed server $victim: tpcc exited $rc: $(tail -n 1 "$T/run1.err")"
[ $rc -eq 3 ] || fail "tpcc exited $rc after losing a server, not 3: $(tail -n 5 "$T/run1.err")"
cluster_restart $victim || fail "server $victim did not restart"
check "after kill -9 of server $victim"

# (2) the client dies mid-run
"$L" tpcc --config "$CLUSTER_INI" --no-load --threads 3 --seconds 60 --quiet \
    >"$T/run2.out" 2>"$T/run2.err" &
tp=$!
sleep 2
kill -0 $tp 2>/dev/null || fail "the second run ended early: $(tail -n 3 "$T/run2.err")"
kill -9 $tp
wait $tp 2>/dev/null; tp=
check "after kill -9 of lotus tpcc"
echo ok
