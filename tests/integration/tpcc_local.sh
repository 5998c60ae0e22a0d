#!/usr/bin/env bash
# timeout: 240
# `lotus tpcc` end to end on an embedded two-server cluster: one warehouse at
# the spec's cardinalities is loaded (progress on stderr), three terminal
# threads run the five transactions for 3 s (so New-Order, Delivery and
# Payment meet on the same districts, the concurrency the phantom argument of
# docs/tpcc.md is about), and the run is checked.  The JSON document must
# show new-order/s > 0, the mix near 45/43/4/4/4, every type with latencies,
# abort rate and round trips, and consistency conditions 1-4 true.
. "$(dirname "$0")/lib.sh"
out=$("$L" tpcc --local 2 --warehouses 1 --threads 3 --seconds 3 --json 2>"$T/err") \
  || fail "lotus tpcc exited $?: $(tail -n 5 "$T/err")"
grep -q "loaded [0-9]* rows of 1 warehouse" "$T/err" || fail "no load report on stderr: $(tail -n 3 "$T/err")"
echo "$out" | "$PY" -c '
import json, sys
d = json.load(sys.stdin)
assert d["new_order_per_s"] > 0, d["new_order_per_s"]
assert {k: v for k, v in d["checks"].items() if k != "11"} == {str(k): True for k in range(1, 13) if k != 11} and d["checks"]["11"] is None, d["checks"]
assert abs(sum(d["mix"].values()) - 1) < 1e-3, d["mix"]
assert 0.3 < d["mix"]["new_order"] < 0.6 and 0.3 < d["mix"]["payment"] < 0.6, d["mix"]
for name in ("new_order", "payment", "order_status", "delivery", "stock_level"):
    t = d["types"][name]
    for k in ("done", "abort_rate", "round_trips_per_txn", "bytes_sent_per_txn", "by_type"):
        assert k in t, (name, k)
    assert set(t["lat_us"]) == {"p50", "p99", "p999"}, t
assert d["types"]["new_order"]["done"] > 0 and d["types"]["new_order"]["round_trips_per_txn"] > 0
print("new-order/s %.0f, mix %s, checks %s" % (d["new_order_per_s"], d["mix"], d["checks"]))
' || fail "bad report: $out"
echo ok
