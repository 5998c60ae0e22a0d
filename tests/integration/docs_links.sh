#!/usr/bin/env bash
# README.md and docs/*.md have no dead links: every relative link, image and
# backticked path of the tree exists (scripts/check-docs), and the checker
# itself catches a dead link, a dead image, a missing plot and a bad anchor.
. "$(dirname "$0")/lib.sh"
out=$("$ROOT/scripts/check-docs" 2>&1) || fail "dead links:
$out"
echo "$out"
cat >"$T/bad.md" <<'MD'
# Title
[a](no-such-file.md) and ![plot](no-such.png) and `results/no-such.png`
[b](#no-such-heading) [c](#title)
MD
out=$("$ROOT/scripts/check-docs" "$T/bad.md" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "check-docs on a bad file exited $rc: $out"
for want in no-such-file.md no-such.png results/no-such.png '#no-such-heading'; do
  echo "$out" | grep -qF -- "$want" || fail "check-docs missed $want: $out"
done
echo "$out" | grep -q '#title' && fail "check-docs flagged a good anchor: $out"
echo "ok: check-docs catches $(echo "$out" | wc -l) planted problems"

# The README names every subcommand `lotus --help` lists.
cmds=$("$L" --help 2>&1 | awk '/^commands:/ {on=1; next} on && NF {print $1}')
[ "$(echo "$cmds" | wc -w)" -ge 8 ] || fail "lotus --help lists too few commands: $cmds"
for c in $cmds; do
  grep -q "\`lotus $c\`" "$ROOT/README.md" || fail "the README does not name \`lotus $c\`"
done
echo "ok: the README names all $(echo "$cmds" | wc -w) subcommands"
