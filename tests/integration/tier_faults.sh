#!/usr/bin/env bash
# timeout: 150
# I/O faults on a tiered memory server (issue 16) lose nothing and never
# return wrong data.  One durable server, --memory 4M --capacity 64M, a YCSB
# table of 12000 records of 1 KiB (3x the pool); the digests of the load and of
# one round of uniform workload A are taken first on an untiered in-memory
# server.  Then, each on a fresh tiered server:
#   evict-eio     LOTUS_TIER_FAULT=evict:10:EIO:20: 20 eviction writes fail;
#   evict-enospc  the same with ENOSPC: the pages stay dirty and are written
#                 later; load + round give the reference digest, also after a
#                 SIGTERM restart; the stats count the eviction write errors;
#   miss-eio      LOTUS_TIER_FAULT=miss:100:EIO:2: the full read that meets the
#                 failing miss reads fails with an error (no digest printed,
#                 or the right one), the server keeps running, and the next
#                 full read gives the reference digest;
#   ckpt-eio      LOTUS_PW_FAULT="0=cqe:2:EIO;1=cqe:2:EIO" on a 2000-record
#                 table that fits the pool (so the page writers write only
#                 checkpoints, one every 1 MiB of log): a checkpoint page write
#                 of each writer fails; kill -9, restart: the round's digest;
#   ring          LOTUS_PW_FAULT="0=enter:4": page writer 0's io_uring fails
#                 mid-run and falls back to libaio, writer 1 stays on
#                 io_uring; kill -9, restart: the round's digest (no page lost);
#   full-disk     (root only: a 40 MiB loop-mounted ext4 as the data dir) the
#                 load, then the disk is filled: a full read still gives the
#                 load's digest, the final checkpoint at SIGTERM cannot be
#                 written; with the space back the server recovers the load.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
mnt=$top/mnt
cleanup() {
  cluster_stop
  local i
  for i in $(seq 50); do mountpoint -q "$mnt" 2>/dev/null || break; umount "$mnt" 2>/dev/null || sleep 0.1; done
  mountpoint -q "$mnt" 2>/dev/null && umount -l "$mnt"
  rm -rf "$top"
}
at_exit cleanup
unset LOTUS_TIER_FAULT LOTUS_PW_FAULT LOTUS_IO_FAULT
records=12000
pool=(--threads 1 --memory 4M --capacity 64M --durability sync)
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
round() { Y --no-load --workload A --dist uniform --threads 1 --txns 200 --seed 21 --digest; }
full_read() { Y --threads 1 --no-load --no-run --digest; }
alive() { kill -0 "${CLUSTER_PIDS[0]}" 2>/dev/null || fail "$1: the server died: $(tail -n 5 "$dir/ms0.err")"; }
counts() { local st; st=$(tier_stats) || fail "$1: no stats"; eval "$(tier_counts "$st")"; }

# start_case NAME [extra memserver options]: a fresh tiered server in $top/NAME
start_case() {
  dir=$top/$1; mkdir -p "$dir"
  CLUSTER_DATA=${DATA_ROOT:-$dir}/data CLUSTER_DURABILITY=sync
  shift
  cluster_start "$dir" 1 "${pool[@]}" "$@" || fail "$(basename "$dir"): server did not start: $(tail -n 3 "$dir/ms0.err")"
}
load() {
  Y --threads 2 --no-run >"$dir/load.json" 2>"$dir/load.err" \
    || fail "$1: load: $(tail -n 3 "$dir/load.err")"
}
restart_clean() {   # $1 = case, $2 = TERM or KILL
  unset LOTUS_TIER_FAULT LOTUS_PW_FAULT
  if [ "$2" = TERM ]; then
    kill -TERM "${CLUSTER_PIDS[0]}"; wait "${CLUSTER_PIDS[0]}"
  else
    cluster_kill 0
  fi
  cluster_restart 0 || fail "$1: no restart after SIG$2: $(tail -n 3 "$dir/ms0.err")"
}

tier_need

