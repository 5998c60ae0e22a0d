#!/usr/bin/env bash
# timeout: 120
# Garbage UCX worker addresses (issue 20 item 1, docs/net.md "Who may
# connect"), from outside, on a loopback memory server without a secret (any
# local process knows the zero key):
#  - a relay on the door's port captures a real client's worker address;
#  - a few hundred handshakes (bounded in count and time) then send random
#    addresses, every other UCX version nibble, and truncated or mutated
#    copies of the real one; each gets an answer (a refusal, or a welcome for
#    a copy that still fits the shape) and the server lives through all of
#    them, on tcp and on sm;
#  - a real client is served afterwards, and the server logged the refusals
#    without a line per try;
#  - a client handed a garbage server address by a fake door exits with an
#    error instead of aborting in UCX.
. "$(dirname "$0")/lib.sh"
ATTACK="$(dirname "$0")/door_attack.py"
dir=$T; pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null; rm -rf "$dir"
}
at_exit cleanup

# start_ms NAME ARGS...: a memory server on 127.0.0.1:0; sets PID and PORT
start_ms() {
  local name=$1; shift
  "$L" memserver --listen 127.0.0.1:0 --memory 32M --threads 2 --ready-json "$@" \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  PID=$!; pids+=("$PID")
  for _ in $(seq 100); do grep -q '"port"' "$dir/$name.out" 2>/dev/null && break; sleep 0.1; done
  PORT=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/$name.out")
  [ -n "$PORT" ] || fail "$name did not start: $(cat "$dir/$name.err")"
}

# attack TRANSPORT TRIES
attack() {
  local tl=$1 tries=$2
  start_ms "ms-$tl" --transport "$tl"
  local ms=$PID port=$PORT
  printf '[cluster]\ntransport = %s\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$tl" "$port" \
    >"$dir/$tl.ini"
  # a real client's address, through a relay on the way to the door
  $PY "$ATTACK" capture "$port" "$dir/$tl.addr" >"$dir/relay.$tl" 2>"$dir/relay.$tl.err" &
  local relay=$!; pids+=("$relay")
  for _ in $(seq 100); do [ -s "$dir/relay.$tl" ] && break; sleep 0.1; done
  local rport; rport=$(head -1 "$dir/relay.$tl")
  [ -n "$rport" ] || fail "the relay did not start: $(cat "$dir/relay.$tl.err")"
  printf '[cluster]\ntransport = %s\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$tl" "$rport" \
    >"$dir/$tl.relay.ini"
  timeout 30 "$L" txn-status --config "$dir/$tl.relay.ini" --txn 1 --json \
    >/dev/null 2>"$dir/cap.$tl.err" || fail "$tl: a client through the relay: $(cat "$dir/cap.$tl.err")"
  wait "$relay" || fail "$tl: no address captured: $(cat "$dir/relay.$tl.err")"
  echo "$tl: captured a client's worker address of $(( $(wc -c <"$dir/$tl.addr") / 2 )) bytes"

  out=$(timeout 90 $PY "$ATTACK" badaddr "$port" "$tries" 40 "$dir/$tl.addr" 2>&1); rc=$?
  sleep 0.2
  kill -0 "$ms" 2>/dev/null ||
    fail "$tl: the memory server died of a garbage worker address: $(grep -m2 -i 'assert' "$dir/ms-$tl.err")"
  [ $rc -eq 0 ] || fail "$tl: the attack could not run: $out"
  echo "$tl: $out"
  echo "$out" | grep -q "closed" && fail "$tl: a handshake went unanswered: $out"
  n=$(echo "$out" | sed -n 's/.*refused: worker address refused \([0-9]*\).*/\1/p')
  [ "${n:-0}" -ge $((tries / 2)) ] || fail "$tl: too few refusals: $out"

  timeout 30 "$L" ycsb --config "$dir/$tl.ini" --records 200 --seconds 0.5 --threads 1 \
    >/dev/null 2>"$dir/y.$tl.err" || fail "$tl: a real client after the attack: $(tail -3 "$dir/y.$tl.err")"
  grep -q "worker address refused" "$dir/ms-$tl.err" || fail "$tl: the refusals were not logged"
  lines=$(wc -l <"$dir/ms-$tl.err")
  [ "$lines" -le 60 ] || { cut -c1-150 "$dir/ms-$tl.err" | sort | uniq -c | sort -rn | head; fail "$tl: $lines log lines for $tries tries"; }
  echo "ok: $tl: served after the attack; $lines lines of server log"
  kill "$ms"; wait "$ms" 2>/dev/null
}

attack tcp 400
attack sm 200

# ---- the client side: a fake door hands out a garbage server address ----
$PY "$ATTACK" fakedoor "$dir/fake.port" 3 2>"$dir/fake.err" &
pids+=($!)
for _ in $(seq 100); do [ -s "$dir/fake.port" ] && break; sleep 0.1; done
[ -s "$dir/fake.port" ] || fail "the fake door did not start: $(cat "$dir/fake.err")"
printf '[cluster]\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$(cat "$dir/fake.port")" >"$dir/fake.ini"
for i in 1 2 3; do
  out=$(timeout 20 "$L" txn-status --config "$dir/fake.ini" --txn 1 --json 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "a client took a garbage server address: $out"
  [ $rc -lt 128 ] && [ $rc -ne 124 ] || fail "a client died (exit $rc) of a garbage server address: $(echo "$out" | tail -3)"
  echo "$out" | grep -q "worker address" || fail "unclear error for a garbage server address: $out"
done
echo "ok: a client refuses a garbage server address: $(echo "$out" | grep -m1 'worker address' | cut -c1-150)"
