#!/usr/bin/env bash
# timeout: 90
# One flipped byte in the middle of the redo log is damage, not a torn tail.
# Two durable memory servers run `lotus bank` (no checkpoint meanwhile, so the
# log holds everything); server 1 is killed (-9) and a byte in the middle of
# its log segment is flipped.  On restart it must refuse to start, naming the
# file, the offset and the LSN range at stake - never start with acknowledged
# transfers missing.  Then --recovery-mode point-in-time starts it, saying
# what it drops; and a log that ends in a partly written record (a torn
# tail) still starts by default, with every transfer present.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
top=$T
at_exit 'cluster_stop'
CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 2 --threads 1 --memory 64M --checkpoint-log 1G \
  || fail "servers did not start"
led=$top/bank.ledger
# Where a segment's records end (a segment may be preallocated: zeros follow).
rec_end() { "$root/scripts/redo-seg" "$1" | cut -d' ' -f3; }
# A loaded machine commits few transfers in 2 s: run more rounds (appending to
# the same ledger) until server 1's log is big enough to have a middle, at most 6.
for round in 1 2 3 4 5 6; do
  "$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds 2 --threads 2 --inflight 2 \
      --ledger "$led" --quiet >/dev/null 2>"$top/bank.err" || fail "bank failed: $(tail -n 3 "$top/bank.err")"
  seg=$(ls "$top"/data/ms1/redo-*.log | tail -n1)
  [ "$(rec_end "$seg")" -gt 100000 ] && break
done
# The damage must lie below the log writer's watermark (written within 100 ms
# of going idle): above it, in a preallocated segment, records past a gap
# are what a torn last write leaves.  Wait until the header's mark reaches
# the last record.
for i in $(seq 100); do
  read -r _ _ recs mark version <<<"$("$root/scripts/redo-seg" "$seg")"
  [ "$version" = 0 ] && { caught="no header"; break; }
  [ "$mark" -ge "$recs" ] && { caught=yes; break; }
  caught="mark $mark, records end at $recs"
  sleep 0.2
done
[ "$caught" = yes ] || echo "the watermark did not catch up: $caught"
cluster_kill 1
seg=$(ls "$top"/data/ms1/redo-*.log | tail -n1)
size=$(stat -c %s "$seg")
end=$(rec_end "$seg")
[ "$end" -gt 100000 ] || fail "the log is too small to damage its middle ($end bytes of records)"
cp "$seg" "$top/seg.orig"
"$root/scripts/damage-file" flip "$seg" --offset $((end / 2)) || fail "cannot damage $seg"
if cluster_restart 1 2>/dev/null; then
  "$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>&1 | tail -n1
  fail "server 1 started on a log damaged in the middle"
fi
grep -q "the log is damaged in $seg at file offset [0-9]* (LSN [0-9]*), and valid records with higher LSNs follow, up to LSN [0-9]*" \
  "$top/ms1.err" || fail "no message naming the damage: $(tail -n 3 "$top/ms1.err")"
cmp -s "$seg" "$top/seg.orig" && fail "the damage is gone?"
[ "$(stat -c %s "$seg")" = "$size" ] || fail "the refused start changed the log"
echo "refused: $(grep -o 'redo: the log is damaged.*' "$top/ms1.err" | cut -c1-200)"

saved_args=("${CLUSTER_ARGS[@]}")
CLUSTER_ARGS+=(--recovery-mode point-in-time)
cluster_restart 1 || fail "point-in-time did not start: $(tail -n 3 "$top/ms1.err")"
grep -q "recovery-mode point-in-time: the log is damaged in $seg" "$top/ms1.err" \
  || fail "point-in-time said nothing about what it dropped"
echo "point-in-time: $(grep -o 'dropping the records.*' "$top/ms1.err" | tail -n1)"
cluster_kill 1
CLUSTER_ARGS=("${saved_args[@]}")

# The undamaged log again, now with a torn tail: a last record only partly written.
rm -f "$top"/data/ms1/redo-*.log* "$top"/data/ms1/MANIFEST "$top"/data/ms1/pages-*
cp "$top/seg.orig" "$seg"
/usr/bin/python3 - "$seg" <<'PY'
import struct, sys
p = sys.argv[1]
d = bytearray(open(p, 'rb').read())
# past the segment header (format 1: a 4 KiB block starting "LRSG"), walk the
# records: len u32, crc u32, lsn u64, ..., magic u32 at 28
pos = 4096 if d[:4] == b'LRSG' else 0
while pos + 32 <= len(d):
    ln, _, lsn = struct.unpack_from('<IIQ', d, pos)
    size = (32 + ln + 7) & ~7
    if struct.unpack_from('<I', d, pos + 28)[0] != 0x4f44524c or lsn != pos + size:
        break
    pos += size
# a record whose write never completed: a good header and the first bytes of
# its payload in the file's last block, zeroes where the sectors that never
# reached the disk are, and the rest past the end of the file (a write that
# would extend the file moves its size only once it completes, so a torn
# record can only have its head inside the last block)
room = -pos % 4096
if room < 32 + 16:
    print(f"the log ends {room} bytes before a block edge: no room for a torn record")
    sys.exit(3)
ln = 1000
hdr = struct.pack('<IIQQB3xI', ln, 0, pos + ((32 + ln + 7) & ~7), 1, 16, 0x4f44524c)
rec = hdr + bytes((i * 37 + 11) & 0xff or 1 for i in range(min(100, room - 32)))
d[pos:pos + len(rec)] = rec
d = d[:pos + room]           # the writer writes whole 4 KiB blocks
d += bytes(-len(d) % 4096)
open(p, 'wb').write(d)
PY
rc=$?
[ $rc = 3 ] && { echo "skipped the torn tail"; echo ok; exit 0; }
[ $rc = 0 ] || fail "could not write the torn tail"
cluster_restart 1 || fail "a torn tail stopped the server: $(tail -n 3 "$top/ms1.err")"
grep -q "torn or corrupt log tail" "$top/ms1.err" || fail "the torn tail was not reported"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$top/verify.err") \
  || fail "verify after a torn tail: $ver $(cat "$top/verify.err")"
echo "torn tail cut; verify: $ver"
echo ok
