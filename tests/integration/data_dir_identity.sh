#!/usr/bin/env bash
# timeout: 120
# A memory server never joins its cluster on the wrong data (issue 20, item 5).
#  1. An empty or missing data directory without --init exits non-zero
#     within a second, with one line that says to give --init.
#  2. The issue's scenario: a 2-server durable cluster holding a bank; server 1
#     is killed, its directory emptied, and its restart is refused; restored,
#     --verify finds every transfer.  --init on a matching identity is a no-op.
#  3. A swapped directory is refused, with --init or without: server 0's
#     directory given to server 1, and another cluster's server-1 directory;
#     so is one whose IDENTITY is damaged.
#  4. A client refuses a server of another cluster in the handshake.
#  5. A config's relative data_dir is relative to the config file.
#  6. --local: a missing ms<i> beside the others is refused.
. "$(dirname "$0")/lib.sh"
top=$T
root=$ROOT
. "$root/scripts/lib-cluster.sh"
pids=()
at_exit 'cluster_stop; for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done'

# refused WHAT WANT ARGS...: a memserver that must exit non-zero with one line
# matching WANT.  With TIMED=1 it must also exit within a second (of three
# tries, one must: a busy machine may stall any one start).
refused() {
  local what=$1 want=$2 t0 t1 out rc try ms
  shift 2
  for try in 1 2 3; do
    t0=$(date +%s%N)
    out=$(timeout 10 "$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 32M "$@" 2>&1 >/dev/null)
    rc=$?
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$what: exited $rc, want a refusal: $out"
    printf '%s\n' "$out" | grep -q -- "$want" || fail "$what: no line saying '$want': $out"
    [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$what: want one line, got: $out"
    [ "${TIMED:-0}" = 1 ] && [ $ms -ge 1000 ] || break
  done
  [ "${TIMED:-0}" = 0 ] || [ $ms -lt 1000 ] || fail "$what: took $ms ms (3 tries)"
  echo "ok: $what: exit $rc in $ms ms: $out"
}

# 1. empty or missing, without --init
TIMED=1 refused "missing data dir" "does not exist: give --init" --data-dir "$top/nothing"
[ -e "$top/nothing" ] && fail "a refused start created $top/nothing"
mkdir "$top/empty"
TIMED=1 refused "empty data dir" "holds no database: give --init" --data-dir "$top/empty"

# 2. the issue's scenario
mkdir -p "$top/a"
CLUSTER_DATA=$top/a/data CLUSTER_DURABILITY=sync
cluster_start "$top/a" 2 --threads 1 --memory 64M \
  || fail "cluster A did not start: $(tail -n 2 "$top"/a/ms*.err)"
led=$top/a/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts 40 --opening 1000 --seconds 0.5 --threads 1 \
    --ledger "$led" --quiet >/dev/null 2>"$top/a/bank.err" || fail "bank: $(cat "$top/a/bank.err")"
cluster_kill 1
mv "$top/a/data/ms1" "$top/a/ms1.saved"
mkdir "$top/a/data/ms1"
cluster_restart 1 2>/dev/null && fail "server 1 restarted on an emptied data directory"
grep -q "holds no database: give --init" "$top/a/ms1.err" \
  || fail "no clear refusal of the emptied directory: $(tail -n 2 "$top/a/ms1.err")"
echo "ok: restart on an emptied directory refused: $(grep -o 'the data directory.*' "$top/a/ms1.err" | tail -n1)"
rm -rf "$top/a/data/ms1"
cp -a "$top/a/ms1.saved" "$top/a/data/ms1"
made=$(grep -c "created a new database\|stamped" "$top/a/ms1.err")
CLUSTER_ARGS+=(--init)   # a matching identity: --init is a no-op
cluster_restart 1 || fail "server 1 did not restart on its own directory with --init"
CLUSTER_ARGS=("${CLUSTER_ARGS[@]:0:${#CLUSTER_ARGS[@]}-1}")
[ "$(grep -c "created a new database\|stamped" "$top/a/ms1.err")" = "$made" ] || fail "--init rewrote server 1's identity"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify 2>&1) \
  || fail "bank --verify after the restart: $ver"
echo "ok: --init on its own directory, then: $(printf '%s\n' "$ver" | tail -n1)"

# 3. swapped directories.  Cluster B: another one, one server per directory.
cluster_stop
refused "server 0's directory as server 1's" "holds the data of memory server 0, not of server 1" \
  --id 1 --data-dir "$top/a/data/ms0" --init
"$L" bank --local 2 --data-dir "$top/b" --server-threads 1 --server-memory 32M --accounts 10 \
    --seconds 0.2 --threads 1 --ledger "$top/b.ledger" --quiet >/dev/null 2>"$top/b.err" \
  || fail "cluster B: $(cat "$top/b.err")"
refused "another cluster's directory" "belongs to cluster .*, not to this server's cluster" \
  --config "$CLUSTER_INI" --id 1 --data-dir "$top/b/ms1"
refused "another cluster's directory with --init" "belongs to cluster" \
  --config "$CLUSTER_INI" --id 1 --data-dir "$top/b/ms1" --init
# a damaged identity file is refused, never rewritten
cp -a "$top/a/data/ms0" "$top/damaged"
sed -i 's/server_id 0/server_id 9/' "$top/damaged/IDENTITY"
cp "$top/damaged/IDENTITY" "$top/damaged.id"
refused "a damaged IDENTITY" "IDENTITY is damaged (its check does not match" \
  --config "$CLUSTER_INI" --id 0 --data-dir "$top/damaged" --init
cmp -s "$top/damaged/IDENTITY" "$top/damaged.id" || fail "the damaged IDENTITY was rewritten"

# 4. the handshake: two in-memory servers of two clusters, one client config
start_bare() {  # start_bare NAME CLUSTER: its port in $port
  "$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 32M --cluster-id "$2" --ready-json \
      >"$top/$1.out" 2>"$top/$1.err" &
  pids+=($!)
  for _ in $(seq 200); do grep -q ready "$top/$1.out" 2>/dev/null && break; sleep 0.05; done
  port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$top/$1.out")
}
start_bare x0 east; p0=$port
start_bare x1 west; p1=$port
[ -n "$p0" ] && [ -n "$p1" ] || fail "bare servers did not start: $(cat "$top"/x*.err)"
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:%s\n[memserver 1]\nlisten = 127.0.0.1:%s\n' \
  "$p0" "$p1" >"$top/mixed.ini"
out=$(timeout 30 "$L" ycsb --config "$top/mixed.ini" --records 100 --seconds 0.2 --threads 1 --quiet 2>&1 >/dev/null)
rc=$?
[ $rc -ne 0 ] || fail "a client connected to servers of two clusters"
printf '%s\n' "$out" | grep -q "belongs to cluster .*, not to this one" || fail "no clear handshake refusal: $out"
echo "ok: mixed clusters refused: $(printf '%s\n' "$out" | grep -o 'memory server .*belongs.*' | head -n1)"
printf '[cluster]\ntransport = tcp\ncluster_id = west\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$p0" >"$top/named.ini"
out=$(timeout 30 "$L" ycsb --config "$top/named.ini" --records 100 --seconds 0.2 --threads 1 --quiet 2>&1 >/dev/null)
[ $? -ne 0 ] || fail "a client of cluster west connected to a server of east"
printf '%s\n' "$out" | grep -q "belongs to cluster" || fail "cluster_id mismatch unclear: $out"
sed -i 's/cluster_id = west/cluster_id = east/' "$top/named.ini"
out=$(timeout 30 "$L" ycsb --config "$top/named.ini" --records 100 --seconds 0.2 --threads 1 --quiet 2>&1 >/dev/null) \
  || fail "a client of cluster east did not connect to its server: $out"
echo "ok: cluster_id in the client's config checked"
# a client of handshake version 1 (before cluster ids) gets a clear refusal
v1=$(/usr/bin/python3 - "$p0" <<'PY'
import os, socket, struct, sys
s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)
s.sendall(struct.pack('<B3xI', 1, 40) + b'lotus-d1' + os.urandom(32))
h = b''
while len(h) < 8:
    x = s.recv(8 - len(h))
    if not x:
        break
    h += x
t, n = struct.unpack('<B3xI', h) if len(h) == 8 else (0, 0)
body = s.recv(n) if 0 < n < 4096 else b''
print(t, body[1:].decode('ascii', 'replace'))
PY
)
case $v1 in "5 this server speaks handshake version 2"*) ;; *) fail "a version-1 HELLO got: $v1" ;; esac
echo "ok: a version-1 client is told: ${v1#5 }"

