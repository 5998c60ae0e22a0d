#!/usr/bin/env bash
# timeout: 90
# Floods a memory server from outside (issue 20 N15 and the bad-message nit;
# docs/net.md "Who may connect"):
#  - handshakes from 300 loopback addresses (127.0.1.1 .. 127.0.2.50), 4 from
#    each at all times, half silent and half stalling after HELLO, for 12 s:
#    8 real clients started during the flood all get in, the server lives, and
#    its log stays small (the door logs at most 20 lines per 10 s plus a count);
#  - a client sending malformed messages as fast as the replies come back
#    (netbench's requests are no memory-server requests): thousands of them,
#    a few dozen log lines, one of them the count of the rest.
. "$(dirname "$0")/lib.sh"
ATTACK="$(dirname "$0")/door_attack.py"
dir=$T; pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null; rm -rf "$dir"
}
at_exit cleanup

"$L" memserver --listen 127.0.0.1:0 --memory 32M --threads 2 --ready-json \
  >"$dir/ms.out" 2>"$dir/ms.err" &
ms=$!; pids+=("$ms")
for _ in $(seq 100); do grep -q '"port"' "$dir/ms.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/ms.out")
[ -n "$PORT" ] || fail "the memory server did not start: $(cat "$dir/ms.err")"
printf '[cluster]\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$PORT" >"$dir/c.ini"
timeout 30 "$L" ycsb --config "$dir/c.ini" --records 200 --seconds 0.3 --threads 1 \
  >/dev/null 2>"$dir/load.err" || fail "loading: $(tail -3 "$dir/load.err")"

# ---- a handshake flood from 300 addresses ----
$PY "$ATTACK" manyflood "$PORT" 300 4 12 >"$dir/flood.out" 2>&1 &
flood=$!; pids+=("$flood")
sleep 2
cl=()
for i in $(seq 8); do
  (timeout 30 "$L" ycsb --config "$dir/c.ini" --records 200 --seconds 0.3 --threads 1 --no-load \
     >/dev/null 2>"$dir/y$i.err"; echo $? >"$dir/y$i.rc") &
  cl+=($!)
done
wait "${cl[@]}"
wait "$flood"
echo "$(cat "$dir/flood.out")"
kill -0 "$ms" 2>/dev/null || fail "the memory server died in the flood: $(tail -3 "$dir/ms.err")"
ok=0
for i in $(seq 8); do [ "$(cat "$dir/y$i.rc")" = 0 ] && ok=$((ok + 1)); done
bytes=$(wc -c <"$dir/ms.err"); lines=$(wc -l <"$dir/ms.err")
echo "real clients served during the flood: $ok of 8; server log: $lines lines, $bytes bytes"
[ "$ok" = 8 ] || fail "$((8 - ok)) of 8 real clients locked out: $(cat "$dir"/y*.err | grep -m2 error)"
# 12 s: two windows of 20 lines and their counts, the start-up line, and a
# little slack for what the real clients' runs log
[ "$lines" -le 80 ] || { cut -c1-120 "$dir/ms.err" | sort | uniq -c | sort -rn | head -5;
                         fail "$lines lines of log in a 12 s flood"; }
for _ in $(seq 120); do grep -q "more failed or refused handshakes not logged" "$dir/ms.err" && break; sleep 0.1; done
grep -q "more failed or refused handshakes not logged" "$dir/ms.err" ||
  fail "no count of the handshake failures not logged"
echo "$(grep -m1 'more failed or refused' "$dir/ms.err" | cut -c1-160)"

# ---- malformed messages as fast as they are answered ----
before=$(wc -l <"$dir/ms.err")
timeout 30 "$L" netbench --connect "127.0.0.1:$PORT" --outstanding 8 --size 64 --seconds 3 \
  --warmup 0 >/dev/null 2>"$dir/nb.err" || fail "netbench: $(cat "$dir/nb.err")"
sleep 1.5    # the count of the last second is logged once that second is over
bad=$(sed -n 's/.*netbench: \([0-9]*\) malformed replies.*/\1/p' "$dir/nb.err")
lines=$(( $(wc -l <"$dir/ms.err") - before ))
echo "malformed messages sent: ${bad:-0}; server log lines for them: $lines"
[ "${bad:-0}" -ge 1000 ] || fail "too few malformed messages to tell (${bad:-0}): $(cat "$dir/nb.err")"
[ "$lines" -le 40 ] || { tail -5 "$dir/ms.err"; fail "$lines log lines for $bad malformed messages"; }
grep -q "more bad messages not logged" "$dir/ms.err" || fail "no count of the bad messages not logged"
kill -0 "$ms" 2>/dev/null || fail "the memory server died: $(tail -3 "$dir/ms.err")"
echo "ok"
