#!/usr/bin/env bash
# timeout: 120
# A flood of status queries must not make a participant forget a COMMIT.
# Two durable memory servers run `lotus bank` (two-phase commit across them);
# server 1 dies at the crash point before_commit: its PREPARE is durable and
# the COMMIT arrived, but nothing was applied, while server 0 committed.
# While server 1 is down, a client asks server 0 about 300,000 random
# transaction ids (`lotus txn-status --random`, more than its outcome tables
# hold).  Server 1 restarts, its resolver asks server 0, and `lotus bank
# --verify` must find the total unchanged and every acknowledged transfer.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
top=$T
at_exit 'cluster_stop'
CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync CLUSTER_CC=wait_die
cluster_start "$top" 2 --threads 1 --memory 64M || fail "servers did not start"
led=$top/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts 40 --opening 1000 --seconds 0.3 --threads 1 \
    --ledger "$led" --quiet >/dev/null 2>"$top/bank0.err" || fail "setup run failed"
cluster_kill 1
LOTUS_CRASH_AT=before_commit:30 cluster_restart 1 || fail "server 1 did not restart"
"$L" bank --config "$CLUSTER_INI" --seconds 20 --threads 2 --inflight 2 --ledger "$led" \
    --quiet >"$top/bank.out" 2>"$top/bank.err"
rc=$?
grep -q "crash point before_commit reached" "$top/ms1.err" \
  || fail "the crash point was never reached (bank exit $rc)"
[ $rc -eq 3 ] || [ $rc -eq 0 ] || fail "bank exited $rc: $(tail -n 5 "$top/bank.err")"
cluster_kill 1
# the flooding client knows server 0 only (server 1 is down)
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "${CLUSTER_PORTS[0]}" \
  >"$top/server0.ini"
flood=$("$L" txn-status --config "$top/server0.ini" --server 0 --random 300000 --json 2>"$top/flood.err") \
  || fail "the flood failed: $(tail -n 3 "$top/flood.err")"
echo "flood: $flood"
cluster_restart 1 || fail "server 1 did not come back: $(tail -n 3 "$top/ms1.err")"
ok=""
for i in $(seq 30); do   # the resolver settles what server 1 left prepared
  ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$top/verify.err") \
    && { ok=1; break; }
  sleep 0.5
done
grep -o "recovery: [0-9]* prepared transactions\? without a decision" "$top/ms1.err" | tail -n1
grep "resolved with the other participants" "$top/ms1.err" | tail -n 3
[ -n "$ok" ] || fail "verify failed: $ver $(tail -n 3 "$top/verify.err")"
[ "$(echo "$ver" | field total)" = 40000 ] || fail "total changed: $ver"
grep -q "resolved with the other participants: commit" "$top/ms1.err" \
  || fail "no committed transaction was resolved: the test did not test the flood"
echo "verify: $ver"
echo ok
