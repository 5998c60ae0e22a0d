# lib-cluster.sh - start and stop standalone lotus memory servers on 127.0.0.1,
# for scripts and tests.  Source it, set L to the lotus binary, then:
#   cluster_start DIR N [memserver options...]   writes DIR/cluster.ini, sets CLUSTER_INI
#   cluster_stop                                  stops them (call it from an EXIT trap too)
#   cluster_kill ID                               kill -9 server ID (a crash)
#   cluster_restart ID                            start server ID again on its port, with
#                                                 --config (so it can reach the others)
# TRANSPORT (default tcp) and CLUSTER_CC (optional) go into the config file.
# CLUSTER_LEASE_MS (optional) goes into [cluster] lease_ms and to every server
# as --lease-ms.
# CLUSTER_DATA=DIR gives server i --data-dir DIR/ms<i>; CLUSTER_DURABILITY
# (sync or async) goes into the config's [cluster] section.  With CLUSTER_DATA
# the servers are restarted once with --config after the ports are known.
# Identity: cluster_start starts every server with --init (a new database, or
# a no-op on its own) and --cluster-id CLUSTER_ID, which also goes into the
# config's cluster_id; cluster_restart starts it without --init, so a missing
# or emptied directory is refused.  The id is the one kept in
# $CLUSTER_DATA/cluster-id (written at the first start), else $CLUSTER_ID,
# else a random one.
# Replication (docs/replication.md): CLUSTER_REPLICAS=R and CLUSTER_COORDINATOR=
# HOST:PORT (a ZooKeeper, scripts/lib-zk.sh) go into [cluster] replicas and
# coordinator; the servers are then restarted once with --config after the
# ports are known, as with CLUSTER_DATA (only then do they join).
# Every server is started with --peers DIR/cluster.ini (written, atomically,
# once the ports are known), so it can ask the others about undecided
# prepared transactions, durable or in memory.
CLUSTER_PIDS=()
CLUSTER_PORTS=()
CLUSTER_ARGS=()
CLUSTER_DIR=
CLUSTER_INI=
_CLUSTER_ID=

# _cluster_spawn ID LISTEN [extra...]: start server ID in the background.
_cluster_spawn() {
  local id=$1 listen=$2
  shift 2
  local data=()
  [ -z "${CLUSTER_DATA:-}" ] || data=(--data-dir "$CLUSTER_DATA/ms$id")
  if [ "$listen" = 127.0.0.1:0 ] && [ -n "$_CLUSTER_ID" ]; then
    data+=(--cluster-id "$_CLUSTER_ID")
    [ -z "${CLUSTER_DATA:-}" ] || data+=(--init)
  fi
  [ -z "${CLUSTER_LEASE_MS:-}" ] || data+=(--lease-ms "$CLUSTER_LEASE_MS")
  "$L" memserver --listen "$listen" --id "$id" --transport "${TRANSPORT:-tcp}" \
      --ready-json "${data[@]}" "$@" "${CLUSTER_ARGS[@]}" \
      >"$CLUSTER_DIR/ms$id.out" 2>>"$CLUSTER_DIR/ms$id.err" &
  CLUSTER_PIDS[$id]=$!
}

# _cluster_ready ID: wait for server ID's ready line.
_cluster_ready() {
  local id=$1 i
  # the whole ready line, with its port (not a part of it still being written)
  for i in $(seq 600); do
    grep -q '"ready":true.*"port":[0-9]' "$CLUSTER_DIR/ms$id.out" 2>/dev/null && break
    kill -0 "${CLUSTER_PIDS[$id]}" 2>/dev/null || break   # it exited: it will not be ready
    sleep 0.05
  done
  if ! grep -q '"ready":true.*"port":[0-9]' "$CLUSTER_DIR/ms$id.out"; then
    local rc=running
    kill -0 "${CLUSTER_PIDS[$id]}" 2>/dev/null || { wait "${CLUSTER_PIDS[$id]}" 2>/dev/null; rc=$?; }
    echo "memory server $id did not start (exit $rc): $(tail -n 3 "$CLUSTER_DIR/ms$id.err")" >&2
    return 1
  fi
}

