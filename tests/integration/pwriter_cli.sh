#!/usr/bin/env bash
# `lotus memserver --capacity / --page-writers`: usage errors (exit 2, one
# line); a server holding 3x its --memory (capacity and page_writers from the
# config) whose page writer 1 loses its io_uring ring mid-run
# (LOTUS_PW_FAULT) and whose eviction writes fail for a while
# (LOTUS_TIER_FAULT) serves the same data as a server all in memory, through
# a clean stop (registrations/clones/fallbacks in its exit line) and a
# kill -9 with lazy recovery; checkpoints (every 4M of log, written by the
# page writers) run meanwhile.
# timeout: 120
. "$(dirname "$0")/lib.sh"
dir=$T
pid=
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
at_exit cleanup

expect2() {
  local out rc
  out=$("$L" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "lotus $* exited $rc, want 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "lotus $*: want one line, got: $out"
  echo "ok: lotus $* -> $out"
}
expect2 memserver --listen 127.0.0.1:0 --memory 16M --capacity 1G
expect2 memserver --listen 127.0.0.1:0 --memory 16M --capacity 1G --data-dir "$dir/x" --durability none
expect2 memserver --listen 127.0.0.1:0 --memory 64M --capacity 16M --data-dir "$dir/x"
expect2 memserver --listen 127.0.0.1:0 --memory 16M --capacity 1G --data-dir "$dir/x" --page-writers 0
expect2 memserver --listen 127.0.0.1:0 --memory 16M --capacity lots --data-dir "$dir/x"
expect2 memserver --listen 127.0.0.1:0 --memory 16K --capacity 1M --data-dir "$dir/x"
printf '[memserver 0]\nlisten = 127.0.0.1:7000\nmemory = 16M\ncapacity = 1G\n' >"$dir/nodir.ini"
expect2 memserver --config "$dir/nodir.ini" --id 0
expect2 ycsb --local 1 --server-capacity 1G --server-memory 16M
[ -d "$dir/x" ] && fail "a refused start created $dir/x"

# The server: 16M of frames, 256M of pages, 3 page writers (from the config);
# on a sanitizer build, where loading is several times slower, half of each
# (8M, 128M, 20000 records): still 3x the pool.
mem=16M cap=256M frames=2047 pages=32768 records=40000 min_misses=3000
case ${LOTUS_BUILD:-} in *asan*|*tsan*)
  mem=8M cap=128M frames=1023 pages=16384 records=20000 min_misses=1500 ;;
esac
printf '[cluster]\ntransport = tcp\n\n[memserver 0]\nlisten = 127.0.0.1:7000\nthreads = 2\nmemory = %s\ncapacity = %s\npage_writers = 3\ndata_dir = %s/ms0\n' "$mem" "$cap" "$dir" >"$dir/s.ini"
start() {   # start [env...]: the server, its port into $dir/c.ini
  env "$@" LOTUS_LOG=info "$L" memserver --config "$dir/s.ini" --id 0 --listen 127.0.0.1:0 --checkpoint-log 4M --init \
    --ready-json >"$dir/ready" 2>>"$dir/err" &
  pid=$!
  for _ in $(seq 200); do grep -q ready "$dir/ready" 2>/dev/null && break; sleep 0.1; done
  local port
  port=$(grep -o '"port":[0-9]*' "$dir/ready" | head -1 | cut -d: -f2)
  [ -n "$port" ] || fail "server did not start: $(tail -5 "$dir/err")"
  printf '[cluster]\ntransport = tcp\n\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" >"$dir/c.ini"
}
Y="nice $L ycsb --records $records --workload A --threads 1 --quiet --json"
digest() { grep -o '"digest":"[0-9a-f]*"' | cut -d'"' -f4; }

start LOTUS_PW_FAULT="1=enter:6" LOTUS_TIER_FAULT="evict:20:ENOSPC:30"
grep -q "tier: $pages logical pages in $frames frames; 3 page writers, pool registered once and cloned into 3 of their rings" "$dir/err" ||
  fail "no tier start line: $(tail -3 "$dir/err")"
d1=$($Y --config "$dir/c.ini" --txns 1500 --seed 9 --digest 2>"$dir/y1") || fail "ycsb 1: $(tail -3 "$dir/y1")"
d1=$(printf '%s' "$d1" | digest)
kill -TERM "$pid"; wait "$pid"; rc=$?; pid=
[ $rc -eq 0 ] || fail "SIGTERM exit $rc: $(tail -3 "$dir/err")"
line=$(grep "tier: .* frames resident" "$dir/err")
echo "ok: $line"
printf '%s' "$line" | grep -q "registrations 1, clones 3, fallbacks 1" || fail "exit line: $line"
printf '%s' "$line" | grep -qE " 30 write errors" || fail "the 30 failed eviction writes: $line"
grep -q "switches to libaio" "$dir/err" || fail "writer 1 did not fall back"
printf '%s' "$line" | grep -qE "pages \([1-9][0-9]* for checkpoints\)" ||
  fail "the checkpoints did not go through the page writers: $line"

start
$Y --config "$dir/c.ini" --no-load --txns 800 --seed 2 >/dev/null 2>"$dir/y2" || fail "ycsb 2: $(tail -3 "$dir/y2")"
kill -9 "$pid"; wait "$pid" 2>/dev/null; pid=
start
grep -q "recovered .* $records records" "$dir/err" || fail "recovery line: $(grep recovered "$dir/err" | tail -1)"
d2=$($Y --config "$dir/c.ini" --no-load --no-run --digest 2>"$dir/y3" | digest) || fail "ycsb 3"
kill -TERM "$pid"; wait "$pid"; pid=
# lazy recovery: 5715 pages in 2047 frames (2857 in 1023 on a sanitizer
# build) - the digest read the rest on misses
m=$(grep "tier: .* frames resident" "$dir/err" | tail -1 | sed -n 's/.*resident; \([0-9]*\) misses.*/\1/p')
[ -n "$m" ] && [ "$m" -gt $min_misses ] || fail "after recovery: $m misses, want > $min_misses (pages not resident)"
echo "ok: $m misses after the lazy recovery"

# the same two runs against a server with everything in memory; durability
# async: the reference needs the data kept across its clean restart, not a
# sync per commit (a third of the test's time, waiting on fdatasync)
ref=$($Y --local 1 --server-threads 2 --server-memory 256M --data-dir "$dir/ref" --durability async \
      --txns 1500 --seed 9 --digest 2>/dev/null | digest)
r2=$($Y --local 1 --server-threads 2 --server-memory 256M --data-dir "$dir/ref" --durability async \
     --no-load --txns 800 --seed 2 --digest 2>/dev/null | digest)
echo "digests: tiered $d1 then $d2; in memory $ref then $r2"
[ -n "$d1" ] && [ "$d1" = "$ref" ] || fail "after run 1: tiered $d1, in memory $ref"
[ -n "$d2" ] && [ "$d2" = "$r2" ] || fail "after kill -9 and recovery: tiered $d2, in memory $r2"
echo "PASS"
