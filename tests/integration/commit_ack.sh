#!/usr/bin/env bash
# timeout: 90
# Commit in one round trip (issue 23): a transaction that writes on two
# durable memory servers is acknowledged as soon as both yes votes are
# durable; the COMMIT notices follow on the next messages, and nobody waits
# for their replies.  The votes alone decide, so the notices may be lost:
#   client  lease-client (public lotus.h only) writes TAG to keys on both
#           servers and commits with LOTUS_CRASH_AT=client_acked:1: it kills
#           itself after its commit was acknowledged and before the notices
#           left.  Both servers lose the client with the transaction prepared;
#           their resolvers must commit it (every vote durable and yes), and
#           every key shows TAG.
#   server  the same with server 1 restarted with LOTUS_CRASH_AT=before_commit:1:
#           it dies when the notice arrives, before applying anything.  The
#           commit must have returned 0, and once server 1 is back (its
#           recovery finds the PREPARE undecided and asks server 0) every key
#           shows the new TAG.
# A dump that meets the still-prepared keys is refused and retried (20 s at most).
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
C=$(dirname "$L")/lease-client
[ -x "$C" ] || fail "lease-client not built"
n=8
holder=
at_exit '[ -z "$holder" ] || kill -9 "$holder" 2>/dev/null; cluster_stop'

# dump_is TAG: every key holds TAG (retried while the resolvers settle)
dump_is() {
  local out i
  for i in $(seq 40); do
    out=$("$C" dump "$CLUSTER_INI" $n 2>&1) && [ "$(echo "$out" | grep -c "=$1\$")" -eq $n ] \
      && return 0
    sleep 0.5
  done
  echo "$out"
  return 1
}

CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync CLUSTER_CC=no_wait
cluster_start "$T" 2 --threads 1 --memory 64M --durability sync \
  || fail "servers did not start: $(tail -n 2 "$T"/ms*.err)"
echo go | "$C" hold "$CLUSTER_INI" no_wait $n first >"$T/h0.out" 2>&1 \
  || fail "first commit failed: $(cat "$T/h0.out")"

# client: killed between its acknowledgement and its COMMIT notices
echo go | LOTUS_CRASH_AT=client_acked:1 "$C" hold "$CLUSTER_INI" no_wait $n acked \
  >"$T/h1.out" 2>"$T/h1.err"
rc=$?
grep -q "crash point client_acked reached" "$T/h1.err" \
  || fail "client: the crash point was never reached (exit $rc): $(cat "$T/h1.out" "$T/h1.err")"
[ $rc -eq 137 ] || fail "client: exit $rc after its crash point, not SIGKILL's 137"
out=$(dump_is acked) || fail "client: the acknowledged transaction is not committed: $out"
echo "client: killed after its acknowledgement; every key holds its value"

# server: server 1 dies when the notice arrives
cluster_kill 1 2>/dev/null
export LOTUS_CRASH_AT=before_commit:1
cluster_restart 1 || fail "server 1 did not restart with the crash point"
unset LOTUS_CRASH_AT
echo go | "$C" hold "$CLUSTER_INI" no_wait $n late >"$T/h2.out" 2>"$T/h2.err"
rc=$?
grep -q "^commit 0 " "$T/h2.out" || fail "server: the commit was not acknowledged (exit $rc): $(cat "$T/h2.out" "$T/h2.err")"
for i in $(seq 100); do grep -q "crash point before_commit reached" "$T/ms1.err" && break; sleep 0.1; done
grep -q "crash point before_commit reached" "$T/ms1.err" \
  || fail "server: the crash point was never reached: $(tail -n 5 "$T/ms1.err")"
cluster_restart 1 || fail "server 1 did not come back"
out=$(dump_is late) || fail "server: the acknowledged transaction is not committed: $out"
echo "server: server 1 died before applying; after its restart every key holds the value"
echo ok
