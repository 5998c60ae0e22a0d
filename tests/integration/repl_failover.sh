#!/usr/bin/env bash
# timeout: 300
# sanitizers: skip (a JVM, and waits out ZooKeeper sessions)
# Replicated memory servers keep working when a primary dies
# (docs/replication.md, issue 29): a private ZooKeeper on loopback and 4
# durable memory servers with replicas = 2, i.e. partitions {0,1} and {2,3}.
#  - the backups follow their primaries' logs: a bank run's data is on them;
#  - kill -9 of partition 0's primary: its backup takes over at epoch 2 once
#    the primary's session ends, and every acknowledged transfer is there
#    (bank --verify against the new primary);
#  - the killed server restarts as a backup and catches up from the new
#    primary's log (status: role backup, lag 0);
#  - a bank run (and at the end a ycsb run) through each kill -9 goes on
#    and exits 0 (the library
#    reconnects to the successor; what the lost primary held is retried);
#  - kill -9 of the new primary: the restarted server takes over at epoch 3,
#    and verify still passes;
#  - a primary paused (SIGSTOP) past its session is deposed: its backup takes
#    over, and after SIGCONT it applies nothing and stops.
. "$(dirname "$0")/lib.sh"
lib_use zk
zk_need
lib_use cluster
cleanup() {
  cluster_stop
  zk_stop
}
at_exit cleanup

zk_start "$T" || fail "ZooKeeper did not start"
export CLUSTER_REPLICAS=2 CLUSTER_COORDINATOR=$ZK_HOSTS CLUSTER_LEASE_MS=2000
export CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync
cluster_start "$T" 4 --threads 1 --memory 64M || fail "servers did not start: $(tail -n 3 "$T"/ms*.err)"

bank() { "$L" bank --config "$CLUSTER_INI" --accounts 40 --threads 2 --inflight 4 --ledger "$T/led" "$@"; }
verify() {
  "$L" bank --config "$CLUSTER_INI" --ledger "$T/led" --verify >"$T/verify.out" 2>&1 \
    && grep -q "verify: OK" "$T/verify.out"
}

[ "$(repl_field 0 role)" = primary ] && [ "$(repl_field 1 role)" = backup ] \
  || fail "roles at start: $(repl_status)"

# Traffic; the backups follow.
bank --seconds 2 --quiet >"$T/bank1.out" 2>"$T/bank1.err" || fail "bank: $(tail -n 5 "$T/bank1.err")"
verify || fail "verify: $(tail -n 5 "$T/verify.out")"
for id in 1 3; do
  recs=$(repl_field "$id" records)
  [ "${recs:-0}" -gt 0 ] || fail "backup $id holds no records: $(repl_status)"
done
lsn0=$(repl_field 0 lsn); lsn1=$(repl_field 1 lsn)
[ "$lsn0" = "$lsn1" ] || fail "backup 1's log is at $lsn1, its primary's at $lsn0"
echo "backups follow: server 1 holds $(repl_field 1 records) records, log at LSN $lsn1 as its primary's"

# kill -9 of partition 0's primary during a bank run.
bank --seconds 4 --quiet >"$T/bank2.out" 2>"$T/bank2.err" &
bpid=$!
sleep 1.5
cluster_kill 0
t0=$(date +%s%N)
repl_wait_role 1 primary 20 || fail "server 1 did not take over: $(tail -n 5 "$T/ms1.err")"
echo "server 1 took over $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill -9 (session 2000 ms)"
wait "$bpid" || fail "the bank run through the failover exited $?: $(tail -n 5 "$T/bank2.err")"
grep -q "reconnected to its primary" "$T/bank2.err" || fail "the bank run did not reconnect: $(tail -n 5 "$T/bank2.err")"
echo "the bank run went on through the failover and exited 0:"; cat "$T/bank2.out"; grep -v " info: " "$T/bank2.err" | head -n 8
[ "$(repl_field 1 epoch)" = 2 ] || fail "epoch after the takeover: $(repl_field 1 epoch)"
verify || fail "verify after the takeover: $(tail -n 5 "$T/verify.out")"
echo "verify OK against the new primary"

# The killed server restarts as a backup and catches up.
cluster_restart 0 || fail "server 0 did not restart: $(tail -n 3 "$T/ms0.err")"
repl_wait_role 0 backup 10 || fail "server 0 is not a backup: $(repl_status)"
bank --seconds 2 --quiet >"$T/bank3.out" 2>"$T/bank3.err" || fail "bank after the takeover: $(tail -n 5 "$T/bank3.err")"
for i in $(seq 100); do
  [ "$(repl_field 1 lag)" = 0 ] && [ "$(repl_field 0 lsn)" = "$(repl_field 1 lsn)" ] && break
  sleep 0.1
