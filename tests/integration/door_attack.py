#!/usr/bin/python3
"""door_attack.py - a hostile or confused peer of lotus's front door
(src/net/door.h), for tests/integration/door.sh.  Standard library only.

  door_attack.py garbage PORT            every malformed input, each on its own
                                         connection; exits 0 when all are sent
  door_attack.py silent PORT SECONDS     connect, send nothing; prints the
                                         seconds until the server closed it
                                         (or SECONDS if it did not)
  door_attack.py wrongkey PORT KEYFILE   a client that knows the protocol but
                                         not the secret: prints what it got
  door_attack.py reflect PORT            send the server's own MAC back as ours
  door_attack.py flood PORT N SECONDS SRC
                                         keep N silent connections open from
                                         source address SRC for SECONDS,
                                         reopening each one the server closes
  door_attack.py capture PORT OUT        a relay to the door at PORT that
                                         prints its own port, relays one
                                         handshake and writes the worker
                                         address in the client's AUTH (hex)
                                         to OUT
  door_attack.py badaddr PORT N SECONDS [HEXFILE]
                                         up to N handshakes (for at most
                                         SECONDS) with the zero key (no
                                         secret) and a garbage worker
                                         address: random, and truncated or
                                         mutated copies of the one in HEXFILE;
                                         prints the counts of the answers
  door_attack.py fakedoor PORTFILE N     a door (no secret) that prints its
                                         port to PORTFILE and answers N
                                         clients' AUTH with a garbage
                                         WELCOME address
  door_attack.py manyflood PORT NSRC PER SECONDS
                                         PER connections from each of NSRC
                                         source addresses 127.0.1.1.., half
                                         silent, half stalling after HELLO,
                                         reopened as the server closes them
"""
import hashlib, hmac, os, socket, struct, sys, time

F_HELLO, F_CHALLENGE, F_AUTH, F_WELCOME, F_ERROR = 1, 2, 3, 4, 5


def hdr(t, n):
    return struct.pack('<B3xI', t, n)


