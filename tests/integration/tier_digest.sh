#!/usr/bin/env bash
# timeout: 90
# A durable memory server holds three times its buffer pool, correctly and
# through restarts (issue 16).  One standalone server with --memory 8M; a YCSB
# table of 24000 records of 1 KiB (about 3x the pool):
#  - without --capacity the load fails with "out of space" (the issue's repro);
#  - --capacity without a data directory is a usage error;
#  - with --capacity 64M the load succeeds, and two rounds of uniform workload
#    A (one thread, fixed seeds, --txns: a deterministic history) leave the
#    same digests as the same load and rounds on an untiered in-memory server;
#  - the server's stats show misses and evictions (the pool really was too
#    small: the test cannot pass on an untiered server);
#  - after round 1 the server is stopped with SIGTERM, after round 2 killed
#    with -9; after each restart the digest read back is unchanged.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
at_exit 'cluster_stop'
records=24000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
# round N: 300 transactions of workload A (half updates), uniform keys
round() { Y --no-load --workload A --dist uniform --threads 1 --txns 300 --seed "$1" --digest; }

tier_need
out=$(timeout 10 "$L" memserver --listen 127.0.0.1:0 --memory 8M --capacity 64M 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "--capacity without --data-dir exited $rc, want 2: $out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "--capacity without --data-dir: want one line: $out"
echo "ok: --capacity without a data dir: $out"

# --- the reference: the same history on an untiered in-memory server ----------
mkdir "$top/ref"
cluster_start "$top/ref" 1 --threads 1 --memory 64M || fail "reference server did not start"
Y --threads 2 --no-run >/dev/null 2>"$top/ref.err" || fail "reference load: $(cat "$top/ref.err")"
r1=$(round 11 | digest_of); r2=$(round 12 | digest_of)
[ -n "$r1" ] && [ -n "$r2" ] && [ "$r1" != "$r2" ] || fail "reference digests: '$r1' '$r2'"
echo "reference (in memory): round 1 digest $r1, round 2 digest $r2"
cluster_stop

# --- the repro: a durable --memory 8M server without --capacity is full --------
mkdir "$top/full"
CLUSTER_DATA=$top/full/data CLUSTER_DURABILITY=sync
cluster_start "$top/full" 1 --threads 1 --memory 8M --durability sync \
  || fail "untiered durable server did not start"
Y --threads 2 --no-run >/dev/null 2>"$top/full.err" && fail "24000 KiB records fit in an 8M pool without --capacity: the test's data is too small"
grep -q "out of space" "$top/full.err" || fail "load into 8M without --capacity: $(cat "$top/full.err")"
echo "ok: without --capacity: $(tail -n 1 "$top/full.err")"
cluster_stop

# --- the tiered server ----------------------------------------------------------
mkdir "$top/tier"
CLUSTER_DATA=$top/tier/data
cluster_start "$top/tier" 1 --threads 1 --memory 8M --capacity 64M --durability sync \
  || fail "tiered server did not start: $(tail -n 3 "$top/tier/ms0.err")"
Y --threads 2 --no-run >"$top/load.json" 2>"$top/load.err" \
  || fail "load of 3x the pool into a tiered server: $(tail -n 3 "$top/load.err")"
grep -q "\"loaded\":$records" "$top/load.json" || fail "load: $(cat "$top/load.json")"
t1=$(round 11 | digest_of)
echo "tiered: round 1 digest $t1"
[ "$t1" = "$r1" ] || fail "round 1: tiered digest '$t1' differs from the in-memory one $r1"
st=$(tier_stats) || fail "no stats from the tiered server"
eval "$(tier_counts "$st")"
echo "tiered stats after round 1: $misses misses ($miss_reads preads), evictions $evict_clean clean + $evict_dirty dirty, resident $resident of $frames frames; $writers page writers ($pw_uring on io_uring): $pw_ios writes of $pw_pages pages, registrations $registrations, clones $clones"
[ "$miss_reads" -gt 0 ] || fail "no miss reads with 3x the pool: $st"
[ "$evict_dirty" -gt 0 ] || fail "no dirty evictions with 3x the pool loaded: $st"
[ "$pw_pages" -gt 0 ] || fail "the page writers wrote nothing: $st"
[ "$miss_errors" -eq 0 ] && [ "$evict_errors" -eq 0 ] && [ "$pw_errors" -eq 0 ] \
  || fail "I/O errors without faults: $st"
if [ "$writers" -gt 0 ] && [ "$pw_uring" -eq "$writers" ]; then   # the paper's cloned registration
  [ "$registrations" -ge 1 ] && [ "$clones" -eq "$writers" ] \
    || fail "$writers io_uring page writers, but registrations $registrations, clones $clones: $st"
fi

pid=${CLUSTER_PIDS[0]}
kill -TERM "$pid"; wait "$pid"; rc=$?
[ $rc -eq 0 ] || fail "SIGTERM: the tiered server exited $rc: $(tail -n 3 "$top/tier/ms0.err")"
cluster_restart 0 || fail "tiered server did not restart after SIGTERM"
d=$(Y --threads 1 --no-load --no-run --digest | digest_of)
echo "after SIGTERM and restart: digest $d"
[ "$d" = "$r1" ] || fail "after SIGTERM and restart the digest is '$d', want $r1"
eval "$(tier_counts "$(tier_stats)")"
echo "stats after the restart and a full read: $miss_reads miss preads, resident $resident of $frames frames"
[ "$miss_reads" -gt 0 ] || fail "a full read after the restart read nothing from disk (the whole table resident in an 8M pool?)"

t2=$(round 12 | digest_of)
echo "tiered: round 2 digest $t2"
[ "$t2" = "$r2" ] || fail "round 2: tiered digest '$t2' differs from the in-memory one $r2"
cluster_kill 0
cluster_restart 0 || fail "tiered server did not restart after kill -9: $(tail -n 3 "$top/tier/ms0.err")"
d=$(Y --threads 1 --no-load --no-run --digest | digest_of)
echo "after kill -9 and restart: digest $d"
[ "$d" = "$r2" ] || fail "after kill -9 and restart the digest is '$d', want $r2"
echo ok
