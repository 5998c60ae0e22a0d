#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (a JVM, network namespaces, and waits out ZooKeeper sessions)
# A partition between a primary and its backup (docs/replication.md), on the
# netns test bed (scripts/netns-cluster): 4 durable memory servers with
# replicas = 2 (partitions {ms0,ms1} and {ms2,ms3}), each in its own network
# namespace, ZooKeeper on client host c1, `lotus bank` on c0.
#  - ms0 (partition 0's primary) is cut from ms1 (its backup) only: ms0 drops
#    ms1 from the in-sync set after a lease and commits go on; ms1 still
#    reaches ZooKeeper and sees its primary alive, so it does not take over;
#  - the cut heals: ms1 catches up (the same log end as ms0, lag 0);
#  - then ms0 loses its link altogether: its session ends, ms1 takes over at
#    epoch 2, the bank run goes on and exits 0; once the link is back, ms0
#    learns it was deposed and stops; the whole ledger verifies;
#  - ms0 restarts as ms1's backup; then ms1 is cut from ZooKeeper's host
#    alone (clients and ms0 still reach it): it stops serving within half a
#    session, ms0 takes over at epoch 3, a bank run moves to ms0 and exits 0,
#    ms1 stops once the cut heals, and the ledger verifies.
. "$(dirname "$0")/lib.sh"
lib_use zk
zk_need
cd "$(dirname "$0")/../.."
. scripts/lib-netns.sh
tmpl=$(mktemp)
cid=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
# the data directories, made here (the bed starts the servers without --init)
for i in 0 1 2 3; do
  "$L" memserver --listen 127.0.0.1:0 --id $i --data-dir "$T/data/ms$i" --init --cluster-id "$cid" \
      --threads 1 --memory 16M --ready-json >"$T/init$i.out" 2>&1 &
  p=$!
  for k in $(seq 100); do grep -q ready "$T/init$i.out" && break; sleep 0.05; done
  kill $p; wait $p 2>/dev/null
  grep -q ready "$T/init$i.out" || fail "cannot make data directory $i: $(tail -n 2 "$T/init$i.out")"
done
{
  echo "[cluster]"
  echo "cluster_id = $cid"
  echo "cc = no_wait"
  echo "lease_ms = 2000"
  echo "durability = sync"
  echo "replicas = 2"
  echo "coordinator = 127.0.0.1:1"   # set once ZooKeeper runs
  for i in 0 1 2 3; do printf '[memserver %d]\ndata_dir = %s/ms%d\n' $i "$T/data" $i; done
} >"$tmpl"
bed_up 4 "$tmpl" --clients 2 --no-start -- --threads 1 --memory 64M
rm -f "$tmpl"
zkaddr=$(nc addr c1)
[ -n "$zkaddr" ] || fail "no address for c1"
mkdir -p "$T/zk/data"
cat >"$T/zk/zoo.cfg" <<CFG
tickTime=200
initLimit=10
syncLimit=5
dataDir=$T/zk/data
clientPort=2181
clientPortAddress=$zkaddr
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok
CFG
on_bg c1 java -Xmx128m -Dzookeeper.jmx.log4j.disable=true -cp "$ZK_JAR" \
  org.apache.zookeeper.server.ZooKeeperServerMain "$T/zk/zoo.cfg" >"$T/zk/zk.log" 2>&1
for i in $(seq 300); do
  on c1 timeout 2 bash -c "exec 3<>/dev/tcp/$zkaddr/2181 && printf ruok >&3 && cat <&3" 2>/dev/null | grep -q imok && break
  sleep 0.1
done
sed -i "s/^coordinator = .*/coordinator = $zkaddr:2181/" "$INI"
for i in 0 1 2 3; do nc start ms$i >/dev/null || fail "ms$i did not start: $(tail -n 3 "$BED/ms$i.err")"; done

status() { on c0 "$L" status --config "$INI" --json --timeout-ms 2000 2>/dev/null; }
field() {
  status | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
s = [x for x in d["servers"] if x["id"] == int(sys.argv[1])][0]
print(s.get(sys.argv[2]))' "$1" "$2"
}
led=$WORK/bank.ledger
on c0 "$L" bank --config "$INI" --accounts 40 --seconds 0.5 --threads 1 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank0.err" || fail "first bank run failed: $(tail -n 3 "$WORK/bank0.err")"
[ "$(field 0 role)" = primary ] && [ "$(field 1 role)" = backup ] || fail "roles: $(status)"

