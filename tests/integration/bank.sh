#!/usr/bin/env bash
# timeout: 90
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# `lotus bank`: transfers on a --local cluster pass --verify over tcp and sm
# under every protocol; bad arguments exit 2; a --data-dir bank is verified by
# a second invocation.  Then against two standalone memory servers: a run, a
# second run continuing on the same data (same ledger), --verify alone; a
# ledger claiming a transfer that does not exist fails --verify with a clear
# line; the loss of a server mid-run exits 3 with one line.
. "$(dirname "$0")/lib.sh"
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
at_exit 'cluster_stop'
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }

# --- a --local run then --verify, per transport and protocol ------------------
for tr in tcp sm; do
  for cc in no_wait wait_die wound_wait; do
    led="$dir/$tr-$cc.ledger"
    out=$("$L" bank --local 2 --transport $tr --cc $cc --accounts 50 --seconds 1 --threads 2 \
          --inflight 2 --server-threads 1 --ledger "$led" --verify --json --quiet) \
      || fail "bank $tr $cc failed: $out"
    # one document {"run":{..},"verify":{..}}: split it into its two objects
    run=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["run"], separators=(",", ":")))') \
      || fail "$tr $cc: not one JSON document: $out"
    ver=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["verify"], separators=(",", ":")))')
    echo "$tr $cc: $run"
    echo "$tr $cc: $ver"
    c=$(echo "$run" | field committed)
    [ "$c" -gt 0 ] || fail "$tr $cc: nothing committed"
    [ "$(echo "$ver" | field ok)" = true ] || fail "$tr $cc: verify not ok"
    [ "$(echo "$ver" | field acknowledged)" = "$c" ] || fail "$tr $cc: ledger holds not $c ids"
    [ "$(echo "$ver" | field total)" = 50000 ] || fail "$tr $cc: total not 50000"
    [ "$(grep -c '^0x' "$led")" = "$c" ] || fail "$tr $cc: ledger lines differ from committed"
  done
done

# --- bad arguments ---------------------------------------------------------
expect2() {
  local out rc
  out=$("$L" bank "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "lotus bank $* exited $rc, want 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "lotus bank $*: want one line: $out"
  echo "ok: lotus bank $* -> $out"
}
expect2 --seconds 1
expect2 --ledger "$dir/x" --accounts 1
expect2 --ledger "$dir/x" --accounts abc
expect2 --ledger "$dir/x" --cc optimistic
expect2 --ledger "$dir/x" --threads 0
expect2 --ledger "$dir/x" --bogus
expect2 --ledger "$dir/x" --config "$dir/c.ini" --local 2
expect2 --ledger "$dir/x" --config "$dir/missing.ini"
"$L" bank --help | grep -q -- '--inflight' || fail "bank --help lacks --inflight"
"$L" --help | grep -q 'bank' || fail "lotus --help lacks bank"

# --- durable local servers: the bank outlives the command ----------------------
led="$dir/durable.ledger"
"$L" bank --local 2 --data-dir "$dir/data" --server-threads 1 --accounts 30 --seconds 1 \
    --threads 2 --ledger "$led" --quiet >/dev/null || fail "durable run failed"
ver=$("$L" bank --local 2 --data-dir "$dir/data" --server-threads 1 --ledger "$led" --verify \
      --json) || fail "durable verify failed: $ver"
echo "durable: $ver"
[ "$(echo "$ver" | field acknowledged)" = "$(grep -c '^0x' "$led")" ] || fail "durable: count"

# --- standalone memory servers: run, continue, verify ------------------------
CLUSTER_CC=wait_die cluster_start "$dir" 2 --threads 1 --memory 128M || fail "servers did not start"
led="$dir/cluster.ledger"
c1=$("$L" bank --config "$CLUSTER_INI" --accounts 40 --opening 500 --seconds 1 --threads 2 \
     --ledger "$led" --json --quiet | field committed) || fail "first config run failed"
out=$("$L" bank --config "$CLUSTER_INI" --seconds 1 --threads 2 --inflight 4 --ledger "$led" \
      --json --quiet) || fail "second config run failed: $out"
echo "continued: $out"
[ "$(echo "$out" | field created)" = false ] || fail "second run did not continue"
[ "$(echo "$out" | field accounts)" = 40 ] || fail "second run lost the account count"
[ "$(echo "$out" | field opening)" = 500 ] || fail "second run lost the opening balance"
c2=$(echo "$out" | field committed)
[ "$(grep -c '^# run' "$led")" = 2 ] || fail "ledger lacks a header per run"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json) \
  || fail "verify after two runs failed: $ver"
echo "verify: $ver"
[ "$(echo "$ver" | field acknowledged)" = $((c1 + c2)) ] || fail "acknowledged != $c1 + $c2"
[ "$(echo "$ver" | field total)" = 20000 ] || fail "total not 40 x 500"
out=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify) || fail "human verify"
echo "$out" | grep -q OK || fail "human verify lacks OK: $out"
out=$("$L" bank --config "$CLUSTER_INI" --accounts 41 --seconds 1 --ledger "$led" 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "already holds 40 accounts" \
  || fail "a different --accounts on an existing bank: exit $rc: $out"

# --- a corrupted ledger: one acknowledged id that was never committed ---------
cp "$led" "$dir/corrupt.ledger"
run=$(sed -n 's/^# run \(0x[0-9a-f]*\).*/\1/p' "$led" | head -n1)
printf '%s%08x\n' "$run" 4294967295 >>"$dir/corrupt.ledger"
out=$("$L" bank --config "$CLUSTER_INI" --ledger "$dir/corrupt.ledger" --verify 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "corrupted ledger: exit $rc, want 1"
echo "$out" | grep -q "acknowledged in the ledger but missing from bank_transfers" \
  || fail "corrupted ledger: unclear message: $out"
echo "ok: $out"

# --- a memory server dies mid-run: exit 3, one line, ledger flushed -------------
"$L" bank --config "$CLUSTER_INI" --seconds 20 --threads 2 --inflight 2 --ledger "$led" \
    --quiet >"$dir/lost.out" 2>"$dir/lost.err" &
bank=$!
sleep 1
kill -9 "${CLUSTER_PIDS[1]}"
wait $bank; rc=$?
[ $rc -eq 3 ] || fail "server lost: exit $rc, want 3: $(cat "$dir/lost.err")"
grep -q "^lotus bank: memory server lost" "$dir/lost.err" || fail "no loss message"
grep -q "status unavailable" "$led" || fail "ledger lacks the run's end line"
grep "^lotus bank" "$dir/lost.err"
echo ok
