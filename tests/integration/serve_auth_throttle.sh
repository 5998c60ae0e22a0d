#!/usr/bin/env bash
# timeout: 90
# `lotus serve --requirepass`: wrong AUTH guesses are throttled.  In 2 s a
# client gets only a few answers to wrong AUTH (or HELLO ... AUTH) guesses:
# asked one at a time, pipelined by the thousand, or spread over 20
# connections from one address.  The right password from another address is
# answered at once; from the guessing address it still works after a while
# (the throttle slows it, it does not lock it out).
. "$(dirname "$0")/lib.sh"
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

serve_start "$dir" --local 1 --requirepass 'right horse' || fail "serve did not start"
$PY - "$SERVE_PORT" <<'PYEOF' || fail "see above"
import select, socket, sys, time
port = int(sys.argv[1])
bad = []
WRONG = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
def connect(src="127.0.0.1"):
    s = socket.socket()
    s.bind((src, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    return s
def auth(i, pw):
    pw = pw.encode()
    if i % 2:   # HELLO 2 AUTH default PW
        return b"*5\r\n$5\r\nHELLO\r\n$1\r\n2\r\n$4\r\nAUTH\r\n$7\r\ndefault\r\n$%d\r\n%s\r\n" % (len(pw), pw)
    return b"*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n" % (len(pw), pw)

# one at a time on one connection
s = connect()
n, t0 = 0, time.time()
while time.time() - t0 < 2:
    s.sendall(auth(n, "guess%d" % n))
    s.settimeout(max(0.01, 2 - (time.time() - t0)))
    try:
        r = s.recv(200)
    except socket.timeout:
        break
    if r != WRONG:
        sys.exit("FAIL: a wrong guess got %r" % r)
    n += 1
s.close()
print("one connection, one guess at a time: %d wrong guesses answered in 2 s" % n)
if n >= 20:
    bad.append("%d guesses in 2 s on one connection" % n)

def count_answers(socks, seconds):
    got, t0 = 0, time.time()
    while time.time() - t0 < seconds:
        ready, _, _ = select.select(socks, [], [], 0.05)
        for x in ready:
            try:
                got += x.recv(1 << 16).count(b"WRONGPASS")
            except OSError:
                pass
    return got

# pipelined: 2,000 guesses sent at once
s = connect("127.0.0.4")
s.sendall(b"".join(auth(0, "p%d" % i) for i in range(2000)))
n = count_answers([s], 2)
s.close()
print("one connection, 2,000 guesses pipelined: %d answered in 2 s" % n)
if n >= 20:
    bad.append("%d pipelined guesses answered in 2 s" % n)

# 20 connections from one address, each guessing again as soon as answered
socks = [connect("127.0.0.3") for i in range(20)]
got, t0 = 0, time.time()
for x in socks:
    x.sendall(auth(0, "first"))
while time.time() - t0 < 2:
    ready, _, _ = select.select(socks, [], [], 0.05)
    for x in ready:
        k = x.recv(4096).count(b"WRONGPASS")
        got += k
        if k:
            x.sendall(auth(0, "again"))
print("20 connections from one address: %d wrong guesses answered in 2 s" % got)
if got >= 100:
    bad.append("%d guesses in 2 s over 20 connections" % got)

# the right password from an address without failures: at once
s = connect("127.0.0.2")
t0 = time.time()
s.sendall(auth(0, "right horse") + b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
r = b""
while r.count(b"\r\n") < 2 and time.time() - t0 < 10:
    r += s.recv(200)
dt = time.time() - t0
print("the right password from a fresh address: %r in %.3f s" % (r, dt))
if r != b"+OK\r\n$-1\r\n" or dt > 1.0:
    bad.append("right password from a fresh address: %r after %.2f s" % (r, dt))
s.close()

# ... and from the guessing address, on a new connection: slowed, not refused
s = connect("127.0.0.3")
t0 = time.time()
s.sendall(auth(0, "right horse"))
r = s.recv(200)
dt = time.time() - t0
print("the right password from the guessing address: %r in %.2f s" % (r, dt))
if r != b"+OK\r\n" or dt > 8:
    bad.append("right password from the guessing address: %r after %.2f s" % (r, dt))
for x in socks:
    x.close()
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PYEOF
kill -0 "$SERVE_PID" 2>/dev/null || fail "serve died"
# redis-py from 127.0.0.1, which guessed above: its AUTH is slowed (by 3.2 s
# at most), within redis-py's timeout
$PY -c '
import redis, sys
r = redis.Redis(host="127.0.0.1", port=int(sys.argv[1]), password="right horse", socket_timeout=10)
assert r.set("k", "v") and r.get("k") == b"v"
print("ok: redis-py with the right password")
' "$SERVE_PORT" || fail "redis-py with the right password"
serve_stop || fail "serve exited $? on SIGTERM"
echo PASS
