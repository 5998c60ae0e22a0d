#!/usr/bin/env bash
# timeout: 120
# `make install DESTDIR=...` lays out bin, include, lib (liblotus.a, liblotus.so
# with soname liblotus.so.0) and lib/pkgconfig/lotus.pc; both libraries export
# only lotus_*; a program with its own cpu_count, crc32c and log_msg links
# against either and keeps its own; `make uninstall` removes every file.
. "$(dirname "$0")/lib.sh"
[ "${LOTUS_BUILD:-build}" = build ] || { echo "skip: installs the default build"; exit 77; }
tmp=$T
st=$tmp/stage
make --no-print-directory -s install DESTDIR="$st" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail install; }
prefix=$(sed -n 's/^prefix=//p' build/lotus.pc); p=$st$prefix
for f in bin/lotus include/lotus.h lib/liblotus.a lib/liblotus.so lib/liblotus.so.0 \
         lib/pkgconfig/lotus.pc; do
  [ -e "$p/$f" ] || fail "$f not installed"
done
[ "$(readlink "$p/lib/liblotus.so")" = liblotus.so.0 ] || fail "liblotus.so -> $(readlink "$p/lib/liblotus.so")"
real=$(readlink "$p/lib/liblotus.so.0"); [[ $real == liblotus.so.0.*.* ]] || fail "liblotus.so.0 -> $real"
readelf -d "$p/lib/liblotus.so" | grep -q 'SONAME.*\[liblotus.so.0\]' || fail "soname"
"$p/bin/lotus" --version | grep -qE '^lotus [0-9]+\.[0-9]+\.[0-9]+$' || fail "lotus --version"

dyn=$(nm -D --defined-only "$p/lib/liblotus.so" | awk '{print $NF}' | grep -v '^lotus_')
[ -z "$dyn" ] || fail "liblotus.so exports more than lotus_*: $(echo $dyn | head -c 300)"
sta=$(nm -g --defined-only "$p/lib/liblotus.a" | awk 'NF==3 {print $3}' | grep -v '^lotus_')
[ -z "$sta" ] || fail "liblotus.a defines globals besides lotus_*: $(echo $sta | head -c 300)"
echo "ok   exports: $(nm -D --defined-only "$p/lib/liblotus.so" | grep -c ' lotus_') lotus_* symbols, nothing else"

# A user's own cpu_count/crc32c/log_msg (names lotus uses inside) must be theirs.
cat >"$tmp/clash.c" <<'C'
#include <stdio.h>
#include <lotus.h>
int cpu_count = 7;
unsigned crc32c(void) { return 42; }
void log_msg(const char *s) { printf("%s", s); }
int main(void) {   /* lotus_connect pulls in the whole library */
    struct lotus_options o;
    lotus_cluster_t *c;
    lotus_options_init(&o);
    o.config_path = "/nonexistent/cluster.ini";
    int rc = lotus_connect(&o, &c);
    log_msg("");
    printf("%d %u %s\n", cpu_count, crc32c(), rc == LOTUS_ECONFIG ? "econfig" : "?");
    return 0;
}
C
export PKG_CONFIG_PATH="$p/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$st"
for mode in shared static; do
  if [ $mode = static ]; then
    flags=$(pkg-config --static --cflags --libs lotus | sed 's/-llotus/-l:liblotus.a/')
  else
    flags=$(pkg-config --cflags --libs lotus)
  fi
  [ -n "$flags" ] || fail "pkg-config lotus ($mode)"
  cc "$tmp/clash.c" $flags -o "$tmp/clash-$mode" 2>"$tmp/cc.log" ||
    { cat "$tmp/cc.log"; fail "a program with its own cpu_count does not link ($mode)"; }
  out=$(LD_LIBRARY_PATH="$p/lib" "$tmp/clash-$mode" 2>/dev/null) || fail "clash-$mode did not run"
  [ "$out" = "7 42 econfig" ] || fail "clash-$mode printed '$out'"
  echo "ok   own cpu_count/crc32c/log_msg with liblotus ($mode)"
done
ldd "$tmp/clash-static" | grep -q liblotus && fail "static program uses liblotus.so"

make --no-print-directory -s uninstall DESTDIR="$st" >"$tmp/log" 2>&1 || { cat "$tmp/log"; fail uninstall; }
left=$(find "$st" -type f -o -type l)
[ -z "$left" ] || fail "uninstall left: $left"
echo ok
