#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# The serializability checker (docs/checker.md).  First the checker's
# self-test: a hand-made history per anomaly kind, each of which it must
# report, and a clean one it must pass.  Then a short matrix of real rounds
# over every protocol, batch mode and cache mode (none, location cache,
# co-partitioned), plus the faults: kill -9 of a durable memory server, a
# killed client process (also co-partitioned: nothing committed may live only
# in its cache), a full memory server, sticky errors, a long scan of
# a static table, tiered servers whose hot reads park on misses (with a
# kill -9 of one).  Every round must show 0 anomalies; the tiered round
# must have parked requests on misses and committed transactions.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
/usr/bin/python3 tests/checker/elle_check.py --self-test || fail "checker self-test"
[ -x "$(dirname "${LOTUS_BIN:?}")/la-client" ] || fail "la-client not built"
out=$T/out
scripts/check-serializable --json --seconds 3 --clients 3 \
  --round no_wait:none:none:none \
  --round wait_die:intra:loc:none \
  --round wound_wait:inter:co:none \
  --round wait_die:inter:none:kill-server \
  --round no_wait:intra:loc:kill-client \
  --round wound_wait:intra:co:kill-client \
  --round wound_wait:intra:none:sticky \
  --round wait_die:intra:none:full \
  --round wound_wait:none:none:bigscan \
  --round wait_die:intra:none:tiered >"$out"
rc=$?
/usr/bin/python3 - "$out" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print("transactions:", s["transactions"])
print("anomalies:", s["anomalies"] or "none")
print("faults injected:", s["faults_injected"])
for r in s["per_round"]:
    print(" ", r["spec"], r.get("transactions", r.get("error")), r.get("anomalies") or "",
          r.get("tier") or "")
t = [r for r in s["per_round"] if r["spec"].endswith(":tiered")]
if not t or not (t[0].get("tier") or {}).get("parked") or not t[0]["transactions"].get("ok"):
    sys.exit("the tiered round parked no request on a miss or committed nothing: %s"
             % (t and (t[0].get("tier"), t[0].get("transactions"))))
EOF
tier_rc=$?
[ $rc -eq 0 ] || fail "check-serializable exited $rc (anomalies or a round that could not run)"
[ $tier_rc -eq 0 ] || fail "the tiered round did not exercise misses that park"
echo ok
