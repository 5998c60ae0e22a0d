# lib-serve.sh - start and stop `lotus serve` for scripts and tests.  Source
# it, set L to the lotus binary, then:
#   serve_start DIR [serve options...]   starts it on 127.0.0.1 (a free port unless
#                                        --listen is given), sets SERVE_PID, SERVE_PORT
#   serve_stop                           SIGTERM, then waits (kill -9 after 10 s);
#                                        returns the server's exit status
#   serve_children PID                   PIDs of PID's child processes (memory servers)
SERVE_PID=
SERVE_PORT=
SERVE_DIR=

serve_start() {
  SERVE_DIR=$1; shift
  local listen=(--listen 127.0.0.1:0) a
  for a in "$@"; do [ "$a" = --listen ] && listen=(); done
  rm -f "$SERVE_DIR/serve.out" "$SERVE_DIR/serve.err"
  "$L" serve "${listen[@]}" "$@" >"$SERVE_DIR/serve.out" 2>"$SERVE_DIR/serve.err" &
  SERVE_PID=$!
  local i
  for i in $(seq 600); do
    grep -q "listening on" "$SERVE_DIR/serve.out" 2>/dev/null && break
    kill -0 "$SERVE_PID" 2>/dev/null || break
    sleep 0.05
  done
  SERVE_PORT=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\) .*/\1/p' "$SERVE_DIR/serve.out")
  if [ -z "$SERVE_PORT" ]; then
    echo "lotus serve did not start: $(tail -n 3 "$SERVE_DIR/serve.err")" >&2
    kill -9 "$SERVE_PID" 2>/dev/null; wait "$SERVE_PID" 2>/dev/null; SERVE_PID=
    return 1
  fi
}

serve_children() {
  local p
  for p in $(ls /proc 2>/dev/null | grep '^[0-9]*$'); do
    [ "$(awk '{print $4}' /proc/$p/stat 2>/dev/null)" = "$1" ] && echo "$p"
  done
}

serve_stop() {
  [ -n "$SERVE_PID" ] || return 0
  local i rc
  kill -TERM "$SERVE_PID" 2>/dev/null
  for i in $(seq 200); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$SERVE_PID" 2>/dev/null && kill -9 "$SERVE_PID" 2>/dev/null
  wait "$SERVE_PID"; rc=$?
  SERVE_PID=
  return $rc
}
