#!/usr/bin/env bash
# timeout: 180
# A redo log cut short is damage, not a torn tail (issue 20, item 4 and N27).
# Two durable memory servers run `lotus bank` (no checkpoint meanwhile, so the
# log holds everything) and stop; the log writer's watermark catches up; server
# 1 is killed (-9) and its last log segment is cut:
#   byte     at a random byte inside the records (a size no write leaves)
#   record   at a random record boundary inside them
#   block    at a 4 KiB boundary inside them (a size a crash could leave, but
#            below the watermark the segment header holds)
# Each time the restart must refuse, naming the LSNs, and leave the file as it
# was - never start with acknowledged transfers missing.  --recovery-mode
# tolerate-tail starts on the block cut and says what it drops.  The uncut log
# starts and `bank --verify` finds every acknowledged transfer.
# Then, with small segments (LOTUS_REDO_SEGMENT_BYTES) and checkpoints that
# delete the old ones, one server is killed and: its newest segment deleted
# (the previous one's header says it existed) - refused; its MANIFEST deleted
# (the log starts past LSN 0) - refused with a message naming the MANIFEST.
# LOG_CUT_SEED picks the offsets (printed).
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
top=$T
at_exit 'cluster_stop'
seed=${LOG_CUT_SEED:-$RANDOM}
echo "seed $seed"

CLUSTER_DATA=$top/data CLUSTER_DURABILITY=sync
cluster_start "$top" 2 --threads 1 --memory 64M --checkpoint-log 1G \
  || fail "servers did not start"
led=$top/bank.ledger
# Where a segment's records end (a segment may be preallocated: zeros follow).
rec_end() { "$root/scripts/redo-seg" "$1" | cut -d' ' -f3; }
t0=$SECONDS
for i in $(seq 30); do   # until server 1's log holds 32 KB (or 30 s: a busy machine)
  "$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds 1 --threads 2 --inflight 2 \
      --ledger "$led" --quiet >/dev/null 2>"$top/bank.err" || fail "bank failed: $(tail -n 3 "$top/bank.err")"
  seg=$(ls "$top"/data/ms1/redo-*.log | tail -n1)
  [ "$(rec_end "$seg")" -lt 32768 ] && [ $((SECONDS - t0)) -lt 30 ] || break
done
# The log writer writes its watermark within 100 ms of going idle: wait until
# the header's mark (the newer of its two copies) reaches the last record.
for i in $(seq 100); do
  read -r _ _ recs mark version <<<"$("$root/scripts/redo-seg" "$seg")"
  [ "$version" = 0 ] && { caught="no header"; break; }
  [ "$mark" -ge "$recs" ] && { caught=yes; break; }
  caught="mark $mark, records end at $recs"
  sleep 0.2
done
[ "$caught" = yes ] || echo "the watermark did not catch up: $caught (on a binary without it, the cuts below are not refused)"
cluster_kill 1
cp -a "$top/data/ms1" "$top/ms1.orig"

# The cut offsets: walk the records of the segment (after its 4 KiB header).
read -r size end byte record block <<<"$(/usr/bin/python3 - "$seg" "$seed" <<'PY'
import random, struct, sys
d = open(sys.argv[1], 'rb').read()
rnd = random.Random(int(sys.argv[2]))
pos = 4096 if d[:4] == b'LRSG' else 0
ends = []
while pos + 32 <= len(d):
    ln, _, lsn = struct.unpack_from('<IIQ', d, pos)
    size = (32 + ln + 7) & ~7
    if struct.unpack_from('<I', d, pos + 28)[0] != 0x4f44524c or lsn != pos + size:
        break
    pos += size
    ends.append(pos)
assert len(ends) > 20, "too few records"
mid = ends[len(ends) // 4: 3 * len(ends) // 4]
byte = rnd.randrange(mid[0], mid[-1])
while byte % 4096 == 0:
    byte += 1
record = rnd.choice(mid)
block = rnd.choice(mid) & ~4095
print(len(d), pos, byte, record, block)
PY
)"
[ -n "$block" ] || fail "cannot read the records of $seg"
echo "segment $(basename "$seg"): $size bytes, records end at $end"

restore() { rm -rf "$top/data/ms1" && cp -a "$top/ms1.orig" "$top/data/ms1"; }

for cut in byte record block; do
  at=${!cut}
  restore
  truncate -s "$at" "$seg"
  : >"$top/ms1.err"
  if cluster_restart 1 2>/dev/null; then
    "$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>&1 | tail -n1
    fail "$cut: server 1 started on a log cut at offset $at of $size"
  fi
  grep -Eq "redo: .*LSN [0-9]+.*A crash cannot leave this.*Refusing to start" "$top/ms1.err" \
    || fail "$cut: no message naming the damage: $(tail -n 3 "$top/ms1.err")"
  [ "$(stat -c %s "$seg")" = "$at" ] || fail "$cut: the refused start changed the log"
  echo "$cut cut at $at: refused: $(grep -o 'redo: .*' "$top/ms1.err" | head -n1 | cut -c1-240)"
