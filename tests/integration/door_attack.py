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


if __name__ == '__main__':
    cmd, port = sys.argv[1], int(sys.argv[2])
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
    sys.exit(2)
