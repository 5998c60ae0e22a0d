#!/usr/bin/env bash
# timeout: 60
# lotus durbench says on stderr what it is doing (each step as it starts),
# keeps stdout pure JSON with --json, and is silent on stderr with --quiet.
set -u
fail() { echo "FAIL: $*"; exit 1; }
L=${LOTUS_BIN:?}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
"$L" durbench --dir "$dir" --size 16M --seconds 0.2 --json >"$dir/out" 2>"$dir/err" \
  || fail "durbench failed: $(cat "$dir/err")"
/usr/bin/python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$dir/out" \
  || fail "stdout is not JSON lines: $(cat "$dir/out")"
for step in "log on" "filling a store" "checkpoint on" "recovery on"; do
  grep -q "^durbench: $step" "$dir/err" || fail "no progress line for '$step': $(cat "$dir/err")"
done
echo "ok: $(wc -l <"$dir/err") progress lines, $(wc -l <"$dir/out") JSON results"
"$L" durbench --dir "$dir" --size 16M --seconds 0.2 --only ckpt --quiet >/dev/null 2>"$dir/qerr" \
  || fail "durbench --quiet failed: $(cat "$dir/qerr")"
[ -s "$dir/qerr" ] && fail "--quiet still wrote: $(cat "$dir/qerr")"
echo "ok: --quiet is quiet"
