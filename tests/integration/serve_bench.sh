#!/usr/bin/env bash
# timeout: 120
# redis-benchmark -t set,get,incr,mset -P 16 completes with no errors against
# `lotus serve --local 2`: on its default single key per test (every client
# on one hot key) and with -r over a key space; the INCR counter afterwards
# equals the number of INCRs sent.
. "$(dirname "$0")/lib.sh"
command -v redis-benchmark >/dev/null || { echo "SKIP: redis-benchmark (redis-tools) not installed"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'
serve_start "$dir" --local 2 || fail "serve did not start"

run() {
  local out
  out=$(timeout 60 redis-benchmark -p "$SERVE_PORT" -t set,get,incr,mset -P 16 -c 10 -q "$@" 2>&1) \
    || fail "redis-benchmark $* exited $?: $out"
  echo "$out" | tr '\r' '\n' | grep -E 'requests per second' | sed 's/^/  /'
  echo "$out" | grep -qi 'error' && fail "redis-benchmark $* reported errors: $out"
  [ "$(echo "$out" | tr '\r' '\n' | grep -c 'requests per second')" -eq 4 ] ||
    fail "redis-benchmark $*: not 4 results: $out"
  echo "ok: redis-benchmark $*"
}
run -n 2000
[ "$(redis-cli -p "$SERVE_PORT" GET counter:__rand_int__)" = 2000 ] ||
  fail "hot counter is $(redis-cli -p "$SERVE_PORT" GET counter:__rand_int__), want 2000"
run -n 4000 -r 1000 -d 100
redis-cli -p "$SERVE_PORT" INFO lotus | grep -E "txn_(committed|retried|failed)|requests_per_msg"
[ "$(redis-cli -p "$SERVE_PORT" INFO lotus | sed -n 's/lotus_txn_failed:\([0-9]*\).*/\1/p')" = 0 ] ||
  fail "transactions failed"
serve_stop || fail "serve exited $? on SIGTERM"
echo PASS
