#!/usr/bin/env bash
# timeout: 180
# Misses that do not block (issue 24).  A tiered memory server (--memory 8M,
# 24000 records of 1 KiB: 3x the pool, one worker) serves its misses
# concurrently: a request whose page is not resident parks while its worker
# reads the page on its own ring and serves the other requests.
#  - YCSB C with 4 client threads x 8 transactions in flight (--batch inter):
#    the server's stats show reads on the worker's ring with more than one in
#    flight at once (miss_depth_max > 1) and parked requests; the digests of
#    a deterministic round of workload A afterwards equal those of the same
#    load and round on an untiered in-memory server;
#  - a read error (LOTUS_TIER_FAULT=miss:N:EIO:1 after a clean restart: one
#    read on the worker's ring fails at its completion) fails only the
#    requests waiting on that page: exactly one miss read failed (ycsb stops
#    at the transaction that got -EIO), hundreds of reads around it on the
#    ring succeeded, the server serves on, and a full read afterwards gives
#    the digest of the data before the fault;
#  - a damaged page on disk (after updates, bytes of pages.swap flipped under
#    the running server) fails its checksum on the ring: a failed read (miss_async_errors)
#    that fails its waiters only; after a clean restart the data is whole.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
at_exit 'cluster_stop'
records=24000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
round() { Y --no-load --workload A --dist uniform --threads 1 --txns 300 --seed "$1" --digest; }
full_read() { Y --no-load --no-run --threads 1 --digest; }
storm() {   # YCSB C, many requests in flight, bounded in time
  timeout 60 "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records --no-load \
    --workload C --threads 4 --batch inter --inflight 8 --seconds 2 --warmup 0 "$@"
}
tier_need
"$L" memserver --help 2>&1 | grep -q -- --miss-depth || fail "lotus memserver has no --miss-depth"

# --- the reference: in memory -----------------------------------------------------
mkdir "$top/ref"
cluster_start "$top/ref" 1 --threads 1 --memory 64M || fail "reference server did not start"
Y --threads 2 --no-run >/dev/null 2>"$top/ref.err" || fail "reference load: $(cat "$top/ref.err")"
ref_load=$(full_read | digest_of)
r1=$(round 11 | digest_of)
[ -n "$ref_load" ] && [ -n "$r1" ] || fail "reference digests: '$ref_load' '$r1'"
cluster_stop

tiered() {   # tiered NAME [memserver options]
  local name=$1
  shift
  mkdir "$top/$name"
  CLUSTER_DATA=$top/$name/data
  cluster_start "$top/$name" 1 --threads 1 --memory 8M --capacity 64M --durability sync "$@" \
    || fail "$name: tiered server did not start: $(tail -n 3 "$top/$name/ms0.err")"
  Y --threads 2 --no-run >/dev/null 2>"$top/$name/load.err" \
    || fail "$name: load: $(tail -n 3 "$top/$name/load.err")"
}

# --- concurrent misses --------------------------------------------------------------
tiered async
storm >"$top/async/storm.json" 2>"$top/async/storm.err" || fail "async: ycsb C: $(tail -n 3 "$top/async/storm.err")"
eval "$(tier_counts "$(tier_stats)")"
echo "async: $misses misses: $miss_async_reads read on the worker's ring (at most $miss_depth_max in flight), $miss_sync_reads preads, $miss_parked parked requests, $miss_errors errors"
[ "$miss_async_reads" -gt 0 ] || fail "async: no miss was read on the worker's ring"
[ "$miss_depth_max" -gt 1 ] || fail "async: never more than $miss_depth_max miss read in flight"
[ "$miss_parked" -gt 0 ] || fail "async: no request parked on a miss"
[ "$miss_errors" -eq 0 ] || fail "async: $miss_errors miss errors without faults"
t1=$(round 11 | digest_of)
[ "$t1" = "$r1" ] || fail "async: round digest '$t1' differs from the in-memory one $r1"
d=$(full_read | digest_of)
[ -n "$d" ] || fail "async: no digest from the full read"
echo "ok: misses served concurrently; round digest $t1 as in memory"
load_digest=$d

# --- a read error fails only its page's waiters ----------------------------------------
# The same server again after a clean stop, with a fault on the 300th miss read
# after its start (the counter starts with the process).
pid=${CLUSTER_PIDS[0]}
kill -TERM "$pid"; wait "$pid"
grep -q "tier: misses that did not block: [0-9]* parked requests" "$top/async/ms0.err" \
  || fail "async: no 'misses that did not block' line at exit: $(grep 'tier:' "$top/async/ms0.err" | tail -n 2)"
