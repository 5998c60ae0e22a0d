#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (a 100,000-record load, 87 s under ASan; its code paths (chunk growth, scans, deletes) run under ASan in test_onesided_delscan)
# A fresh `lotus ycsb --engine onesided` run loads its own data through
# one-sided inserts and commits, on sm with two local servers: 100,000
# records of 1 KiB, far more than the first region chunk holds, so the
# compute side's FAA runs past chunks' ends and the memory servers add
# chunks that the clients then learn.  YCSB E (scans and inserts) runs on
# the one-sided engine, and for the same load and transactions (one thread,
# --txns, fixed seed) the final table's digest of every workload A-F equals
# the two-sided engine's.  (Deletes: test_onesided_delscan.)
. "$(dirname "$0")/lib.sh"
field() { echo "$1" | sed -n "s/.*\"$2\":\"\{0,1\}\([0-9a-f.]*\).*/\1/p"; }

# 1. a fresh 100k load through one-sided inserts, then commits
out=$("$L" ycsb --local 2 --transport sm --engine onesided --records 100000 --threads 1 \
      --txns 1000 --warmup 0 --server-threads 1 --json --quiet 2>"$T/load.err") \
  || fail "fresh onesided 100k run failed: $(tail -n 3 "$T/load.err")"
echo "$out" | grep -q '"txns_committed":1000' || fail "100k: did not commit 1000: $out"
grep -q "out of space" "$T/load.err" && fail "100k: out of space: $(tail -n 3 "$T/load.err")"
echo "100k fresh onesided: committed 1000, $(field "$out" round_trips_per_txn) round trips/txn"

# 2. YCSB E (95% scans of up to 100 rows, 5% inserts) on the one-sided engine
out=$("$L" ycsb --local 2 --transport sm --engine onesided --workload E --records 5000 \
      --threads 1 --txns 300 --warmup 0 --server-threads 1 --json --quiet 2>"$T/e.err") \
  || fail "workload E on onesided failed: $(tail -n 3 "$T/e.err")"
echo "$out" | grep -q '"txns_committed":300' || fail "E: did not commit 300: $out"

# 3. digests of A-F: one-sided equals two-sided
common=(--local 2 --transport sm --records 1000 --threads 1 --txns 100 --warmup 0
        --ops-per-txn 8 --server-threads 1 --digest --json --quiet)
for w in A B C D E F; do
  two=$("$L" ycsb "${common[@]}" --workload $w --engine twosided 2>"$T/two.err") \
    || fail "twosided $w: $(tail -n 2 "$T/two.err")"
  one=$("$L" ycsb "${common[@]}" --workload $w --engine onesided 2>"$T/one.err") \
    || fail "onesided $w: $(tail -n 2 "$T/one.err")"
  d2=$(field "$two" digest); d1=$(field "$one" digest)
  echo "$w: twosided $d2, onesided $d1"
  [ -n "$d1" ] && [ "$d1" = "$d2" ] || fail "digests differ on workload $w"
  echo "$one" | grep -q '"txns_committed":100' || fail "onesided $w did not commit 100"
done
echo ok
