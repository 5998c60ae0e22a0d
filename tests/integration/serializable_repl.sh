#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (a JVM, and waits out ZooKeeper sessions)
# The serializability checker (docs/checker.md) on a replicated cluster
# (docs/replication.md): 4 durable memory servers with replicas = 2 and a
# private ZooKeeper; in each round the primary of a partition is killed with
# -9 mid-run, its backup takes over, and the killed server restarts as a
# backup.  The clients fail over by themselves; what they were told failed
# (LOTUS_EFAILOVER included) must not have landed, and what they were told
# committed must be there.  Every round must show 0 anomalies, committed
# transactions, and a takeover.
. "$(dirname "$0")/lib.sh"
lib_use zk
zk_need
cd "$(dirname "$0")/../.."
[ -x "$(dirname "${LOTUS_BIN:?}")/la-client" ] || fail "la-client not built"
out=$T/out
scripts/check-serializable --json --seconds 5 --clients 3 \
  --round no_wait:intra:none:replicated \
  --round wound_wait:inter:loc:replicated \
  --round wait_die:none:none:replicated >"$out"
rc=$?
/usr/bin/python3 - "$out" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("transactions:", s["transactions"])
print("anomalies:", s["anomalies"] or "none")
print("faults injected:", s["faults_injected"])
bad = []
for r in s["per_round"]:
    print(" ", r["spec"], r.get("transactions", r.get("error")), r.get("anomalies") or "",
          "; ".join(r.get("notes", [])))
    if not (r.get("transactions") or {}).get("ok"):
        bad.append("%s committed nothing" % r["spec"])
    if not any("took over" in n for n in r.get("notes", [])):
        bad.append("%s: no takeover" % r["spec"])
if bad:
    sys.exit("; ".join(bad))
PY
check_rc=$?
[ $rc -eq 0 ] || fail "check-serializable exited $rc (anomalies or a round that could not run)"
[ $check_rc -eq 0 ] || fail "a round did not fail over or committed nothing"
echo ok
