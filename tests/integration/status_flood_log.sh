#!/usr/bin/env bash
# timeout: 120
# Status queries about unknown transaction ids must not grow the redo log
# (issue 20, nit: each one used to append a durable refusal, 9.4 MB per 300k
# queries).  A durable memory server is asked about 100,000 random ids
# (`lotus txn-status --random`): none holds locks there, so none can ever be
# prepared there, and the answers ("unknown") need no record.  The log may
# grow by at most 64 KiB (a checkpoint's records; nothing per query).  The
# refusal that keeps "unknown" final for a transaction that does hold locks
# there is checked by tests/unit/test_resolve_live.c; the outcome tests
# (outcome_flood.sh, durable_local_settle.sh) check that the resolver still
# settles prepared transactions.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
SRV_STATS=$(dirname "$L")/srv-stats
[ -x "$SRV_STATS" ] || { echo "skip: no $SRV_STATS"; exit 77; }
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
top=$T
at_exit 'cluster_stop'
CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 1 --threads 1 --memory 64M || fail "the server did not start"
before=$("$SRV_STATS" "$CLUSTER_INI" 0 | field log_bytes)
[ -n "$before" ] || fail "no log_bytes in the server's stats"
flood=$("$L" txn-status --config "$CLUSTER_INI" --server 0 --random 100000 --json \
    2>"$top/flood.err") || fail "the queries failed: $(tail -n 3 "$top/flood.err")"
after=$("$SRV_STATS" "$CLUSTER_INI" 0 | field log_bytes)
grew=$((after - before))
echo "100000 status queries ($flood): the log grew by $grew bytes"
[ "$grew" -le 65536 ] || fail "the log grew by $grew bytes for 100000 unknown-id queries"
one=$("$L" txn-status --config "$CLUSTER_INI" --server 0 --txn 123456789abc --json 2>/dev/null)
echo "$one" | grep -q '"answer":"unknown"' || fail "an unknown id: $one"
echo ok
