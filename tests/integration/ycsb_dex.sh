#!/usr/bin/env bash
# timeout: 200
# `lotus ycsb --engine dex` (DEX: one-sided, compute-side partitioning,
# docs/dex.md), the way a user runs it:
#  - one compute server (--local 2, sm): for the same load and transactions
#    the final table's digest equals the two-sided engine's, under no_wait
#    (A) and wait_die (C), with a cache hit rate above 0 and the offload counter;
#  - two compute servers (--compute-id 0 and 1 of --compute-count 2, at the
#    same time, against standalone memory servers): each commits its
#    transactions on its own key ranges, and the table the dex engine then
#    reads equals the one two two-sided clients make with the same keys
#    (--owned-keys): each engine's clients write their own copy of the
#    table (the one-sided region is built from the records when first
#    attached), with the same transactions, the same values even where an
#    attempt aborted and was retried (under load it failed 1 run in 6 when a
#    retry drew new values);
#  - no cache (--cache 0) still runs, every lookup then offloaded or read.
. "$(dirname "$0")/lib.sh"
digest() { echo "$1" | sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
field() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
common=(--records 2000 --threads 1 --txns 150 --warmup 0 --ops-per-txn 8 --server-threads 1
        --digest --json --quiet --lease-ms 10000)
for wc in A:no_wait C:wait_die; do
  w=${wc%:*} cc=${wc#*:}
  two=$("$L" ycsb --local 2 --transport sm "${common[@]}" --workload $w --cc $cc \
        --engine twosided) || fail "twosided $w $cc"
  dex=$("$L" ycsb --local 2 --transport sm "${common[@]}" --workload $w --cc $cc \
        --engine dex --cache 4M) || fail "dex $w $cc"
  d2=$(digest "$two"); dx=$(digest "$dex"); hr=$(field "$dex" hit_rate)
  echo "$w $cc: twosided $d2, dex $dx, dex hit rate $hr"
  [ -n "$dx" ] && [ "$dx" = "$d2" ] || fail "digests differ ($w $cc)"
  echo "$dex" | grep -q '"txns_committed":150' || fail "dex did not commit 150: $dex"
  echo "$dex" | grep -q '"engine":"dex"' || fail "engine not named dex"
  echo "$dex" | grep -q '"offload"' || fail "no offload counter: $dex"
  awk -v h="$hr" 'BEGIN { exit !(h > 0) }' || fail "dex hit rate $hr is not above 0"
done
out=$("$L" ycsb --local 1 --transport sm "${common[@]}" --workload A --engine dex --cache 0) \
  || fail "dex without a cache"
echo "$out" | grep -q '"txns_committed":150' || fail "dex --cache 0 did not commit 150"

# --- two compute servers ----------------------------------------------------
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
at_exit 'cluster_stop'
TRANSPORT=sm CLUSTER_LEASE_MS=10000 cluster_start "$T" 2 --threads 1 --memory 128M || fail "servers did not start"
run=(--config "$CLUSTER_INI" --records 2000 --threads 1 --warmup 0 --ops-per-txn 8 --quiet
     --lease-ms 10000)
"$L" ycsb "${run[@]}" --no-run >/dev/null || fail "load"
part=(--no-load --workload A --txns 150 --compute-count 2 --json)
for e in dex twosided; do
  [ $e = dex ] && x=(--engine dex --cache 4M) || x=(--engine twosided --owned-keys)
  "$L" ycsb "${run[@]}" "${part[@]}" "${x[@]}" --compute-id 0 >"$T/$e.0" 2>"$T/$e.0.err" & p0=$!
  "$L" ycsb "${run[@]}" "${part[@]}" "${x[@]}" --compute-id 1 >"$T/$e.1" 2>"$T/$e.1.err" & p1=$!
  wait $p0 || fail "$e compute server 0: $(cat "$T/$e.0.err")"
  wait $p1 || fail "$e compute server 1: $(cat "$T/$e.1.err")"
  for i in 0 1; do
    grep -q '"txns_committed":150' "$T/$e.$i" || fail "$e compute $i: $(cat "$T/$e.$i")"
  done
  echo "$e, two compute servers: hit rates $(field "$(cat "$T/$e.0")" hit_rate)" \
       "$(field "$(cat "$T/$e.1")" hit_rate)"
done
# the whole table, read by one compute server that owns every key
dd=$(digest "$("$L" ycsb "${run[@]}" --no-load --no-run --digest --json --engine dex)") \
  || fail "dex digest"
d2=$(digest "$("$L" ycsb "${run[@]}" --no-load --no-run --digest --json)") || fail "digest"
echo "two compute servers: dex table $dd, two-sided table $d2"
[ -n "$dd" ] && [ "$dd" = "$d2" ] || fail "the tables differ"
# a compute server that would own no key of the table says so
err=$("$L" ycsb "${run[@]}" --no-load --engine dex --compute-count 3 --compute-id 2 \
      --txns 1 2>&1 >/dev/null) && fail "compute 2 of 3 with 2000 records ran"
echo "$err" | grep -q "owns no key" || fail "unclear error: $err"
echo ok
