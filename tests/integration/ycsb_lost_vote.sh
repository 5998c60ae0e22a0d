#!/usr/bin/env bash
# timeout: 90
# `lotus ycsb` ends its run as soon as it loses a memory server, even when
# the only transaction in flight is a commit whose vote went with that
# server.  Two durable servers; server 1 dies at its first durable PREPARE
# (LOTUS_CRASH_AT=prepared: the vote is never sent) under a one-thread,
# one-transaction ycsb run.  Its commit then asks server 0, which voted yes
# and cannot reach server 1 either, what became of it: "prepared", every
# 200 ms, for up to timeout_ms (20 s here).  ycsb used to wait that out
# (nothing else was in flight to fail, so nothing told the run its server
# was gone; lease_stopped_server's ycsb part hit it about 1 run in 10); now
# it exits 1 within a few seconds, having said which server it lost, with no
# crash (the commit left in flight is dropped when its session closes).
. "$(dirname "$0")/lib.sh"
lib_use cluster
slow=1; case ${LOTUS_BUILD:-} in *asan*|*tsan*) slow=2 ;; esac
client=
cleanup() {
  [ -z "$client" ] || kill -9 "$client" 2>/dev/null
  # server 0 holds the undecided yes-vote: a SIGTERM would have it wait for
  # the decision first; the data is scratch
  local p; for p in ${CLUSTER_PIDS[@]+"${CLUSTER_PIDS[@]}"}; do kill -9 "$p" 2>/dev/null; done
  cluster_stop
}
at_exit cleanup
CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync
cluster_start "$T" 2 --threads 1 --memory 64M || fail "servers did not start"
sed -i 's/^\[cluster\]$/[cluster]\ntimeout_ms = 20000/' "$CLUSTER_INI"
"$L" ycsb --config "$CLUSTER_INI" --records 500 --threads 1 --no-run --quiet \
  >/dev/null 2>"$T/load.err" || fail "load: $(tail -n 3 "$T/load.err")"
# server 1 again, now armed: it dies at its first durable PREPARE
kill "${CLUSTER_PIDS[1]}"; wait "${CLUSTER_PIDS[1]}" 2>/dev/null
# (bash reports the armed server's death at its crash point: "Killed")
LOTUS_CRASH_AT=prepared cluster_restart 1 || fail "server 1 did not restart"
"$L" ycsb --config "$CLUSTER_INI" --no-load --records 500 --threads 1 --inflight 1 \
  --seconds 60 --warmup 0 --quiet >"$T/y.out" 2>"$T/y.err" &
client=$!
for i in $(seq 300); do kill -0 "${CLUSTER_PIDS[1]}" 2>/dev/null || break; sleep 0.05; done
kill -0 "${CLUSTER_PIDS[1]}" 2>/dev/null && fail "server 1 did not reach its crash point: $(tail -n 3 "$T/y.err")"
t0=$(date +%s%N)
grep -q "crash point prepared" "$T/ms1.err" || fail "server 1 died elsewhere: $(tail -n 3 "$T/ms1.err")"
for i in $(seq 300); do kill -0 $client 2>/dev/null || break; sleep 0.05; done
ms=$((($(date +%s%N) - t0) / 1000000))
if kill -0 $client 2>/dev/null; then
  fail "ycsb still running $ms ms after server 1 died (its commit waits out timeout_ms): $(tail -n 3 "$T/y.err")"
fi
wait $client; rc=$?; client=
[ $rc -eq 1 ] || fail "ycsb exited $rc, want 1: $(tail -n 5 "$T/y.err")"
! grep -q "Assertion\|Caught signal\|AddressSanitizer\|runtime error" "$T/y.err" \
  || fail "ycsb crashed: $(grep -m2 "Assertion\|Caught signal\|AddressSanitizer\|runtime error" "$T/y.err")"
grep -q "lost memory server 1" "$T/y.err" || fail "ycsb did not say which server it lost: $(tail -n 3 "$T/y.err")"
[ "$ms" -le $((8000 * slow)) ] || fail "ycsb took $ms ms to exit after server 1 died"
echo "ok: server 1 died at its PREPARE; ycsb exit $rc after $ms ms: $(grep -m1 'lost memory server' "$T/y.err" | cut -c26-)"
