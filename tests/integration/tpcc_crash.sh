#!/usr/bin/env bash
# timeout: 300
# sanitizers: skip (a durable load of 660k rows, two runs and the lease and
# settling waits after each kill)
# TPC-C's consistency conditions survive crashes: two durable memory servers
# (--durability sync) from a config, one warehouse loaded.  (1) `lotus tpcc
# --no-load` runs and one memory server is killed with -9 mid-run: the run
# must end (exit 3, server lost); the server is restarted on its port and
# `lotus tpcc --check` must pass (it retries reads that meet the locks of
# prepared transactions until the servers have settled them).  (2) the
# client itself is killed with -9 mid-run, and --check must pass again (the
# servers free its unprepared transactions when its lease runs out).
. "$(dirname "$0")/lib.sh"
lib_use cluster
at_exit 'cluster_stop'
at_exit '[ -z "${tp:-}" ] || kill -9 $tp 2>/dev/null'
CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync CLUSTER_CC=wait_die CLUSTER_LEASE_MS=1000
cluster_start "$T" 2 --threads 1 --memory 512M --durability sync \
  || fail "servers did not start: $(tail -n 2 "$T"/ms*.err)"
"$L" tpcc --config "$CLUSTER_INI" --warehouses 1 --load-only --quiet >/dev/null 2>"$T/load.err" \
  || fail "load failed: $(tail -n 3 "$T/load.err")"

check() {   # check LABEL: --check must pass
  local out rc
  out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/check.err"); rc=$?
  echo "$1: --check exit $rc: $out"
  [ $rc -eq 0 ] || fail "$1: --check exited $rc: $(tail -n 3 "$T/check.err")"
  echo "$out" | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert all(d["checks"][k] for k in "1234")' \
    || fail "$1: a condition failed: $out"
}

# (1) a memory server dies mid-run
"$L" tpcc --config "$CLUSTER_INI" --no-load --threads 3 --seconds 60 --quiet \
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
