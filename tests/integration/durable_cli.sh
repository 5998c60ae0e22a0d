#!/usr/bin/env bash
# `lotus memserver` durability options: async/sync without a data directory
# is a usage error (exit 2, one line), from flags or from the config file; a
# data_dir in the config means sync, recovered at start and reported in the
# ready line; SIGTERM takes a final checkpoint.
# timeout: 40
. "$(dirname "$0")/lib.sh"
dir=$T
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
at_exit cleanup

expect2() {
  local out rc
  out=$("$L" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "lotus $* exited $rc, want 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "lotus $*: want one line, got: $out"
  echo "ok: lotus $* -> $out"
}
expect2 memserver --listen 127.0.0.1:0 --durability sync
expect2 memserver --listen 127.0.0.1:0 --durability async
expect2 memserver --listen 127.0.0.1:0 --durability always --data-dir "$dir/x"
expect2 memserver --listen 127.0.0.1:0 --data-dir "$dir/x" --checkpoint-log lots
printf '[cluster]\ndurability = sync\n\n[memserver 0]\nlisten = 127.0.0.1:7000\n' >"$dir/nodir.ini"
expect2 memserver --config "$dir/nodir.ini" --id 0

# data_dir in the config alone: sync, and the ready line reports recovery
printf '[cluster]\ntransport = tcp\n\n[memserver 0]\nlisten = 127.0.0.1:7000\nthreads = 1\nmemory = 64M\ndata_dir = %s/ms0\n' "$dir" >"$dir/c.ini"
"$L" memserver --config "$dir/c.ini" --id 0 --listen 127.0.0.1:0 --init --ready-json >"$dir/ready" 2>"$dir/err" &
pid=$!
for _ in $(seq 100); do grep -q ready "$dir/ready" 2>/dev/null && break; sleep 0.1; done
grep -q '"durability":"sync","recovered":{' "$dir/ready" || fail "ready line: $(cat "$dir/ready") $(cat "$dir/err")"
echo "ok: $(cat "$dir/ready")"
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
[ $rc -eq 0 ] || fail "SIGTERM exit $rc"
grep -q "final checkpoint" "$dir/err" || fail "no final checkpoint line: $(cat "$dir/err")"
[ -f "$dir/ms0/MANIFEST" ] || fail "no MANIFEST after the clean stop"
echo "ok: $(grep 'final checkpoint' "$dir/err")"

# --durability none ignores the directory
"$L" memserver --config "$dir/c.ini" --id 0 --listen 127.0.0.1:0 --durability none --ready-json >"$dir/ready" 2>"$dir/err" &
pid=$!
for _ in $(seq 100); do grep -q ready "$dir/ready" 2>/dev/null && break; sleep 0.1; done
grep -q '"durability"' "$dir/ready" && fail "durability none still uses the log: $(cat "$dir/ready")"
kill -TERM "$pid"; wait "$pid"; pid=
echo "ok: --durability none"
