#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (a JVM, and waits out ZooKeeper sessions)
# Replacing a replicated memory server whose disk was lost (docs/replication.md,
# "Replacing a server"): a private ZooKeeper and 4 durable servers with
# replicas = 2.
#  - bank traffic; kill -9 of backup 1 and its data directory removed;
#  - a restart without --join is refused (an empty directory is no database);
#  - `lotus memserver --join` copies partition 0's data from its primary into
#    the empty directory, starts as a backup and catches up (same LSN, lag 0)
#    while a bank run goes on;
#  - kill -9 of the primary: the joined server takes over, and every
#    acknowledged transfer is there (bank --verify);
#  - --join into a directory that is not empty, and --join with --init, are
#    refused with a clear line.
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

bank --seconds 2 --quiet >"$T/bank1.out" 2>"$T/bank1.err" || fail "bank: $(tail -n 5 "$T/bank1.err")"

# Backup 1 loses its disk.
cluster_kill 1
rm -rf "$CLUSTER_DATA/ms1"
cluster_restart 1 && fail "a server restarted on an empty directory without --join or --init"
grep -q "give --init\|--init" "$T/ms1.err" || fail "no clear refusal of the empty directory: $(tail -n 2 "$T/ms1.err")"

# The replacement joins while traffic goes on.
bank --seconds 4 --quiet >"$T/bank2.out" 2>"$T/bank2.err" &
bpid=$!
sleep 1
: >"$T/ms1.out"
_cluster_spawn 1 "127.0.0.1:${CLUSTER_PORTS[1]}" --config "$CLUSTER_INI" --join
_cluster_ready 1 || fail "the replacement did not start: $(tail -n 5 "$T/ms1.err")"
grep -q "join: partition 0's primary copied into" "$T/ms1.err" || fail "no copy reported: $(tail -n 5 "$T/ms1.err")"
wait "$bpid" || fail "bank during the join: $(tail -n 5 "$T/bank2.err")"
repl_wait_role 1 backup 10 || fail "the replacement is not a backup: $(repl_status)"
for i in $(seq 100); do
  [ "$(repl_field 0 lag)" = 0 ] && [ "$(repl_field 0 lsn)" = "$(repl_field 1 lsn)" ] && break
  sleep 0.1
done
[ "$(repl_field 0 lsn)" = "$(repl_field 1 lsn)" ] || fail "the replacement did not catch up: $(repl_status)"
grep -o "join: partition 0's primary copied into [^;]*" "$T/ms1.err" | head -n 1
echo "the replacement caught up: log at LSN $(repl_field 1 lsn), as its primary's, $(repl_field 1 records) records"

# It holds the data: the primary dies, the replacement takes over.
cluster_kill 0
repl_wait_role 1 primary 20 || fail "the replacement did not take over: $(tail -n 5 "$T/ms1.err")"
verify || fail "verify after the takeover: $(tail -n 5 "$T/verify.out")"
echo "the replacement took over; verify OK"

# Misuse.
mkdir -p "$T/full" && touch "$T/full/x"
"$L" memserver --config "$CLUSTER_INI" --id 0 --data-dir "$T/full" --join >"$T/j1.out" 2>&1 \
  && fail "--join into a directory that is not empty was accepted"
grep -q "is not empty: --join copies" "$T/j1.out" || fail "no clear error: $(tail -n 2 "$T/j1.out")"
"$L" memserver --config "$CLUSTER_INI" --id 0 --data-dir "$T/new" --join --init >"$T/j2.out" 2>&1
[ $? -eq 2 ] || fail "--join --init: want exit 2: $(cat "$T/j2.out")"
echo "PASS: a server that lost its disk rejoined with --join, caught up and took over"
