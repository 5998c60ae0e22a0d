#!/usr/bin/env bash
# timeout: 150
# sanitizers: skip (redis-benchmark's whole default suite is slow under ASan; serve_types covers its commands)
# redis-benchmark's default suite (PING, SET, GET, INCR, LPUSH, RPUSH, LPOP,
# RPOP, SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_100..600, MSET) runs against
# `lotus serve --local 2` with no error reply, every test reports a rate, and
# the list it built reads back whole.
. "$(dirname "$0")/lib.sh"
command -v redis-benchmark >/dev/null || { echo "SKIP: redis-benchmark not installed"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

serve_start "$dir" --local 2 || fail "serve did not start"
timeout 120 redis-benchmark -p "$SERVE_PORT" -n 1000 -c 10 -q >"$dir/bench.out" 2>&1 ||
  fail "redis-benchmark failed: $(tr '\r' '\n' <"$dir/bench.out" | tail -n 3)"
tr '\r' '\n' <"$dir/bench.out" | grep "requests per second" >"$dir/rates"
cat "$dir/rates"
if tr '\r' '\n' <"$dir/bench.out" | grep -Eiq "error|ERR |WRONGTYPE"; then
  fail "error replies: $(tr '\r' '\n' <"$dir/bench.out" | grep -Ei 'error|ERR |WRONGTYPE' | head -n 3)"
fi
for t in PING_INLINE SET GET INCR LPUSH RPUSH LPOP RPOP SADD HSET SPOP ZADD ZPOPMIN \
         LRANGE_100 LRANGE_300 LRANGE_500 LRANGE_600 MSET; do
  grep -q "^ *$t[ :(]" "$dir/rates" || fail "no rate for $t"
done
n=$(timeout 20 redis-cli -p "$SERVE_PORT" LLEN mylist)
[ "$(timeout 20 redis-cli -p "$SERVE_PORT" LRANGE mylist 0 -1 | wc -l)" = "$n" ] || fail "LRANGE mylist"
echo "serve_suite: all ok ($n items in mylist)"
