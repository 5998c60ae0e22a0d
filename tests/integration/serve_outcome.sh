#!/usr/bin/env bash
# timeout: 120
# A failed commit never says "nothing was applied" about a transaction that
# was applied (issue 20, item 2).  Two durable memory servers (sync), `lotus
# serve` on them, and two kinds of client counting at once:
#   - redis-py, THREADS connections, each adding 1 to its own three counters
#     with MULTI / INCR a / INCR b / INCR c / EXEC in a loop;
#   - lease-client count (the public C API), adding 1 to its own counters
#     per transaction and classifying each commit as lotus.h says.
# Memory server 1 is killed (-9) while they run and restarted 2.5 s later,
# CYCLES times (default 3).
# Then every counter must lie in [acknowledged, acknowledged + in doubt]:
# an answer "nothing was applied" (serve) / a commit error other than
# LOTUS_EINDOUBT (C API) must really not have been applied, and the three
# counters of a MULTI must be equal.  Before the fix serve answered
# "...; nothing was applied" for EXECs that the resolver then committed, so
# counters ended above what was acknowledged.
. "$(dirname "$0")/lib.sh"
C=$(dirname "$L")/lease-client
/usr/bin/python3 -c 'import redis' 2>/dev/null || { echo "SKIP: python3-redis not installed"; exit 77; }
[ -x "$C" ] || { echo "SKIP: no lease-client next to $L"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
. "$(dirname "$0")/../../scripts/lib-serve.sh"
py= cc=
cleanup() {
  [ -z "$py" ] || kill -9 "$py" 2>/dev/null
  [ -z "$cc" ] || kill -9 "$cc" 2>/dev/null
  serve_stop >/dev/null 2>&1
  cluster_stop
  rm -rf "$dir"
}
at_exit cleanup
threads=${THREADS:-8}
cycles=${CYCLES:-3}
run_s=$((2 + cycles * 5))

CLUSTER_DATA=$dir/data CLUSTER_DURABILITY=sync   # for cluster_restart too
cluster_start "$dir" 2 --threads 1 --memory 64M \
  || fail "memory servers did not start"
serve_start "$dir" --config "$CLUSTER_INI" --threads 1 || fail "serve did not start"

cat >"$dir/count.py" <<'PY'
import sys, time, threading
import redis
port, nthreads, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
res = [None] * nthreads

def connect():
    c = redis.Connection(host="127.0.0.1", port=port, socket_timeout=40)
    c.connect()
    return c

def worker(i):
    keys = ["oc%d:%s" % (i, k) for k in "abc"]
    acked = doubt = notapplied = 0
    odd = []
    c = None
    end = time.time() + secs
    n = 0
    while time.time() < end and n < 100000:
        n += 1
        sent = False
        try:
            if c is None:
                c = connect()
            c.send_command("MULTI")
            c.read_response()
            for k in keys:
                c.send_command("INCR", k)
                c.read_response()
            c.send_command("EXEC")
            sent = True
            r = c.read_response()
            if len(set(r)) != 1:
                odd.append("EXEC answered %r" % (r,))
            acked += 1
        except redis.exceptions.ResponseError as e:
            m = str(e)
            if not sent:
                odd.append("before EXEC: " + m)
            elif m.startswith("UNKNOWN"):
                doubt += 1
            elif "nothing was applied" in m:
                notapplied += 1
            else:
                odd.append(m)
                doubt += 1
            if not sent:
                c.disconnect()
                c = None
            time.sleep(0.02)   # a failing cluster: do not spin
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
            if sent:
                doubt += 1     # the answer is lost: so is the outcome
            c = None
            time.sleep(0.1)
    res[i] = (keys, acked, doubt, notapplied, odd)

ts = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
[t.start() for t in ts]
[t.join() for t in ts]
r = redis.Redis(host="127.0.0.1", port=port, socket_timeout=40)
bad = 0
for keys, acked, doubt, notapplied, odd in res:
    vals = None
    for _ in range(80):     # until what the servers settle is readable
        try:
            vals = [int(v or 0) for v in r.mget(keys)]
            break
        except redis.exceptions.RedisError:
            time.sleep(0.5)
    print("%s: acked %d, in doubt %d, not applied %d, final %r%s" % (
        keys[0][:-2], acked, doubt, notapplied, vals, (", odd: %r" % odd[:3]) if odd else ""))
    if vals is None:
        print("FAIL: %s could not be read" % keys[0]); bad = 1; continue
    if len(set(vals)) != 1:
        print("FAIL: a MULTI was applied in part: %r" % vals); bad = 1
    if not acked <= vals[0] <= acked + doubt:
        print("FAIL: %s is %d, outside [acked %d, acked + in doubt %d]%s" % (
            keys[0][:-2], vals[0], acked, acked + doubt,
            ": an EXEC answered 'nothing was applied' was applied" if vals[0] > acked + doubt
            else ": an acknowledged EXEC was lost"))
        bad = 1
sys.exit(bad)
PY

/usr/bin/python3 "$dir/count.py" "$SERVE_PORT" "$threads" "$run_s" >"$dir/py.out" 2>"$dir/py.err" &
py=$!
"$C" count "$CLUSTER_INI" wound_wait 3 "$run_s" >"$dir/c.out" 2>"$dir/c.err" &
cc=$!
sleep 1.5
for ((i = 0; i < cycles; i++)); do
  sleep "0.$((RANDOM % 10))"
  cluster_kill 1
  sleep 2.5
  cluster_restart 1 || fail "server 1 did not restart: $(tail -n 3 "$dir/ms1.err")"
  sleep 1.5
done
wait "$py"; prc=$?; py=
wait "$cc"; crc=$?; cc=
cat "$dir/py.out"
[ $prc -eq 0 ] || fail "redis-py clients (exit $prc): $(grep FAIL "$dir/py.out" | head -3) $(tail -n 3 "$dir/py.err")"

# the C API client: the same bounds
line=$(tail -n 1 "$dir/c.out")
echo "C API: $line"
[ $crc -eq 0 ] || fail "lease-client count exit $crc: $line $(tail -n 3 "$dir/c.err")"
set -- $line
[ "$1 $3 $5 $7" = "acked doubt notapplied final" ] || fail "lease-client count printed: $line"
acked=$2 doubt=$4 v=$8
[ "$v" = "$9" ] && [ "$v" = "${10}" ] || fail "C API: a transaction was applied in part: $line"
[ "$v" -ge "$acked" ] || fail "C API: counter $v below the $acked acknowledged commits"
[ "$v" -le $((acked + doubt)) ] \
  || fail "C API: counter $v above acknowledged + in doubt ($acked + $doubt): a commit reported as not applied was applied"
kill -0 "$SERVE_PID" || fail "serve died"
echo "ok: no 'not applied' answer was applied; $(cat "$dir"/ms*.err | grep -c resolved) resolver" \
     "decisions, $(cat "$dir/serve.err" "$dir/c.err" | grep -c 'after a lost vote') commits" \
     "confirmed by asking the writers"
