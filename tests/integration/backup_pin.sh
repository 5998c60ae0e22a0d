#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (it waits out pins and checkpoint timers; backup_restore covers the code)
# A backup copies one server at a time; the servers not yet copied must keep
# their checkpoint files as they were at the cut, however long that takes.
# With the servers' pin cut to 1.5 s (LOTUS_BACKUP_PIN_MS), checkpoints every
# 200 ms, `lotus bank` running, and the client pausing 300 ms before each
# read (LOTUS_BACKUP_READ_DELAY_MS):
#  - without keep-alives the second server's pin runs out and it checkpoints
#    past the cut: the backup must fail (exit 1, the server saying why), not
#    hand out a copy that mixes a newer image with the cut;
#  - with keep-alives every 300 ms the backup succeeds and restores to a bank
#    that passes `bank --verify --no-ledger`.
. "$(dirname "$0")/lib.sh"
. "$ROOT/scripts/lib-cluster.sh"
top=$T
bankpid=
at_exit 'cluster_stop; [ -z "$bankpid" ] || { kill "$bankpid" 2>/dev/null; wait "$bankpid" 2>/dev/null; }'
export LOTUS_BACKUP_PIN_MS=1500
CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 2 --threads 1 --memory 64M --checkpoint-log 256K --checkpoint-interval 200 \
  || fail "the cluster did not start"
unset LOTUS_BACKUP_PIN_MS
"$L" bank --config "$CLUSTER_INI" --accounts 200 --threads 2 --seconds 1 --ledger "$top/bank.ledger" \
    --quiet >/dev/null 2>"$top/bank0.err" || fail "bank setup: $(cat "$top/bank0.err")"
"$L" bank --config "$CLUSTER_INI" --threads 2 --seconds 30 --ledger "$top/bank.ledger" --quiet \
    >/dev/null 2>"$top/bank.err" &
bankpid=$!
sleep 1

LOTUS_BACKUP_READ_DELAY_MS=300 LOTUS_BACKUP_KEEPALIVE_MS=600000 \
  "$L" backup --config "$CLUSTER_INI" --out "$top/bk1" --quiet >"$top/bk1.out" 2>"$top/bk1.err"
rc=$?
[ $rc -eq 1 ] || fail "a backup whose pin ran out exited $rc: $(cat "$top/bk1.out" "$top/bk1.err")"
[ -e "$top/bk1/BACKUP" ] && fail "a failed backup wrote BACKUP"
grep -q "a checkpoint ran after the cut" "$top"/ms*.err || fail "no server said why: $(tail -n 3 "$top"/ms*.err)"
echo "ok: without keep-alives: $(grep -h 'backup:' "$top/bk1.err" | tail -n 1)"

LOTUS_BACKUP_READ_DELAY_MS=300 LOTUS_BACKUP_KEEPALIVE_MS=300 \
  "$L" backup --config "$CLUSTER_INI" --out "$top/bk2" --quiet --json >"$top/bk2.json" 2>"$top/bk2.err" \
  || fail "a backup with keep-alives failed: $(cat "$top/bk2.err")"
echo "ok: with keep-alives: $(cat "$top/bk2.json")"
kill "$bankpid" 2>/dev/null; wait "$bankpid" 2>/dev/null; bankpid=
cluster_stop
sed -e "/^\[memserver 0\]/a data_dir = $top/r2/ms0" -e "/^\[memserver 1\]/a data_dir = $top/r2/ms1" \
    "$CLUSTER_INI" >"$top/restore.ini"
"$L" restore --config "$top/restore.ini" --from "$top/bk2" 2>"$top/r2.err" || fail "restore: $(cat "$top/r2.err")"
CLUSTER_DATA=$top/r2
cluster_restart 0 && cluster_restart 1 || fail "the restored servers did not start"
"$L" bank --config "$CLUSTER_INI" --verify --no-ledger --json >"$top/v2.json" 2>"$top/v2.err" \
  || fail "the restored bank fails --verify --no-ledger: $(cat "$top/v2.json" "$top/v2.err")"
grep -q '"ok":true' "$top/v2.json" || fail "verify not ok: $(cat "$top/v2.json")"
echo "ok: restored: $(cat "$top/v2.json")"
