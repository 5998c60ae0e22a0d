#!/usr/bin/env bash
# timeout: 120
# `lotus serve` used by redis-py (python3-redis): 4 threads x 200 INCR on one
# key end at exactly 800; pipeline(transaction=True) is one atomic
# transaction and pipeline(transaction=False) sees its own writes in order;
# concurrent bank transfers (MULTI: DECRBY + INCRBY) preserve the total, and
# a reader's MGET of every account always sees that total; binary keys and
# values round-trip.  Run with 2 event-loop threads, under each protocol.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import redis' 2>/dev/null || { echo "SKIP: python3-redis not installed"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

cat >"$dir/t.py" <<'PY'
import sys, threading, random
import redis
port = int(sys.argv[1])
def conn():
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)
def check(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)

r = conn()
check(r.ping(), "ping")

# 4 threads x 200 INCR on one key
r.delete("ctr")
def incr():
    c = conn()
    for _ in range(200):
        c.incr("ctr")
ts = [threading.Thread(target=incr) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
check(r.get("ctr") == b"800", "4x200 INCR gave %r" % r.get("ctr"))
print("ok: 4 threads x 200 INCR = 800")

# pipeline(transaction=True): MULTI/EXEC, read-your-writes inside
p = r.pipeline(transaction=True)
p.set("p", 5).incr("p").incrby("p", 10).get("p").mset({"q1": "a", "q2": "b"}).mget("q1", "q2", "nope")
res = p.execute()
check(res == [True, 6, 16, b"16", True, [b"a", b"b", None]], "transaction pipeline: %r" % res)
# and pipelined without MULTI: each reply in order, later commands see earlier ones
p = r.pipeline(transaction=False)
p.set("np", 1).incr("np").append("np", "x").get("np").delete("np").exists("np").incr("np")
res = p.execute()
check(res == [True, 2, 2, b"2x", 1, 0, 1], "plain pipeline: %r" % res)
print("ok: pipelines")

# binary keys and values
val = bytes(range(256)) * 4
key = b"bin\x00\r\n\xff"
r.set(key, val)
check(r.get(key) == val, "binary value")
check(r.strlen(key) == 1024, "binary strlen")
print("ok: binary keys and values")

# bank: transfers between accounts under concurrency keep the total
N, OPEN = 10, 100
accts = ["acct:%d" % i for i in range(N)]
r.mset({a: OPEN for a in accts})
stop = threading.Event()
bad = []
def transfers(seed):
    c = conn(); rnd = random.Random(seed)
    for _ in range(150):
        a, b = rnd.sample(accts, 2)
        x = rnd.randint(1, 20)
        p = c.pipeline(transaction=True)
        p.decrby(a, x).incrby(b, x)
        p.execute()
def reader():
    c = conn()
    while not stop.is_set():
        vals = c.mget(accts)
        tot = sum(int(v) for v in vals)
        if tot != N * OPEN:
            bad.append(tot)
ts = [threading.Thread(target=transfers, args=(i,)) for i in range(4)]
rd = threading.Thread(target=reader)
rd.start(); [t.start() for t in ts]; [t.join() for t in ts]
stop.set(); rd.join()
total = sum(int(v) for v in r.mget(accts))
check(total == N * OPEN, "bank total %d, want %d" % (total, N * OPEN))
check(not bad, "a reader saw totals %r" % bad[:5])
print("ok: 600 concurrent transfers keep the total at %d; every MGET saw it" % total)

# errors come back as redis-py exceptions, the connection keeps working
try:
    r.execute_command("SET", "k", "v", "EX", "0"); check(False, "SET EX 0 accepted")
except redis.ResponseError as e:
    check("invalid expire time" in str(e), "SET EX 0 error: %s" % e)
check(r.set("k", "v") and r.get("k") == b"v", "after an error")
print("PASS")
PY

for cc in no_wait wait_die wound_wait; do
  serve_start "$dir" --local 2 --threads 2 --cc $cc || fail "serve did not start"
  echo "--- cc $cc"
  /usr/bin/python3 "$dir/t.py" "$SERVE_PORT" || fail "redis-py under $cc (serve log: $(tail -3 "$dir/serve.err"))"
  redis-cli -p "$SERVE_PORT" INFO lotus | grep -E "txn_(committed|retried|failed)|requests_per_msg"
  serve_stop || fail "serve exited $? on SIGTERM"
done
echo PASS
