#!/usr/bin/env bash
# timeout: 150
# WATCH compares lotus's record versions (lotus_txn_result_version) inside
# EXEC's transaction, not values: `lotus serve` on two durable (sync) memory
# servers of their own, redis-py clients, and a lotus client that is not
# serve (row-rewrite, the public C API):
#   1. ABA through serve: SET k a; WATCH k; another connection SET k b, SET k
#      a; MULTI; SET out 1; EXEC -> nil, out not set;
#   2. another lotus client writes the row's own bytes back (the value, and
#      serve's write stamp in it, unchanged: only the record version moves):
#      EXEC -> nil.  A value or stamp comparison misses this one;
#   3. a key absent at WATCH and still absent, and a watched key nobody
#      wrote, let EXEC run; a rewrite of another key too;
#   4. r.transaction() from 4 threads x 100 increments of one counter gives
#      exactly 400 (bounded: 60 s);
#   5. both memory servers killed (-9) and restarted between WATCH and EXEC:
#      once serve reaches them again, EXEC answers nil: the versions start
#      anew at a restart (it never runs on a key it cannot vouch for); a new
#      WATCH after the restart runs.
. "$(dirname "$0")/lib.sh"
RW=$(dirname "$L")/row-rewrite
/usr/bin/python3 -c 'import redis' 2>/dev/null || { echo "SKIP: python3-redis not installed"; exit 77; }
[ -x "$RW" ] || { echo "SKIP: no row-rewrite next to $L"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
. "$(dirname "$0")/../../scripts/lib-serve.sh"
py=
cleanup() {
  [ -z "$py" ] || kill -9 "$py" 2>/dev/null
  serve_stop >/dev/null 2>&1
  cluster_stop
}
at_exit cleanup

CLUSTER_DATA=$dir/data CLUSTER_DURABILITY=sync
cluster_start "$dir" 2 --threads 1 --memory 64M || fail "memory servers did not start"
serve_start "$dir" --config "$CLUSTER_INI" --threads 2 || fail "serve did not start"

cat >"$dir/t.py" <<'PY'
import os, subprocess, sys, threading, time
import redis
port, ini, rw, phase = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def conn():
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
def check(cond, what):
    if not cond:
        print("FAIL:", what); sys.exit(1)
def rewrite(key):
    p = subprocess.run([rw, ini, "serve", key], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, "row-rewrite %s: rc %d: %s %s" % (key, p.returncode, p.stdout, p.stderr))
r = conn()

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

if phase == "main":
    r.set("k", "a")
    def aba():
        c = conn(); c.set("k", "b"); c.set("k", "a")
    check(not watched("k", aba), "SET k b, SET k a (ABA) after WATCH k did not fail EXEC")
    check(r.get("k") == b"a", "k is not a")
    print("ok: ABA through serve -> nil")
    check(not watched("k", lambda: rewrite("k")), "another lotus client rewriting k's own bytes did not fail EXEC")
    check(r.get("k") == b"a", "the rewrite changed k")
    r.hset("kh", "f", 1)
    check(not watched("kh", lambda: rewrite("kh")), "a rewrite of a hash's row did not fail EXEC")
    print("ok: a rewrite of the same bytes by another lotus client -> nil")
    r.delete("absent")
    check(watched("absent", lambda: conn().get("absent")), "an absent key still absent failed EXEC")
    check(watched("k", lambda: conn().get("k")), "an unchanged watched key failed EXEC")
    r.set("other", "x")
    check(watched("k", lambda: rewrite("other")), "a rewrite of another key failed EXEC")
    print("ok: absent and still absent, unchanged, another key rewritten -> EXEC runs")

    r.set("cnt", 0)
    errors = []
    deadline = time.time() + 60
    def work():
        c = conn()
        try:
            for _ in range(100):
                def inc(p):
                    v = int(p.get("cnt"))
                    p.multi()
                    p.set("cnt", v + 1)
                c.transaction(inc, "cnt")
                if time.time() > deadline:
                    errors.append("over 60 s"); return
        except Exception as e:
            errors.append(repr(e))
    ts = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in ts]; [t.join() for t in ts]
    check(not errors, "transaction errors: %s" % errors[:3])
    check(r.get("cnt") == b"400", "4 x 100 r.transaction() increments gave %r" % r.get("cnt"))
    print("ok: 4 threads x 100 r.transaction() = 400")
elif phase == "restart":
    r.set("rk", "a")
    r.delete("out")
    p = r.pipeline()
    p.watch("rk")
    open(sys.argv[5], "w").close()          # watching: restart the servers now
    for _ in range(600):
        if os.path.exists(sys.argv[6]):
            break
        time.sleep(0.1)
    check(os.path.exists(sys.argv[6]), "the servers were not restarted")
    ok = False                               # serve reconnects to them first
    for _ in range(300):
        try:
            check(conn().get("rk") == b"a", "rk lost across the restart"); ok = True; break
        except (redis.ConnectionError, redis.ResponseError, redis.TimeoutError):
            time.sleep(0.1)
    check(ok, "serve did not reach the restarted memory servers within 30 s")
    p.multi()
    p.set("out", 1)
    try:
        p.execute(); res = "ran"
    except redis.WatchError:
        res = "nil"
    check(res == "nil", "EXEC across a restart of the memory servers: %s" % res)
    check(r.get("out") is None, "EXEC across a restart applied its SET")
    check(r.get("rk") == b"a", "rk lost across the restart")
    check(watched("rk", lambda: conn().get("rk")), "a WATCH after the restart failed EXEC")
    print("ok: EXEC across a restart of both memory servers -> nil; a new WATCH runs")
PY

timeout 120 /usr/bin/python3 "$dir/t.py" "$SERVE_PORT" "$CLUSTER_INI" "$RW" main \
  || fail "WATCH version checks failed"

/usr/bin/python3 "$dir/t.py" "$SERVE_PORT" "$CLUSTER_INI" "$RW" restart "$dir/watching" "$dir/restarted" &
py=$!
for _ in $(seq 300); do [ -e "$dir/watching" ] && break; sleep 0.1; done
[ -e "$dir/watching" ] || fail "the client did not WATCH"
cluster_kill 0; cluster_kill 1
cluster_restart 0 || fail "memory server 0 did not restart"
cluster_restart 1 || fail "memory server 1 did not restart"
touch "$dir/restarted"
rc=0; timeout 90 tail --pid="$py" -f /dev/null || rc=$?
wait "$py"; rc=$?; py=
[ "$rc" = 0 ] || fail "WATCH across a restart failed"
echo "serve_watch_version: all ok"
