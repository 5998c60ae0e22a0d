#!/usr/bin/env bash
# timeout: 90
# WATCH through redis-py (python3-redis), as an application uses it:
# r.transaction() from 4 threads x 100 read-modify-write increments of one
# counter ends at exactly 400 (a lost update would show as less); EXEC after
# a watched key was changed by another client answers nil (WatchError) and
# applies nothing, also when the change wrote the same value back (a version,
# not a value, is compared: no ABA), and when the key was deleted or its hash
# member changed; an unchanged watched key, UNWATCH, or a change made before
# WATCH let EXEC run.  Then redis-py's own data-type calls, with a TTL.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import redis' 2>/dev/null || { echo "SKIP: python3-redis not installed"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

cat >"$dir/t.py" <<'PY'
import sys, threading, time
import redis
port = int(sys.argv[1])
def conn():
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=20)
def check(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)
r = conn()

r.set("cnt", 0)
errors = []
def work():
    c = conn()
    try:
        for _ in range(100):
            def inc(p):
                v = int(p.get("cnt"))
                p.multi()
                p.set("cnt", v + 1)
            c.transaction(inc, "cnt")
    except Exception as e:
        errors.append(repr(e))
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
check(not errors, "transaction errors: %s" % errors[:3])
check(r.get("cnt") == b"400", "4 x 100 r.transaction() increments gave %r" % r.get("cnt"))
print("ok: 4 threads x 100 r.transaction() = 400")

def watched(key, change):
    """EXEC's outcome after WATCH key, change(), MULTI, SET out 1."""
    r.delete("out")
    p = r.pipeline()
    p.watch(key)
    change()
    p.multi()
    p.set("out", 1)
    try:
        p.execute()
        ok = True
    except redis.WatchError:
        ok = False
    check(ok == (r.get("out") == b"1"), "EXEC's answer and its effect disagree")
    return ok

r.set("w", "a")
check(not watched("w", lambda: conn().set("w", "b")), "a changed value did not fail EXEC")
check(not watched("w", lambda: conn().set("w", "b")), "the same value written back (ABA) did not fail EXEC")
check(not watched("w", lambda: conn().delete("w")), "a deleted key did not fail EXEC")
check(not watched("nokey", lambda: conn().set("nokey", 1)), "a created key did not fail EXEC")
r.hset("wh", "f", 1)
check(not watched("wh", lambda: conn().hset("wh", "g", 2)), "a new hash member did not fail EXEC")
check(watched("w", lambda: conn().set("other", 1)), "EXEC failed with the watched key unchanged")
p = r.pipeline(); p.watch("w"); conn().set("w", "c"); p.unwatch(); p.multi(); p.set("out", 2)
check(p.execute() == [True], "EXEC after UNWATCH")
print("ok: WATCH: changed (also to the same value), deleted, created -> nil; unchanged, UNWATCH -> runs")

# redis-py's calls for the types, and a TTL
r.delete("h", "l", "s", "z")
check(r.hset("h", mapping={"a": 1, "b": 2}) == 2 and r.hgetall("h") == {b"a": b"1", b"b": b"2"}, "hash")
check(r.rpush("l", *range(10)) == 10 and r.lrange("l", 2, 4) == [b"2", b"3", b"4"], "list")
check(r.sadd("s", "x", "y") == 2 and r.smembers("s") == {b"x", b"y"}, "set")
check(r.zadd("z", {"p": 1.5, "q": 0.5}) == 2 and r.zrange("z", 0, -1, withscores=True) == [(b"q", 0.5), (b"p", 1.5)], "zset")
check(r.set("t", "v", px=300) and 0 < r.pttl("t") <= 300, "SET PX")
for _ in range(40):
    if r.get("t") is None:
        break
    time.sleep(0.1)
check(r.get("t") is None and r.exists("t") == 0, "SET PX 300 did not expire")
print("ok: redis-py hash/list/set/zset calls, SET PX expires")
PY

serve_start "$dir" --local 2 --threads 2 || fail "serve did not start"
timeout 80 /usr/bin/python3 "$dir/t.py" "$SERVE_PORT" || fail "redis-py WATCH checks failed"
echo "serve_watch: all ok"
