#!/usr/bin/env bash
# timeout: 60
# A host program decides where lotus's log lines go (lotus_options.log_fn):
# log-sink (public lotus.h only) connects to a cluster whose memory server
# does not listen, with a sink installed.  The line saying why the session
# cannot open must reach the sink, with its level, and not stderr; after the
# sink's cluster is disconnected, the same failure without a sink logs to
# stderr again.  The sink's line carries the timestamp, tag and level of
# every log line.
. "$(dirname "$0")/lib.sh"
S=$(dirname "$L")/log-sink
[ -x "$S" ] || { echo "no $S"; exit 77; }
dir=$T
# a port nothing listens on: bind one, note it, close it
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
printf '[cluster]\ntransport = tcp\ntimeout_ms = 2000\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" \
  >"$dir/cluster.ini"
"$S" "$dir/cluster.ini" >"$dir/out" 2>"$dir/err"; rc=$?
cat "$dir/out"
echo "stderr:"; cat "$dir/err"
[ $rc -eq 0 ] || fail "log-sink exited $rc: the sink did not get the error line"
grep -q "^sink error .*memory server 0" "$dir/out" || fail "no error line in the sink"
# the sink gets the fields of every log line: UTC timestamp (ms), tag, level
grep -Eq "^sink error [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z [a-z][a-z0-9 ]*: error: .*memory server 0" "$dir/out" \
  || fail "the sink's line lacks the timestamp, tag or level: $(grep '^sink error' "$dir/out" | head -n 1)"
# stderr holds only the second attempt's lines (no sink): each sink line once at most
n_sink=$(grep -c "^sink error .*memory server 0" "$dir/out")
n_err=$(grep -c "error: .*memory server 0" "$dir/err")
[ "$n_err" -ge 1 ] || fail "without a sink, the error did not reach stderr"
[ "$n_err" -le "$n_sink" ] || fail "lines with a sink reached stderr too ($n_err on stderr, $n_sink in the sink)"
echo ok
