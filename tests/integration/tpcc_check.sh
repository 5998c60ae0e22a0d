#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (loads 660k rows and scans them three times: minutes under ASan; tpcc_local runs the same code there)
# `lotus tpcc --check` catches a broken database: on two standalone memory
# servers a warehouse is loaded (--load-only, which checks nothing), --check
# passes; then a small program on the public API (tpcc-corrupt) adds one
# cent to one D_YTD, and --check must exit 1 naming condition 1 (and only
# it); then it deletes a NEW-ORDER row in the middle of a district, and
# condition 3 must fail too.
. "$(dirname "$0")/lib.sh"
lib_use cluster
at_exit 'cluster_stop'
corrupt=$(dirname "$L")/tpcc-corrupt
[ -x "$corrupt" ] || fail "no $corrupt (make progs)"
cluster_start "$T" 2 --threads 1 --memory 512M || fail "servers did not start"
"$L" tpcc --config "$CLUSTER_INI" --warehouses 1 --load-only --quiet >"$T/load.out" 2>"$T/load.err" \
  || fail "load failed: $(tail -n 3 "$T/load.err")"
checks() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); print("".join("T" if d["checks"][k] else "F" for k in "1234"))'; }

out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/c0.err") || fail "--check of a fresh load exited $?: $out $(cat "$T/c0.err")"
[ "$(echo "$out" | checks)" = TTTT ] || fail "fresh load: $out"

"$corrupt" "$CLUSTER_INI" ytd 1 3 1 || fail "tpcc-corrupt ytd failed"
out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/c1.err"); rc=$?
echo "after D_YTD + 1: exit $rc, $(echo "$out" | checks), $(cat "$T/c1.err")"
[ $rc -eq 1 ] || fail "--check exited $rc after D_YTD was changed: $out"
[ "$(echo "$out" | checks)" = FTTT ] || fail "expected condition 1 alone to fail: $out"
echo "$out" | grep -q 'warehouse 1: W_YTD' || fail "the violation is not named: $out"

"$corrupt" "$CLUSTER_INI" no 1 7 || fail "tpcc-corrupt no failed"
out=$("$L" tpcc --config "$CLUSTER_INI" --check 2>"$T/c2.err"); rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "--check exited $rc after a NEW-ORDER row was deleted"
echo "$out" | grep -q "condition 3: warehouse 1 district 7" || fail "condition 3 not caught: $out"
echo ok
