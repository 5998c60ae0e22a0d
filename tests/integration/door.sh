#!/usr/bin/env bash
# timeout: 90
# lotus's front door (docs/net.md, "Who may connect"), from outside:
#  - the memory server listens on nothing beyond --listen but UCX's data ports
#    on the same interface (loopback here);
#  - garbage, truncated frames, 32 zero bytes and a silent connection on EVERY
#    port the server process listens on leave it serving; the door closes a
#    silent connection within its handshake timeout;
#  - a client with a wrong secret, with no secret, or replaying the server's
#    MAC gets nothing (clear error, non-zero exit); the right secret works;
#  - a memory server refuses to listen off loopback without a secret;
#  - max_clients: the next client gets "server full: max_clients N";
#  - 300 silent handshakes from one address (127.0.0.2) do not lock out a
#    client from another;
#  - the memory server's stats count what the door turned away.
. "$(dirname "$0")/lib.sh"
ATTACK="$(dirname "$0")/door_attack.py"
. "$(dirname "$0")/../../scripts/lib-serve.sh"
dir=$T; pids=()
cleanup() {
  serve_stop >/dev/null 2>&1
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null; rm -rf "$dir"
}
at_exit cleanup

# start_ms NAME ARGS...: a memory server on 127.0.0.1:0; sets PID and PORT
start_ms() {
  local name=$1; shift
  "$L" memserver --listen 127.0.0.1:0 --memory 32M --ready-json "$@" \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  PID=$!; pids+=("$PID")
  for _ in $(seq 100); do grep -q '"port"' "$dir/$name.out" 2>/dev/null && break; sleep 0.1; done
  PORT=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/$name.out")
  [ -n "$PORT" ] || fail "$name did not start: $(cat "$dir/$name.err")"
}
ycsb() { timeout 30 "$L" ycsb --records 200 --seconds 0.5 --threads 1 "$@"; }

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/key"; chmod 600 "$dir/key"
echo "another secret" >"$dir/wrong"; chmod 600 "$dir/wrong"

# ---- the server and what it listens on ----
start_ms ms --threads 2 --secret-file "$dir/key"
ms=$PID
printf '[cluster]\nsecret_file = key\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$PORT" >"$dir/c.ini"
printf '[cluster]\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$PORT" >"$dir/nosecret.ini"
ycsb --config "$dir/c.ini" >/dev/null 2>"$dir/y0.err" || fail "right secret, first client: $(cat "$dir/y0.err")"

listeners=$(ss -Hltnp 2>/dev/null | grep "pid=$ms," | awk '{print $4}')
[ -n "$listeners" ] || fail "ss shows no listener of pid $ms"
echo "listeners of the memory server: $(echo $listeners)"
echo "$listeners" | grep -qx "127.0.0.1:$PORT" || fail "--listen port $PORT not listed"
other=$(echo "$listeners" | grep -v '^127\.0\.0\.1:' || true)
[ -z "$other" ] || fail "listening beyond the loopback interface: $other"
ports=$(echo "$listeners" | sed 's/.*://')
nports=$(echo "$ports" | wc -l)
[ "$nports" -le 3 ] || fail "$nports listeners: want --listen plus one UCX data port per worker (2)"

# ---- hostile bytes on every port, and a silent connection on each ----
for p in $ports; do
  $PY "$ATTACK" silent "$p" 4 >"$dir/silent.$p" &
  sil+=($!)
done
for p in $ports; do
  $PY "$ATTACK" garbage "$p" || fail "attack on port $p could not run"
  kill -0 "$ms" 2>/dev/null || fail "memory server died from garbage on port $p: $(tail -5 "$dir/ms.err")"
done
wait "${sil[@]}"
t=$(cat "$dir/silent.$PORT")
echo "silent connection to the door closed after $t s"
$PY -c "import sys; sys.exit(0 if 1.5 <= $t <= 6 else 1)" || fail "door kept a silent connection $t s (timeout 2 s; 6 s allowed for load)"
kill -0 "$ms" 2>/dev/null || fail "memory server died: $(tail -5 "$dir/ms.err")"

