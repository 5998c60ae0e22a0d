#!/usr/bin/env bash
# timeout: 60
# lotus durbench says on stderr what it is doing (each step as it starts),
# keeps stdout pure JSON with --json, and is silent on stderr with --quiet.
. "$(dirname "$0")/lib.sh"
dir=$T
"$L" durbench --dir "$dir" --size 16M --seconds 0.2 --json >"$dir/out" 2>"$dir/err" \
  || fail "durbench failed: $(cat "$dir/err")"
/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert isinstance(r, list) and r, r' \
  "$dir/out" || fail "stdout is not one JSON array: $(cat "$dir/out")"
for step in "log on" "filling a store" "checkpoint on" "recovery on"; do
  grep -q "^durbench: $step" "$dir/err" || fail "no progress line for '$step': $(cat "$dir/err")"
done
echo "ok: $(wc -l <"$dir/err") progress lines, $(wc -l <"$dir/out") JSON results (one array)"
"$L" durbench --dir "$dir" --size 16M --seconds 0.2 --only ckpt --quiet >/dev/null 2>"$dir/qerr" \
  || fail "durbench --quiet failed: $(cat "$dir/qerr")"
[ -s "$dir/qerr" ] && fail "--quiet still wrote: $(cat "$dir/qerr")"
echo "ok: --quiet is quiet"

# Ctrl-C (SIGINT to the process group, as `timeout -s INT` sends it) or a
# SIGTERM to the command alone: the work directory is removed all the same.
mkdir "$dir/int"
timeout -s INT 1.5 "$L" durbench --dir "$dir/int" --only log --seconds 30 --quiet >/dev/null \
  2>"$dir/ierr"; rc=$?
[ $rc -ne 0 ] || fail "interrupted durbench exited 0"
[ -z "$(ls -A "$dir/int")" ] || fail "Ctrl-C left $(ls "$dir/int") behind: $(cat "$dir/ierr")"
echo "ok: Ctrl-C exits $rc and leaves nothing: $(cat "$dir/ierr")"
"$L" durbench --dir "$dir/int" --only log --seconds 30 --quiet >/dev/null 2>"$dir/terr" &
pid=$!
for _ in $(seq 50); do [ -n "$(ls -A "$dir/int")" ] && break; sleep 0.05; done
sleep 0.5; kill -TERM $pid; wait $pid; rc=$?
[ $rc -ne 0 ] || fail "terminated durbench exited 0"
[ -z "$(ls -A "$dir/int")" ] || fail "SIGTERM left $(ls "$dir/int") behind: $(cat "$dir/terr")"
echo "ok: SIGTERM exits $rc and leaves nothing"
