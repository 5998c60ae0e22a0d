#!/usr/bin/env bash
# timeout: 90
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# The ledger of `lotus bank` survives its users' mistakes and crashes:
#  1. a second bank on the same ledger is refused with a clear error while the
#     first runs (the ledger is locked), and the first still verifies;
#  2. a bank killed with -9 may leave a torn last line; the next run cuts it
#     off (saying so on stderr) instead of appending to it, and --verify
#     accepts the ledger afterwards.
# One standalone memory server, so the killed client cannot tear a transfer.
. "$(dirname "$0")/lib.sh"
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
bank=
at_exit '[ -n "$bank" ] && kill -9 $bank 2>/dev/null; cluster_stop'
cluster_start "$dir" 1 --threads 1 --memory 64M || fail "server did not start"
led=$dir/ledger
runs() { grep -c '^# run' "$led" 2>/dev/null; }

# 1. two banks, one ledger
"$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds 4 --threads 1 --ledger "$led" \
    --quiet >"$dir/a.out" 2>"$dir/a.err" &
bank=$!
for _ in $(seq 100); do [ "$(runs)" = 1 ] && break; sleep 0.05; done
out=$("$L" bank --config "$CLUSTER_INI" --seconds 1 --threads 1 --compute-id 1 \
      --ledger "$led" --quiet 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "second bank on one ledger exited $rc, want 1 ($out)"
echo "$out" | grep -q "in use by another lotus bank" || fail "second bank: unclear error: $out"
echo "ok: $out"
wait $bank; rc=$?; bank=
[ $rc -eq 0 ] || fail "first bank exited $rc: $(cat "$dir/a.err")"
"$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify >"$dir/v1.out" 2>&1 \
  || fail "verify after two banks: $(cat "$dir/v1.out")"
echo "ok: the first bank verifies: $(grep ledger "$dir/v1.out")"

# 2. kill -9 mid-run, then a torn last line
"$L" bank --config "$CLUSTER_INI" --seconds 30 --threads 2 --ledger "$led" --quiet \
    >/dev/null 2>"$dir/k.err" &
bank=$!
for _ in $(seq 100); do [ "$(runs)" = 2 ] && break; sleep 0.05; done
sleep 1.5
kill -9 $bank; wait $bank 2>/dev/null; bank=
# The kill may or may not have torn a line; make sure the tail is torn, as a
# kill during the write of "0x...\n" leaves it: cut the last line in half.
size=$(stat -c %s "$led")
[ "$(tail -c 1 "$led" | od -An -c | tr -d ' ')" = '\n' ] && truncate -s $((size - 9)) "$led"
tail -c 1 "$led" | od -An -c | grep -q '\\n' && fail "could not make a torn tail"
echo "torn tail: '$(tail -n 1 "$led")'"
"$L" bank --config "$CLUSTER_INI" --seconds 1 --threads 1 --ledger "$led" --quiet \
    >"$dir/r.out" 2>"$dir/r.err" || fail "run after the kill failed: $(cat "$dir/r.err")"
grep -q "torn last line" "$dir/r.err" || fail "the torn line was not reported: $(cat "$dir/r.err")"
echo "ok: $(grep torn "$dir/r.err")"
# The server aborts the killed client's transactions once it notices the loss.
for i in 1 2 3 4 5 6 7 8 9 10; do
  "$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify >"$dir/v2.out" 2>&1 && break
  sleep 1
done
grep -q "verify: OK" "$dir/v2.out" || fail "verify after kill -9 and a torn line: $(cat "$dir/v2.out")"
echo "ok: verify after kill -9: $(grep ledger "$dir/v2.out")"

# 3. a plain --local cluster starts empty: a second run on its ledger is
#    refused at the start (exit 2), and the ledger is left as it was
ll=$dir/local-ledger
"$L" bank --local 1 --server-threads 1 --server-memory 32M --accounts 20 --seconds 0.5 \
    --threads 1 --ledger "$ll" --verify --quiet >/dev/null 2>"$dir/l1.err" \
  || fail "first --local run: $(cat "$dir/l1.err")"
before=$(md5sum <"$ll")
out=$("$L" bank --local 1 --server-threads 1 --server-memory 32M --accounts 20 --seconds 0.5 \
      --threads 1 --ledger "$ll" --verify --quiet 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "second --local run on a used ledger exited $rc, want 2 ($out)"
echo "$out" | grep -q "a --local cluster starts empty" || fail "unclear refusal: $out"
[ "$(md5sum <"$ll")" = "$before" ] || fail "the refused run changed the ledger"
echo "ok: $out"
# 4. a durable cluster that holds no bank (a new --data-dir) is refused too
out=$("$L" bank --local 1 --data-dir "$dir/fresh" --server-threads 1 --server-memory 32M \
      --seconds 0.5 --threads 1 --ledger "$ll" --quiet 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "a used ledger on a new --data-dir exited $rc, want 2 ($out)"
echo "$out" | grep -q "holds no bank" || fail "unclear refusal: $out"
[ "$(md5sum <"$ll")" = "$before" ] || fail "the refused run changed the ledger"
echo "ok: $out"
