#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# `lotus ycsb --local 2` runs every workload over tcp and shared memory,
# commits transactions, prints the JSON fields the README promises, leaves no
# server behind, and writes a key trace on request.
. "$(dirname "$0")/lib.sh"
dir=$T
# Each run is a number of transactions (--txns), not a time: a 1 s window
# commits nothing when the process gets no CPU for it (load 8 on 2 cores).
for tr in tcp sm; do
  for w in A B C D E F; do
    out=$("$L" ycsb --local 2 --transport $tr --workload $w --records 2000 --txns 300 \
          --warmup 0 --threads 2 --ops-per-txn 8 --server-threads 1 --json --quiet \
          --trace-keys "$dir/keys") || fail "ycsb $w over $tr failed"
    echo "$tr $w: $out" | cut -c1-200
    for f in workload cc threads ops_per_txn records transport txns_committed txns_aborted \
             abort_rate txn_per_s ops_per_s lat_us p50 p99 p999 net msgs_sent bytes_sent \
             msgs_per_txn bytes_per_txn reqs_per_msg engine round_trips_per_txn \
             bytes_sent_per_txn bytes_recv_per_txn by_type committed aborted \
             all_per_committed_txn; do
      echo "$out" | grep -q "\"$f\"" || fail "field $f missing"
    done
    # the engine's counts: a read-only transaction is one execute round (its
    # COMMIT only releases, unawaited), with its 8 reads; every type has its
    # bytes both ways
    echo "$out" | /usr/bin/python3 -c '
import json, sys
w, n = sys.argv[1], json.load(sys.stdin)["net"]
assert n["engine"] == "twosided", n["engine"]
assert n["round_trips_per_txn"] >= 1, n
assert n["bytes_sent_per_txn"] > 0 and n["bytes_recv_per_txn"] > 0, n
if w == "C":
    assert 1 <= n["round_trips_per_txn"] <= 1.01, n["round_trips_per_txn"]  # rare extra wait seen under load (x.001)
    assert n["by_type"]["read"]["ops_per_txn"] == 8, n["by_type"]["read"]
    assert n["by_type"]["write_lock"]["ops_per_txn"] == 0, n["by_type"]
' $w || fail "engine counters ($tr $w)"
    c=$(echo "$out" | sed 's/.*"txns_committed":\([0-9]*\).*/\1/')
    [ "$c" -gt 0 ] || fail "no transaction committed ($tr $w)"
  done
done
# With no warm-up the engine's counts start at the run too, not at the load:
# one read-only transaction per thread is 1 round trip and 8 reads.
out=$("$L" ycsb --local 2 --workload C --records 2000 --txns 1 --warmup 0 --threads 2 \
      --ops-per-txn 8 --server-threads 1 --json --quiet) || fail "ycsb C --txns 1 failed"
echo "$out" | /usr/bin/python3 -c '
import json, sys
n = json.load(sys.stdin)["net"]
assert n["round_trips_per_txn"] == 1 and n["by_type"]["read"]["ops_per_txn"] == 8, n
' || fail "the load was counted in the run's engine figures (--txns 1 --warmup 0)"
[ -s "$dir/keys" ] || fail "no key trace"
head -n 3 "$dir/keys" | grep -qE '^[0-9]+$' || fail "key trace is not one id per line"
out=$("$L" ycsb --local 2 --records 1000 --seconds 1 --warmup 0 --quiet) || fail "table output"
echo "$out" | grep -q "txn/s" || fail "human table lacks txn/s"
echo "$out" | grep -q "round trips" || fail "human table lacks the round trips per txn"
sleep 0.5
pgrep -f "$L memserver" && fail "memory servers left running"
echo ok
