#!/usr/bin/env bash
# timeout: 300
# A client killed with -9 never leaves half a transfer applied (issue 9): two
# standalone in-memory memory servers (tcp, one thread each) and, for each
# protocol, KILLS (default 8, 4 on a sanitizer build) `lotus bank` runs on one ledger, each killed -9
# at a random moment while it commits.  After every kill `lotus bank --verify`
# must pass within VERIFY_S seconds: every balance equals its opening balance
# plus the transfers in the database, the total is unchanged, and the lost
# client's locks are free (its prepared transfers settled by the servers).
# A torn last ledger line (the bank's own buffered ledger, killed mid-write)
# is cut before verifying: that is the ledger's problem, not the database's.
# CCS (default "no_wait wait_die wound_wait") picks the protocols, TRANSPORT=sm
# runs it over shared memory.
. "$(dirname "$0")/lib.sh"
dir=$T
kills=8   # a sanitizer build: 4 per protocol (the normal build runs 8)
case ${LOTUS_BUILD:-} in *asan*|*tsan*) kills=4 ;; esac
kills=${KILLS:-$kills}
verify_s=${VERIFY_S:-20}
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
bank=
at_exit '[ -z "$bank" ] || kill -9 $bank 2>/dev/null; cluster_stop'
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
accounts=20

for cc in ${CCS:-no_wait wait_die wound_wait}; do
  cluster_stop
  mkdir -p "$dir/$cc"
  cluster_start "$dir/$cc" 2 --threads 1 --memory 64M || fail "$cc: servers did not start"
  led=$dir/$cc/bank.ledger
  "$L" bank --config "$CLUSTER_INI" --cc $cc --accounts $accounts --opening 1000 --seconds 0.2 \
      --threads 1 --ledger "$led" --quiet >/dev/null 2>"$dir/bank0.err" \
    || fail "$cc: first bank run failed: $(cat "$dir/bank0.err")"
  runs=1 maybe_in_db=0
  for ((k = 1; k <= kills; k++)); do
    "$L" bank --config "$CLUSTER_INI" --cc $cc --seconds 30 --threads 4 --inflight 4 \
        --ledger "$led" --quiet >/dev/null 2>"$dir/bank.err" &
    bank=$!
    # kill it while it transfers, not while it reads the accounts at start
    for i in $(seq 200); do
      [ "$(grep -c '^# run' "$led")" -gt "$runs" ] || ! kill -0 $bank 2>/dev/null && break
      sleep 0.05
    done
    runs=$((runs + 1))
    sleep "0.$((RANDOM % 8 + 2))"
    kill -9 $bank 2>/dev/null
    wait $bank 2>/dev/null
    bank=
    [ -z "$(tail -c1 "$led")" ] || sed -i '$ d' "$led"   # a torn last line
    t0=$(date +%s.%N)
    ver=$(timeout -s KILL "$verify_s" "$L" bank --config "$CLUSTER_INI" --cc $cc --ledger "$led" \
          --verify --json 2>"$dir/verify.err"); rc=$?
    t1=$(date +%s.%N)
    [ $rc -ne 137 ] || fail "$cc kill $k: verify still blocked after ${verify_s} s (locks of the killed client)"
    [ $rc -eq 0 ] || fail "$cc kill $k: verify failed: $ver $(tail -n 3 "$dir/verify.err")"
    [ "$(echo "$ver" | field ok)" = true ] || fail "$cc kill $k: verify not ok: $ver"
    [ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] || fail "$cc kill $k: total changed"
    echo "$cc kill $k: verify ok in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s:" \
         "acknowledged $(echo "$ver" | field acknowledged), in db $(echo "$ver" | field transfers_in_db)"
  done
  echo "$cc: client losses seen by the servers: $(cat "$dir/$cc"/ms*.err | grep -c "client .* lost")"
  echo "$cc: prepared transfers settled by the servers: $(cat "$dir/$cc"/ms*.err | grep -c resolved)"
done
echo ok