# --- the reference ---------------------------------------------------------------
dir=$top/ref; mkdir -p "$dir"
cluster_start "$dir" 1 --threads 1 --memory 64M || fail "reference server did not start"
ref_load=$(Y --threads 2 --no-run --digest | digest_of)
ref_round=$(round | digest_of)
[ -n "$ref_load" ] && [ -n "$ref_round" ] || fail "no reference digests"
cluster_stop
dir=$top/ref-small; mkdir -p "$dir"
cluster_start "$dir" 1 --threads 1 --memory 64M || fail "reference server did not start"
Y --records 2000 --threads 2 --no-run >/dev/null || fail "reference: small load"
ref_small=$(Y --records 2000 --no-load --workload A --dist uniform --threads 1 --txns 200 --seed 21 --digest | digest_of)
[ -n "$ref_small" ] || fail "no reference digest for the small table"
echo "reference: load $ref_load, round $ref_round, small table round $ref_small"
cluster_stop

# --- eviction writes fail (EIO, ENOSPC) ---------------------------------------------
for err in EIO ENOSPC; do
  name=evict-$(echo $err | tr A-Z a-z)
  export LOTUS_TIER_FAULT=evict:10:$err:20
  start_case $name
  load $name
  d=$(round | digest_of)
  [ "$d" = "$ref_round" ] || fail "$name: round digest '$d', want $ref_round"
  alive $name; counts $name
  echo "$name: round digest ok; evict_errors $evict_errors, pw_errors $pw_errors, evict_dirty $evict_dirty"
  [ "$evict_errors" -gt 0 ] || [ "$pw_errors" -gt 0 ] || fail "$name: no eviction write error counted (did the fault fire?)"
  [ "$frame_timeouts" -eq 0 ] || fail "$name: $frame_timeouts requests found no frame (20 failed writes should be retried)"
  restart_clean $name TERM
  d=$(full_read | digest_of)
  [ "$d" = "$ref_round" ] || fail "$name: after the restart the digest is '$d', want $ref_round"
  echo "ok: $name"
  cluster_stop
done

# --- a miss read fails ------------------------------------------------------------------
export LOTUS_TIER_FAULT=miss:100:EIO:2
start_case miss-eio
load miss-eio
out=$(full_read 2>"$dir/read.err"); rc=$?
alive miss-eio; counts miss-eio
echo "miss-eio: full read exited $rc: $(tail -n 1 "$dir/read.err" | cut -c1-160); miss_errors $miss_errors"
[ "$miss_errors" -gt 0 ] || fail "miss-eio: no miss read error counted (did the fault fire?)"
d=$(echo "$out" | digest_of)
if [ $rc -eq 0 ]; then   # the client must have been told, or have got the right data
  [ "$d" = "$ref_load" ] || fail "miss-eio: a failed miss read gave a digest '$d', want $ref_load or an error"
  echo "miss-eio: the read was retried and gave the right digest"
else
  [ -z "$d" ] || [ "$d" = "$ref_load" ] || fail "miss-eio: wrong digest $d after an error"
fi
d=""
for i in 1 2 3; do d=$(full_read | digest_of); [ -n "$d" ] && break; done
[ "$d" = "$ref_load" ] || fail "miss-eio: the next full read gives '$d', want $ref_load"
alive miss-eio
echo "ok: miss-eio"
cluster_stop

# --- a page writer's ring fails mid-run ----------------------------------------------
unset LOTUS_TIER_FAULT
export LOTUS_PW_FAULT="0=enter:4"
start_case ring --page-writers 2
load ring
d=$(round | digest_of)
[ "$d" = "$ref_round" ] || fail "ring: round digest '$d', want $ref_round"
alive ring; st=$(tier_stats); counts ring
be=$(/usr/bin/python3 -c 'import json,sys; print(" ".join(w["backend"] for w in json.loads(sys.argv[1])["tier"]["page_writers"]))' "$st")
echo "ring: writers on [$be], fallbacks $fallbacks, clones $clones, pages written $pw_pages"
[ "$writers" -eq 2 ] || fail "ring: --page-writers 2 gave $writers writers: $st"
[ "$fallbacks" -ge 1 ] && [ "${be%% *}" = aio ] || fail "ring: writer 0 did not fall back to libaio: $st"
[ "${be##* }" = uring ] || fail "ring: writer 1 left io_uring too (the fallback is per writer): $st"
restart_clean ring KILL
d=$(full_read | digest_of)
[ "$d" = "$ref_round" ] || fail "ring: after kill -9 and restart the digest is '$d', want $ref_round"
echo "ok: ring"
cluster_stop
unset LOTUS_PW_FAULT

