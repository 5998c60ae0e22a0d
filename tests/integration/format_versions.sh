#!/usr/bin/env bash
# timeout: 60
# On-disk format versions (docs/operations.md, "Upgrades"): a durable memory
# server refuses, at start and with one line naming the file and both
# versions, a data directory whose MANIFEST, checkpoint (the image's CRC file
# header) or redo segment header carries a format version newer than it
# reads; nothing is taken for damage (no fallback to the older image).  A CRC
# file from before the version field (version 0) still loads, and the
# untouched directory starts.
. "$(dirname "$0")/lib.sh"
top=$T
pid=
at_exit '[ -z "$pid" ] || { kill -9 "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }'
ready() { for i in $(seq 300); do grep -q ready "$1" 2>/dev/null && return 0; kill -0 "$pid" 2>/dev/null || return 1; sleep 0.05; done; return 1; }

# a small database: one server, a YCSB table, a clean stop (a final checkpoint)
"$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 32M --data-dir "$top/db" --init \
    --ready-json >"$top/a.out" 2>"$top/a.err" &
pid=$!
ready "$top/a.out" || fail "the server did not start: $(cat "$top/a.err")"
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$top/a.out")
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" >"$top/c.ini"
"$L" ycsb --config "$top/c.ini" --records 500 --no-run --quiet >/dev/null 2>"$top/y.err" \
  || fail "load: $(cat "$top/y.err")"
kill -TERM "$pid"; wait "$pid"; pid=
[ -s "$top/db/MANIFEST" ] || fail "no MANIFEST after a clean stop: $(ls "$top/db")"

# start DIR: the server on DIR; sets rc and out (its stderr)
start() {
  timeout 30 "$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 32M --data-dir "$1" \
      --ready-json >"$top/s.out" 2>"$top/s.err" &
  pid=$!
  if ready "$top/s.out"; then
    rc=0; kill -TERM "$pid"; wait "$pid"
  else
    wait "$pid"; rc=$?
  fi
  pid=
  out=$(cat "$top/s.err")
}
# refused DIR WHAT FILE [V [READS]]: the start fails with a line naming the
# file, version V (2) and the newest this lotus reads (READS, 1)
refused() {
  local v=${4:-2} reads=${5:-1}
  start "$1"
  [ $rc -ne 0 ] || fail "$2 of version $v: the server started"
  echo "$out" | grep -q "$3.*written by a newer lotus: $2 format version $v, and this lotus reads versions.* $reads" \
    || fail "$2 of version $v: no clear line: $out"
  echo "$out" | grep -q "recovering from the previous checkpoint" && fail "$2 of version $v taken for damage: $out"
  echo "ok: $2: $(echo "$out" | grep 'newer lotus')"
}
fresh() { rm -rf "$top/$1"; cp -a "$top/db" "$top/$1"; }

fresh m
sed -i '1s/^lotus-manifest 1$/lotus-manifest 2/' "$top/m/MANIFEST"
refused "$top/m" manifest "$top/m/MANIFEST"

fresh c
img=$(sed -n 's/^image pages-\([ab]\)\.dat$/\1/p' "$top/c/MANIFEST")
[ -n "$img" ] || fail "no image line in the MANIFEST: $(cat "$top/c/MANIFEST")"
# the CRC file header: magic, seq, npages (u64), page_size, crc, version (u32 at 32)
$PY - "$top/c/pages-$img.crc" 2 <<'EOF'
import struct, sys
p, v = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
b[32:36] = struct.pack('<I', v)
open(p, 'wb').write(b)
EOF
refused "$top/c" checkpoint "$top/c/pages-$img.crc"

fresh r
seg=$(ls "$top/r"/redo-*.log | sort | tail -n 1)
# both header copies (offsets 0 and 512): version (u16 at 4), CRC32C (at 36) over the 40 bytes with crc 0
$PY - "$seg" <<'EOF'
import struct, sys
def crc32c(data):
    crc = 0xffffffff
    for x in data:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
for off in (0, 512):
    h = bytearray(b[off:off + 40])
    assert h[0:4] == b'LRSG', h[0:4]
    h[4:6] = struct.pack('<H', 3)   # 2: a preallocated segment (this lotus reads it)
    h[36:40] = b'\0\0\0\0'
    h[36:40] = struct.pack('<I', crc32c(bytes(h)))
    b[off:off + 40] = h
open(p, 'wb').write(b)
EOF
refused "$top/r" "segment" "$seg" 3 2

# older formats still load: a CRC file of version 0 (before the field), and the original
fresh o
$PY - "$top/o/pages-$img.crc" 0 <<'EOF'
import struct, sys
p, v = sys.argv[1], int(sys.argv[2])
b = bytearray(open(p, 'rb').read())
b[32:36] = struct.pack('<I', v)
open(p, 'wb').write(b)
EOF
start "$top/o"
[ $rc -eq 0 ] || fail "a version-0 CRC file does not load: $out"
echo "$out" | grep -q "recovered .*500 records" || fail "the version-0 checkpoint was not loaded: $out"
start "$top/db"
[ $rc -eq 0 ] || fail "the untouched directory does not start: $out"
echo "ok: version 0 and 1 files load"
