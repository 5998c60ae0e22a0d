#!/usr/bin/env bash
# timeout: 300
# Atomic commit across durable memory servers survives a crash: two standalone
# servers (--durability sync), `lotus bank` running against them, and in each
# cycle one server is killed with -9 at a random moment and restarted on the
# same port.  The bank exits 3 when it loses the server; the next cycle runs it
# again on the same ledger.  At the end `lotus bank --verify` must find the
# total unchanged and every acknowledged transfer present.
# CRASH_CYCLES (default 10) sets the number of crashes; 100 makes a soak.
set -u
fail() { echo "FAIL: $*"; exit 1; }
L=${LOTUS_BIN:?}
dir=$(mktemp -d)
cycles=${CRASH_CYCLES:-10}
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
trap 'cluster_stop; rm -rf "$dir"' EXIT
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }

CLUSTER_DATA=$dir/data CLUSTER_DURABILITY=sync CLUSTER_CC=wait_die
cluster_start "$dir" 2 --threads 1 --memory 64M --durability sync \
  || fail "servers did not start"
led=$dir/bank.ledger
accounts=40
"$L" bank --config "$CLUSTER_INI" --accounts $accounts --opening 1000 --seconds 0.2 \
    --threads 1 --ledger "$led" --quiet >/dev/null 2>"$dir/bank0.err" \
  || fail "first bank run failed: $(cat "$dir/bank0.err")"

runs=1
for ((c = 1; c <= cycles; c++)); do
  "$L" bank --config "$CLUSTER_INI" --seconds 30 --threads 2 --inflight 2 --ledger "$led" \
      --quiet >"$dir/bank.out" 2>"$dir/bank.err" &
  bank=$!
  victim=$((RANDOM % 2))
  # crash it mid-run, not while the bank reads its accounts at start (that
  # may wait for the locks of transactions the last crash left prepared)
  for i in $(seq 200); do
    [ "$(grep -c '^# run' "$led")" -gt "$runs" ] || ! kill -0 $bank 2>/dev/null && break
    sleep 0.05
  done
  runs=$((runs + 1))
  sleep "0.$((RANDOM % 6 + 1))"
  cluster_kill $victim
  t0=$SECONDS
  wait $bank; rc=$?
  echo "cycle $c: killed server $victim; bank exited $rc after $((SECONDS - t0)) s"
  [ $rc -eq 3 ] || [ $rc -eq 0 ] || fail "cycle $c: bank exited $rc: $(tail -n 40 "$dir/bank.err")"
  cluster_restart $victim || fail "cycle $c: server $victim did not restart"
  grep -h "prepared\|resolved" "$dir"/ms*.err | tail -n 2
done

# Let the resolvers decide what the crashes left prepared (locks held until then).
sleep 3
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$dir/verify.err") \
  || fail "verify failed: $ver $(cat "$dir/verify.err")"
echo "verify after $cycles crashes: $ver"
[ "$(echo "$ver" | field ok)" = true ] || fail "verify not ok"
[ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] || fail "total changed"
acked=$(echo "$ver" | field acknowledged)
[ "$acked" -gt 0 ] || fail "nothing acknowledged"
echo "resolved prepared transactions: $(cat "$dir"/ms*.err | grep -c resolved)"
echo ok
