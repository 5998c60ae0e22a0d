#!/usr/bin/env bash
# timeout: 90
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# `lotus bank` on two standalone 1 MiB memory servers runs until a memory
# server is out of space: the run stops with a clear "out of space" line, and
# `--verify` then passes (no transfer half applied: a commit that does not fit
# changes nothing).  The servers keep serving: a second --verify passes too.
# Over every protocol, one cluster each.  Then the same on a durable --local
# cluster (sync, two-phase commit across the servers) of 256 KiB servers: the
# --verify run restarts the servers on the full data directories with the same
# --server-memory and passes.
. "$(dirname "$0")/lib.sh"
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
at_exit 'cluster_stop'

for cc in no_wait wait_die wound_wait; do
  cluster_start "$dir" 2 --threads 2 --memory 1M || fail "servers did not start"
  led="$dir/$cc.ledger"
  out=$("$L" bank --config "$CLUSTER_INI" --cc $cc --accounts 500 --seconds 30 --threads 4 \
        --inflight 2 --ledger "$led" --quiet 2>&1); rc=$?
  echo "$cc: run exit $rc: $(echo "$out" | tail -n1)"
  echo "$out" | grep -q "out of space" || fail "$cc: the run did not stop on out of space: $out"
  ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify 2>&1) \
    || fail "$cc: verify after out of space failed: $ver"
  echo "$cc: $(echo "$ver" | tail -n2 | tr '\n' ' ')"
  grep -h "applied partially" "$dir"/ms*.err && fail "$cc: a server applied a commit partially"
  ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify 2>&1) \
    || fail "$cc: second verify failed: $ver"
  cluster_stop
done
led="$dir/durable.ledger"
out=$("$L" bank --local 2 --data-dir "$dir/data" --server-memory 256K --server-threads 2 \
      --accounts 200 --seconds 40 --threads 4 --ledger "$led" --quiet 2>&1)
echo "durable: $(echo "$out" | tail -n1)"
echo "$out" | grep -q "out of space" || fail "durable: the run did not stop on out of space: $out"
ver=$("$L" bank --local 2 --data-dir "$dir/data" --server-memory 256K --server-threads 1 \
      --ledger "$led" --verify 2>&1) || fail "durable: verify after out of space failed: $ver"
echo "durable: $(echo "$ver" | tail -n2 | tr '\n' ' ')"
echo "ok"
