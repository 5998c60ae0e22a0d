#!/usr/bin/env bash
# timeout: 300
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# `lotus ycsb --engine onesided` runs workloads A, B and C correctly on tcp
# (emulated RMA) and sm (true one-sided): for the same load and the same
# transactions (one thread, --txns, fixed seed) the final table's digest
# equals the two-sided engine's, under no_wait and wait_die, and the run
# reports the one-sided counters.  A run of three leases loses no connection
# (the engine keeps idle sessions' leases).  Also: a scan workload (E) runs
# on one server, and no memory server is left behind.
. "$(dirname "$0")/lib.sh"
common=(--local 2 --records 2000 --threads 1 --txns 200 --warmup 0 --ops-per-txn 8
        --server-threads 1 --digest --json --quiet)
digest() { echo "$1" | sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
for tr in sm tcp; do
  for w in A B C; do
    for cc in no_wait wait_die; do
      two=$("$L" ycsb "${common[@]}" --transport $tr --workload $w --cc $cc \
            --engine twosided) || fail "twosided $w $cc over $tr"
      one=$("$L" ycsb "${common[@]}" --transport $tr --workload $w --cc $cc \
            --engine onesided) || fail "onesided $w $cc over $tr"
      d2=$(digest "$two"); d1=$(digest "$one")
      echo "$tr $w $cc: twosided $d2, onesided $d1"
      [ -n "$d1" ] && [ "$d1" = "$d2" ] || fail "digests differ ($tr $w $cc)"
      echo "$one" | grep -q '"txns_committed":200' || fail "onesided did not commit 200"
      for f in round_trips_per_txn ops_per_txn by_type; do
        echo "$one" | grep -q "\"$f\"" || fail "field $f missing ($tr $w $cc)"
      done
      echo "$one" | grep -q '"cas"' || fail "no cas counter ($tr $w $cc)"
    done
  done
done
# A run several leases long loses no connection: the sessions' own workers
# (the engine's, not the two-sided sessions') are kept while idle.
out=$(mktemp)
errs=$("$L" ycsb --local 2 --engine onesided --seconds 3 --warmup 0 --records 2000 \
       --threads 2 --server-threads 1 --lease-ms 1000 --quiet --json 2>&1 >"$out") \
  || { rm -f "$out"; fail "onesided run of 3 leases failed: $errs"; }
json=$(cat "$out"); rm -f "$out"
echo "$errs" | grep -E "nothing sent to|declaring it lost|silent for" \
  && fail "onesided: a connection lost its lease during the run"
# one-sided operations are not server requests: no CPU per request for them
echo "$json" | grep -q '"servers":{[^}]*"cpu_us_per_req":null,"note":' \
  || fail "onesided: servers.cpu_us_per_req is not null with a note: $json"
err=$("$L" ycsb --local 1 --records 500 --workload E --engine onesided --seconds 1 \
      --warmup 0 --quiet 2>&1 >/dev/null) || fail "workload E (scans) failed on onesided: $err"
sleep 0.5
pgrep -f "$L memserver" && fail "memory servers left running"
echo ok
