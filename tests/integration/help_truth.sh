#!/usr/bin/env bash
# What `--help` says is what the command does:
#  - `lotus ycsb --help` names the durability a --local cluster with
#    --data-dir gets when --durability is not given, and the run has it: with
#    every redo log write held back LOTUS_REDO_DELAY_MS, a sync commit waits
#    that long for its acknowledgment, an async one does not;
#  - `lotus netbench --spin-us 0` (never busy-poll) is accepted, as the docs'
#    LOTUS_NET_SPIN_US=0 is, and both run.
. "$(dirname "$0")/lib.sh"

help=$("$L" ycsb --help 2>&1) || fail "ycsb --help exited $?"
line=$(printf '%s\n' "$help" | grep -- '--durability') || fail "ycsb --help has no --durability"
echo "$line" | grep -q 'sync with --data-dir' ||
  fail "ycsb --help does not say a data dir means sync: $line"

delay=500
p99() {   # p99 latency (us) of a tiny --local 1 run on its own data dir
  LOTUS_REDO_DELAY_MS=$delay timeout 60 "$L" ycsb --local 1 --data-dir "$T/d$1" "${@:2}" \
      --records 20 --ops-per-txn 2 --workload A --txns 4 --threads 1 --json --quiet \
      >"$T/out$1" 2>"$T/err$1" || { cat "$T/err$1"; fail "ycsb $*: exit $?"; }
  $PY -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["lat_us"]["p99"]))' "$T/out$1"
}
def=$(p99 1) || exit 1
asy=$(p99 2 --durability async) || exit 1
echo "p99 with a data dir: default ${def} us, async ${asy} us (log writes held ${delay} ms)"
[ "$def" -ge $((delay * 800)) ] || fail "the default waited ${def} us, below the held log write: not sync"
[ "$asy" -lt $((delay * 800)) ] || fail "async waited ${asy} us for the log"
echo "ok: ycsb --data-dir without --durability runs sync, as its help says"

for how in "--spin-us 0" "env"; do
  if [ "$how" = env ]; then
    out=$(LOTUS_NET_SPIN_US=0 timeout 60 "$L" netbench --outstanding 1 --seconds 0.3 --json 2>&1)
  else
    out=$(timeout 60 "$L" netbench $how --outstanding 1 --seconds 0.3 --json 2>&1)
  fi || fail "netbench ($how): exit $?: $out"
  echo "$out" | $PY -c 'import json,sys; r=json.load(sys.stdin)["runs"]; assert r and r[0]["round_trips"] > 0' ||
    fail "netbench ($how) printed: $out"
  echo "ok: netbench spin 0 ($how) runs"
done
"$L" netbench --help 2>&1 | grep -- '--spin-us' | grep -q '0:' || fail "netbench --help does not say what --spin-us 0 does"
echo ok
