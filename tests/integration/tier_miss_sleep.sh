#!/usr/bin/env bash
# timeout: 150
# A worker with miss reads in flight sleeps until one completes, and answers
# the requests that one poll resumes together (issue 24).  A tiered memory
# server (--memory 8M, 24000 records of 1 KiB: 3x the pool, one worker),
# under YCSB C with 2 client threads x 8 transactions in flight, on each I/O
# backend of the miss ring (LOTUS_IO=uring, aio), with LOTUS_MISS_SPIN_US=0 (no
# poll before the sleep, so every wait with reads in flight is a sleep):
#  - the server's stats (srv-stats, from the outside) show waits taken with
#    reads in flight (miss_sleeps > 0: the worker slept on the ring's
#    completion eventfd instead of polling), reads on the ring, no errors;
#  - 800 transactions finish at >= 200 txn/s (a healthy run here: 3,000-3,700;
#    with the eventfd never signalled, every wait lasts the worker's 200 ms
#    and the same run gave 38 txn/s);
#  - the replies to resumed requests went out in at most half as many
#    messages as requests parked (2 x miss_reply_msgs <= miss_parked; one
#    message per request before replies were gathered, 770 for 31,953 here);
#  - a full read gives the load's digest.
# And LOTUS_MISS_SLEEP=0 (the old polling worker) takes no such wait: the
# check above can fail.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
at_exit 'cluster_stop'
unset LOTUS_TIER_FAULT LOTUS_MISS_HYBRID LOTUS_MISS_SLEEP LOTUS_MISS_SPIN_US
records=24000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
rate_of() { sed -n 's/.*"txn_per_s":\([0-9.]*\).*/\1/p'; }
tier_need
tier=(--threads 1 --memory 8M --capacity 64M --durability sync)

run_one() {   # run_one NAME ENV...: start, load, storm, check
  local name=$1; shift
  local d=$top/$name
  mkdir -p "$d"
  CLUSTER_DATA=$d/data
  export "$@"
  cluster_start "$d" 1 "${tier[@]}" || fail "$name: the server did not start: $(tail -n 3 "$d/ms0.err")"
  local load; load=$(Y --threads 2 --no-run --digest 2>"$d/load.err" | digest_of)
  [ -n "$load" ] || fail "$name: load: $(tail -n 3 "$d/load.err")"
  local t0=$SECONDS j
  j=$(timeout 90 "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records --no-load \
        --workload C --threads 2 --batch inter --inflight 8 --txns 400 --warmup 0 2>"$d/run.err") \
    || fail "$name: ycsb C: $(tail -n 3 "$d/run.err")"
  local secs=$((SECONDS - t0)) rate; rate=$(echo "$j" | rate_of)
  eval "$(tier_counts "$(tier_stats)")"
  echo "$name: 800 txns in ${secs}s ($rate txn/s): $miss_async_reads ring reads, $miss_parked parked," \
       "$miss_reply_msgs reply messages, $miss_sleeps sleeps with reads in flight, $miss_async_errors errors"
  if [ "$miss_async_reads" -eq 0 ] && grep -q "no ring for misses" "$d/ms0.err"; then
    cluster_stop; echo "SKIP: $name: the miss ring cannot be made here: $(grep -m1 'no ring' "$d/ms0.err")"
    exit 77
  fi
  [ "$miss_async_reads" -gt 0 ] || fail "$name: no miss was read on the worker's ring"
  [ "$miss_async_errors" -eq 0 ] || fail "$name: $miss_async_errors failed reads without faults"
  [ $((2 * miss_reply_msgs)) -le "$miss_parked" ] \
    || fail "$name: $miss_reply_msgs reply messages for $miss_parked parked requests"
  /usr/bin/python3 -c "import sys; sys.exit(0 if float('${rate:-0}') >= 200 else 1)" \
    || fail "$name: $rate txn/s: below what a worker that wakes on its reads does (lost wakeups?)"
  local d2; d2=$(Y --no-load --no-run --threads 1 --digest | digest_of)
  [ "$d2" = "$load" ] || fail "$name: full read digest '$d2', want the load's $load"
  cluster_stop
  for v in "$@"; do unset "${v%%=*}"; done
}

run_one uring LOTUS_IO=uring LOTUS_MISS_SPIN_US=0
[ "$miss_sleeps" -gt 0 ] || fail "uring: the worker never slept with reads in flight (it polled)"
run_one aio LOTUS_IO=aio LOTUS_MISS_SPIN_US=0
[ "$miss_sleeps" -gt 0 ] || fail "aio: the worker never slept with reads in flight (it polled)"
run_one polling LOTUS_IO=uring LOTUS_MISS_SLEEP=0
[ "$miss_sleeps" -eq 0 ] || fail "LOTUS_MISS_SLEEP=0: $miss_sleeps sleeps with reads in flight, want none"
echo "ok: the worker sleeps on its ring's completions (io_uring and libaio) and answers resumed requests together"
