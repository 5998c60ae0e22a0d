#!/usr/bin/env bash
# timeout: 90
# The hash point index through recovery, from the outside.  A durable memory
# server (--checkpoint-log 64K, so checkpoints run during the load and the
# rounds) gets a YCSB table of 3000 records, then rounds of workload A
# (updates) and D (inserts: the table grows) with fixed seeds; their digests
# (the table read back by key), and the one of the loaded records read back
# after them, must equal those of the same history on
# a server without the hash index (LOTUS_HASH_INDEX=0).  The server is then
# killed with -9 and restarted (checkpoint image + redo replay rebuild both
# indexes): the digest read back must be the one before the kill, and the
# server's stats must show the hash index in use with one entry per record
# (records == hash_entries: no recovery path left an index behind).
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
SRV_STATS=${SRV_STATS:-$(dirname "$L")/srv-stats}
top=$T
at_exit 'cluster_stop'
records=3000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
round() { Y --no-load --workload "$1" --threads 1 --txns 300 --seed "$2" --digest | digest_of; }
field() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"; }

history() {   # dir: load, two rounds; their digests in dir/digests
  CLUSTER_DATA=$1/data CLUSTER_DURABILITY=sync
  cluster_start "$1" 1 --threads 1 --memory 64M --durability sync --checkpoint-log 64K \
    || fail "server did not start: $(tail -n 3 "$1/ms0.err")"
  Y --threads 1 --no-run >/dev/null 2>"$1/load.err" || fail "load: $(tail -n 3 "$1/load.err")"
  echo "$(round A 21) $(round D 22) $(Y --threads 1 --no-load --no-run --digest | digest_of)" \
    >"$1/digests"
}

[ -x "$SRV_STATS" ] || skip "no srv-stats helper"
mkdir "$top/ref" "$top/hx"
LOTUS_HASH_INDEX=0 history "$top/ref"
read -r ra rd r0 <"$top/ref/digests"
st=$("$SRV_STATS" "$CLUSTER_INI" 0) || fail "no stats from the reference server"
ht=$(field hash_tables <<<"$st")
[ -n "$ht" ] || fail "the server's stats have no hash_tables (no hash index): $st"
[ "$ht" = 0 ] || fail "LOTUS_HASH_INDEX=0, yet $ht hash tables: $st"
cluster_stop
[ -n "$ra" ] && [ -n "$rd" ] && [ "$ra" != "$rd" ] || fail "reference digests: '$ra' '$rd'"
echo "reference (B+tree only): digests A $ra, D $rd"

history "$top/hx"
read -r ha hd h0 <"$top/hx/digests"
echo "hash index: digests A $ha, D $hd"
[ "$ha" = "$ra" ] && [ "$hd" = "$rd" ] && [ "$h0" = "$r0" ] || fail "digests differ from the B+tree-only server's"
st=$("$SRV_STATS" "$CLUSTER_INI" 0) || fail "no stats"
rec=$(field records <<<"$st"); he=$(field hash_entries <<<"$st")
[ "$(field hash_tables <<<"$st")" -ge 1 ] && [ -n "$rec" ] && [ "$rec" -gt $records ] \
  && [ "$he" = "$rec" ] || fail "before the kill: records $rec, hash entries $he: $st"
echo "before the kill: $rec records, $he hash entries"

cluster_kill 0
cluster_restart 0 || fail "the server did not restart after kill -9"
st=$("$SRV_STATS" "$CLUSTER_INI" 0) || fail "no stats after the restart"
rec2=$(field records <<<"$st"); he2=$(field hash_entries <<<"$st")
echo "after the restart: $rec2 records, $he2 hash entries"
[ "$rec2" = "$rec" ] && [ "$he2" = "$rec2" ] || fail "after recovery: records $rec2, hash entries $he2 (before: $rec): $st"
d=$(Y --threads 1 --no-load --no-run --digest | digest_of)
[ -n "$d" ] && [ "$d" = "$h0" ] || fail "digest after kill -9 and recovery '$d', before '$h0'"
echo "ok: digest after kill -9 and recovery $d equals the one before"
