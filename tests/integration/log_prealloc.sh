#!/usr/bin/env bash
# timeout: 120
# Preallocated redo segments (docs/durability.md, "Preallocated segments").
# A durable server's log segment is zero-filled to its full size before its
# first record, so the log writer overwrites zeros instead of extending the
# file.  Tried from the outside, with `lotus bank` and kill -9:
#   - the segment is 64 MiB from the start and its header says preallocated;
#   - kill -9, restart: every acknowledged transfer is there;
#   - a torn last write (valid records past a zeroed gap, above the header's
#     watermark, as an overwrite torn by a power loss leaves them): the
#     server starts, says it cut them, zeroes them, and verify passes;
#   - a flipped byte in the zeros far past the last record: starts, zeroed;
#   - small segments that roll (LOTUS_REDO_SEGMENT_BYTES): each new one is
#     preallocated from the spare the server makes ahead, and verify passes
#     after kill -9;
#   - LOTUS_REDO_PREALLOC=0: segments grow as they are written, as before.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
top=$T
at_exit 'cluster_stop'

# seginfo FILE: "<size> <flags of the newest header copy> <records end> <mark> <version>"
# (scripts/redo-seg)
seginfo() { "$root/scripts/redo-seg" "$1"; }
bank() {
  "$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds "$1" --threads 2 --inflight 2 \
      --ledger "$led" --quiet >/dev/null 2>"$top/bank.err" || fail "bank failed: $(tail -n 3 "$top/bank.err")"
}
verify() {
  local v
  v=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$top/verify.err") \
    || fail "$1: verify failed: $v $(cat "$top/verify.err")"
  echo "$1: verify: $v"
}

# 1. The default: preallocated.
CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 2 --threads 1 --memory 64M --checkpoint-log 1G || fail "servers did not start"
led=$top/bank.ledger
bank 2
seg=$(ls "$top"/data/ms1/redo-*.log | tail -n1)
read -r size flags end mark version <<<"$(seginfo "$seg")"
echo "segment: $size bytes, version $version, flags $flags, records end at $end, mark $mark"
[ "$size" = $((64 << 20)) ] || fail "the segment is $size bytes, not preallocated to 64 MiB"
[ $((flags & 2)) = 2 ] || fail "the segment header does not say preallocated (flags $flags)"
[ "$version" = 2 ] || fail "a preallocated segment's header is version $version, not 2"
[ "$end" -gt 8192 ] || fail "too few records ($end)"

# 2. kill -9 and restart.
cluster_kill 1
cluster_restart 1 || fail "restart after kill -9: $(tail -n 3 "$top/ms1.err")"
verify "kill -9"
bank 1
cluster_kill 1

# 3. A torn last write: a copy of the last record, renumbered for its new
# place 8 KiB past the end of the records, with the gap left zero.  The
# header's mark is lowered to the end of the records (a watermark written
# before the batch), so the gap is above it.
read -r size flags end mark <<<"$(seginfo "$seg")"
cp "$seg" "$top/seg.orig"
/usr/bin/python3 - "$seg" "$end" <<'PY' || fail "could not write the torn write"
import struct, sys
p, end = sys.argv[1], int(sys.argv[2])
def crc32c(crc, data):
    crc ^= 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xffffffff
d = bytearray(open(p, 'rb').read())
pos, last = 4096, None
while pos < end:
    ln = struct.unpack_from('<I', d, pos)[0]
    last, pos = pos, pos + ((32 + ln + 7) & ~7)
ln, crc, lsn, txn, typ, magic = struct.unpack_from('<IIQQB3xI', d, last)
pay = bytes(d[last + 32:last + 32 + ln])
# the writer's CRC, checked on a real record first
if crc32c(crc32c(0, pay), struct.pack('<IIQQB3xI', ln, 0, lsn, txn, typ, magic)) != crc:
    sys.exit("crc32c here does not match the log's")
at = end + 8192
size = (32 + ln + 7) & ~7
hdr = struct.pack('<IIQQB3xI', ln, 0, at + size, txn, typ, magic)
hdr = struct.pack('<IIQQB3xI', ln, crc32c(crc32c(0, pay), hdr), at + size, txn, typ, magic)
d[at:at + 32] = hdr
d[at + 32:at + 32 + ln] = pay
# lower the mark of both header copies to the end of the records
for s in (0, 512):
    if d[s:s + 4] == b'LRSG':
        h = bytearray(d[s:s + 40])
        struct.pack_into('<Q', h, 24, min(struct.unpack_from('<Q', h, 24)[0], end))
        struct.pack_into('<I', h, 36, 0)
        struct.pack_into('<I', h, 36, crc32c(0, bytes(h)))
        d[s:s + 40] = h