# (LOTUS_MISS_HYBRID=0: every miss on the ring, so the damaged pages below are
# read there too, never by the hybrid rule's pread)
LOTUS_TIER_FAULT=miss:300:EIO:1 LOTUS_MISS_HYBRID=0 cluster_restart 0 \
  || fail "fault: the server did not restart"
# ycsb exits at the failed transaction with others of its threads in flight
# (a client that stops on an error, not the server under test: no leak check)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  storm >"$top/async/fault.json" 2>"$top/async/fault.err"; rc=$?
eval "$(tier_counts "$(tier_stats)")"
echo "fault: ycsb exited $rc ($(tail -n 1 "$top/async/fault.err" | cut -c1-120)); $miss_errors failed miss read, $miss_async_reads ring reads, $miss_parked parked"
[ "$miss_errors" -eq 1 ] || fail "fault: want exactly 1 failed miss read, got $miss_errors (did the fault fire?)"
[ "$miss_async_reads" -ge 299 ] || fail "fault: only $miss_async_reads reads on the ring around the failed one"
grep -q "fault injection: the miss read of page" "$top/async/ms0.err" || fail "fault: no fault line in the server log"
kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null || fail "fault: the server died"
d=$(full_read | digest_of)
[ "$d" = "$load_digest" ] || fail "fault: after the failed read the full read gives '$d', want $load_digest"
echo "ok: one failed read failed only its waiters; the server served on and the data is whole"

# --- a damaged page on disk fails only its waiters --------------------------------------
# Updates (a round of YCSB A) put dirty pages into pages.swap as they are evicted; then
# 20 bytes of pages.swap are flipped under the running server: a miss read on
# the worker's ring that gets a damaged page fails its checksum (counted as a
# failed ring read and as a bad swap page), its waiters get an error, the
# reads around it succeed, and after a clean restart (the page rebuilt from
# its checkpoint and the log) the data is whole.
round 12 >/dev/null 2>"$top/async/a.err" || fail "rot: ycsb A: $(tail -n 3 "$top/async/a.err")"
want=$(full_read | digest_of)
[ -n "$want" ] || fail "rot: no digest after the updates"
eval "$(tier_counts "$(tier_stats)")"
a0=$miss_async_reads
# a byte in the middle of 20 of the pages written there (pages.swap holds page
# p at p x page size; past the first 16, where the table's own pages are),
# xored with 0xff as scripts/damage-file flip does
swap=$CLUSTER_DATA/ms0/pages.swap
n=$("$PY" - "$swap" "$(sed -n 's/^page_size //p' "$CLUSTER_DATA/ms0/MANIFEST")" <<'PYEOF'
import random, sys
path, ps = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    data = f.read()
    pages = [p for p in range(16, len(data) // ps) if any(data[p * ps:(p + 1) * ps])]
    for p in random.Random(5).sample(pages, min(20, len(pages))):
        f.seek(p * ps + ps // 2)
        f.write(bytes([data[p * ps + ps // 2] ^ 0xff]))
print(min(20, len(pages)))
PYEOF
)
[ "${n:-0}" -gt 0 ] || fail "rot: no page past the first 16 in pages.swap: nothing was evicted dirty"
# uniform reads: every page alike, so a damaged one is met within the run
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  storm --dist uniform >"$top/async/rot.json" 2>"$top/async/rot.err"; rc=$?
eval "$(tier_counts "$(tier_stats)")"
echo "rot: ycsb exited $rc ($(tail -n 1 "$top/async/rot.err" | cut -c1-120)); $miss_async_errors failed ring reads, $swap_crc_errors bad swap pages, $((miss_async_reads - a0)) good ring reads"
[ "$swap_crc_errors" -gt 0 ] || fail "rot: no damaged page was read (swap_crc_errors 0)"
[ "$miss_async_errors" -gt 1 ] || fail "rot: a damaged page on the ring is not counted as a failed read (miss_async_errors $miss_async_errors, 1 of them the fault's)"
[ $((miss_async_reads - a0)) -gt 0 ] || fail "rot: no good read on the ring around the damaged pages"
grep -q "fails its checksum" "$top/async/ms0.err" || fail "rot: no checksum line in the server log"
kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null || fail "rot: the server died"
pid=${CLUSTER_PIDS[0]}
kill -TERM "$pid"; wait "$pid"
cluster_restart 0 || fail "rot: the server did not restart"
d=$(full_read | digest_of)
[ "$d" = "$want" ] || fail "rot: after the restart the full read gives '$d', want $want"
echo "ok: damaged pages failed only their waiters; after a restart the data is whole"
cluster_stop