# ---- clients without the secret get nothing ----
out=$(ycsb --config "$dir/nosecret.ini" 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a client without the secret ran: $out"
echo "$out" | grep -q "secret" || fail "no secret: error does not say why: $out"
echo "no secret: exit $rc: $(echo "$out" | grep -m1 secret)"
out=$(ycsb --config "$dir/c.ini" --secret-file "$dir/wrong" 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a client with a wrong secret ran: $out"
echo "$out" | grep -q "secret" || fail "wrong secret: error does not say why: $out"
echo "wrong secret: exit $rc"
out=$($PY "$ATTACK" wrongkey "$PORT" "$dir/wrong") || fail "wrong-key peer was served: $out"
echo "$out"; echo "$out" | grep -q "refused: authentication failed" || fail "wrong key: $out"
out=$($PY "$ATTACK" reflect "$PORT") || fail "reflected MAC was accepted: $out"
echo "$out"; echo "$out" | grep -q "refused: authentication failed" || fail "reflect: $out"
out=$("$L" memserver --listen 127.0.0.1:0 --secret-file "$dir/none" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "secret file $dir/none" || fail "missing secret file: exit $rc: $out"
: >"$dir/empty"
out=$(ycsb --config "$dir/c.ini" --secret-file "$dir/empty" 2>&1); rc=$?
[ $rc -ne 0 ] && echo "$out" | grep -q "is empty" || fail "empty secret file: exit $rc: $out"

# ---- after all that, the right secret still works ----
ycsb --config "$dir/c.ini" >/dev/null 2>"$dir/y1.err" || fail "right secret after the attacks: $(cat "$dir/y1.err")"
echo "ok: a client with the secret is served after the attacks"
out=$(timeout 20 "$L" txn-status --config "$dir/c.ini" --txn 1 --json 2>&1) ||
  fail "txn-status with the secret: $out"
out=$(timeout 20 "$L" txn-status --config "$dir/nosecret.ini" --txn 1 --json 2>&1) &&
  fail "txn-status without the secret answered: $out"
echo "ok: txn-status only with the secret"

# ---- a flood of silent handshakes from one address does not lock others out ----
$PY "$ATTACK" flood "$PORT" 300 5 127.0.0.2 >"$dir/flood.out" &
flood=$!
sleep 1
ycsb --config "$dir/c.ini" >/dev/null 2>"$dir/y3.err" ||
  fail "a client during a flood of handshakes from 127.0.0.2: $(tail -3 "$dir/y3.err")"
wait $flood
echo "ok: served during a flood from 127.0.0.2 ($(cat "$dir/flood.out"))"

# ---- the door's counters in the memory server's stats (lotus serve's INFO) ----
serve_start "$dir" --config "$dir/c.ini" --threads 1 || fail "serve did not start"
info=$(timeout 10 redis-cli -p "$SERVE_PORT" INFO 2>&1 | grep lotus_memserver0)
serve_stop >/dev/null 2>&1
door=$(echo "$info" | sed 's/^lotus_memserver0://' | tr -d '\r' |
       $PY -c 'import json,sys; d=json.load(sys.stdin)["door"]; print(json.dumps(d))') ||
  fail "no door stats: $info"
echo "door stats: $door"
echo "$door" | $PY -c '
import json, sys
d = json.load(sys.stdin)
ok = d["auth_failed"] >= 3 and d["bad_frames"] >= 5 and d["timed_out"] >= 1 and d["welcomed"] >= 3
sys.exit(0 if ok else 1)' || fail "door counters too low: $door"

# ---- off loopback without a secret: refused before any bind ----
out=$("$L" memserver --listen 192.0.2.1:7000 --memory 32M 2>&1); rc=$?
[ $rc -ne 0 ] || fail "non-loopback listen without a secret started"
echo "$out" | grep -q "without a cluster secret" || fail "non-loopback refusal unclear: $out"
echo "ok: $out" | cut -c1-120

# ---- max_clients ----
start_ms full --threads 1 --max-clients 2
printf '[cluster]\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$PORT" >"$dir/full.ini"
(timeout 30 "$L" ycsb --config "$dir/full.ini" --records 100 --seconds 3 --threads 1 \
   >/dev/null 2>"$dir/hold.err"; echo $? >"$dir/hold.rc") &
hold=$!
for _ in $(seq 50); do grep -q running "$dir/hold.err" 2>/dev/null && break; sleep 0.1; done
out=$(ycsb --config "$dir/full.ini" --no-load 2>&1); rc=$?
[ $rc -ne 0 ] || fail "a client beyond max_clients ran"
echo "$out" | grep -q "server full: max_clients 2" || fail "max_clients error unclear: $out"
echo "max_clients: exit $rc: $(echo "$out" | grep -m1 'server full')"
wait $hold
[ "$(cat "$dir/hold.rc")" = 0 ] || fail "the client inside max_clients failed: $(cat "$dir/hold.err")"
timeout 30 "$L" ycsb --config "$dir/full.ini" --records 100 --seconds 0.5 --threads 1 --no-load \
  >/dev/null 2>"$dir/y2.err" ||
  fail "slots not given back after the clients left: $(cat "$dir/y2.err")"
grep -q "server full: max_clients 2" "$dir/full.err" || fail "server did not log the refusal"
serve_start "$dir" --config "$dir/full.ini" --threads 1 || fail "serve on the full server did not start"
full=$(timeout 10 redis-cli -p "$SERVE_PORT" INFO 2>&1 | grep lotus_memserver0 | sed 's/^lotus_memserver0://' | tr -d '\r')
serve_stop >/dev/null 2>&1
echo "$full" | $PY -c '
import json, sys
d = json.load(sys.stdin)["door"]
print("full server door stats:", json.dumps(d))
sys.exit(0 if d["refused_full"] >= 1 and d["max_clients"] == 2 and d["clients"] <= 2 else 1)' ||
  fail "refused_full not counted: $full"
echo "ok"
