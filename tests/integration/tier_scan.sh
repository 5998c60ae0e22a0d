#!/usr/bin/env bash
# timeout: 90
# Scans of cold data on a tiered memory server read their pages in batches
# (store_prefetch through the worker's io_uring/libaio context), outside in:
# a durable server with --memory 8M holds 24000 x 1 KiB records (3x the
# pool).  After a restart nothing is resident; 200 transactions of YCSB E
# (scans of up to 100 rows, one thread, a fixed seed: a deterministic
# history) must
#  - leave the same --digest as the same load and run on an untiered
#    in-memory server,
#  - show prefetched pages > 0 in batches, with no prefetch errors;
# after a restart with LOTUS_TIER_PREFETCH=0 a second round gives the
# reference's digest too, with nothing prefetched (the pages are read by
# misses: the seam the benchmark compares against).
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
at_exit 'cluster_stop'
records=24000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }

tier_need
unset LOTUS_TIER_PREFETCH
E() { Y --no-load --workload E --threads 1 --txns 200 --max-scan 100 --seed "$1" --digest | digest_of; }

mkdir "$top/ref"
cluster_start "$top/ref" 1 --threads 1 --memory 64M || fail "reference server did not start"
Y --threads 2 --no-run >/dev/null 2>"$top/ref.err" || fail "reference load: $(cat "$top/ref.err")"
r1=$(E 21); r2=$(E 22)
[ -n "$r1" ] && [ -n "$r2" ] && [ "$r1" != "$r2" ] || fail "reference digests: '$r1' '$r2'"
echo "reference (in memory): E round 1 digest $r1, round 2 $r2"
cluster_stop

mkdir "$top/tier"
CLUSTER_DATA=$top/tier/data CLUSTER_DURABILITY=sync
cluster_start "$top/tier" 1 --threads 1 --memory 8M --capacity 64M --durability sync \
  || fail "tiered server did not start: $(tail -n 3 "$top/tier/ms0.err")"
Y --threads 2 --no-run >/dev/null 2>"$top/load.err" || fail "load: $(tail -n 3 "$top/load.err")"
pid=${CLUSTER_PIDS[0]}
kill -TERM "$pid"; wait "$pid"
cluster_restart 0 || fail "tiered server did not restart"
d1=$(E 21)
eval "$(tier_counts "$(tier_stats)")"
echo "cold E with prefetch: digest $d1; prefetched $prefetched pages in $prefetch_batches batches ($prefetch_errors errors), $miss_reads miss preads"
[ "$d1" = "$r1" ] || fail "E round 1 on the cold tiered server: digest '$d1', want $r1"
[ "$prefetched" -gt 0 ] && [ "$prefetch_batches" -gt 0 ] || fail "cold scans prefetched nothing"
[ "$prefetch_errors" -eq 0 ] && [ "$miss_errors" -eq 0 ] || fail "I/O errors without faults"

pid=${CLUSTER_PIDS[0]}
kill -TERM "$pid"; wait "$pid"
LOTUS_TIER_PREFETCH=0 cluster_restart 0 || fail "tiered server did not restart (prefetch off)"
d2=$(E 22)
eval "$(tier_counts "$(tier_stats)")"
echo "cold E, LOTUS_TIER_PREFETCH=0: digest $d2; prefetched $prefetched, $miss_reads miss preads"
[ "$d2" = "$r2" ] || fail "E round 2 with prefetch off: digest '$d2', want $r2"
[ "$prefetched" -eq 0 ] || fail "LOTUS_TIER_PREFETCH=0 still prefetched $prefetched pages"
[ "$miss_reads" -gt 0 ] || fail "prefetch off: no miss reads"
echo ok
