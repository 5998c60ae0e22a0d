#!/usr/bin/env bash
# timeout: 400
# sanitizers: skip (loads 660k rows and scans them three times: minutes under ASan; tpcc_local runs the same code there)
# `lotus tpcc --check` catches a broken database: on two standalone memory
# servers a warehouse is loaded (--load-only, which checks nothing), --check
# passes (conditions 1-10 and 12; 11 is not checked: null); then a small
# program on the public API (tpcc-corrupt) adds one cent to one D_YTD, and
# --check must exit 1 naming conditions 1 and 9 (and only them); then it
# breaks the others, one district each: a NEW-ORDER row deleted in the middle
# of a district (3, 5), two orders' O_OL_CNT moved by one (6), a delivered
# line's OL_DELIVERY_D nulled (7), an H_AMOUNT raised (8, 9, 10), a
# C_YTD_PAYMENT raised (12); every one of those conditions must fail, each
# naming the district its damage is in.
. "$(dirname "$0")/lib.sh"
lib_use cluster
CLUSTER_LEASE_MS=30000   # a loaded host stalls processes for seconds: no lease may run out
at_exit 'cluster_stop'
corrupt=$(dirname "$L")/tpcc-corrupt
[ -x "$corrupt" ] || fail "no $corrupt (make progs)"
cluster_start "$T" 2 --threads 1 --memory 512M || fail "servers did not start"
"$L" tpcc --config "$CLUSTER_INI" --warehouses 1 --load-only --quiet >"$T/load.out" 2>"$T/load.err" \
  || fail "load failed: $(tail -n 3 "$T/load.err")"
# T: held, F: failed, -: not checked (null)
checks() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); print("".join({True:"T",False:"F",None:"-"}[d["checks"][str(k)]] for k in range(1, 13)))'; }

out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/c0.err") || fail "--check of a fresh load exited $?: $out $(cat "$T/c0.err")"
[ "$(echo "$out" | checks)" = TTTTTTTTTT-T ] || fail "fresh load: $out"

"$corrupt" "$CLUSTER_INI" ytd 1 3 1 || fail "tpcc-corrupt ytd failed"
out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/c1.err"); rc=$?
echo "after D_YTD + 1: exit $rc, $(echo "$out" | checks), $(cat "$T/c1.err")"
[ $rc -eq 1 ] || fail "--check exited $rc after D_YTD was changed: $out"
[ "$(echo "$out" | checks)" = FTTTTTTTFT-T ] || fail "expected conditions 1 and 9 alone to fail: $out"
echo "$out" | grep -q 'warehouse 1: W_YTD' || fail "the violation is not named: $out"

"$corrupt" "$CLUSTER_INI" no 1 7 || fail "tpcc-corrupt no failed"
"$corrupt" "$CLUSTER_INI" olcnt 1 2 || fail "tpcc-corrupt olcnt failed"
"$corrupt" "$CLUSTER_INI" oldel 1 4 || fail "tpcc-corrupt oldel failed"
"$corrupt" "$CLUSTER_INI" hamount 1 5 17 || fail "tpcc-corrupt hamount failed"
"$corrupt" "$CLUSTER_INI" cytd 1 6 9 || fail "tpcc-corrupt cytd failed"
out=$("$L" tpcc --config "$CLUSTER_INI" --check --json 2>"$T/c2.err"); rc=$?
echo "after the rest: exit $rc, $(echo "$out" | checks)"
[ $rc -eq 1 ] || fail "--check exited $rc after the damage"
[ "$(echo "$out" | checks)" = FTFTFFFFFF-F ] || fail "expected 1, 3, 5-10 and 12 to fail: $out"
echo "$out" | "$PY" -c '
import json, sys
e = json.load(sys.stdin)["check_errors"]
want = {"3": "warehouse 1 district 7", "5": "warehouse 1 district 7 order", "6": "district 2 order 1:",
        "7": "district 4 order 1:", "8": "warehouse 1: W_YTD", "9": "district 3:",
        "10": "district 5 customer 17:", "12": "district 6 customer 9:"}
for k, s in want.items():
    assert s in e.get(k, ""), (k, s, e.get(k))
' || fail "a violation is not named where it was made: $out"
echo ok
