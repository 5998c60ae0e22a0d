#!/usr/bin/env bash
# timeout: 90
# `lotus serve` out of file descriptors.  Its descriptor limit is lowered
# (prlimit) to a few above what it has open, and clients connect until one is
# not served.  That client, and the ones after it, must be refused at once
# with Redis's "-ERR max number of clients reached" (not left in the backlog
# to time out); serve must not spin on accept meanwhile, as a level-triggered
# accept loop does; the refusals are logged at most once per 10 s; and once
# clients close, new ones are served again.  "Spin" is measured over 2 s as
# the time serve's busiest thread was runnable (running or waiting for a CPU,
# /proc/PID/task/*/schedstat), which does not depend on how loaded the
# machine is, as CPU time would.
. "$(dirname "$0")/lib.sh"
[ -x $PY ] || { echo "SKIP: no $PY"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'
export LOTUS_NET_SPIN_US=0   # an idle serve must use no CPU: no busy polling

serve_start "$dir" --local 1 || fail "serve did not start"
$PY - "$SERVE_PID" "$SERVE_PORT" <<'PYEOF' || fail "see above"
import os, resource, socket, sys, time
pid, port = int(sys.argv[1]), int(sys.argv[2])
bad = []
nfd = len(os.listdir("/proc/%d/fd" % pid))
soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
resource.prlimit(pid, resource.RLIMIT_NOFILE, (nfd + 8, hard))
print("serve has %d descriptors open; its limit is now %d" % (nfd, nfd + 8))

def connect():
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(3)
    return s

def answer(s, send):
    try:
        if send:
            s.sendall(b"PING\r\n")
        return s.recv(100)
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "error %s" % e

served, refused, texts = [], 0, []
for i in range(64):
    s = connect()
    r = answer(s, True)
    if r == b"+PONG\r\n":
        served.append(s)
        continue
    texts.append(r)
    s.close()
    break
print("served %d clients, then: %r" % (len(served), texts[-1] if texts else None))
if not texts:
    bad.append("64 clients served: the limit was not reached")
elif texts[-1] == "timeout":
    bad.append("the client over the limit got no answer in 3 s")
# clients over the limit that send nothing must read the refusal
for i in range(2):
    s = connect()
    r = answer(s, False)
    print("client over the limit reads %r" % (r,))
    if r != b"-ERR max number of clients reached\r\n":
        bad.append("client over the limit read %r" % (r,))
    s.close()
# two more clients wait (in the backlog, unless refused); serve must not spin
waiting = [connect() for i in range(2)]
time.sleep(0.3)
def runnable():
    # per thread: time running + waiting for a CPU (ns), which a spinning
    # thread spends all the time in however loaded the machine is
    t = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            f = open("/proc/%d/task/%s/schedstat" % (pid, tid)).read().split()
            t[tid] = int(f[0]) + int(f[1])
        except OSError:
            pass
    return t
def cpu():
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])   # utime + stime, in clock ticks
hz = os.sysconf("SC_CLK_TCK")
r0, c0, t0 = runnable(), cpu(), time.time()
time.sleep(2)
r1, used, wall = runnable(), (cpu() - c0) / hz, time.time() - t0
busiest = max([(r1[k] - r0.get(k, r1[k])) / 1e9 for k in r1] + [0])
print("at its descriptor limit, in %.1f s: serve used %.2f s of CPU; its busiest thread "
      "was runnable %.2f s" % (wall, used, busiest))
if busiest > 0.5 * wall:
    bad.append("serve spins at its descriptor limit: a thread runnable %.2f s of %.1f s"
               % (busiest, wall))
for s in served + waiting:
    s.close()
# served again once descriptors are free
ok = False
deadline = time.time() + 10
while time.time() < deadline and not ok:
    s = connect()
    ok = answer(s, True) == b"+PONG\r\n"
    s.close()
    if not ok:
        time.sleep(0.2)
print("a new client after the others closed: %s" % ("served" if ok else "NOT served"))
if not ok:
    bad.append("no client served after the others closed")
for b in bad:
    print("FAIL: " + b)
sys.exit(1 if bad else 0)
PYEOF
kill -0 "$SERVE_PID" 2>/dev/null || fail "serve died"
n=$(grep -c "cannot accept clients" "$dir/serve.err")
echo "serve logged $n accept-error line(s): $(grep -m1 "cannot accept clients" "$dir/serve.err")"
[ "$n" -ge 1 ] && [ "$n" -le 3 ] || fail "want 1 to 3 rate-limited accept-error lines, got $n"
serve_stop || fail "serve exited $? on SIGTERM"
echo PASS