# 5. data_dir in a config is relative to the config file, not the cwd
mkdir -p "$top/conf" "$top/cwd"
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:7000\ndata_dir = data/ms0\n' >"$top/conf/c.ini"
(cd "$top/cwd" && exec "$L" memserver --config ../conf/c.ini --id 0 --listen 127.0.0.1:0 --threads 1 \
    --memory 32M --init --ready-json >"$top/rel.out" 2>"$top/rel.err") &
pids+=($!)
for _ in $(seq 200); do grep -q ready "$top/rel.out" 2>/dev/null && break; sleep 0.05; done
grep -q ready "$top/rel.out" || fail "config-relative server did not start: $(cat "$top/rel.err")"
[ -f "$top/conf/data/ms0/IDENTITY" ] || fail "data_dir = data/ms0 not under the config's directory: $(find "$top" -name IDENTITY)"
[ -e "$top/cwd/data" ] && fail "data_dir = data/ms0 was taken relative to the working directory"
echo "ok: data_dir = data/ms0 in conf/c.ini is conf/data/ms0"

# 6. --local: a missing ms<i> beside the others
rm -rf "$top/b/ms1"
out=$(timeout 30 "$L" bank --local 2 --data-dir "$top/b" --server-threads 1 --server-memory 32M \
      --ledger "$top/b.ledger" --verify 2>&1 >/dev/null)
[ $? -ne 0 ] || fail "--local started with ms1 missing"
printf '%s\n' "$out" | grep -q "does not exist: give --init" || fail "--local: unclear: $out"
[ -e "$top/b/ms1" ] && fail "--local created the missing ms1"
echo "ok: --local with ms1 missing refused: $(printf '%s\n' "$out" | grep -o 'the data directory.*' | head -n1)"
echo ok
