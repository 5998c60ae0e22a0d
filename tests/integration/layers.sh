#!/usr/bin/env bash
# timeout: 30
# src/compute's layers point one way (scripts/check-layers): no file includes
# a compute header of a layer above its own, and no object calls up into a
# higher layer's.  Also shows the check fails on an upward include, in a
# copy of the tree.
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
