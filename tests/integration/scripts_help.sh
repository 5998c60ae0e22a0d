#!/usr/bin/env bash
# Every program in scripts/ answers --help with exit 0 and a usage text that
# names it, and starts nothing (no cluster, no install, no benchmark).  The
# sourced kits (lib-*.sh) and data directories are not programs.
. "$(dirname "$0")/lib.sh"
n=0
for s in "$ROOT"/scripts/*; do
  [ -f "$s" ] && [ -x "$s" ] || continue
  name=$(basename "$s")
  out=$(cd "$T" && timeout 20 "$s" --help 2>&1); rc=$?
  [ $rc -eq 0 ] || fail "scripts/$name --help exited $rc: $(echo "$out" | head -n 3)"
  echo "$out" | grep -q -- "$name" || fail "scripts/$name --help does not name itself: $(echo "$out" | head -n 3)"
  [ "$(echo "$out" | wc -l)" -ge 2 ] || fail "scripts/$name --help: one line is no usage text: $out"
  n=$((n + 1))
done
[ $n -ge 10 ] || fail "only $n scripts found"
echo "ok: $n scripts answer --help"
