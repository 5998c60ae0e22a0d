#!/usr/bin/env bash
# timeout: 150
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# Cooperative termination across a partition between memory servers (issue
# 12), on the netns test bed (scripts/netns-cluster): two memory servers
# that know each other from the config file, `lotus bank` on host c0 and a
# list-append client of the serializability checker on host c1, both with
# LOTUS_CRASH_AT=client_prepared:N: each kills itself (SIGKILL) after every
# writer of a two-phase commit voted yes and before it sends COMMIT.  The
# servers then hold prepared transactions whose client is gone, and must ask
# each other how they end (OP_TXN_STATUS) - but ms0 is cut from ms1 (both
# still reach the clients) from before the clients die until CUT_S (default
# 4) seconds after.  While cut, neither may decide alone (a prepared
# participant cannot know the outcome).  After the heal, both must settle
# every such transaction the same way, `lotus bank --verify` from c1 must
# pass (total preserved, nothing acknowledged lost) and the checker must
# find no anomaly.  Prints how long the settling took after the heal.  Two
# rounds (KINDS): in-memory servers, and durable ones (durability = sync, a
# data directory each, so votes and refusals go through the redo log).
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
. scripts/lib-netns.sh
lease=$(lease_ms)
cut_s=${CUT_S:-4}
resolved() { cat "$BED"/ms*.err | grep -c "resolved with the other participants"; }