done

# The operator accepts the loss: tolerate-tail starts, saying what it drops.
saved_args=("${CLUSTER_ARGS[@]}")
CLUSTER_ARGS+=(--recovery-mode tolerate-tail)
: >"$top/ms1.err"
cluster_restart 1 || fail "tolerate-tail did not start: $(tail -n 3 "$top/ms1.err")"
grep -Eq "recovery-mode tolerate-tail: .*(are lost|cut there)" "$top/ms1.err" \
  || fail "tolerate-tail said nothing about what it dropped: $(tail -n 3 "$top/ms1.err")"
echo "tolerate-tail: $(grep -o 'recovery-mode tolerate-tail.*' "$top/ms1.err" | head -n1 | cut -c1-200)"
cluster_kill 1
CLUSTER_ARGS=("${saved_args[@]}")

# The log as the crash left it: starts, and nothing acknowledged is missing.
restore
cluster_restart 1 || fail "the uncut log did not start: $(tail -n 3 "$top/ms1.err")"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$top/verify.err") \
  || fail "verify on the uncut log: $ver $(cat "$top/verify.err")"
echo "uncut: verify: $ver"
cluster_stop

# Small segments, checkpoints deleting the old ones.
export LOTUS_REDO_SEGMENT_BYTES=65536
CLUSTER_DATA=$top/small
cluster_start "$top" 1 --threads 1 --memory 64M --checkpoint-log 64K --checkpoint-interval 300 \
  || fail "the small-segment server did not start"
led2=$top/bank2.ledger
d=$top/small/ms0
t0=$SECONDS
for i in $(seq 60); do   # until checkpoints have deleted the first segment (or 60 s)
  [ $((SECONDS - t0)) -lt 60 ] || break
  "$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds 1 --threads 2 --inflight 2 \
      --ledger "$led2" --quiet >/dev/null 2>"$top/bank2.err" || fail "bank failed: $(tail -n 3 "$top/bank2.err")"
  [ -e "$d/redo-0000000000000000.log" ] || [ "$(ls "$d"/redo-*.log | wc -l)" -lt 2 ] || break
done
cluster_kill 0
unset LOTUS_REDO_SEGMENT_BYTES
[ -f "$d/MANIFEST" ] || fail "no checkpoint was taken"
[ -e "$d/redo-0000000000000000.log" ] && fail "no old segment was deleted after $((SECONDS - t0)) s: \
$(ls "$d" | tr '\n' ' ' | cut -c1-300); MANIFEST: $(grep -E 'seq|lsn|kept' "$d/MANIFEST" | tr '\n' ' '); \
$(grep -E 'ckpt|error|warn' "$top/ms0.err" | tail -n 5)"
[ "$(ls "$d"/redo-*.log | wc -l)" -ge 2 ] || fail "fewer than 2 segments: $(ls "$d")"
cp -a "$d" "$top/ms0.orig"

newest=$(ls "$d"/redo-*.log | tail -n1)
rm "$newest"
: >"$top/ms0.err"
cluster_restart 0 2>/dev/null && fail "server 0 started without its newest segment $(basename "$newest")"
grep -Eq "whose header records that the next segment .* was created; it is missing" "$top/ms0.err" \
  || fail "no message naming the missing segment: $(tail -n 3 "$top/ms0.err")"
echo "newest segment deleted: refused: $(grep -o 'redo: .*' "$top/ms0.err" | head -n1 | cut -c1-200)"

rm -rf "$d" && cp -a "$top/ms0.orig" "$d"
rm "$d/MANIFEST"
: >"$top/ms0.err"
cluster_restart 0 2>/dev/null && fail "server 0 started without its MANIFEST"
grep -Eq "the log in .* starts at LSN [0-9]+ .* but recovery needs it from LSN 0: .*MANIFEST missing" \
  "$top/ms0.err" || fail "no message naming the missing MANIFEST: $(tail -n 3 "$top/ms0.err")"
echo "MANIFEST deleted: refused: $(grep -o 'redo: .*' "$top/ms0.err" | head -n1 | cut -c1-200)"

rm -rf "$d" && cp -a "$top/ms0.orig" "$d"
cluster_restart 0 || fail "the intact small-segment log did not start: $(tail -n 3 "$top/ms0.err")"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led2" --verify --json 2>"$top/verify2.err") \
  || fail "verify on the intact log: $ver $(cat "$top/verify2.err")"
echo "intact: verify: $ver"
echo ok
