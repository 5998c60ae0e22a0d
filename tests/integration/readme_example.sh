#!/usr/bin/env bash
# timeout: 120
# The README's library example, exactly as printed: built with each of the
# README's `cc` lines (against the build tree, and via pkg-config after
# `make install DESTDIR=...`), then run with no lotus_bin and no LOTUS_BIN, so
# it must find `lotus` itself (on PATH) instead of re-running itself.  Without
# any lotus binary it must fail with a message, not recurse.
. "$(dirname "$0")/lib.sh"
[ "${LOTUS_BUILD:-build}" = build ] || { echo "skip: README lines name build/"; exit 77; }
root=$PWD
tmp=$T
unset LOTUS_BIN
readme_block() {   # the first ```$1 block after "## Using the library"
  awk -v tag="$1" '/^## Using the library/ {on=1} on && $0 == "```" tag {inb=1; next}
                   inb && /^```/ {exit} inb {print}' "$root/README.md"
}
readme_block c >"$tmp/app.c"
[ -s "$tmp/app.c" ] || fail "no C example in the README"
grep '^cc ' <(readme_block sh) >"$tmp/cc-lines"
[ "$(wc -l <"$tmp/cc-lines")" -ge 3 ] || fail "the README's cc lines are missing"

make --no-print-directory -s install DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "make install"; }
prefix=$(sed -n 's/^prefix=//p' build/lotus.pc)
export PKG_CONFIG_PATH="$tmp/stage$prefix/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$tmp/stage"
export LD_LIBRARY_PATH="$tmp/stage$prefix/lib"
i=0
while read -r line; do
  i=$((i+1))
  # the build-tree line runs in the source tree, the others next to app.c
  if [[ $line == *build/liblotus.a* ]]; then dir=$root; src=$tmp/app.c; else dir=$tmp; src=app.c; fi
  cmd=${line/app.c/$src}; cmd=${cmd/-o app/-o $tmp/app$i}
  (cd "$dir" && eval "$cmd") >"$tmp/cc.log" 2>&1 || { cat "$tmp/cc.log"; fail "build: $line"; }
  out=$(cd "$tmp" && PATH="$tmp/stage$prefix/bin:$PATH" timeout 60 "./app$i" 2>"$tmp/err") ||
    { tail -n 5 "$tmp/err"; fail "run of: $line"; }
  [ "$out" = "alice: 110 (success)" ] || fail "app$i printed '$out'"
  echo "ok   $line"
done <"$tmp/cc-lines"
ldd "$tmp/app1" | grep -q 'liblotus.so.0 ' || fail "app1 is not linked with liblotus.so.0"

# No lotus anywhere: a clear error, quickly, and no copies of the program.
nolotus=$(mktemp -d); ln -s "$(command -v timeout)" "$nolotus/timeout"
out=$(cd "$tmp" && PATH="$nolotus" timeout 20 ./app1 2>&1); rc=$?
rm -rf "$nolotus"
[ $rc -eq 1 ] || fail "without a lotus binary: exit $rc, want 1 ($out)"
echo "$out" | grep -q "LOTUS_BIN" || fail "no message naming LOTUS_BIN: $out"
echo "ok   without lotus: $(echo "$out" | head -n1)"
echo ok
