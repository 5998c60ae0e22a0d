#!/usr/bin/env bash
# timeout: 30
# src/compute's and src/store's layers point one way (scripts/check-layers):
# no file includes a header of a layer above its own, no object calls up into
# a higher layer's, and store_int.h is included by the store's own files only.
# Also shows the check fails, in a copy of the tree, on an upward include
# (compute and store), a private header included from outside, and an upward
# call (an index object that calls the store).
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
command -v nm >/dev/null || { echo "no nm"; exit 77; }
scripts/check-layers "${LOTUS_BUILD:-build}" || fail "the tree has upward dependencies"

tmp=$T
mkdir -p "$tmp/scripts" "$tmp/src" "$tmp/tests"
cp scripts/check-layers "$tmp/scripts/"
cp -r src/compute "$tmp/src/"
sed -i '0,/#include "net\/net.h"/s//#include "net\/net.h"\n#include "compute\/session.h"/' \
  "$tmp/src/compute/cluster.h"
out=$("$tmp/scripts/check-layers" "$tmp/nobuild" 2>&1) && fail "an upward include passed: $out"
printf '%s\n' "$out" | grep -q 'cluster.h (cluster) includes compute/session.h from above' ||
  fail "the upward include was not named: $out"
echo "ok: upward include caught: $(printf '%s\n' "$out" | head -n1)"

# src/store: an upward include, a private header from outside, an upward call
st=$T/st
mkdir -p "$st/scripts" "$st/src/memserver" "$st/build/src/store"
cp scripts/check-layers "$st/scripts/"
cp -r src/store "$st/src/"
sed -i 's|^#define LOTUS_STORE_INDEX_H$|&\n#include "store/store.h"|' "$st/src/store/index.h"
printf '#include "store/store_int.h"\n' >"$st/src/memserver/peek.c"
printf 'int store_get(void);\nint peek(void) { return store_get(); }\n' >"$st/up.c"
cc -c -o "$st/build/src/store/index.o" "$st/up.c" || fail "cc failed"
cp "${LOTUS_BUILD:-build}/src/store/store.o" "$st/build/src/store/" || fail "no store.o"
out=$("$st/scripts/check-layers" "$st/build" 2>&1) && fail "the store's upward dependencies passed: $out"
for want in 'index.h (index) includes store/store.h from above: store' \
            'src/memserver/peek.c includes store/store_int.h, private to the store layer' \
            'index.c (index) calls up into store.c (store): store_get'; do
  printf '%s\n' "$out" | grep -qF "$want" || fail "not named: $want: $out"
done
echo "ok: the store's upward include, private include and upward call caught"
