#!/usr/bin/env bash
# timeout: 120
# `lotus backup` / `lotus restore` on a durable 2-server cluster of real
# processes (docs/operations.md, "Backup and restore"):
#  - an idle backup (--json: servers, bytes, cut LSNs, pause_ms) restores, into
#    new data directories, to a cluster that starts without --init and reads
#    back the exact YCSB digest of the original;
#  - restore refuses a non-empty data directory (and a directory a running
#    server holds) and replaces it with --force;
#  - a backup taken while `lotus bank` runs transfers across both servers (and
#    checkpoints come every 1M of log, so the copy must hold them off)
#    restores to a bank that passes `bank --verify --no-ledger` (no transfer
#    half applied at the cut), while the original keeps serving and passes
#    its ledger's --verify.
. "$(dirname "$0")/lib.sh"
. "$ROOT/scripts/lib-cluster.sh"
top=$T
bankpid=
at_exit 'cluster_stop; [ -z "$bankpid" ] || { kill "$bankpid" 2>/dev/null; wait "$bankpid" 2>/dev/null; }'
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records 2000 "$@"; }
# restore.ini: the cluster's config with data_dir = DIR/ms<i> (restore writes there)
restore_ini() {
  sed -e "/^\[memserver 0\]/a data_dir = $1/ms0" -e "/^\[memserver 1\]/a data_dir = $1/ms1" \
      "$CLUSTER_INI" >"$top/restore.ini"
}
# start the servers of the original ports on the data under DIR (no --init)
start_on() {
  CLUSTER_DATA=$1
  cluster_restart 0 && cluster_restart 1
}

CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 2 --threads 1 --memory 64M --checkpoint-log 1M || fail "the cluster did not start"
Y --threads 2 --no-run >/dev/null 2>"$top/load.err" || fail "load: $(cat "$top/load.err")"
d0=$(Y --no-load --workload A --threads 1 --txns 300 --seed 7 --digest | digest_of)
[ -n "$d0" ] || fail "no digest from the original"

# --- an idle backup restores to the exact digest ---------------------------------
"$L" backup --config "$CLUSTER_INI" --out "$top/bk1" --json >"$top/bk1.json" 2>"$top/bk1.err" \
  || fail "backup: $(cat "$top/bk1.err")"
echo "idle backup: $(cat "$top/bk1.json")"
$PY - "$top/bk1.json" <<'EOF' || fail "backup --json: $(cat "$top/bk1.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["servers"]) == 2, d
assert all(s["cut_lsn"] > 0 and s["bytes"] > 0 for s in d["servers"]), d
assert d["bytes"] == sum(s["bytes"] for s in d["servers"]), d
assert 0 < d["pause_ms"] < 10000, d
EOF
[ -s "$top/bk1/BACKUP" ] && [ -s "$top/bk1/ms0/IDENTITY" ] && [ -s "$top/bk1/ms1/IDENTITY" ] \
  || fail "the backup lacks BACKUP or an IDENTITY: $(ls -R "$top/bk1")"
cluster_stop
restore_ini "$top/r1"
"$L" restore --config "$top/restore.ini" --from "$top/bk1" 2>"$top/r1.err" \
  || fail "restore: $(cat "$top/r1.err")"
start_on "$top/r1" || fail "the restored servers did not start (without --init)"
d1=$(Y --no-load --no-run --digest | digest_of)
echo "digest: original $d0, restored $d1"
[ "$d1" = "$d0" ] || fail "the restored cluster's digest $d1 is not the original's $d0"

# --- restore refuses a data directory in use, or not empty -----------------------
out=$("$L" restore --config "$top/restore.ini" --from "$top/bk1" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "restore onto running servers exited $rc: $out"
echo "$out" | grep -q "is in use by a running memory server" || fail "restore onto a running server: $out"
echo "ok: running: $out"
cluster_stop
out=$("$L" restore --config "$top/restore.ini" --from "$top/bk1" --id 1 2>&1); rc=$?
[ $rc -eq 1 ] || fail "restore into a non-empty directory exited $rc: $out"
echo "$out" | grep -q "$top/r1/ms1 is not empty.*--force" || fail "restore into a non-empty dir: $out"
echo "ok: non-empty: $out"
"$L" restore --config "$top/restore.ini" --from "$top/bk1" --id 1 --force 2>"$top/r1f.err" \
  || fail "restore --force: $(cat "$top/r1f.err")"

# --- an online backup during a bank run ------------------------------------------
start_on "$top/data" || fail "the original servers did not restart"
"$L" bank --config "$CLUSTER_INI" --accounts 200 --threads 2 --seconds 1 --ledger "$top/bank.ledger" \
    --quiet >/dev/null 2>"$top/bank0.err" || fail "bank setup: $(cat "$top/bank0.err")"
"$L" bank --config "$CLUSTER_INI" --threads 3 --seconds 4 --ledger "$top/bank.ledger" --quiet \
    --json >"$top/bank.json" 2>"$top/bank.err" &
bankpid=$!
sleep 1.5
"$L" backup --config "$CLUSTER_INI" --out "$top/bk2" --json >"$top/bk2.json" 2>"$top/bk2.err" \
  || fail "online backup: $(cat "$top/bk2.err")"
echo "online backup: $(cat "$top/bk2.json")"
kill -0 "$bankpid" 2>/dev/null || fail "the bank run was over before the backup was: $(cat "$top/bank.json")"
wait "$bankpid"; rc=$?; bankpid=
[ $rc -eq 0 ] || fail "bank run exited $rc: $(cat "$top/bank.err")"
committed=$(sed -n 's/.*"committed":\([0-9]*\).*/\1/p' "$top/bank.json")
[ "${committed:-0}" -gt 0 ] || fail "the bank committed nothing: $(cat "$top/bank.json")"
"$L" bank --config "$CLUSTER_INI" --ledger "$top/bank.ledger" --verify --quiet >"$top/v0.out" 2>&1 \
  || fail "the original bank fails its verify: $(cat "$top/v0.out")"
cluster_stop
restore_ini "$top/r2"
"$L" restore --config "$top/restore.ini" --from "$top/bk2" 2>"$top/r2.err" \
  || fail "restore of the online backup: $(cat "$top/r2.err")"
start_on "$top/r2" || fail "the servers restored from the online backup did not start"
"$L" bank --config "$CLUSTER_INI" --verify --no-ledger --json >"$top/v2.json" 2>"$top/v2.err" \
  || fail "the restored bank fails --verify --no-ledger: $(cat "$top/v2.json" "$top/v2.err")"
echo "restored bank: $(cat "$top/v2.json")"
grep -q '"ok":true' "$top/v2.json" || fail "verify not ok: $(cat "$top/v2.json")"
grep -q '"total":200000' "$top/v2.json" || fail "the restored total is not 200 x 1000: $(cat "$top/v2.json")"
n=$(sed -n 's/.*"transfers_in_db":\([0-9]*\).*/\1/p' "$top/v2.json")
[ "${n:-0}" -gt 0 ] || fail "the restored bank holds no transfers: $(cat "$top/v2.json")"
echo "ok: the online backup holds $n transfers, all whole ($committed acknowledged by the run)"
