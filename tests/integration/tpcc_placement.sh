#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (loads 460k rows; test_placement covers the routing under ASan)
# `lotus tpcc --placement warehouse` on two standalone memory servers: one
# warehouse is loaded and run for 2 s; the report must say placement
# warehouse, every check true, and each transaction type must reach about
# one server (Order-Status, Delivery and Stock-Level exactly one: their
# scans stay on the warehouse's server; New-Order and Payment cross only for
# remote lines and payments).  A later client with the default --placement
# hash would look for rows where they are not: --check must refuse it (exit
# 1), naming the load's placement.  With --placement warehouse it passes,
# and after tpcc-corrupt -w (the same rule) moves one D_YTD it fails
# conditions 1 and 9: the check reads the placed rows, not an empty view.
. "$(dirname "$0")/lib.sh"
lib_use cluster
CLUSTER_LEASE_MS=30000   # a loaded host stalls processes for seconds: no lease may run out
at_exit 'cluster_stop'
corrupt=$(dirname "$L")/tpcc-corrupt
[ -x "$corrupt" ] || fail "no $corrupt (make progs)"
cluster_start "$T" 2 --threads 1 --memory 512M || fail "servers did not start"
tp() { "$L" tpcc --config "$CLUSTER_INI" --quiet "$@"; }
out=$(tp --warehouses 1 --threads 2 --seconds 2 --placement warehouse --json 2>"$T/run.err") \
  || fail "lotus tpcc --placement warehouse exited $?: $(tail -n 5 "$T/run.err")"
echo "$out" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
assert d["placement"] == "warehouse", d["placement"]
assert {k: v for k, v in d["checks"].items() if k != "11"} == {str(k): True for k in range(1, 13) if k != 11} and d["checks"]["11"] is None, d["checks"]
sv = {k: t["servers_per_attempt"] for k, t in d["types"].items()}
for k in ("order_status", "delivery", "stock_level"):
    assert sv[k] == 1.0 or d["types"][k]["done"] == 0, sv
assert 1.0 <= sv["new_order"] < 1.3 and 1.0 <= sv["payment"] < 1.3, sv
print("servers per attempt", sv)
' || fail "bad report: $out"

out=$(tp --check 2>"$T/hash.err"); rc=$?
echo "--check (placement hash): exit $rc: $(cat "$T/hash.err")"
[ $rc -eq 1 ] || fail "--check with another placement exited $rc: $out"
grep -q "loaded with --placement warehouse" "$T/hash.err" || fail "the mismatch is not named: $(cat "$T/hash.err")"

checks() { "$PY" -c 'import json,sys; d=json.load(sys.stdin); print("".join({True:"T",False:"F",None:"-"}[d["checks"][str(k)]] for k in range(1, 13)))'; }
out=$(tp --check --placement warehouse --json 2>"$T/check.err") \
  || fail "--check --placement warehouse exited $?: $out $(tail -n 3 "$T/check.err")"
[ "$(echo "$out" | checks)" = TTTTTTTTTT-T ] || fail "--check --placement warehouse: $out"
"$corrupt" -w "$CLUSTER_INI" ytd 1 4 1 || fail "tpcc-corrupt -w ytd failed"
out=$(tp --check --placement warehouse --json 2>"$T/c1.err"); rc=$?
[ $rc -eq 1 ] && [ "$(echo "$out" | checks)" = FTTTTTTTFT-T ] || fail "after D_YTD + 1: exit $rc: $out"
echo ok
