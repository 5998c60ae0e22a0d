#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# A client cut off the network mid-run loses its locks after its lease
# (issue 12), on the netns test bed (scripts/netns-cluster): two memory
# servers and two client hosts, each in its own network namespace.  c0 runs
# `lotus bank` and a list-append client of the serializability checker; c1
# runs another list-append client.  Two seconds in, c0's link goes down: no
# FIN, no RST, the servers just hear nothing more.  From c1, `lotus bank
# --verify` (on a copy of the ledger so far) must then pass within lease + 2 s
# of the cut: the cut-off client's locks are free, the total is preserved and
# nothing it acknowledged is lost.  Then the link comes back, c0's clients must
# end by themselves (they learn their lease is gone) without a crash, the
# whole ledger verifies, and the checker finds no anomaly in the history.
# LEASE_MS (default 2000) is the lease configured; PROBE_MAX_S (default 30)
# how long the probe keeps trying before it gives up.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
. scripts/lib-netns.sh
lease=$(lease_ms)
tmpl=$(mktemp)
{
  echo "[cluster]"
  echo "cc = no_wait"
  echo "timeout_ms = 4000"
  ! lotus_knows lease_ms "$lease" || echo "lease_ms = $lease"
} >"$tmpl"
bed_up 2 "$tmpl" --clients 2 -- --threads 1 --memory 64M
rm -f "$tmpl"
led=$WORK/bank.ledger
la=$(dirname "$L")/la-client
[ -x "$la" ] || fail "la-client not built"

on c0 "$L" bank --config "$INI" --accounts 20 --seconds 0.2 --threads 1 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank0.err" || fail "first bank run failed: $(cat "$WORK/bank0.err")"
on_bg c0 "$L" bank --config "$INI" --seconds 8 --threads 2 --inflight 2 --ledger "$led" --quiet \
  >/dev/null 2>"$WORK/bank.err"
bank=$BG_PID
on_bg c0 "$la" --config "$INI" --log "$WORK/la0.jsonl" --client-id 1 --compute-id 1 --compute-count 8 --threads 1 \
  --seconds 8 --txn-timeout 3 >/dev/null 2>"$WORK/la0.err"
la0=$BG_PID
on_bg c1 "$la" --config "$INI" --log "$WORK/la1.jsonl" --client-id 2 --compute-id 2 --compute-count 8 --threads 1 \
  --seconds 6 --txn-timeout 3 >/dev/null 2>"$WORK/la1.err"
la1=$BG_PID
# cut c0 once its bank transfers (its run line is in the ledger)
for i in $(seq 100); do [ "$(grep -c '^# run' "$led")" -ge 2 ] && break; sleep 0.05; done
sleep 2
kill -0 $bank 2>/dev/null || fail "the bank ended before the cut: $(tail -n 3 "$WORK/bank.err")"
nc partition c0
t0=$(date +%s%N)
echo "c0 cut off at $(grep -c '^0x' "$led") acknowledged transfers; probing from c1"
probe_free c1 "$led" no_wait "$t0" "${PROBE_MAX_S:-30}"
free=$FREE_S
if [ -z "$free" ]; then
  echo "locks of the cut-off client still held after $(ms_since "$t0") s, $PROBES verify runs;" \
       "last: $(echo "$PROBE_LAST" | tail -n 1)"
fi
nc heal c0
t_heal=$(date +%s%N)
[ -n "$free" ] || fail "the cut-off client's locks were never freed (lease ${lease} ms)"
echo "locks free ${free} s after the cut ($PROBES verify runs; lease ${lease} ms)"
# lease + 2 s: the time counted includes the successful verify run itself
# (a process's start, connect and reads), over 1 s on a loaded machine
awk -v f="$free" -v l="$lease" 'BEGIN { exit !(f <= l / 1000 + 2) }' \
  || fail "locks free only after ${free} s, more than lease + 2 s"

# healed: c0's clients end by themselves, cleanly
for p in $bank $la0 $la1; do
  for i in $(seq 300); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
  if kill -0 $p 2>/dev/null; then
    kill -TERM $p
    for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done
    kill -0 $p 2>/dev/null && fail "a client (pid $p) ignored SIGTERM after the heal"
    echo "a client (pid $p) was still running 30 s after the heal; SIGTERM stopped it"
  fi
done
wait $bank; brc=$?
wait $la0; l0rc=$?
wait $la1; l1rc=$?
BED_PIDS=()
echo "after the heal ($(ms_since "$t_heal") s): bank exit $brc, la-client exits $l0rc (cut off), $l1rc"
[ $brc -lt 128 ] || fail "the cut-off bank died of a signal ($brc): $(tail -n 5 "$WORK/bank.err")"
[ $l0rc -lt 128 ] && [ $l1rc -lt 128 ] || fail "a list-append client died of a signal"
verify c1 "$led" no_wait
echo "verify ok: $VERIFY_OUT"
on c1 "$la" --config "$INI" --log "$WORK/final.jsonl" --client-id 60000 --compute-id 3 --compute-count 8 --final --txn-timeout 10 \
  >/dev/null 2>"$WORK/final.err" || fail "the checker's final read failed: $(tail -n 2 "$WORK/final.err")"
/usr/bin/python3 tests/checker/elle_check.py "$WORK"/la0.jsonl "$WORK"/la1.jsonl "$WORK"/final.jsonl \
  >"$WORK/elle.out" 2>&1; erc=$?
cat "$WORK/elle.out"
[ $erc -eq 0 ] || fail "the serializability checker found anomalies"
echo ok