def conn(port):
    s = socket.create_connection(('127.0.0.1', port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recvn(s, n):
    b = b''
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise EOFError('closed after %d of %d bytes' % (len(b), n))
        b += x
    return b


def frame(s):
    t, n = struct.unpack('<B3xI', recvn(s, 8))
    return t, recvn(s, n)


def hello(s):
    nc = os.urandom(32)
    s.sendall(hdr(F_HELLO, 40) + b'lotus-d2' + nc)
    t, body = frame(s)
    # Ns, the server's cluster id (8 bytes), its MAC
    assert t == F_CHALLENGE and len(body) == 72, (t, len(body))
    return nc, body[:32], body[40:]


def send_close(port, data, linger=0.05):
    try:
        s = conn(port)
        s.sendall(data)
        time.sleep(linger)
        s.close()
    except OSError:
        pass   # the server may reset us: that is its right


def garbage(port):
    inputs = [
        bytes(32),                                   # the UCX sockcm killer
        bytes(4096),
        os.urandom(65536),
        b'GET / HTTP/1.0\r\n\r\n',
        b'\xff' * 8,                                 # a header claiming 4 GiB
        hdr(F_HELLO, 40) + b'lotus-d1',              # truncated HELLO
        hdr(F_HELLO, 40)[:5],                        # truncated header
        hdr(F_AUTH, 100) + bytes(100),               # AUTH before HELLO
        hdr(F_HELLO, 39) + bytes(39),                # wrong length
        hdr(F_HELLO, 40) + b'LOTUS-D1' + bytes(32),  # wrong magic
        b'\x01\x01\x00\x00' + struct.pack('<I', 40) + b'lotus-d1' + bytes(32),  # pad bytes set
    ]
    for data in inputs:
        send_close(port, data)
    # A good HELLO, then hostile AUTH frames.
    for auth in (hdr(F_AUTH, 0xffffffff), hdr(F_AUTH, 32) + bytes(32),
                 hdr(F_AUTH, 1 << 20) + bytes(1000), hdr(F_AUTH, 200) + bytes(50),
                 hdr(F_WELCOME, 10) + bytes(10)):
        try:
            s = conn(port)
            hello(s)
            s.sendall(auth)
            time.sleep(0.05)
            s.close()
        except (OSError, EOFError, AssertionError):
            pass
    return 0


def silent(port, seconds):
    s = conn(port)
    s.settimeout(seconds)
    t0 = time.time()
    try:
        while s.recv(4096):
            pass
    except socket.timeout:
        pass
    except OSError:
        pass
    print('%.2f' % (time.time() - t0))
    return 0


def refused(s, what):
    try:
        t, body = frame(s)
    except EOFError:
        print('%s: closed, nothing served' % what)
        return 0
    if t == F_ERROR:
        print('%s: refused: %s' % (what, body[1:].decode('ascii', 'replace')))
        return 0
    print('%s: GOT FRAME %d (%d bytes)' % (what, t, len(body)))
    return 1


def wrongkey(port, keyfile):
    k = hashlib.sha256(open(keyfile, 'rb').read().rstrip(b'\n\r \t')).digest()
    s = conn(port)
    nc, ns, ms = hello(s)
    addr = b'not-a-worker-address'
    mac = hmac.new(k, b'lotus door client\0' + nc + ns + addr, hashlib.sha256).digest()
    s.sendall(hdr(F_AUTH, 32 + len(addr)) + mac + addr)
    return refused(s, 'wrong key')


def reflect(port):
    s = conn(port)
    nc, ns, ms = hello(s)
    s.sendall(hdr(F_AUTH, 33) + ms + b'x')
    return refused(s, 'reflected MAC')


def flood(port, n, seconds, src):
    import selectors
    sel = selectors.DefaultSelector()
    opened = 0

    def one():
        nonlocal opened
        s = socket.socket()
        s.bind((src, 0))
        s.setblocking(False)
        try:
            s.connect(('127.0.0.1', port))
        except BlockingIOError:
            pass
        sel.register(s, selectors.EVENT_READ)
        opened += 1

    for _ in range(n):
        one()
    end = time.time() + seconds
    while time.time() < end:
        for key, _ in sel.select(timeout=0.1):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except OSError:
                data = b''
            if not data:
                sel.unregister(s)
                s.close()
                one()
    print('flood: %d connections opened' % opened)
    return 0


def capture(port, out):
    import selectors
    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(4)
    print(ls.getsockname()[1], flush=True)
    ls.settimeout(60)
    c, _ = ls.accept()
    u = conn(port)
    up = b''   # client -> server bytes, for the AUTH frame
    sel = selectors.DefaultSelector()
    sel.register(c, selectors.EVENT_READ, u)
    sel.register(u, selectors.EVENT_READ, c)
    done = False
    while not done:
        for key, _ in sel.select(timeout=30):
            try:
                data = key.fileobj.recv(65536)
            except OSError:
                data = b''
            if not data:
                done = True
                break
            key.data.sendall(data)
            if key.fileobj is c:
                up += data
    # HELLO (8 + 40), then AUTH: header, MAC (32), address
    a = up[48:]
    t, n = struct.unpack('<B3xI', a[:8])
    if t != F_AUTH or len(a) < 8 + n:
        print('capture: no AUTH frame seen', file=sys.stderr)
        return 1
    open(out, 'w').write(a[8 + 32:8 + n].hex())
    return 0


def auth_with(port, addr, key=bytes(32)):
    """One handshake with worker address addr: 'refused: TEXT', 'welcome',
    or 'closed'."""
    s = conn(port)
    try:
        nc, ns, ms = hello(s)
        mac = hmac.new(key, b'lotus door client\0' + nc + ns + addr, hashlib.sha256).digest()
        s.sendall(hdr(F_AUTH, 32 + len(addr)) + mac + addr)
        t, body = frame(s)
        if t == F_ERROR:
            return 'refused: ' + body[1:].decode('ascii', 'replace')
        return 'welcome' if t == F_WELCOME else 'frame %d' % t
    except (OSError, EOFError, AssertionError):
        return 'closed'
    finally:
        s.close()


def badaddr(port, n, seconds, hexfile=None):
    import random
    rnd = random.Random(int.from_bytes(os.urandom(4), 'little'))
    real = bytes.fromhex(open(hexfile).read().strip()) if hexfile else b''
    tries = []
    tries.append(os.urandom(200))                      # the first shot
    tries.append(bytes([0x09]) + os.urandom(99))       # an unknown version
    tries.append(b'\x01')                               # version 2, nothing else
    if real:
        tries.append(real[:1])
        tries.append(real[:len(real) // 2])
        tries.append(real[:-1])
        tries.append(real + b'\0')
        for v in range(2, 16):                         # other version nibbles
            tries.append(bytes([(real[0] & 0xf0) | v]) + real[1:])
    while len(tries) < n:
        k = rnd.randrange(4) if real else 0
        if k == 0:
            tries.append(os.urandom(rnd.randrange(1, 400)))
        elif k == 1:
            tries.append(real[:rnd.randrange(1, len(real))])
        else:
            b = bytearray(real)
            for _ in range(rnd.randrange(1, 4)):
                b[rnd.randrange(len(b))] = rnd.randrange(256)
            if k == 3:
                b = b[:rnd.randrange(1, len(b) + 1)]
            tries.append(bytes(b))
    counts = {}
    end = time.time() + seconds
    done = 0
    for a in tries[:n]:
        if time.time() > end:
            break
        r = auth_with(port, a)
        r = r if not r.startswith('refused: ') else 'refused: ' + r[9:].split(':')[0]
        counts[r] = counts.get(r, 0) + 1
        done += 1
        if r == 'closed':
            break   # the server may be gone: let the caller look
    print('badaddr: %d tries: %s' % (done, ', '.join('%s %d' % kv for kv in sorted(counts.items()))))
    return 0


def fakedoor(portfile, n):
    ls = socket.socket()
    ls.bind(('127.0.0.1', 0))
    ls.listen(8)
    open(portfile + '.tmp', 'w').write('%d\n' % ls.getsockname()[1])
    os.rename(portfile + '.tmp', portfile)
    ls.settimeout(30)
    garbage = [os.urandom(200), bytes([0x09]) + os.urandom(60), b'\x20' + os.urandom(40)]
    for i in range(n):
        try:
            c, _ = ls.accept()
        except socket.timeout:
            break
        c.settimeout(10)
        try:
            t, body = frame(c)
            nc, ns, cid = body[8:40], os.urandom(32), bytes(8)   # cluster id 0: any
            ms = hmac.new(bytes(32), b'lotus door server\0' + nc + ns + cid,
                          hashlib.sha256).digest()
            c.sendall(hdr(F_CHALLENGE, 72) + ns + cid + ms)
            frame(c)   # AUTH
            a = garbage[i % len(garbage)]
            c.sendall(hdr(F_WELCOME, len(a)) + a)
            time.sleep(0.2)
        except (OSError, EOFError):
            pass
        c.close()
    return 0


def manyflood(port, nsrc, per, seconds):
    import selectors
    sel = selectors.DefaultSelector()
    opened = 0

    def one(src, stall):
        nonlocal opened
        s = socket.socket()
        try:
            s.bind((src, 0))
            s.setblocking(False)
            s.connect(('127.0.0.1', port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return
        sel.register(s, selectors.EVENT_READ | (selectors.EVENT_WRITE if stall else 0),
                     (src, stall))
        opened += 1

    srcs = ['127.0.%d.%d' % (1 + i // 250, 1 + i % 250) for i in range(nsrc)]
    for i in range(per):
        for src in srcs:
            one(src, i % 2 == 1)
    end = time.time() + seconds
    while time.time() < end:
        for key, ev in sel.select(timeout=0.1):
            s = key.fileobj
            src, stall = key.data
            if ev & selectors.EVENT_WRITE:
                # connected: say HELLO, then never AUTH
                try:
                    s.send(hdr(F_HELLO, 40) + b'lotus-d2' + os.urandom(32))
                except OSError:
                    pass
                sel.modify(s, selectors.EVENT_READ, (src, stall))
                continue
            try:
                data = s.recv(4096)
            except OSError:
                data = b''
            if not data:
                sel.unregister(s)
                s.close()
                one(src, stall)
    print('manyflood: %d connections opened from %d addresses' % (opened, nsrc))
    return 0


if __name__ == '__main__':
    cmd = sys.argv[1]
    port = int(sys.argv[2]) if cmd != 'fakedoor' else 0
    if cmd == 'garbage':
        sys.exit(garbage(port))
    if cmd == 'silent':
        sys.exit(silent(port, float(sys.argv[3])))
    if cmd == 'wrongkey':
        sys.exit(wrongkey(port, sys.argv[3]))
    if cmd == 'reflect':
        sys.exit(reflect(port))
    if cmd == 'flood':
        sys.exit(flood(port, int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]))
    if cmd == 'capture':
        sys.exit(capture(port, sys.argv[3]))
    if cmd == 'badaddr':
        sys.exit(badaddr(port, int(sys.argv[3]), float(sys.argv[4]),
                         sys.argv[5] if len(sys.argv) > 5 else None))
    if cmd == 'fakedoor':
        sys.exit(fakedoor(sys.argv[2], int(sys.argv[3])))
    if cmd == 'manyflood':
        sys.exit(manyflood(port, int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])))
    sys.exit(2)
