#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# A hostile client does not cost the others their data: `lotus bank` runs
# transfers against two memory servers (default limits) while a flood client
# (test_limits flood ...) hits server 0 with parked requests, 15 MiB
# messages, requests for 16 GiB of replies, and a stream of small requests,
# one after another.  The bank must keep committing during each flood, and
# --verify must find the total preserved and every acknowledged transfer
# applied.  (tests/unit/test_limits.c checks each limit's counter.)
. "$(dirname "$0")/lib.sh"
F=$(dirname "$L")/../tests/test_limits
[ -x "$F" ] || fail "no $F (build the tests first)"
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
bank_pid=
at_exit '[ -n "$bank_pid" ] && kill $bank_pid 2>/dev/null; cluster_stop'
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }

cluster_start "$dir" 2 --threads 1 --memory 256M || fail "servers did not start"
port0=${CLUSTER_PORTS[0]}
led="$dir/ledger"
"$L" bank --config "$CLUSTER_INI" --accounts 200 --seconds 0.2 --ledger "$led" --quiet \
  >/dev/null 2>"$dir/init.err" || fail "bank init: $(cat "$dir/init.err")"

# one bank run per flood, each checked to commit
for flood in "park 3000 0 4" "big 30 15728640 4" "amplify 4 0 4" "small 0 0 4"; do
  "$L" bank --config "$CLUSTER_INI" --seconds 4 --threads 2 --inflight 2 --ledger "$led" \
    --json --quiet >"$dir/run.json" 2>"$dir/run.err" &
  bank_pid=$!
  sleep 0.5
  fl=$("$F" flood 127.0.0.1 "$port0" $flood 2>"$dir/flood.err") || fail "flood $flood: $(tail -3 "$dir/flood.err")"
  wait $bank_pid; rc=$?; bank_pid=
  [ $rc = 0 ] || fail "bank during flood '$flood' exited $rc: $(tail -3 "$dir/run.err")"
  c=$(field committed <"$dir/run.json")
  echo "flood $flood: $fl"
  echo "  bank meanwhile: committed $c"
  [ "${c:-0}" -gt 0 ] || fail "bank committed nothing during flood '$flood'"
done

ver=$("$L" bank --config "$CLUSTER_INI" --verify --ledger "$led" --json --quiet) \
  || fail "verify failed: $ver"
echo "verify: $ver"
[ "$(echo "$ver" | field ok)" = true ] || fail "verify not ok"
[ "$(echo "$ver" | field total)" = 200000 ] || fail "total not 200000"
echo "ok"
