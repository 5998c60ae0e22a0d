#!/usr/bin/env bash
# timeout: 120
# The bound on misses in flight (issue 24, item 3).  A tiered memory server
# (--memory 8M, 24000 records of 1 KiB: 3x the pool, one worker) under YCSB C
# with 4 client threads x 8 transactions in flight (--batch inter: far more
# misses at once than the bound):
#  - --miss-depth 3: the server's stats (from the outside, srv-stats) show reads
#    on the worker's ring with more than one and never more than 3 in flight
#    (miss_depth_max), requests parked, no errors; a full read gives the load's
#    digest;
#  - the same data after a clean restart with --miss-depth 0: no read on the
#    ring, no request parked, every miss a synchronous pread; the same digest;
#  - --local with --server-miss-depth 2: ycsb's own tier figures say at most 2
#    in flight (and reads on the ring); --server-miss-depth 0: none on the ring.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
at_exit 'cluster_stop'
unset LOTUS_TIER_FAULT LOTUS_MISS_HYBRID
records=24000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
full_read() { Y --no-load --no-run --threads 1 --digest; }
storm() {   # YCSB C, many requests in flight, bounded in time
  timeout 60 "$L" ycsb --quiet --json --records $records --workload C --threads 4 \
    --batch inter --inflight 8 --seconds 2 --warmup 0 "$@"
}
tier_need
"$L" memserver --help 2>&1 | grep -q -- "--miss-depth N" || fail "lotus memserver --help has no --miss-depth N"
"$L" ycsb --help 2>&1 | grep -q -- "--server-miss-depth N" || fail "lotus ycsb --help has no --server-miss-depth N"

# --- a standalone server: --miss-depth 3, then 0 -----------------------------------
mkdir "$top/srv"
CLUSTER_DATA=$top/srv/data
tier=(--threads 1 --memory 8M --capacity 64M --durability sync)
cluster_start "$top/srv" 1 "${tier[@]}" --miss-depth 3 \
  || fail "tiered server did not start: $(tail -n 3 "$top/srv/ms0.err")"
load=$(Y --threads 2 --no-run --digest 2>"$top/srv/load.err" | digest_of)
[ -n "$load" ] || fail "load: $(tail -n 3 "$top/srv/load.err")"
storm --config "$CLUSTER_INI" --no-load >/dev/null 2>"$top/srv/storm.err" \
  || fail "depth 3: ycsb C: $(tail -n 3 "$top/srv/storm.err")"
eval "$(tier_counts "$(tier_stats)")"
echo "depth 3: $misses misses: $miss_async_reads on the ring (at most $miss_depth_max in flight), $miss_sync_reads preads, $miss_parked parked, $miss_async_errors errors"
[ "$miss_async_reads" -gt 0 ] || fail "depth 3: no miss was read on the worker's ring"
[ "$miss_depth_max" -le 3 ] || fail "depth 3: $miss_depth_max reads in flight at once, above --miss-depth 3"
[ "$miss_depth_max" -gt 1 ] || fail "depth 3: never more than $miss_depth_max read in flight (the bound was not reached for)"
[ "$miss_parked" -gt 0 ] || fail "depth 3: no request parked on a miss"
[ "$miss_async_errors" -eq 0 ] || fail "depth 3: $miss_async_errors failed reads without faults"
d=$(full_read | digest_of)
[ "$d" = "$load" ] || fail "depth 3: full read digest '$d', want the load's $load"

pid=${CLUSTER_PIDS[0]}
kill -TERM "$pid"; wait "$pid"
CLUSTER_ARGS=("${tier[@]}" --miss-depth 0)
cluster_restart 0 || fail "depth 0: the server did not restart"
storm --config "$CLUSTER_INI" --no-load >/dev/null 2>"$top/srv/storm0.err" \
  || fail "depth 0: ycsb C: $(tail -n 3 "$top/srv/storm0.err")"
eval "$(tier_counts "$(tier_stats)")"
echo "depth 0: $misses misses: $miss_async_reads on the ring, $miss_sync_reads preads, $miss_parked parked"
[ "$miss_async_reads" -eq 0 ] && [ "$miss_parked" -eq 0 ] \
  || fail "depth 0: $miss_async_reads reads on the ring, $miss_parked parked: want none"
[ "$miss_sync_reads" -gt 0 ] || fail "depth 0: no synchronous miss read (did the restart drop the pool?)"
d=$(full_read | digest_of)
[ "$d" = "$load" ] || fail "depth 0: full read digest '$d', want the load's $load"
cluster_stop
echo "ok: --miss-depth 3 bounds the reads in flight; 0 turns the ring off"

# --- --local: --server-miss-depth ---------------------------------------------------
field() { sed -n "s/.*\"tier\":{.*\"$1\":\\([0-9]*\\).*/\\1/p"; }
j=$(storm --local 1 --server-threads 1 --server-memory 8M --server-capacity 64M \
      --data-dir "$top/local2" --server-miss-depth 2 2>"$top/local2.err") \
  || fail "local depth 2: ycsb: $(tail -n 3 "$top/local2.err")"
a=$(echo "$j" | field miss_async_reads) m=$(echo "$j" | field miss_depth_max)
echo "local depth 2: $a reads on the rings, at most $m in flight"
[ "${a:-0}" -gt 0 ] || fail "local depth 2: no read on the ring: $j"
[ -n "$m" ] && [ "$m" -ge 1 ] && [ "$m" -le 2 ] || fail "local depth 2: miss_depth_max '$m', want 1..2"
j=$(storm --local 1 --server-threads 1 --server-memory 8M --server-capacity 64M \
      --data-dir "$top/local0" --server-miss-depth 0 2>"$top/local0.err") \
  || fail "local depth 0: ycsb: $(tail -n 3 "$top/local0.err")"
a=$(echo "$j" | field miss_async_reads) s=$(echo "$j" | field miss_sync_reads)
echo "local depth 0: $a reads on the rings, $s preads"
[ "${a:-x}" = 0 ] && [ "${s:-0}" -gt 0 ] || fail "local depth 0: want preads only: $j"
echo "ok: --server-miss-depth reaches the local servers"
