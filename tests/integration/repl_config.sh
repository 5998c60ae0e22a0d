#!/usr/bin/env bash
# timeout: 120
# The replication keys' errors (docs/replication.md), as the commands report
# them: replicas that do not divide the servers, and replicas > 1 without a
# coordinator, fail `lotus memserver` and `lotus bank` with exit 2 and one
# line naming the file and line; a replicated server without a data
# directory is refused with a clear line; a coordinator that does not answer fails a
# memory server's start with a clear error instead of a hang; replicas = 1
# (and no coordinator) is today's cluster.  Needs no ZooKeeper.
. "$(dirname "$0")/lib.sh"

write() {   # write FILE REPLICAS [COORDINATOR]
  {
    printf '[cluster]\n'
    printf 'replicas = %s\n' "$2"
    [ -z "${3:-}" ] || printf 'coordinator = %s\n' "$3"
    for id in 0 1 2; do printf '[memserver %d]\nlisten = 127.0.0.1:%d\n' $id $((1 + id)); done
  } >"$1"
}
expect2() {   # expect2 WHAT FILE TEXT -- command...
  local what=$1 f=$2 text=$3; shift 4
  "$@" >"$T/out" 2>&1; local rc=$?
  [ $rc -eq 2 ] || fail "$what: exit $rc, want 2: $(cat "$T/out")"
  grep -q "^lotus: $f:2: .*$text" "$T/out" || fail "$what: message: $(cat "$T/out")"
  [ "$(wc -l <"$T/out")" = 1 ] || fail "$what: not one line: $(cat "$T/out")"
}

write "$T/div.ini" 2 127.0.0.1:1
write "$T/nocoord.ini" 3
for cmd in "memserver --id 0" "bank --seconds 1 --ledger $T/led"; do
  # shellcheck disable=SC2086
  expect2 "$cmd, R=2 of 3" "$T/div.ini" "replicas = 2 does not divide the 3 memory servers" \
    -- "$L" $cmd --config "$T/div.ini"
  # shellcheck disable=SC2086
  expect2 "$cmd, no coordinator" "$T/nocoord.ini" "replicas = 3 needs a coordinator" \
    -- "$L" $cmd --config "$T/nocoord.ini"
done

# A replicated server needs a data directory: its log is what it ships.
write "$T/zk.ini" 3 127.0.0.1:1
timeout -s KILL 60 "$L" memserver --config "$T/zk.ini" --id 1 >"$T/nd.out" 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] || fail "replicated server without a data directory: exit $rc"
grep -q "replicas = 3 needs a data directory" "$T/nd.out" \
  || fail "no clear error without a data directory: $(tail -n 3 "$T/nd.out")"

# A coordinator nobody answers at: the server says so and exits.
timeout -s KILL 60 "$L" memserver --config "$T/zk.ini" --id 1 --lease-ms 500 \
    --data-dir "$T/d1" --init >"$T/ms.out" 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -ne 137 ] || fail "memory server without its coordinator: exit $rc: $(tail -n 3 "$T/ms.out")"
grep -q "coordinator 127.0.0.1:1: no ZooKeeper session within\|built without it: install libzookeeper-mt-dev" \
  "$T/ms.out" || fail "no clear error without the coordinator: $(tail -n 3 "$T/ms.out")"

# replicas = 1 with a coordinator: no ZooKeeper is asked (it would fail: port 1).
printf '[cluster]\nreplicas = 1\ncoordinator = 127.0.0.1:1\n[memserver 0]\nlisten = 127.0.0.1:%d\n' \
  "$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" \
  >"$T/r1.ini"
"$L" memserver --config "$T/r1.ini" --id 0 --ready-json --threads 1 --memory 64M >"$T/r1.out" 2>"$T/r1.err" &
ms=$!
at_exit 'kill $ms 2>/dev/null; wait $ms 2>/dev/null'
for i in $(seq 200); do grep -q ready "$T/r1.out" && break; kill -0 $ms 2>/dev/null || break; sleep 0.05; done
grep -q ready "$T/r1.out" || fail "replicas = 1 server did not start: $(tail -n 3 "$T/r1.err")"
"$L" bank --config "$T/r1.ini" --accounts 10 --seconds 0.5 --threads 1 --ledger "$T/l" --quiet \
    >/dev/null 2>"$T/bank.err" || fail "bank on replicas = 1: $(tail -n 3 "$T/bank.err")"
"$L" bank --config "$T/r1.ini" --ledger "$T/l" --verify >"$T/v.out" 2>&1 || fail "verify: $(cat "$T/v.out")"
! grep -qi "coordinator\|zookeeper" "$T/r1.err" "$T/bank.err" || fail "replicas = 1 talked of a coordinator"
echo "PASS: replication config errors; replicas = 1 needs no coordinator"
