#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (a JVM, and waits out ZooKeeper sessions)
# ZooKeeper restarted under traffic (docs/replication.md, "When ZooKeeper is
# unreachable"): 4 durable servers with replicas = 2 and a private ZooKeeper.
# A bank run goes on while ZooKeeper is stopped and started again on its port
# and data: the primaries pause once they have not heard from it for half a
# session (clients get the retryable LOTUS_EFAILOVER), go on once it is back
# with their sessions, and nobody takes over (epochs stay 1).  The run exits 0
# and verifies.
. "$(dirname "$0")/lib.sh"
lib_use zk
zk_need
lib_use cluster
bpid=
cleanup() {
  [ -z "$bpid" ] || kill -9 "$bpid" 2>/dev/null
  cluster_stop
  zk_stop
}
at_exit cleanup

zk_start "$T" || fail "ZooKeeper did not start"
export CLUSTER_REPLICAS=2 CLUSTER_COORDINATOR=$ZK_HOSTS CLUSTER_LEASE_MS=2000
export CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync
cluster_start "$T" 4 --threads 1 --memory 64M || fail "servers did not start: $(tail -n 3 "$T"/ms*.err)"

"$L" bank --config "$CLUSTER_INI" --accounts 40 --threads 2 --inflight 4 --ledger "$T/led" \
    --seconds 7 --quiet >"$T/bank.out" 2>"$T/bank.err" &
bpid=$!
sleep 1.5
kill "$ZK_PID"; wait "$ZK_PID" 2>/dev/null
t0=$(date +%s%N)
sleep 1   # past half a session: the primaries pause
java -Xmx128m -Dzookeeper.jmx.log4j.disable=true -cp "$ZK_JAR" \
  org.apache.zookeeper.server.ZooKeeperServerMain "$ZK_DIR/zoo.cfg" >>"$ZK_DIR/zk.log" 2>&1 &
ZK_PID=$!
for i in $(seq 300); do [ "$(zk_cmd ruok)" = imok ] && break; sleep 0.1; done
[ "$(zk_cmd ruok)" = imok ] || fail "ZooKeeper did not start again: $(tail -n 3 "$ZK_DIR/zk.log")"
echo "ZooKeeper away for $(( ($(date +%s%N) - t0) / 1000000 )) ms"
wait "$bpid"; rc=$?; bpid=
[ $rc -eq 0 ] || fail "bank through the ZooKeeper restart exited $rc: $(tail -n 5 "$T/bank.err")"
cat "$T/bank.out"
"$L" bank --config "$CLUSTER_INI" --ledger "$T/led" --verify >"$T/verify.out" 2>&1 \
  && grep -q "verify: OK" "$T/verify.out" || fail "verify: $(tail -n 5 "$T/verify.out")"
s=$(repl_status)
echo "$s" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
roles = {s["id"]: (s.get("role"), s.get("epoch")) for s in d["servers"] if s["up"]}
want = {0: ("primary", 1), 1: ("backup", 1), 2: ("primary", 1), 3: ("backup", 1)}
sys.exit(0 if roles == want else "roles and epochs after the restart: %s" % roles)' \
  || fail "a takeover or a lost server: $s"
grep -h "expired" "$T"/ms*.err && fail "a server lost its session"
echo "PASS: a ZooKeeper restart under traffic: no takeover, the run went on and verified"