# Primary and backup cut from each other.
on_bg c0 "$L" bank --config "$INI" --seconds 6 --threads 2 --inflight 2 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank1.err"
bank=$BG_PID
sleep 1
nc partition ms0 ms1
for i in $(seq 100); do grep -q "backup 1 left the in-sync set" "$BED/ms0.err" && break; sleep 0.1; done
grep -q "backup 1 left the in-sync set" "$BED/ms0.err" || fail "ms0 did not drop its cut-off backup: $(tail -n 5 "$BED/ms0.err")"
[ "$(field 1 role)" = backup ] || fail "the cut-off backup took over: $(status)"
nc heal
wait "$bank" || fail "bank through the primary-backup cut: $(tail -n 5 "$WORK/bank1.err")"
for i in $(seq 150); do
  [ "$(field 0 lag)" = 0 ] && [ "$(field 0 lsn)" = "$(field 1 lsn)" ] && break
  sleep 0.1
done
[ "$(field 0 lsn)" = "$(field 1 lsn)" ] || fail "ms1 did not catch up after the heal: $(status)"
echo "primary-backup cut: commits went on, the backup did not take over, and caught up at LSN $(field 1 lsn)"

# The primary cut off from everything: its backup takes over.
on_bg c0 "$L" bank --config "$INI" --seconds 6 --threads 2 --inflight 2 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank2.err"
bank=$BG_PID
sleep 1
nc partition ms0
t0=$(date +%s%N)
for i in $(seq 200); do [ "$(field 1 role)" = primary ] && break; sleep 0.1; done
[ "$(field 1 role)" = primary ] || fail "ms1 did not take over from the cut-off primary: $(tail -n 5 "$BED/ms1.err")"
echo "ms1 seen primary $(ms_since "$t0") s after ms0 was cut off (each status call waits up to 2 s for the cut-off ms0)"
wait "$bank" || fail "bank through the takeover: $(tail -n 12 "$WORK/bank2.err")"
nc heal
for i in $(seq 100); do grep -q "it stops serving partition 0" "$BED/ms0.err" && break; sleep 0.1; done
grep -q "it stops serving partition 0" "$BED/ms0.err" || fail "ms0 did not learn it was deposed: $(tail -n 5 "$BED/ms0.err")"
verify c0 "$led" no_wait
echo "a cut-off primary: ms1 took over at epoch $(field 1 epoch), ms0 stopped once its link was back"

# The primary cut from ZooKeeper alone: clients and its backup still reach
# it, but once half a session has passed without an answer from ZooKeeper
# it refuses every request (LOTUS_EFAILOVER), and its backup takes over when
# its session ends.  No write it took after that may be acknowledged: the
# ledger shows it.  ms0, restarted on its data, is ms1's backup first.
for i in $(seq 100); do nc pid ms0 >/dev/null 2>&1 || break; sleep 0.1; done
nc pid ms0 >/dev/null 2>&1 && fail "the deposed ms0 still runs: $(tail -n 3 "$BED/ms0.err")"
nc start ms0 >/dev/null || fail "ms0 did not restart: $(tail -n 3 "$BED/ms0.err")"
for i in $(seq 150); do
  [ "$(field 0 role)" = backup ] && [ "$(field 1 lag)" = 0 ] && [ "$(field 0 lsn)" = "$(field 1 lsn)" ] && break
  sleep 0.1
done
[ "$(field 0 role)" = backup ] && [ "$(field 0 lsn)" = "$(field 1 lsn)" ] || fail "ms0 did not rejoin as a caught-up backup: $(status)"
on_bg c0 "$L" bank --config "$INI" --seconds 6 --threads 2 --inflight 2 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank3.err"
bank=$BG_PID
sleep 1
nc partition ms1 c1
t0=$(date +%s%N)
for i in $(seq 200); do [ "$(field 0 role)" = primary ] && break; sleep 0.1; done
[ "$(field 0 role)" = primary ] || fail "ms0 did not take over from ms1 cut from ZooKeeper: $(tail -n 5 "$BED/ms0.err")"
echo "ms1 cut from ZooKeeper only: ms0 seen primary at epoch $(field 0 epoch) $(ms_since "$t0") s later"
wait "$bank" || fail "bank through the ZooKeeper cut: $(tail -n 12 "$WORK/bank3.err")"
grep -q "reconnected to its primary" "$WORK/bank3.err" || fail "the bank run never moved to ms0: $(tail -n 5 "$WORK/bank3.err")"
nc heal
for i in $(seq 150); do grep -q "it stops serving partition 0" "$BED/ms1.err" && break; sleep 0.1; done
grep -q "it stops serving partition 0" "$BED/ms1.err" || fail "ms1 did not learn it was deposed: $(tail -n 5 "$BED/ms1.err")"
verify c0 "$led" no_wait
echo "PASS: a primary-backup cut, a cut-off primary, and a primary cut from ZooKeeper alone: no acknowledged transfer lost"