# round KIND: KIND memory (in-memory servers) or durable (durability = sync,
# a data directory each: votes and refusals are logged)
round() {
  local kind=$1 data
  tmpl=$(mktemp)
  data=
  [ $kind = memory ] || data=$(mktemp -d)
  {
    echo "[cluster]"
    echo "cc = wait_die"
    echo "timeout_ms = 4000"
    ! lotus_knows lease_ms "$lease" || echo "lease_ms = $lease"
    if [ -n "$data" ]; then
      echo "durability = sync"
      printf '[memserver %d]\ndata_dir = %s/ms%d\n' 0 "$data" 0 1 "$data" 1
    fi
  } >"$tmpl"
  bed_up 2 "$tmpl" --clients 2 -- --threads 1 --memory 64M
  rm -f "$tmpl"
  [ -z "$data" ] || grep -q "durability sync" "$BED/ms0.err" || fail "$kind: ms0 is not durable: $(cat "$BED/ms0.err")"
  led=$WORK/bank.ledger
  la=$(dirname "$L")/la-client
  [ -x "$la" ] || fail "$kind: la-client not built"

  on c0 "$L" bank --config "$INI" --accounts 20 --seconds 0.2 --threads 1 --ledger "$led" --quiet \
    >/dev/null 2>"$WORK/bank0.err" || fail "$kind: first bank run failed: $(cat "$WORK/bank0.err")"
  before=$(resolved)
  nc partition ms0 ms1
  t_cut=$(date +%s%N)
  LOTUS_CRASH_AT=client_prepared:$((RANDOM % 40 + 20)) on_bg c0 "$L" bank --config "$INI" \
    --seconds 20 --threads 2 --inflight 2 --ledger "$led" --quiet >/dev/null 2>"$WORK/bank.err"
  bank=$BG_PID
  LOTUS_CRASH_AT=client_prepared:$((RANDOM % 40 + 20)) on_bg c1 "$la" --config "$INI" \
    --log "$WORK/la.jsonl" --client-id 1 --compute-id 1 --compute-count 8 --threads 2 --seconds 20 \
    --txn-timeout 5 >/dev/null 2>"$WORK/la.err"
  lac=$BG_PID
  for p in $bank $lac; do
    for i in $(seq 150); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
    kill -0 $p 2>/dev/null && fail "$kind: a client did not reach its crash point in 15 s"
  done
  wait $bank 2>/dev/null; brc=$?
  wait $lac 2>/dev/null; lrc=$?
  BED_PIDS=()
  grep -q "crash point client_prepared reached" "$WORK/bank.err" \
    || fail "$kind: the bank never reached its crash point (exit $brc): $(tail -n 3 "$WORK/bank.err")"
  grep -q "crash point client_prepared reached" "$WORK/la.err" \
    || fail "$kind: la-client never reached its crash point (exit $lrc): $(tail -n 3 "$WORK/la.err")"
  [ $brc -eq 137 ] && [ $lrc -eq 137 ] || fail "$kind: the clients exited $brc and $lrc, not 137 (SIGKILL)"
  t_dead=$(date +%s%N)
  echo "$kind: both clients killed themselves between PREPARE and COMMIT, $(ms_since "$t_cut") s after the cut"
  remaining=$(awk -v c="$(ms_since "$t_dead")" -v s="$cut_s" 'BEGIN { r = s - c; print (r > 0 ? r : 0) }')
  sleep "$remaining"
  during=$(( $(resolved) - before ))
  lost=$(cat "$BED"/ms*.err | grep -c "client .* lost")
  echo "$kind: during the ${cut_s} s cut: the servers saw $lost client losses and settled $during prepared transactions"
  # a participant that prepared cannot decide alone: the only other one is cut off
  [ "$during" -eq 0 ] || fail "$kind: $during prepared transactions were decided while the servers were cut apart"
  nc heal ms0 ms1
  t_heal=$(date +%s%N)
  probe_free c1 "$led" wait_die "$t_heal" 30
  [ -n "$FREE_S" ] || fail "$kind: the bank did not verify within 30 s of the heal: $(echo "$kind: $PROBE_LAST" | tail -n 1)"
  echo "$kind: after the heal: the bank verifies after ${FREE_S} s ($PROBES verify runs)"
  settled=$(( $(resolved) - before ))
  echo "$kind: prepared transactions settled with the other participant: $settled ($during during the cut);" \
       "client losses logged by the servers: $(cat "$BED"/ms*.err | grep -c "client .* lost") ($lost during the cut)"
  [ "$settled" -gt 0 ] || fail "$kind: no prepared transaction was settled by the servers: the crash point left none?"
  # the same decision for every transaction on both servers
  for i in 0 1; do
    sed -n 's/.*prepared txn \([0-9a-f]*\) resolved with the other participants: \([a-z]*\).*/\1 \2/p' \
      "$BED/ms$i.err" | sort -u >"$WORK/dec$i"
  done
  if join "$WORK/dec0" "$WORK/dec1" | awk '$2 != $3 { bad = 1; print "  txn " $1 ": " $2 " on ms0, " $3 " on ms1" } END { exit !bad }'; then
    fail "$kind: the servers decided a transaction differently"
  fi
  echo "$kind: decisions on both servers agree: $(join "$WORK/dec0" "$WORK/dec1" | wc -l) transactions settled on both," \
       "$(cat "$WORK/dec0" "$WORK/dec1" | awk '{print $2}' | sort | uniq -c | tr '\n' ' ')"
  verify c1 "$led" wait_die
  echo "$kind: verify ok: $VERIFY_OUT"
  on c1 "$la" --config "$INI" --log "$WORK/final.jsonl" --client-id 60000 --compute-id 3 --compute-count 8 \
    --final --txn-timeout 10 >/dev/null 2>"$WORK/final.err" \
    || fail "$kind: the checker's final read failed: $(tail -n 2 "$WORK/final.err")"
  /usr/bin/python3 tests/checker/elle_check.py "$WORK/la.jsonl" "$WORK/final.jsonl" >"$WORK/elle.out" 2>&1
  erc=$?
  cat "$WORK/elle.out"
  [ $erc -eq 0 ] || fail "$kind: the serializability checker found anomalies"
  bed_down
  BED= WORK=
  [ -z "$data" ] || rm -rf "$data"
}

for kind in ${KINDS:-memory durable}; do round $kind; done
echo ok
