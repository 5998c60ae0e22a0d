# lib-zk.sh - a private ZooKeeper on 127.0.0.1 for tests and scripts (the
# coordinator of replicated clusters, docs/replication.md).  Source it, then:
#   zk_need                 exit 77 (skip) unless Debian's zookeeper and java are there
#   zk_start DIR            start one on a free port with dataDir DIR/zk and
#                           tickTime=200 (sessions of 400..4000 ms), wait until
#                           it answers; sets ZK_PORT, ZK_PID and ZK_HOSTS (HOST:PORT)
#   zk_stop                 stop it by pid (call it from an exit hook too)
#   zk_cmd WORD             a four-letter word's answer (ruok, dump, mntr, ...)
#   zk_get PATH             a znode's data on stdout (empty if there is none)
# ZK_JAR (default Debian's) names the server's jar.
ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
ZK_PID=
ZK_PORT=
ZK_HOSTS=
ZK_DIR=

zk_need() {
  if [ ! -r "$ZK_JAR" ] || ! command -v java >/dev/null 2>&1; then
    echo "SKIP: ZooKeeper is not installed (Debian package zookeeper: scripts/deps.sh)"
    exit 77
  fi
}

# zk_cmd WORD: send a four-letter word, print the answer.
zk_cmd() {
  timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; printf "%s" "$2" >&3; cat <&3' \
    _ "$ZK_PORT" "$1" 2>/dev/null
}

_zk_free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

zk_start() {
  local dir=$1 try i
  ZK_DIR=$dir/zk
  mkdir -p "$ZK_DIR/data"
  for try in 1 2 3; do   # the free port may be taken before ZooKeeper binds it
    ZK_PORT=$(_zk_free_port)
    cat >"$ZK_DIR/zoo.cfg" <<CFG
tickTime=200
initLimit=10
syncLimit=5
dataDir=$ZK_DIR/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,dump,mntr,stat
CFG
    java -Xmx128m -Dzookeeper.jmx.log4j.disable=true -cp "$ZK_JAR" \
      org.apache.zookeeper.server.ZooKeeperServerMain "$ZK_DIR/zoo.cfg" \
      >"$ZK_DIR/zk.log" 2>&1 &
    ZK_PID=$!
    for i in $(seq 300); do   # 30 s: a JVM on a loaded machine
      [ "$(zk_cmd ruok)" = imok ] && { ZK_HOSTS=127.0.0.1:$ZK_PORT; return 0; }
      kill -0 "$ZK_PID" 2>/dev/null || break
      sleep 0.1
    done
    zk_stop
  done
  echo "ZooKeeper did not start: $(tail -n 3 "$ZK_DIR/zk.log")" >&2
  return 1
}

zk_stop() {
  [ -n "$ZK_PID" ] || return 0
  kill "$ZK_PID" 2>/dev/null || true
  wait "$ZK_PID" 2>/dev/null || true
  ZK_PID=
}

# zk_get PATH: the data of a znode (ZooKeeper's own command-line client).
zk_get() {
  timeout 60 java -Xmx64m -cp "$ZK_JAR" org.apache.zookeeper.ZooKeeperMain \
    -server "127.0.0.1:$ZK_PORT" get "$1" 2>/dev/null | grep -v '^WATCHER::\|^WatchedEvent\|^$' |
    tail -n 1
}

# For a replicated cluster started with lib-cluster.sh (CLUSTER_INI, L):
#   repl_status             `lotus status --json` of the cluster
#   repl_field ID NAME      a server's field there (its role, epoch, lag, lsn, ...)
#   repl_wait_role ID ROLE S   wait up to S seconds for server ID to have ROLE
repl_status() { "$L" status --config "$CLUSTER_INI" --json --timeout-ms 3000 2>/dev/null; }
repl_field() {
  repl_status | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
s = [x for x in d["servers"] if x["id"] == int(sys.argv[1])][0]
print(s.get(sys.argv[2]))' "$1" "$2"
}
repl_wait_role() {
  local i
  for i in $(seq $(($3 * 10))); do
    [ "$(repl_field "$1" role 2>/dev/null)" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}
