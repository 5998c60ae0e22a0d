#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (the malloc-counting shim replaces malloc, which the sanitizer runtimes own)
# No allocation per request on the fast path (docs/net.md, "Buffers and
# pools"): a memory server and a YCSB C client, each under the
# malloc-counting LD_PRELOAD shim (scripts/malloc-count.c), over sm and tcp,
# with one request per message (--batch none: the cost per message) and as
# scripts/bench-percore runs it (--batch inter, 16 transactions in flight).
# Two runs of different length (--txns N and 3N) against one loaded server;
# the difference in allocations over the difference in requests cancels the
# set-up (connecting, the session, the load), so what is left is the cost
# per request.  Both the server and the client must stay at or below 0.05
# allocations per request.
. "$(dirname "$0")/lib.sh"
SHIM=${MALLOC_COUNT_SO:-$(cd "$(dirname "$L")/.." && pwd)/lib/malloc-count.so}
[ -f "$SHIM" ] || fail "no $SHIM (make builds it)"
MAX=${ALLOC_MAX_PER_REQ:-0.05}
SIG=12   # SIGUSR2: the shim writes the server's count to its file
SPID=""
stop_server() {
  [ -z "$SPID" ] || { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
  SPID=""
}
at_exit stop_server

# sample FILE: ask the server for its count, wait for the line, print the count
sample() {
  local f=$1 before i
  before=$(wc -l <"$f" 2>/dev/null || echo 0)
  kill -$SIG "$SPID" || fail "memory server gone"
  for i in $(seq 200); do
    [ "$(wc -l <"$f" 2>/dev/null || echo 0)" -gt "$before" ] && break
    sleep 0.05
  done
  tail -n 1 "$f" | sed -n 's/.* allocs \([0-9]*\)$/\1/p'
}

for tr in sm tcp; do
  : >"$T/ms.$tr.cnt"
  LD_PRELOAD=$SHIM MALLOC_COUNT_OUT=$T/ms.$tr.cnt MALLOC_COUNT_SIGNAL=$SIG \
    "$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 256M --transport $tr \
      --ready-json >"$T/ms.$tr.out" 2>"$T/ms.$tr.err" &
  SPID=$!
  for i in $(seq 200); do
    grep -q ready "$T/ms.$tr.out" 2>/dev/null && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.05
  done
  grep -q ready "$T/ms.$tr.out" || fail "$tr: memory server did not start: $(tail -n 3 "$T/ms.$tr.err")"
  port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$T/ms.$tr.out")
  printf '[cluster]\ntransport = %s\n[memserver 0]\nlisten = 127.0.0.1:%s\n' $tr "$port" >"$T/c.ini"
  Y() { "$L" ycsb --config "$T/c.ini" --records 5000 --threads 1 --record-size 1024 --quiet "$@"; }
  Y --no-run >/dev/null 2>"$T/load.err" || fail "$tr: load: $(tail -n 3 "$T/load.err")"
  # batch, transactions in flight, --txns of the shorter run
  for mode in "none 4 300" "inter 16 600"; do
  set -- $mode
  B=(--batch $1 --inflight $2); N=$3
  rm -f "$T/$tr.runs"
  for n in $N $((N * 3)); do
    a=$(sample "$T/ms.$tr.cnt")
    rm -f "$T/cl.cnt"
    LD_PRELOAD=$SHIM MALLOC_COUNT_OUT=$T/cl.cnt Y "${B[@]}" --no-load --workload C --txns $n --json \
      >"$T/y.$n.json" 2>"$T/y.$n.err" || fail "$tr: ycsb --txns $n: $(tail -n 3 "$T/y.$n.err")"
    b=$(sample "$T/ms.$tr.cnt")
    c=$(sed -n 's/.* allocs \([0-9]*\)$/\1/p' "$T/cl.cnt" | tail -n 1)
    r=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["servers"]["requests"])' "$T/y.$n.json")
    [ -n "$a" ] && [ -n "$b" ] && [ -n "$c" ] && [ -n "$r" ] || fail "$tr: no counts (server $a..$b, client $c, requests $r)"
    echo "$n $((b - a)) $c $r" >>"$T/$tr.runs"
  done
  $PY - "$tr --batch $1 --inflight $2" "$MAX" "$T/$tr.runs" <<'PY' || fail "$tr --batch $1: over $MAX allocations per request"
import sys
what, mx = sys.argv[1], float(sys.argv[2])
(n1, s1, c1, r1), (n2, s2, c2, r2) = [map(int, l.split()) for l in open(sys.argv[3])]
srv, cli = (s2 - s1) / (r2 - r1), (c2 - c1) / (r2 - r1)
print("%s: %d more requests: server %.4f allocations per request, client %.4f (limit %.2f)"
      % (what, r2 - r1, srv, cli, mx))
sys.exit(0 if srv <= mx and cli <= mx else 1)
PY
  done
  stop_server
done
