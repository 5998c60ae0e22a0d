#!/usr/bin/env bash
# timeout: 90
# Malformed RESP sent to a live `lotus serve`: huge and bad lengths, missing
# CRLFs, binary garbage, random bytes on many connections at once, commands
# cut off mid-way, clients that pipeline writes and vanish without reading.
# Each bad connection gets "-ERR Protocol error" and is closed; a good client
# running INCR meanwhile gets every reply right; the server stays up.
. "$(dirname "$0")/lib.sh"
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'
serve_start "$dir" --local 1 --threads 2 || fail "serve did not start"

cat >"$dir/f.py" <<'PY'
import os, random, socket, sys, threading, time
port = int(sys.argv[1]); seed = int(sys.argv[2]); rnd = random.Random(seed)
print("seed", seed)
def fail(m):
    print("FAIL:", m); sys.exit(1)
def conn():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return s
def read_all(s, limit=1 << 20):
    out = b""
    while len(out) < limit:
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            break
        if not d:
            return out, True
        out += d
    return out, False

def expect_closed(payload, what):
    s = conn()
    try:
        s.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        pass
    out, closed = read_all(s)
    s.close()
    if not closed:
        fail("%s: connection not closed (got %r)" % (what, out[:80]))
    if b"-ERR Protocol error" not in out:
        fail("%s: no protocol error reply (got %r)" % (what, out[:80]))
    print("ok: %s -> %s" % (what, out.split(b"\r\n")[-2][:70].decode(errors="replace")))

expect_closed(b"*1\r\n$999999999999\r\n", "huge bulk length")
expect_closed(b"*1\r\n$2147483648\r\n", "bulk length over 8 MiB")
expect_closed(b"*99999999\r\n", "huge multibulk count")
expect_closed(b"*abc\r\n", "non-numeric multibulk count")
expect_closed(b"*1\r\n$-7\r\n", "negative bulk length")
expect_closed(b"*2\r\n$3\r\nGETxx$1\r\nk\r\n", "payload without CRLF")
expect_closed(b"*1\r\n%3\r\nabc\r\n", "not a bulk")
expect_closed(b"PING\r\n\x00\x01\x02\xff\xfe garbage\r\n", "binary garbage inline")
expect_closed(b"SET k v\r\n" * 3 + b"*1\r\n$x\r\n", "a bad command after good ones")

# the good ones before it were answered first
s = conn(); s.sendall(b"SET g 1\r\nGET g\r\n*1\r\n$x\r\n")
out, closed = read_all(s); s.close()
if not out.startswith(b"+OK\r\n$1\r\n1\r\n-ERR Protocol error") or not closed:
    fail("replies before the protocol error: %r" % out)
print("ok: commands before a protocol error are answered first")

# a good client keeps working while garbage flies on other connections
errors = []
def good():
    s = conn(); f = s.makefile("rb")
    s.sendall(b"DEL fz\r\n"); f.readline()
    for i in range(1, 401):
        s.sendall(b"*2\r\n$4\r\nINCR\r\n$2\r\nfz\r\n")
        line = f.readline()
        if line != b":%d\r\n" % i:
            errors.append((i, line)); return
    s.close()
def garbage(k):
    r = random.Random(seed * 100 + k)
    for _ in range(40):
        try:
            s = conn()
            kind = r.randrange(4)
            if kind == 0:
                data = bytes(r.randrange(256) for _ in range(r.randrange(1, 3000)))
            elif kind == 1:
                data = b"*3\r\n$3\r\nSET\r\n$%d\r\n" % r.randrange(0, 1 << 40)
            elif kind == 2:   # a command cut off, then the socket closes
                full = b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"
                data = full[:r.randrange(1, len(full))]
            else:             # pipelined writes, then vanish without reading
                data = b"*3\r\n$3\r\nSET\r\n$2\r\nzz\r\n$1\r\n1\r\n" * r.randrange(1, 200)
            s.sendall(data)
            if r.randrange(2):
                s.settimeout(2)
                try:
                    s.recv(100)
                except Exception:
                    pass
            s.close()
        except OSError:
            pass
ts = [threading.Thread(target=garbage, args=(k,)) for k in range(6)]
g = threading.Thread(target=good)
g.start(); [t.start() for t in ts]; [t.join() for t in ts]; g.join()
if errors:
    fail("the good client got a wrong reply: %r" % errors[:3])
print("ok: 400 INCRs answered right while 240 garbage connections came and went")
# a slow reader: 3000 pipelined GETs of a 4000-byte value (12 MB of replies,
# past the server's 4 MiB output pause) sent before reading anything
s = conn(); s.sendall(b"SET big " + b"b" * 4000 + b"\r\n"); s.recv(10)
def send_gets():
    s.sendall(b"GET big\r\n" * 3000)
st = threading.Thread(target=send_gets); st.start()
time.sleep(1.0)
want = 3000 * len(b"$4000\r\n" + b"b" * 4000 + b"\r\n"); got = 0
s.settimeout(20)
while got < want:
    d = s.recv(1 << 20)
    if not d:
        fail("slow reader: closed after %d of %d bytes" % (got, want))
    got += len(d)
st.join(); s.close()
if got != want:
    fail("slow reader: %d bytes, want %d" % (got, want))
print("ok: a slow reader gets all 3000 replies (%d bytes)" % got)
s = conn(); s.sendall(b"GET fz\r\nINFO stats\r\n")
time.sleep(0.3); out = s.recv(65536); s.close()
if not out.startswith(b"$3\r\n400\r\n"):
    fail("final value: %r" % out[:40])
print("PASS")
PY
/usr/bin/python3 "$dir/f.py" "$SERVE_PORT" "${LOTUS_FUZZ_SEED:-$RANDOM}" || fail "live fuzz (serve log: $(tail -3 "$dir/serve.err"))"
kill -0 "$SERVE_PID" || fail "lotus serve died"
[ "$(redis-cli -p "$SERVE_PORT" PING)" = PONG ] || fail "no PONG after the fuzzing"
redis-cli -p "$SERVE_PORT" INFO stats | grep protocol_errors
serve_stop || fail "serve exited $? on SIGTERM"
echo PASS
