#!/usr/bin/env bash
# model_rdma.sh - scripts/model-rdma's arithmetic on a fixed input.
# timeout: 20
#
# tests/data/model_rdma_runs.jsonl holds one run of each engine with round
# numbers; tests/data/model_rdma_profile.json is a NIC with 2 servers of 4
# threads, 8 client threads with 2 in flight, cpu_share 0.5.  By hand:
#   two-sided: R=2, n=8 messages, Cc=20 us, Cs=50 us, p=8/2/2=2:
#     L = 2*10 + (20 + 50/2)/0.5 = 110 us; latency 8*2/110us = 145454.5
#     (cap 8*0.5/20us = 200000); nic 2*1e6/8 = 250000; bandwidth 2*1e9/3000
#     = 666666.7; server_cpu 2*4*0.5/50us = 80000  -> 80000, server_cpu
#   one-sided (hardware RMA, so Cs = 0): R=n=20, Cc=10 us:
#     L = 20*1 + 10/0.5 = 40 us; latency 16/40us = 400000 (cap 400000);
#     nic 2*2e6/20 = 200000; bandwidth 2e9/6000 = 333333.3 -> 200000, nic
set -u
cd "$(dirname "$0")/../.."
M=scripts/model-rdma D=tests/data
. "$(dirname "$0")/lib.sh"
out=$("$M" --profile $D/model_rdma_profile.json --json $D/model_rdma_runs.jsonl) || fail "model-rdma failed"
/usr/bin/python3 - "$out" <<'PY' || exit 1
import json, sys
j = json.loads(sys.argv[1])
p = {x["engine"]: x for x in j["predictions"]}
def near(a, b): return abs(a - b) < 0.2
t, o = p["twosided"], p["onesided"]
checks = [
    (near(t["latency_us"], 110.0), "two-sided latency", t["latency_us"]),
    (near(t["bounds"]["latency"], 145454.5), "two-sided latency bound", t["bounds"]),
    (near(t["bounds"]["nic"], 250000), "two-sided nic bound", t["bounds"]),
    (near(t["bounds"]["bandwidth"], 666666.7), "two-sided bandwidth bound", t["bounds"]),
    (near(t["bounds"]["server_cpu"], 80000), "two-sided server cpu bound", t["bounds"]),
    (t["bound"] == "server_cpu" and near(t["predicted_txn_per_s"], 80000), "two-sided prediction", t),
    (near(o["latency_us"], 40.0), "one-sided latency", o["latency_us"]),
    ("server_cpu" not in o["bounds"], "one-sided hardware RMA costs no server CPU", o["bounds"]),
    (o["bound"] == "nic" and near(o["predicted_txn_per_s"], 200000), "one-sided prediction", o),
    (near(o["bounds"]["bandwidth"], 333333.3), "one-sided bandwidth bound", o["bounds"]),
]
bad = [f"{name}: {got}" for ok, name, got in checks if not ok]
for b in bad: print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
# --check: medians against measured; 80000 vs 1000 is off, 200000 vs 190000 within 30%
c=$("$M" --check $D/model_rdma_runs.jsonl --profile $D/model_rdma_profile.json --json) || fail "--check failed"
echo "$c" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
r = {x["engine"]: x for x in j["rows"]}
assert j["count"] == 2 and j["within_30pct"] == 1, j
assert abs(r["onesided"]["ratio"] - 200000 / 190000) < 0.001, r
assert r["twosided"]["ratio"] == 80.0, r
' || fail "--check rows"
# --check --own: the file's netbench (rtt 5 us, 1e6 round trips/s) and probe
# (cpu_share 1) replace the profile's.  Two-sided: L = 2*5 + (20 + 50/2)/1 = 55 us,
# latency 16/55us = 290909.1, nic 2*2e6/8 = 500000, server_cpu 2*4/50us = 160000.
# One-sided (on tcp rma_us = rtt, rma_rate = 1e6): L = 20*5 + 10 = 110 us,
# latency 145454.5, nic 2*1e6/20 = 100000 -> 100000, ratio 100000/190000.
c=$("$M" --check $D/model_rdma_own.jsonl --own --profile $D/model_rdma_profile.json --json) || fail "--own failed"
echo "$c" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
r = {x["engine"]: x for x in j["rows"]}
assert r["twosided"]["predicted_txn_per_s"] == 160000.0 and r["twosided"]["bound"] == "server_cpu", r
assert r["onesided"]["predicted_txn_per_s"] == 100000.0 and r["onesided"]["bound"] == "nic", r
assert abs(r["onesided"]["ratio"] - 100000 / 190000) < 0.001, r
' || fail "--check --own rows"
# the shipped profiles load and give every field
for p in cx5-100g local-sm local-tcp; do
  "$M" --profile $p --json $D/model_rdma_runs.jsonl | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
for x in j["predictions"]:
    for k in ("predicted_txn_per_s", "bound", "latency_us", "bounds", "counts"):
        assert k in x, k
' || fail "profile $p"
done
# bad input: a clear error, exit 2
"$M" --profile nosuch $D/model_rdma_runs.jsonl 2>/dev/null; [ $? -eq 2 ] || fail "unknown profile accepted"
"$M" --threads 0 $D/model_rdma_runs.jsonl 2>/dev/null; [ $? -eq 2 ] || fail "--threads 0 accepted"
h=$("$M" --help); case $h in *X_nic*) ;; *) fail "--help lacks the formula" ;; esac
echo "model_rdma: ok"