# _cluster_id: set _CLUSTER_ID (see the top comment).
_cluster_id() {
  local f=${CLUSTER_DATA:+$CLUSTER_DATA/cluster-id}
  _CLUSTER_ID=   # a binary older than identity files runs without
  grep -q -- --cluster-id <<<"$("$L" memserver --help 2>&1)" || return 0
  if [ -n "$f" ] && [ -s "$f" ]; then
    _CLUSTER_ID=$(cat "$f")
  else
    _CLUSTER_ID=${CLUSTER_ID:-$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')}
    [ -z "$f" ] || echo "$_CLUSTER_ID" >"$f"
  fi
}

cluster_start() {
  local dir=$1 n=$2 id
  shift 2
  CLUSTER_DIR=$dir
  CLUSTER_ARGS=("$@")
  CLUSTER_PORTS=()
  [ -z "${CLUSTER_DATA:-}" ] || mkdir -p "$CLUSTER_DATA"
  _cluster_id
  local peers=()   # a binary older than --peers runs without it
  ! grep -q -- --peers <<<"$("$L" memserver --help 2>&1)" || peers=(--peers "$dir/cluster.ini")
  for ((id = 0; id < n; id++)); do
    : >"$dir/ms$id.err"
    _cluster_spawn "$id" 127.0.0.1:0 "${peers[@]}"
  done
  for ((id = 0; id < n; id++)); do
    _cluster_ready "$id" || return 1
    CLUSTER_PORTS[$id]=$(sed -n 's/.*"ready":true.*"port":\([0-9]*\).*/\1/p' "$dir/ms$id.out")
  done
  CLUSTER_INI=$dir/cluster.ini
  {
    printf '[cluster]\ntransport = %s\n' "${TRANSPORT:-tcp}"
    [ -z "$_CLUSTER_ID" ] || printf 'cluster_id = %s\n' "$_CLUSTER_ID"
    [ -z "${CLUSTER_CC:-}" ] || printf 'cc = %s\n' "$CLUSTER_CC"
    [ -z "${CLUSTER_LEASE_MS:-}" ] || printf 'lease_ms = %s\n' "$CLUSTER_LEASE_MS"
    [ -z "${CLUSTER_DURABILITY:-}" ] || printf 'durability = %s\n' "$CLUSTER_DURABILITY"
    [ -z "${CLUSTER_REPLICAS:-}" ] || printf 'replicas = %s\n' "$CLUSTER_REPLICAS"
    [ -z "${CLUSTER_COORDINATOR:-}" ] || printf 'coordinator = %s\n' "$CLUSTER_COORDINATOR"
    for ((id = 0; id < n; id++)); do
      printf '[memserver %d]\nlisten = 127.0.0.1:%s\n' "$id" "${CLUSTER_PORTS[$id]}"
    done
  } >"$CLUSTER_INI.tmp" && mv "$CLUSTER_INI.tmp" "$CLUSTER_INI"
  if [ -n "${CLUSTER_DATA:-}${CLUSTER_REPLICAS:-}" ]; then   # again, now with --config
    for ((id = 0; id < n; id++)); do
      kill "${CLUSTER_PIDS[$id]}" && wait "${CLUSTER_PIDS[$id]}" 2>/dev/null
      cluster_restart "$id" || return 1
    done
  fi
}

cluster_kill() {
  kill -9 "${CLUSTER_PIDS[$1]}" 2>/dev/null || true
  wait "${CLUSTER_PIDS[$1]}" 2>/dev/null || true
}

cluster_restart() {
  local id=$1
  : >"$CLUSTER_DIR/ms$id.out"
  _cluster_spawn "$id" "127.0.0.1:${CLUSTER_PORTS[$id]}" --config "$CLUSTER_INI"
  _cluster_ready "$id"
}

cluster_stop() {
  local p
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${CLUSTER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  CLUSTER_PIDS=()
}
