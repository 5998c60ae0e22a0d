# lib-cluster.sh - start and stop standalone lotus memory servers on 127.0.0.1,
# for scripts and tests.  Source it, set L to the lotus binary, then:
#   cluster_start DIR N [memserver options...]   writes DIR/cluster.ini, sets CLUSTER_INI
#   cluster_stop                                  stops them (call it from an EXIT trap too)
# TRANSPORT (default tcp) and CLUSTER_CC (optional) go into the config file.
CLUSTER_PIDS=()
CLUSTER_INI=

cluster_start() {
  local dir=$1 n=$2 id i ports=()
  shift 2
  for ((id = 0; id < n; id++)); do
    "$L" memserver --listen 127.0.0.1:0 --id "$id" --transport "${TRANSPORT:-tcp}" \
        --ready-json "$@" >"$dir/ms$id.out" 2>"$dir/ms$id.err" &
    CLUSTER_PIDS+=($!)
  done
  for ((id = 0; id < n; id++)); do
    for i in $(seq 400); do grep -q ready "$dir/ms$id.out" 2>/dev/null && break; sleep 0.05; done
    if ! grep -q ready "$dir/ms$id.out"; then
      echo "memory server $id did not start: $(tail -n 3 "$dir/ms$id.err")" >&2
      return 1
    fi
    ports+=("$(sed 's/.*"port":\([0-9]*\).*/\1/' "$dir/ms$id.out")")
  done
  CLUSTER_INI=$dir/cluster.ini
  {
    printf '[cluster]\ntransport = %s\n' "${TRANSPORT:-tcp}"
    [ -z "${CLUSTER_CC:-}" ] || printf 'cc = %s\n' "$CLUSTER_CC"
    for ((id = 0; id < n; id++)); do
      printf '[memserver %d]\nlisten = 127.0.0.1:%s\n' "$id" "${ports[$id]}"
    done
  } >"$CLUSTER_INI"
}

cluster_stop() {
  local p
  for p in "${CLUSTER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${CLUSTER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  CLUSTER_PIDS=()
}
