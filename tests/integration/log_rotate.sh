#!/usr/bin/env bash
# timeout: 90
# Logs as an operator meets them (docs/operations.md, "logs"):
#  - every line of a memory server's --log-file starts with an ISO-8601 UTC
#    timestamp with milliseconds, then the server id and a level;
#  - logrotate's way: mv the file, kill -HUP; the server lives on, the next
#    lines go to a new file at the same path, none is lost: the warnings bad
#    clients provoke (one per source address in 127.0.0.0/8) before, between
#    and after two rotations are each in the file of their phase, and those
#    of a client running across the rotations are each in one file;
#  - lotus serve --log-file: its own lines carry the same fields.
. "$(dirname "$0")/lib.sh"
dir=$T; ms=; sv=
cleanup() {
  [ -z "$ms" ] || kill -9 "$ms" 2>/dev/null
  [ -z "$sv" ] || kill -9 "$sv" 2>/dev/null
  wait 2>/dev/null
}
at_exit cleanup
STAMP='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z '
LINE="${STAMP}memserver 3: (debug|info|warn|error): "
log=$dir/ms.log

"$L" memserver --listen 127.0.0.1:0 --id 3 --memory 32M --threads 1 --ready-json \
  --data-dir "$dir/d" --init --log-file "$log" >"$dir/ms.out" 2>"$dir/ms.err" &
ms=$!
for _ in $(seq 200); do grep -q '"port"' "$dir/ms.out" 2>/dev/null && break; sleep 0.05; done
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/ms.out")
[ -n "$port" ] || fail "memserver did not start: $(cat "$dir/ms.err" "$log" 2>/dev/null)"
grep -q "listening on" "$log" || fail "no 'listening on' line in the log file: $(cat "$log")"
[ ! -s "$dir/ms.err" ] || fail "lines went to stderr, not the log file: $(cat "$dir/ms.err")"

# bad_clients FIRST N [GAP]: N connections that send garbage at the door, from
# 127.0.0.FIRST on (one address each: the door logs a failure once a minute
# per address, 20 lines per 10 s in all); each one is answered by a close
# after the server logged its warning line
bad_clients() {
  $PY - "$port" "$@" <<'EOF'
import socket, sys, time
port, first, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
gap = float(sys.argv[4]) if len(sys.argv) > 4 else 0
for a in range(first, first + n):
    s = socket.socket()
    s.settimeout(10)
    s.bind(("127.0.0.%d" % a, 0))
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n" + b"x" * 64)
    try:
        while s.recv(64):
            pass
    except OSError:
        pass
    s.close()
    time.sleep(gap)
EOF
}
# three phases of 4 failures, with a rotation between them; meanwhile 6 more
# from other addresses, spread over the rotations
bad_clients 100 6 0.25 &
flood=$!
bad_clients 10 4
for r in 1 2; do
  mv "$log" "$log.$r"
  kill -HUP "$ms" || fail "kill -HUP"
  for _ in $(seq 100); do [ -e "$log" ] && break; sleep 0.05; done
  [ -e "$log" ] || fail "rotation $r: no new log file after SIGHUP"
  bad_clients $((10 + 4 * r)) 4
done
wait "$flood" || fail "the background bad clients failed"
kill -0 "$ms" 2>/dev/null || fail "the memory server died of SIGHUP"
kill -TERM "$ms"; wait "$ms"; rc=$?; ms=
[ $rc -eq 0 ] || fail "memserver exited $rc at SIGTERM"

# every line of every file is well-formed
for f in "$log.1" "$log.2" "$log"; do
  bad=$(grep -Ev "$LINE" "$f" | head -n 3)
  [ -z "$bad" ] || fail "$(basename "$f"): lines without timestamp/id/level: $bad"
done
grep -q "shutting down" "$log" || fail "the lines after the last rotation are not in the new file"
! grep -q "shutting down" "$log.1" "$log.2" || fail "shutdown lines in a rotated file"
# nothing lost: each phase's failures are in its own file, and each of the
# 18 addresses is logged exactly once across the three files
for f in 1 2 3; do
  file=$log.$f; [ $f = 3 ] && file=$log
  for a in $(seq $((10 + 4 * (f - 1))) $((13 + 4 * (f - 1)))); do
    [ "$(grep -c "connection from 127\.0\.0\.$a:" "$file")" -eq 1 ] \
      || fail "phase $f: the failure from 127.0.0.$a is not in $(basename "$file") once"
  done
done
cat "$log.1" "$log.2" "$log" >"$dir/all"
for a in $(seq 10 21) $(seq 100 105); do
  [ "$(grep -c "connection from 127\.0\.0\.$a:" "$dir/all")" -eq 1 ] \
    || fail "the failure from 127.0.0.$a is not logged exactly once: $(grep "127\.0\.0\.$a:" "$dir/all")"
done
echo "lines: $(grep -c . "$log.1") before the first rotation, $(grep -c . "$log.2") between, $(grep -c . "$log") after"
head -n 2 "$log.1"; tail -n 1 "$log"

# ---- serve --log-file ----
slog=$dir/serve.log
printf '[cluster]\ntimeout_ms = 1000\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" >"$dir/gone.ini"
timeout 30 "$L" serve --config "$dir/gone.ini" --listen 127.0.0.1:0 --log-file "$slog" \
  >"$dir/serve.out" 2>"$dir/serve.err"; rc=$?
[ $rc -ne 0 ] || fail "serve with its memory server gone exited 0"
grep -Eq "${STAMP}serve: error: cannot open a session" "$slog" \
  || fail "serve's log file lacks the timestamped error: $(cat "$slog" "$dir/serve.err")"
bad=$(grep -Ev "$STAMP[a-z0-9 ]+: (debug|info|warn|error): " "$slog" | head -n 3)
[ -z "$bad" ] || fail "serve: lines without timestamp/level: $bad"
echo "serve: $(tail -n 1 "$slog")"
echo ok
