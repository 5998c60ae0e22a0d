#!/usr/bin/env bash
# timeout: 90
# A full disk makes a durable server read-only; it must not lock its readers
# out.  Two durable memory servers keep their data on a small ext4 file system
# the test creates (a loop mount; skipped where it cannot mount).  `lotus bank`
# runs, the file system is filled to the last block, and bank runs on until
# commits fail (ENOSPC: the servers turn read-only).  Then `lotus bank
# --verify` - which opens the existing tables and reads them - must succeed
# with every acknowledged transfer present, and a new table is still refused.
. "$(dirname "$0")/lib.sh"
skip() { echo "SKIP: $*"; exit 77; }
root=$ROOT
. "$root/scripts/lib-cluster.sh"
top=$T
mnt=$top/mnt
cleanup() {
  cluster_stop
  local i
  for i in $(seq 50); do mountpoint -q "$mnt" || break; umount "$mnt" 2>/dev/null || sleep 0.1; done
  mountpoint -q "$mnt" && umount -l "$mnt"
  rm -rf "$top"
}
at_exit cleanup
[ "$(id -u)" = 0 ] || skip "needs root to mount a small file system"
command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4"
truncate -s 24M "$top/fs.img"
mkfs.ext4 -q -F "$top/fs.img" >/dev/null 2>&1 || skip "mkfs.ext4 failed"
mkdir "$mnt"
mount -o loop "$top/fs.img" "$mnt" 2>/dev/null || skip "cannot loop-mount (no loop devices?)"

CLUSTER_DATA=$mnt/data CLUSTER_DURABILITY=sync
cluster_start "$top" 2 --threads 1 --memory 32M --checkpoint-log 1G || fail "servers did not start"
led=$top/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts 50 --seconds 0.5 --threads 2 --ledger "$led" \
    --quiet >/dev/null 2>"$top/bank0.err" || fail "bank failed: $(tail -n 3 "$top/bank0.err")"
dd if=/dev/zero of="$mnt/filler" bs=64K 2>/dev/null   # until the disk is full
sync
"$L" bank --config "$CLUSTER_INI" --seconds 8 --threads 2 --ledger "$led" --quiet \
    >"$top/bank.out" 2>"$top/bank.err"
echo "bank on a full disk exited $?: $(tail -n 1 "$top/bank.err" | cut -c1-160)"
grep -q "refusing every write\|No space left" "$top"/ms*.err \
  || fail "the servers never noticed the full disk: $(tail -n 3 "$top/ms0.err")"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$top/verify.err") \
  || fail "verify on a read-only server failed: $ver $(tail -n 3 "$top/verify.err")"
echo "$ver" | grep -q '"ok":true' || fail "verify: $ver"
echo "verify on the full disk: $ver"
# writes stay refused: a new table gets LOTUS_EREADONLY, not a hang
"$L" bank --config "$CLUSTER_INI" --ledger "$top/other.ledger" --seconds 0.3 --accounts 5 \
    --quiet >/dev/null 2>"$top/bank2.err" && fail "a transfer run succeeded on a full disk"
echo ok