done
[ "$(repl_field 0 lsn)" = "$(repl_field 1 lsn)" ] || fail "server 0 did not catch up: $(repl_status)"
grep -q "backup 0 caught up at LSN\|backup 0 follows from LSN" "$T/ms1.err" \
  || fail "no catch-up in server 1's log: $(tail -n 5 "$T/ms1.err")"
echo "server 0 caught up: log at LSN $(repl_field 0 lsn), as its primary's"

# kill -9 of the new primary during a bank run: the caught-up server takes over.
bank --seconds 3 --quiet >"$T/bank4.out" 2>"$T/bank4.err" &
bpid=$!
sleep 1
cluster_kill 1
repl_wait_role 0 primary 20 || fail "server 0 did not take over again: $(tail -n 5 "$T/ms0.err")"
wait "$bpid" || fail "the bank run through the second failover exited $?: $(tail -n 5 "$T/bank4.err")"
[ "$(repl_field 0 epoch)" = 3 ] || fail "epoch after the second takeover: $(repl_field 0 epoch)"
verify || fail "verify after the second takeover: $(tail -n 5 "$T/verify.out")"
echo "second failover: server 0 primary at epoch 3, the bank run exited 0, verify OK"

# A primary paused past its session (SIGSTOP) is deposed: its backup takes
# over, and once it runs again it applies nothing and stops.
cluster_restart 1 || fail "server 1 did not restart: $(tail -n 3 "$T/ms1.err")"
repl_wait_role 1 backup 10 || fail "server 1 is not a backup: $(repl_status)"
for i in $(seq 100); do
  [ "$(repl_field 0 lag)" = 0 ] && [ "$(repl_field 0 lsn)" = "$(repl_field 1 lsn)" ] && break
  sleep 0.1
done
kill -STOP "${CLUSTER_PIDS[0]}"
repl_wait_role 1 primary 20 || { kill -CONT "${CLUSTER_PIDS[0]}"; fail "server 1 did not take over from the paused server 0"; }
kill -CONT "${CLUSTER_PIDS[0]}"
for i in $(seq 100); do kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null && fail "the paused primary still runs after its successor took over: $(tail -n 8 "$T/ms0.err")"
grep -q "it stops serving partition 0" "$T/ms0.err" || fail "server 0 did not say it was deposed: $(tail -n 3 "$T/ms0.err")"
bank --seconds 1 --quiet >"$T/bank5.out" 2>"$T/bank5.err" || fail "bank after the pause: $(tail -n 5 "$T/bank5.err")"
verify || fail "verify at the end: $(tail -n 5 "$T/verify.out")"
echo "a paused primary was deposed: $(grep -o "memory server 0: [^;]*; it stops serving" "$T/ms0.err" | head -n 1)"

# lotus ycsb runs through a failover too.
cluster_restart 0 || fail "server 0 did not restart: $(tail -n 3 "$T/ms0.err")"
repl_wait_role 0 backup 10 || fail "server 0 is not a backup: $(repl_status)"
for i in $(seq 100); do
  [ "$(repl_field 1 lag)" = 0 ] && [ "$(repl_field 0 lsn)" = "$(repl_field 1 lsn)" ] && break
  sleep 0.1
done
"$L" ycsb --config "$CLUSTER_INI" --records 5000 --threads 2 --no-run --quiet >/dev/null 2>"$T/ycsb0.err" \
  || fail "ycsb load: $(tail -n 3 "$T/ycsb0.err")"
"$L" ycsb --config "$CLUSTER_INI" --records 5000 --threads 2 --no-load --workload A --seconds 4 \
    --warmup 0 --json --quiet >"$T/ycsb.out" 2>"$T/ycsb.err" &
ypid=$!
sleep 1.5
cluster_kill 1
repl_wait_role 0 primary 20 || fail "server 0 did not take over during ycsb: $(tail -n 5 "$T/ms0.err")"
wait "$ypid" || fail "ycsb through the failover exited $?: $(tail -n 5 "$T/ycsb.err")"
echo "ycsb through a failover: $(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["txns_committed"], "committed,", d["txns_aborted"], "aborted,", d["txn_per_s"], "txn/s")' "$T/ycsb.out")"
echo "PASS: failover during bank and ycsb runs, catch-up, a paused primary fenced, no acknowledged transfer lost"
