#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (a JVM, and waits out a ZooKeeper session; the coordinator's code runs in the normal build)
# Replica groups and ZooKeeper (docs/replication.md, issue 29 items 1-2): a
# private ZooKeeper on loopback (scripts/lib-zk.sh) and 4 memory servers with
# replicas = 2, i.e. partitions {0,1} and {2,3}.
#  - lotus bank runs and verifies against them: keys hash to the 2 partitions
#    and go to each partition's primary (0 and 2);
#  - the partitions' znodes hold members, primary and epoch, created once;
#  - every server has an ephemeral znode; that of a kill -9'd server goes
#    within its session timeout (the lease, 2000 ms here; the bound below is
#    generous for a loaded machine), the others stay;
#  - with both backups dead the bank still verifies (no traffic goes to them);
#  - a restarted server registers again and the partition's znode is unchanged;
#  - a client whose coordinator does not answer fails with a clear error.
. "$(dirname "$0")/lib.sh"
lib_use zk
zk_need
lib_use cluster
bank=
cleanup() {
  [ -z "$bank" ] || kill -9 "$bank" 2>/dev/null
  cluster_stop
  zk_stop
}
at_exit cleanup

zk_start "$T" || fail "ZooKeeper did not start"
export CLUSTER_REPLICAS=2 CLUSTER_COORDINATOR=$ZK_HOSTS CLUSTER_LEASE_MS=2000
export CLUSTER_DATA=$T/data CLUSTER_DURABILITY=async   # a backup copies a log
cluster_start "$T" 4 --threads 1 --memory 64M || fail "servers did not start: $(tail -n 3 "$T"/ms*.err)"
cid=$(sed -n 's/^cluster_id = //p' "$CLUSTER_INI")
[ -n "$cid" ] || fail "no cluster_id in $CLUSTER_INI"
root=/lotus/$cid

# Roles as the servers report them.
for id in 0 1 2 3; do
  role=$([ $((id % 2)) = 0 ] && echo primary || echo backup)
  grep -q "memory server $id: partition $((id / 2)) (servers $((id / 2 * 2))..$((id / 2 * 2 + 1))), $role, epoch 1" \
    "$T/ms$id.err" || fail "server $id does not report partition $((id / 2)) $role: $(tail -n 3 "$T/ms$id.err")"
done

# The partitions' configuration.
p0=$(zk_get "$root/partitions/0"); p1=$(zk_get "$root/partitions/1")
[ "$p0" = '{"epoch":1,"primary":0,"members":[0,1],"insync":[0,1]}' ] || fail "partition 0's znode: '$p0'"
[ "$p1" = '{"epoch":1,"primary":2,"members":[2,3],"insync":[2,3]}' ] || fail "partition 1's znode: '$p1'"
s2=$(zk_get "$root/servers/2")
[ "$s2" = "{\"host\":\"127.0.0.1\",\"port\":${CLUSTER_PORTS[2]},\"partition\":1}" ] \
  || fail "server 2's znode: '$s2'"

# Each server's ephemeral znode, under a session of its own.
live() { zk_cmd dump | grep -c "^	$root/servers/"; }
has() { zk_cmd dump | grep -q "^	$root/servers/$1\$"; }
[ "$(live)" = 4 ] || fail "expected 4 ephemeral server znodes: $(zk_cmd dump)"
sessions=$(zk_cmd dump | grep -c '^0x')
[ "$sessions" -ge 4 ] || fail "expected a session per server: $(zk_cmd dump)"

# A bank run against the primaries.
led=$T/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts 40 --seconds 2 --threads 2 --inflight 4 \
    --ledger "$led" --quiet >"$T/bank.out" 2>"$T/bank.err" \
  || fail "bank exited $?: $(tail -n 5 "$T/bank.err")"
"$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify >"$T/verify.out" 2>&1 \
  || fail "verify: $(tail -n 5 "$T/verify.out")"
grep -q "verify: OK" "$T/verify.out" || fail "verify: $(cat "$T/verify.out")"

# kill -9 a backup: its ephemeral znode goes within the session timeout.
cluster_kill 3
t0=$(date +%s%N)
while has 3; do
  [ $(( ($(date +%s%N) - t0) / 1000000 )) -lt 15000 ] \
    || fail "server 3's ephemeral znode still there 15 s after kill -9 (session 2000 ms)"
  sleep 0.05
done
gone_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "server 3's ephemeral znode gone ${gone_ms} ms after kill -9 (session timeout 2000 ms)"
has 0 && has 1 && has 2 || fail "a live server's znode went too: $(zk_cmd dump)"

# Both backups dead: clients never needed them (the primaries drop them from
# the in-sync set and go on).
cluster_kill 1
"$L" bank --config "$CLUSTER_INI" --ledger "$led" --seconds 1 --threads 2 --quiet \
    >/dev/null 2>"$T/bank2.err" || fail "bank without the backups: $(tail -n 5 "$T/bank2.err")"
"$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify >"$T/verify.out" 2>&1 \
  || fail "verify without the backups: $(tail -n 5 "$T/verify.out")"

# A restarted server registers again (once its old session is gone); the
# partition's primary and epoch are unchanged (only its in-sync set moved).
cluster_restart 1 || fail "server 1 did not restart: $(tail -n 3 "$T/ms1.err")"
has 1 || fail "restarted server 1 has no ephemeral znode: $(zk_cmd dump)"
p0b=$(zk_get "$root/partitions/0")
[ "${p0b%%,\"insync\"*}" = "${p0%%,\"insync\"*}" ] || fail "partition 0's znode changed: '$p0b'"
cluster_restart 3 || fail "server 3 did not restart: $(tail -n 3 "$T/ms3.err")"
has 3 || fail "restarted server 3 has no ephemeral znode: $(zk_cmd dump)"

# A clean stop removes its znode at once.
kill "${CLUSTER_PIDS[2]}"; wait "${CLUSTER_PIDS[2]}" 2>/dev/null
has 2 && fail "server 2 stopped cleanly but its znode is still there"
cluster_restart 2 || fail "server 2 did not restart: $(tail -n 3 "$T/ms2.err")"

# The coordinator down: a new client says so and exits (not a hang).
zk_stop
sed "s/^coordinator = .*/coordinator = 127.0.0.1:1/" "$CLUSTER_INI" >"$T/nozk.ini"
start=$(date +%s)
timeout -s KILL 60 "$L" bank --config "$T/nozk.ini" --ledger "$led" --verify \
    >"$T/nozk.out" 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] || fail "a client without its coordinator exited $rc: $(tail -n 3 "$T/nozk.out")"
grep -q "coordinator 127.0.0.1:1: no ZooKeeper session within" "$T/nozk.out" \
  || fail "no clear error without the coordinator: $(tail -n 3 "$T/nozk.out")"
echo "PASS: replicas = 2, 2 partitions, znodes and liveness in ZooKeeper"
