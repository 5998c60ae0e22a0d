#!/usr/bin/env bash
# timeout: 60
# Two memory servers must never share a data directory: the second one started
# on a directory in use exits at once with a message naming the directory and
# the owner's pid, and the first keeps working.  After the owner dies (kill -9)
# the lock is gone and a new server starts on the directory.
. "$(dirname "$0")/lib.sh"
top=$T
pids=()
at_exit 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done'
start() {  # start OUT: a durable server on $top/data in the background
  "$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 64M --data-dir "$top/data" --init \
      --ready-json >"$top/$1.out" 2>"$top/$1.err" &
  pids+=($!)
}
ready() { for i in $(seq 200); do grep -q ready "$top/$1.out" 2>/dev/null && return 0; sleep 0.05; done; return 1; }

start a; a=${pids[-1]}
ready a || fail "the first server did not start: $(cat "$top/a.err")"
start b; b=${pids[-1]}
for i in $(seq 100); do kill -0 "$b" 2>/dev/null || break; sleep 0.05; done
kill -0 "$b" 2>/dev/null && fail "a second server runs on the same data directory"
wait "$b"; rc=$?
[ $rc -ne 0 ] || fail "the second server exited 0"
grep -q "data directory $top/data is in use by another memory server (pid $a" "$top/b.err" \
  || fail "no clear message: $(cat "$top/b.err")"
grep -q ready "$top/b.out" && fail "the second server said it was ready"
kill -0 "$a" || fail "the first server died"
port=$(sed 's/.*"port":\([0-9]*\).*/\1/' "$top/a.out")
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" >"$top/c.ini"
"$L" ycsb --config "$top/c.ini" --records 200 --seconds 0.3 --warmup 0 --threads 1 --json \
    >"$top/ycsb.json" 2>"$top/ycsb.err" || fail "the first server stopped serving: $(cat "$top/ycsb.err")"
kill -9 "$a"; wait "$a" 2>/dev/null
start c
ready c || fail "no server starts after the owner died: $(cat "$top/c.err")"
echo "second server refused: $(grep -o 'the data directory.*' "$top/b.err")"
echo ok
