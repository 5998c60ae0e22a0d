#!/usr/bin/env bash
# timeout: 120
# `lotus ycsb` against standalone servers, as a user runs it (README "Running
# a real cluster"): load once with --no-run, then runs with --no-load.
#  - --no-run prints what was loaded, no table of zeros, no "running" line;
#  - --no-load on an empty or smaller table is an error (exit 1) naming it;
#  - the lock counters cover this run only: with one thread and no aborts,
#    acquires == committed x ops/txn, also on a second run;
#  - the human output shows the servers' counters as a table;
#  - servers.cpu_us_per_req and client.cpu_us_per_req are reported, and the
#    servers' request count is the client's (+ the closing STATS);
#  - compute_servers in the config is the compute count (--partitioning co
#    with --compute-id 1 works; --compute-id 2 of 2 is refused).
. "$(dirname "$0")/lib.sh"
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
at_exit 'cluster_stop'
cluster_start "$dir" 2 --threads 1 --memory 64M || fail "servers did not start"
Y() { "$L" ycsb --config "$CLUSTER_INI" --threads 1 --quiet "$@"; }
py() { /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); $1" "$2"; }

out=$(Y --no-load --records 500 --seconds 1 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "--no-load on an empty table exited $rc, want 1"
echo "$out" | grep -q "empty" || fail "--no-load on an empty table: $out"
echo "ok: $out"

"$L" ycsb --config "$CLUSTER_INI" --threads 1 --records 500 --no-run --json >"$dir/load.json" 2>"$dir/load.err" \
  || fail "load failed: $(cat "$dir/load.err")"
py 'assert r["loaded"] == 500 and "txn_per_s" not in r, r' "$dir/load.json" || fail "--no-run --json: $(cat "$dir/load.json")"
grep -q "running" "$dir/load.err" && fail "--no-run says it runs: $(cat "$dir/load.err")"
echo "ok: --no-run: $(cat "$dir/load.json")"
Y --no-load --no-run --records 500 >"$dir/nr.txt" 2>&1 || fail "--no-load --no-run: $(cat "$dir/nr.txt")"
grep -q "throughput" "$dir/nr.txt" && fail "--no-run printed a run table: $(cat "$dir/nr.txt")"
echo "ok: $(head -n1 "$dir/nr.txt")"

out=$(Y --no-load --records 1000 --seconds 1 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "--no-load on a smaller table exited $rc, want 1"
echo "$out" | grep -q "fewer records than --records 1000" || fail "--no-load on a smaller table: $out"
echo "ok: $out"
out=$(Y --no-load --records 500 --record-size 512 --seconds 1 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "--no-load with another --record-size exited $rc, want 1"
echo "$out" | grep -q "records of 1024 B, not --record-size 512" \
  || fail "--no-load with another --record-size: $out"
[ "$(echo "$out" | wc -l)" -eq 1 ] || fail "more than one error line: $out"
echo "ok: $out"

for run in 1 2; do
  Y --no-load --records 500 --txns 200 --json >"$dir/r$run.json" 2>"$dir/r$run.err" \
    || fail "run $run: $(cat "$dir/r$run.err")"
  py 'a=r["cc_stats"]["acquires"]; n=r["txns_committed"]*r["ops_per_txn"]
assert r["txns_aborted"] == 0, r
assert a == n, "acquires %d, committed x ops %d" % (a, n)
print("ok: run acquires %d == %d committed x %d ops" % (a, r["txns_committed"], r["ops_per_txn"]))' \
    "$dir/r$run.json" || fail "run $run: lock counters are not this run's"
done
# CPU per request: the servers served what the client sent (and one STATS
# each, the snapshot that ends the run), and both report a CPU cost.
py 's=r["servers"]; c=r["client"]
assert s["count"] == 2 and c["threads"] == 1, r
assert s["requests"] == c["requests"] + 2, (s, c)
assert 0 < s["cpu_us_per_req"] < 10000 and 0 < c["cpu_us_per_req"] < 10000, (s, c)
assert r["transport"] == "tcp", r["transport"]
print("ok: cpu per request: servers %.2f us, client %.2f us over %d requests" %
      (s["cpu_us_per_req"], c["cpu_us_per_req"], c["requests"]))' "$dir/r2.json" \
  || fail "cpu per request: $(cat "$dir/r2.json")"

Y --no-load --records 500 --seconds 0.5 --warmup 0 >"$dir/h.txt" 2>&1 || fail "human run: $(cat "$dir/h.txt")"
grep -q '{' "$dir/h.txt" && fail "human output has a raw JSON line: $(cat "$dir/h.txt")"
grep -Eq '^ +server +acquires +waits' "$dir/h.txt" || fail "no server counter table: $(cat "$dir/h.txt")"
grep -Eq '^ +total +[0-9]+' "$dir/h.txt" || fail "no total row: $(cat "$dir/h.txt")"
grep -Eq '^ +cpu +memory servers [0-9.]+ us/request' "$dir/h.txt" || fail "no cpu line: $(cat "$dir/h.txt")"
echo "ok: server counters as a table, cpu per request"

# Load progress is printed while loading only, not during the run.
"$L" ycsb --config "$CLUSTER_INI" --threads 1 --no-load --records 500 --seconds 2.5 \
    --warmup 0 >/dev/null 2>"$dir/p.err" || fail "run with progress: $(cat "$dir/p.err")"
grep -q 'loading' "$dir/p.err" && fail "--no-load run prints load progress: $(cat "$dir/p.err")"
echo "ok: no load progress during a run"

sed 's/^\[cluster\]$/[cluster]\ncompute_servers = 2/' "$CLUSTER_INI" >"$dir/c2.ini"
grep -q "compute_servers = 2" "$dir/c2.ini" || fail "could not write c2.ini"
"$L" ycsb --config "$dir/c2.ini" --threads 1 --quiet --no-load --records 500 --seconds 0.5 \
    --warmup 0 --partitioning co --compute-id 1 --json >"$dir/co.json" 2>"$dir/co.err" \
  || fail "compute_servers = 2, --compute-id 1: $(cat "$dir/co.err")"
py 'assert r["compute_count"] == 2 and r["partitioning"] == "co", r' "$dir/co.json" \
  || fail "compute_servers not used: $(cat "$dir/co.json")"
echo "ok: compute_servers = 2 gives compute_count 2"
out=$("$L" ycsb --config "$dir/c2.ini" --no-load --records 500 --compute-id 2 --partitioning co 2>&1); rc=$?
[ $rc -eq 2 ] || fail "--compute-id 2 of compute_servers = 2 exited $rc"
echo "$out" | grep -q "compute_servers" || fail "--compute-id 2: $out"
echo "ok: $out"