# --- a real full disk ------------------------------------------------------------------
full_disk() {
if [ "$(id -u)" != 0 ] || ! command -v mkfs.ext4 >/dev/null; then
  echo "full-disk: not run (needs root and mkfs.ext4 for a loop mount)"
  return 0
fi
truncate -s 40M "$top/fs.img"
mkfs.ext4 -q -F "$top/fs.img" >/dev/null 2>&1 || fail "full-disk: mkfs.ext4 failed"
mkdir "$mnt"
if ! mount -o loop "$top/fs.img" "$mnt" 2>/dev/null; then
  echo "full-disk: not run (cannot loop-mount)"; return 0
fi
DATA_ROOT=$mnt start_case full-disk --checkpoint-log 1G
load full-disk
dd if=/dev/zero of="$mnt/filler" bs=64K 2>/dev/null   # until the disk is full
sync
d=$(full_read | digest_of)
alive full-disk; counts full-disk
echo "full-disk: full read on a full disk: digest '$d'; evict_errors $evict_errors, miss preads $miss_reads"
[ "$d" = "$ref_load" ] || fail "full-disk: a full read on a full disk gave '$d', want $ref_load"
kill -TERM "${CLUSTER_PIDS[0]}"; wait "${CLUSTER_PIDS[0]}"; rc=$?
echo "full-disk: SIGTERM on a full disk: exit $rc: $(grep -i "final checkpoint" "$dir/ms0.err" | tail -n 1 | cut -c1-200)"
rm -f "$mnt/filler"; sync
cluster_restart 0 || fail "full-disk: no restart with the space back: $(tail -n 3 "$dir/ms0.err")"
d=$(full_read | digest_of)
[ "$d" = "$ref_load" ] || fail "full-disk: after the restart the digest is '$d', want $ref_load"
echo "ok: full-disk"
cluster_stop
}
full_disk

# --- checkpoint page writes fail ---------------------------------------------------------
# The page writers write both evicted pages and checkpoints; with a table that
# fits the pool nothing is evicted, so every write of theirs is a checkpoint
# page write, and each writer's 2nd one fails with EIO.
export LOTUS_PW_FAULT="0=cqe:2:EIO;1=cqe:2:EIO"
start_case ckpt-eio --checkpoint-log 1M --page-writers 2
small=(--records 2000)
Y "${small[@]}" --threads 2 --no-run >/dev/null 2>"$dir/load.err" || fail "ckpt-eio: load: $(tail -n 2 "$dir/load.err")"
d=$(Y "${small[@]}" --no-load --workload A --dist uniform --threads 1 --txns 200 --seed 21 --digest | digest_of)
[ "$d" = "$ref_small" ] || fail "ckpt-eio: round digest '$d', want $ref_small"
alive ckpt-eio; st=$(tier_stats); counts ckpt-eio
ck=$(/usr/bin/python3 -c 'import json,sys
r=json.loads(sys.argv[1]); t=r.get("tier") or r["durability"]["tier"]
print(sum(w.get("ckpt_pages", 0) for w in t["page_writers"]))' "$st")
echo "ckpt-eio: checkpoint pages written by the page writers $ck, writer errors $pw_errors, dirty evictions $evict_dirty"
[ "$evict_dirty" -eq 0 ] || fail "ckpt-eio: pages were evicted, so the failed write may not have been a checkpoint's: $st"
[ "$ck" -gt 0 ] || fail "ckpt-eio: the page writers wrote no checkpoint pages: $st"
grep -Ei "(ckpt|checkpoint).*(fail|error|Input/output)" "$dir/ms0.err" | tail -n 1 | sed "s/^/ckpt-eio: server log: /" | grep . \
  || fail "ckpt-eio: no failed checkpoint write reported: $(grep -i "ckpt\|checkpoint" "$dir/ms0.err" | tail -n 3)"
restart_clean ckpt-eio KILL
d=$(Y "${small[@]}" --threads 1 --no-load --no-run --digest | digest_of)
[ "$d" = "$ref_small" ] || fail "ckpt-eio: after kill -9 and restart the digest is '$d', want $ref_small"
echo "ok: ckpt-eio"
cluster_stop

echo ok
