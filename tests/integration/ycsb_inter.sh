#!/usr/bin/env bash
# timeout: 60
# --batch inter batches across transactions at its defaults: without
# --inflight it keeps two transactions in flight per thread, so a message
# carries more requests than under intra (4.5 per message at 16 ops/txn over
# 2 servers).  --inflight 1 still gives the old behaviour.
. "$(dirname "$0")/lib.sh"
dir=$T
for b in intra inter; do
  "$L" ycsb --local 2 --server-threads 1 --threads 1 --records 5000 --batch $b \
      --seconds 1 --warmup 0.2 --json --quiet >"$dir/$b.json" 2>"$dir/$b.err" \
    || fail "ycsb --batch $b: $(cat "$dir/$b.err")"
done
/usr/bin/python3 - "$dir/intra.json" "$dir/inter.json" <<'PY'
import json, sys
a, e = (json.load(open(p)) for p in sys.argv[1:])
ra, re_ = a["net"]["reqs_per_msg"], e["net"]["reqs_per_msg"]
print("intra: %.2f requests/msg, %.0f txn/s; inter (inflight %d): %.2f requests/msg, %.0f txn/s"
      % (ra, a["txn_per_s"], e["inflight"], re_, e["txn_per_s"]))
assert e["inflight"] == 2, "default --inflight under inter is %d" % e["inflight"]
assert re_ > 1.5 * ra, "inter does not batch across transactions by default"
PY
