#!/usr/bin/env bash
# timeout: 60
# A memory server stopped (SIGTERM) while it holds a prepared transaction
# that nobody can decide yet exits cleanly, with the PREPARE left in its log
# for the restart, and the restart settles it.  Two durable servers; server 1
# dies (LOTUS_CRASH_AT=prepared: its PREPARE is durable, its vote not sent)
# under a bank run, so server 0 keeps its own yes-vote undecided (it cannot
# reach server 1 to settle it).  Server 0 is then stopped with SIGTERM: it
# must exit 0 (it freed its store before its prepared table and crashed in
# store_resv_release).  Both restart, settle, and bank --verify passes.
. "$(dirname "$0")/lib.sh"
lib_use cluster
at_exit cluster_stop
CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync
cluster_start "$T" 2 --threads 1 --memory 64M || fail "servers did not start"
led=$T/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts 20 --seconds 0.3 --threads 1 --ledger "$led" \
    --quiet >/dev/null 2>"$T/bank0.err" || fail "first bank run failed: $(tail -n 3 "$T/bank0.err")"
# server 1 again, now armed: it dies at its first durable PREPARE
kill "${CLUSTER_PIDS[1]}"; wait "${CLUSTER_PIDS[1]}" 2>/dev/null
LOTUS_CRASH_AT=prepared cluster_restart 1 || fail "server 1 did not restart"
timeout 30 "$L" bank --config "$CLUSTER_INI" --seconds 5 --threads 2 --inflight 2 --ledger "$led" \
    --quiet >/dev/null 2>"$T/bank1.err"
kill -0 "${CLUSTER_PIDS[1]}" 2>/dev/null && fail "server 1 did not reach its crash point"
wait "${CLUSTER_PIDS[1]}" 2>/dev/null
grep -q "prepared" "$T/ms1.err" || fail "server 1 died elsewhere: $(tail -n 3 "$T/ms1.err")"
sleep 0.5
kill -TERM "${CLUSTER_PIDS[0]}"
wait "${CLUSTER_PIDS[0]}"; rc=$?
[ $rc -eq 0 ] || fail "server 0 exited $rc when stopped with a prepared transaction: $(grep -v UCX "$T/ms0.err" | tail -n 5)"
! grep -q "AddressSanitizer\|runtime error" "$T/ms0.err" || fail "server 0: $(grep -m1 -A3 "AddressSanitizer\|runtime error" "$T/ms0.err")"
echo "ok: server 0 stopped cleanly with a prepared transaction"
cluster_restart 0 || fail "server 0 did not restart"
cluster_restart 1 || fail "server 1 did not restart"
out=$(timeout 40 "$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$T/verify.err") \
  || fail "verify failed: $out $(grep -v UCX "$T/verify.err" | tail -n 3)"
echo "$out" | grep -q '"ok":true' || fail "verify: $out"
echo "ok: restarted, settled, verified: $out"
