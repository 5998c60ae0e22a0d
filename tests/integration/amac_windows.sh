#!/usr/bin/env bash
# timeout: 60
# The lookup phases (AMAC, handlers.c) cover every request of a long
# message, not only its first MS_AMAC_MAX (64).  One memory server with one
# worker; one YCSB client thread with 16 transactions in flight batched
# together (--inflight 16 --batch inter), so one message carries up to 16 x
# 16 reads.  Every read then finds its record through the phases' guess
# (the hash bucket read in the second phase), not through a second, full
# index lookup: the server's stats must show guess_hits for at least 90% of
# the reads, and index_finds (reads whose guess failed) for at most 10%.
# Before the fix, messages went through the phases only up to their 64th
# request: about a quarter of the reads hit, the rest looked the key up again.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
SRV_STATS=${SRV_STATS:-$(dirname "$L")/srv-stats}
at_exit 'cluster_stop'
[ -x "$SRV_STATS" ] || skip "no srv-stats helper"
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }
records=5000
cluster_start "$T" 1 --threads 1 --memory 64M || fail "server did not start: $(tail -n 3 "$T/ms0.err")"
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --records $records --threads 1 "$@"; }
Y --no-run >/dev/null 2>"$T/load.err" || fail "load: $(tail -n 3 "$T/load.err")"
st=$("$SRV_STATS" "$CLUSTER_INI" 0) || fail "no stats"
g0=$(field guess_hits <<<"$st"); i0=$(field index_finds <<<"$st")
[ -n "$g0" ] && [ -n "$i0" ] || fail "the server's stats have no guess_hits/index_finds: $st"
Y --no-load --workload C --inflight 16 --batch inter --txns 200 --json >"$T/run.json" 2>"$T/run.err" \
  || fail "workload C: $(tail -n 3 "$T/run.err")"
st=$("$SRV_STATS" "$CLUSTER_INI" 0) || fail "no stats after the run"
g=$(( $(field guess_hits <<<"$st") - g0 )); i=$(( $(field index_finds <<<"$st") - i0 ))
n=$((g + i))
echo "reads: $n, found through the phases' guess: $g, looked up again: $i"
[ "$n" -ge 1000 ] || fail "too few reads counted ($n): $st"
[ $((g * 10)) -ge $((n * 9)) ] || fail "only $g of $n reads found their record through the lookup phases"
exit 0