open(p, 'r+b').write(d)
open(p + '.planted', 'w').write('%d %s' % (at, hdr.hex()))
print("a renumbered copy of the record at %d written at %d" % (last, at))
PY
: >"$top/ms1.err"
cluster_restart 1 || fail "a torn last write stopped the server: $(tail -n 3 "$top/ms1.err")"
grep -q "torn last write in $seg" "$top/ms1.err" || fail "the torn write was not reported: $(grep redo: "$top/ms1.err" | tail -n 3)"
echo "torn: $(grep -o 'redo: torn last write.*' "$top/ms1.err" | head -n1 | cut -c1-200)"
/usr/bin/python3 - "$seg" <<'PY' || fail "the torn write's record is still in the segment"
import sys
at, hdr = open(sys.argv[1] + '.planted').read().split()
d = open(sys.argv[1], 'rb').read()
sys.exit(1 if d[int(at):int(at) + 32].hex() == hdr else 0)
PY
rm -f "$seg.planted"
verify "torn last write"
cluster_kill 1

# 4. A flipped byte far past the records: not damage.
read -r size flags end mark <<<"$(seginfo "$seg")"
"$root/scripts/damage-file" flip "$seg" --offset $((48 << 20)) || fail "cannot flip a byte"
: >"$top/ms1.err"
cluster_restart 1 || fail "a flipped byte past the records stopped the server: $(tail -n 3 "$top/ms1.err")"
/usr/bin/python3 -c "
import sys
d = open('$seg', 'rb').read()
sys.exit(1 if d[48 << 20] else 0)" || fail "the flipped byte past the records is still there"
verify "byte past the records"
cluster_stop

# 5. Small segments that roll: the spares.
export LOTUS_REDO_SEGMENT_BYTES=65536
mkdir -p "$top/c2"
CLUSTER_DATA=$top/small
cluster_start "$top/c2" 1 --threads 1 --memory 64M --checkpoint-log 1G \
  || fail "small: servers did not start: $(cat "$top/c2/ms0.out" "$top/c2/ms0.err" | tail -n 5)"
led=$top/small.ledger
bank 2
n=0; pre=0
for f in "$top"/small/ms0/redo-*.log; do
  read -r size flags end mark <<<"$(seginfo "$f")"
  n=$((n + 1))
  [ $((flags & 2)) = 2 ] && pre=$((pre + 1))
done
echo "small segments: $n, preallocated: $pre"
[ "$n" -ge 3 ] || fail "the log did not roll ($n segments)"
[ "$pre" -ge $((n - 1)) ] || fail "only $pre of $n segments were preallocated"
cluster_kill 0
cluster_restart 0 || fail "small: restart after kill -9: $(tail -n 3 "$top/c2/ms0.err")"
verify "small segments, kill -9"
cluster_stop
unset LOTUS_REDO_SEGMENT_BYTES

# 6. Off: segments grow as they are written.
export LOTUS_REDO_PREALLOC=0
mkdir -p "$top/c3"
CLUSTER_DATA=$top/off
cluster_start "$top/c3" 1 --threads 1 --memory 64M --checkpoint-log 1G || fail "off: servers did not start"
led=$top/off.ledger
bank 1
seg=$(ls "$top"/off/ms0/redo-*.log | tail -n1)
read -r size flags end mark version <<<"$(seginfo "$seg")"
echo "off: $size bytes, version $version, flags $flags, records end at $end"
[ "$size" -lt $((64 << 20)) ] && [ $((flags & 2)) = 0 ] && [ "$version" = 1 ] \
  || fail "LOTUS_REDO_PREALLOC=0 still preallocated (version $version)"
[ ! -e "$top/off/ms0/redo-spare" ] || fail "LOTUS_REDO_PREALLOC=0 made a spare"
cluster_kill 0
cluster_restart 0 || fail "off: restart: $(tail -n 3 "$top/c3/ms0.err")"
verify "off, kill -9"
cluster_stop
echo ok
