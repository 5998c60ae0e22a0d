#!/usr/bin/env bash
# timeout: 200
# sanitizers: skip (a JVM, and waits out ZooKeeper sessions)
# A primary that goes silent (SIGSTOP) is replaced before its clients give it
# up (docs/replication.md): the servers' ZooKeeper sessions last 2 s, the
# client's lease 6 s, so partition 0's backup has taken over long before the
# client declares the silent primary lost, with 8 transfers in flight on one
# session.  The first of them to be retried reconnects to the successor at
# once; the others' commits, whose answers went with the lost connection,
# must still be resolved by asking the successor, not reported in doubt
# because the partition is connected again by the time they are looked at.
# The bank run exits 0, nothing is recorded as "maybe", the ledger verifies,
# and the paused primary stops once it runs again.
. "$(dirname "$0")/lib.sh"
lib_use zk
zk_need
lib_use cluster
cleanup() {
  [ -z "${CLUSTER_PIDS[0]:-}" ] || kill -CONT "${CLUSTER_PIDS[0]}" 2>/dev/null || true
  cluster_stop
  zk_stop
}
at_exit cleanup

zk_start "$T" || fail "ZooKeeper did not start"
export CLUSTER_REPLICAS=2 CLUSTER_COORDINATOR=$ZK_HOSTS CLUSTER_LEASE_MS=2000
export CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync
cluster_start "$T" 4 --threads 1 --memory 64M || fail "servers did not start: $(tail -n 3 "$T"/ms*.err)"
# the client's own lease: it gives up a silent server after 6 s
sed 's/^lease_ms = .*/lease_ms = 6000/' "$CLUSTER_INI" >"$T/client.ini"
grep -q "^lease_ms = 6000" "$T/client.ini" || fail "no lease_ms in $CLUSTER_INI"

bank() { "$L" bank --config "$T/client.ini" --accounts 40 --ledger "$T/led" "$@"; }
bank --seconds 1 --threads 1 --quiet >/dev/null 2>"$T/bank1.err" || fail "bank: $(tail -n 5 "$T/bank1.err")"
[ "$(repl_field 0 role)" = primary ] && [ "$(repl_field 1 role)" = backup ] \
  || fail "roles at start: $(repl_status)"

bank --seconds 11 --threads 1 --inflight 8 --quiet >"$T/bank2.out" 2>"$T/bank2.err" &
bpid=$!
sleep 1.5
kill -STOP "${CLUSTER_PIDS[0]}"
t0=$(date +%s%N)
repl_wait_role 1 primary 20 || fail "server 1 did not take over from the paused server 0: $(tail -n 5 "$T/ms1.err")"
echo "server 1 took over $(( ($(date +%s%N) - t0) / 1000000 )) ms after server 0 stopped (session 2000 ms)"
wait "$bpid"
rc=$?; [ -z "${DBG:-}" ] || cat "$T/bank2.err" >&2
grep -q "lost memory server 0" "$T/bank2.err" || fail "the client never gave up the paused server: $(tail -n 5 "$T/bank2.err")"
grep -q "reconnected to its primary" "$T/bank2.err" || fail "the bank run did not reconnect: $(tail -n 5 "$T/bank2.err")"
[ "$rc" = 0 ] || fail "the bank run through the stall exited $rc: $(grep -v " info: " "$T/bank2.err" | tail -n 6)"
grep -q "in doubt" "$T/bank2.err" && fail "a commit was reported in doubt: $(grep "in doubt" "$T/bank2.err" | head -n 3)"
grep -q "^maybe " "$T/led" && fail "the ledger holds 'maybe' transfers: $(grep -c "^maybe " "$T/led")"
echo "the bank run went on through the stall and exited 0:"; cat "$T/bank2.out"

kill -CONT "${CLUSTER_PIDS[0]}"
for i in $(seq 100); do kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null && fail "the paused primary still runs after its successor took over"
"$L" bank --config "$CLUSTER_INI" --ledger "$T/led" --verify >"$T/verify.out" 2>&1 \
  && grep -q "verify: OK" "$T/verify.out" || fail "verify: $(tail -n 5 "$T/verify.out")"
echo "PASS: a silent primary replaced before the client gave it up: no commit in doubt, the ledger verifies"
