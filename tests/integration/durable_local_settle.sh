#!/usr/bin/env bash
# timeout: 240
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# A durable --local cluster settles every prepared transaction (issue 9 item
# 6): local servers know each other (a peers file), as config-file servers
# do.  In each round a `lotus bank --local 2 --data-dir D` run is killed with
# -9 while it commits; its servers die with it (SIGKILL), leaving PREPAREs
# without a decision in their logs.  The next `lotus bank --local 2
# --data-dir D --verify` restarts them: they must settle those among
# themselves (no "awaiting a decision" warning) and --verify must pass within
# 30 s; a last restart then finds no undecided PREPARE.  ROUNDS (default 4).
. "$(dirname "$0")/lib.sh"
dir=$T
rounds=${ROUNDS:-4}
bank=
kids=()
cleanup() {
  [ -z "$bank" ] || kill -9 $bank 2>/dev/null
  for p in "${kids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
at_exit cleanup
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
led=$dir/bank.ledger
data=$dir/data
accounts=20
args=(--local 2 --data-dir "$data" --server-threads 1 --ledger "$led")
"$L" bank "${args[@]}" --accounts $accounts --seconds 0.3 --threads 1 --quiet >/dev/null \
    2>"$dir/bank0.err" || fail "first bank run failed: $(cat "$dir/bank0.err")"
undecided=0
for ((r = 1; r <= rounds; r++)); do
  runs=$(grep -c '^# run' "$led")
  "$L" bank "${args[@]}" --seconds 30 --threads 4 --inflight 4 --quiet >/dev/null \
      2>"$dir/bank.err" &
  bank=$!
  for i in $(seq 200); do
    [ "$(grep -c '^# run' "$led")" -gt "$runs" ] || ! kill -0 $bank 2>/dev/null && break
    sleep 0.05
  done
  kids=($(pgrep -P $bank))   # its local memory servers (they die with it)
  sleep "0.$((RANDOM % 6 + 3))"
  kill -9 $bank 2>/dev/null
  wait $bank 2>/dev/null
  bank=
  for i in $(seq 100); do
    alive=0
    for p in "${kids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.05
  done
  [ $alive = 0 ] || fail "round $r: the local servers outlived their killed client"
  kids=()
  [ -z "$(tail -c1 "$led")" ] || sed -i '$ d' "$led"   # a torn last line
  ver=$(timeout -s KILL 30 "$L" bank "${args[@]}" --verify --json 2>"$dir/verify.err"); rc=$?
  [ $rc -ne 137 ] || fail "round $r: verify still blocked after 30 s: $(grep -i prepared "$dir/verify.err" | tail -n 2)"
  ! grep -q "awaiting a decision" "$dir/verify.err" \
    || fail "round $r: $(grep "awaiting a decision" "$dir/verify.err" | head -n 1)"
  [ $rc -eq 0 ] && [ "$(echo "$ver" | field ok)" = true ] \
    || fail "round $r: verify failed: $ver $(grep -v UCX "$dir/verify.err" | tail -n 3)"
  [ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] || fail "round $r: total changed"
  n=$(sed -n 's/.*recovery: \([0-9]*\) prepared transactions\{0,1\} without a decision.*/\1/p' \
      "$dir/verify.err" | awk '{s += $1} END {print s + 0}')
  undecided=$((undecided + n))
  echo "round $r: killed the bank and its servers; restart found $n undecided PREPARE(s);" \
       "verify ok: acknowledged $(echo "$ver" | field acknowledged)"
done
echo "undecided PREPAREs settled after restarts: $undecided"
# every one of them was decided and logged: one more restart finds none
ver=$(timeout -s KILL 30 "$L" bank "${args[@]}" --verify --json 2>"$dir/verify.err") \
  || fail "final verify failed: $ver"
! grep -q "without a decision" "$dir/verify.err" \
  || fail "final restart: $(grep "without a decision" "$dir/verify.err" | head -n 1)"
echo ok
