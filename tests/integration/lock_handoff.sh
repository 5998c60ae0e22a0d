#!/usr/bin/env bash
# timeout: 60
# Lock handoff under contention, from the outside: `lotus bank` with six
# threads, two in flight each, on TWO accounts (every transfer X-locks both,
# so nearly every lock request meets an owner and the lock passes from owner
# to waiter), under NO_WAIT, WAIT_DIE and WOUND_WAIT over shared memory, and
# WOUND_WAIT over tcp too.  Every run must commit transfers, conserve the total, and match its
# ledger: a lock granted twice (a lost waiter flag, a release that misses a
# waiter, a wound that leaves its victim an owner) shows up as a torn balance
# or a transfer missing from the ledger; a lost wake-up as a run that commits
# nothing or hangs.
. "$(dirname "$0")/lib.sh"
field() { /usr/bin/python3 -c 'import json,sys
d=json.load(sys.stdin)
for k in sys.argv[1].split("."): d=d[k]
print(str(d).lower())' "$1"; }

for run in sm:no_wait sm:wait_die sm:wound_wait tcp:wound_wait; do
  tr=${run%%:*} cc=${run#*:}
  led="$T/$tr-$cc.ledger"
  out=$(timeout 40 "$L" bank --local 1 --transport $tr --cc $cc --accounts 2 --seconds 1 \
        --threads 6 --inflight 2 --server-threads 2 --ledger "$led" --verify --json --quiet) \
    || fail "bank $tr $cc on 2 accounts failed: $out"
  c=$(echo "$out" | field run.committed)
  a=$(echo "$out" | field run.aborted)
  echo "$tr $cc: committed $c aborted $a total $(echo "$out" | field verify.total)"
  [ "$c" -gt 0 ] || fail "$tr $cc: nothing committed: $out"
  [ "$(echo "$out" | field verify.ok)" = true ] || fail "$tr $cc: verify not ok: $out"
  [ "$(echo "$out" | field verify.total)" = 2000 ] || fail "$tr $cc: total not 2000: $out"
  [ "$(echo "$out" | field verify.acknowledged)" = "$c" ] || fail "$tr $cc: ledger not $c: $out"
done
echo ok
