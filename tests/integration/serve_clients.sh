#!/usr/bin/env bash
# timeout: 90
# `lotus serve --max-clients N`: the client after N gets Redis's
# "-ERR max number of clients reached" and is closed (and counted in INFO's
# rejected_connections), the N keep being served, and a client is admitted
# again once one of them closes.  `--timeout S`: a client idle S seconds is
# closed (not before), one that sends a command now and then is not;
# CONFIG GET shows both.
. "$(dirname "$0")/lib.sh"
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

serve_start "$dir" --local 1 --threads 2 --max-clients 3 || fail "serve --max-clients did not start"
$PY - "$SERVE_PORT" <<'PYEOF' || fail "--max-clients"
import socket, sys, time
port = int(sys.argv[1])
def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s
def cmd(s, line):
    s.sendall(line)
    return s.recv(4096)
full = b"-ERR max number of clients reached\r\n"
held = [connect() for i in range(3)]
for s in held:
    r = cmd(s, b"PING\r\n")
    if r != b"+PONG\r\n":
        sys.exit("FAIL: one of the 3 clients got %r" % r)
for i in range(3):   # sends nothing: reads the refusal, then the close
    s = connect()
    r = s.recv(100)
    rest = s.recv(100)
    print("client 4 reads %r, then %r" % (r, rest))
    if r != full or rest != b"":
        sys.exit("FAIL: client over --max-clients 3 read %r then %r" % (r, rest))
    s.close()
r = cmd(held[0], b"INFO clients\r\n") + cmd(held[0], b"INFO stats\r\n")
if b"maxclients:3" not in r or b"rejected_connections:3" not in r:
    sys.exit("FAIL: INFO: %r" % r)
r = cmd(held[1], b"CONFIG GET maxclients\r\n")
if r != b"*2\r\n$10\r\nmaxclients\r\n$1\r\n3\r\n":
    sys.exit("FAIL: CONFIG GET maxclients: %r" % r)
held.pop().close()
ok = False   # admitted again once serve has seen that close
for i in range(100):
    s = connect()
    try:
        ok = cmd(s, b"PING\r\n") == b"+PONG\r\n"
    except OSError:
        ok = False
    s.close()
    if ok:
        break
    time.sleep(0.1)
if not ok:
    sys.exit("FAIL: no client admitted after one of the 3 closed")
print("ok: --max-clients 3 refuses the 4th client with the error, admits one after a close")
PYEOF
serve_stop || fail "serve exited $? on SIGTERM"

serve_start "$dir" --local 1 --timeout 2 || fail "serve --timeout did not start"
$PY - "$SERVE_PORT" <<'PYEOF' || fail "--timeout"
import socket, sys, time
port = int(sys.argv[1])
idle = socket.create_connection(("127.0.0.1", port), timeout=5)
busy = socket.create_connection(("127.0.0.1", port), timeout=5)
for s in (idle, busy):
    s.settimeout(5)
    s.sendall(b"PING\r\n")
    if s.recv(100) != b"+PONG\r\n":
        sys.exit("FAIL: PING")
busy.sendall(b"CONFIG GET timeout\r\n")
r = busy.recv(100)
if r != b"*2\r\n$7\r\ntimeout\r\n$1\r\n2\r\n":
    sys.exit("FAIL: CONFIG GET timeout: %r" % r)
t0 = time.time()
idle.setblocking(False)
closed = None
while time.time() - t0 < 15 and closed is None:
    busy.sendall(b"PING\r\n")   # every 0.5 s: never idle for 2 s
    if busy.recv(100) != b"+PONG\r\n":
        sys.exit("FAIL: the busy client lost its connection")
    try:
        if idle.recv(100) == b"":
            closed = time.time() - t0
    except BlockingIOError:
        pass
    except OSError:
        closed = time.time() - t0
    time.sleep(0.5)
print("the idle client was closed after %s s; the busy one is still served" %
      ("%.1f" % closed if closed is not None else "(not in 15)"))
if closed is None or closed < 1.5:
    sys.exit("FAIL: --timeout 2: an idle client closed after %s s" % closed)
print("ok: --timeout 2 closes the idle client, keeps the busy one")
PYEOF
serve_stop || fail "serve exited $? on SIGTERM"
echo PASS
