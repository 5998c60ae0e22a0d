#!/usr/bin/env bash
# timeout: 150
# Bit rot in pages.swap is never served as data and never reaches a
# checkpoint image (issue 20, item 3).  Two durable tiered memory servers
# (--memory 1M --capacity 64M: a 128-frame pool) hold a bank of 20000
# accounts (about 3x the pool, so most pages live in pages.swap).  Then 200
# bytes of each server's pages.swap are flipped while the servers run:
#  - `lotus bank --verify` either fails with an error, or reads the right
#    total (never a wrong total); the servers keep running, count the bad
#    swap pages in their tier stats (swap_crc_errors) and log them;
#  - after SIGTERM (whose final checkpoint must not copy a bad page into an
#    image) both servers restart, and --verify finds the right total and
#    every acknowledged transfer;
#  - after another SIGTERM (a good final checkpoint), a page of server 1's
#    newest image gets a bad extent header with a CRC that matches it
#    (damage-file forge: rot copied into an image, as main d0f6129 did):
#    server 1 restarts from the previous image and the log instead of
#    refusing to start, and --verify is clean again.
# The same on a YCSB table: a full-table scan (scan-all: the scan prefetch
# path, store_prefetch) fails with an error or returns every row; a --digest
# full read fails or gives the reference digest, never another one; after a
# SIGTERM restart, the reference digest.
. "$(dirname "$0")/lib.sh"
root=$ROOT
. "$root/scripts/lib-cluster.sh"
. "$root/scripts/lib-tier.sh"
top=$T
[ -n "${LOTUS_KEEP:-}" ] && echo "keeping $top"
at_exit 'cluster_stop'
unset LOTUS_TIER_FAULT LOTUS_PW_FAULT LOTUS_IO_FAULT LOTUS_TIER_PREFETCH
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
accounts=20000
tier=(--threads 1 --memory 1M --capacity 64M --durability sync)

tier_need

# rot_swap DIR SEED: flip 200 bytes of DIR/pages.swap
rot_swap() {
  [ -s "$1/pages.swap" ] || fail "$1/pages.swap is empty: nothing was evicted"
  "$root/scripts/damage-file" flip "$1/pages.swap" --count 200 --seed "$2" || fail "damage-file"
}
alive() {
  local s
  for s in "$@"; do
    kill -0 "${CLUSTER_PIDS[$s]}" 2>/dev/null || fail "server $s died: $(tail -n 5 "$dir/ms$s.err")"
  done
}
sigterm_restart() {
  local s
  for s in "$@"; do kill -TERM "${CLUSTER_PIDS[$s]}"; done
  for s in "$@"; do wait "${CLUSTER_PIDS[$s]}"; done
  for s in "$@"; do
    cluster_restart "$s" || fail "$1: server $s did not restart after SIGTERM: $(grep -i "error\|fail" "$dir/ms$s.err" | tail -n 3)"
  done
}

# --- the bank ---------------------------------------------------------------------
dir=$top/bank; mkdir -p "$dir"
CLUSTER_DATA=$dir/data CLUSTER_DURABILITY=sync
cluster_start "$dir" 2 "${tier[@]}" || fail "servers did not start: $(tail -n 3 "$dir"/ms*.err)"
led=$dir/bank.ledger
"$L" bank --config "$CLUSTER_INI" --accounts $accounts --opening 1000 --seconds 1 --threads 2 \
    --ledger "$led" --quiet >/dev/null 2>"$dir/bank.err" || fail "bank run: $(tail -n 5 "$dir/bank.err")"
for s in 0 1; do
  eval "$(tier_counts "$(tier_stats $s)")"
  echo "bank: server $s: $evict_dirty dirty evictions, $miss_reads miss reads, $resident of $frames frames resident"
  [ "$evict_dirty" -gt 0 ] || fail "server $s evicted nothing: the bank fits its pool"
  rot_swap "$dir/data/ms$s" $((s + 1))
done
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$dir/verify.err"); rc=$?
total=$(echo "$ver" | field total) err=$(echo "$ver" | sed -n 's/.*"error":"\([^"]*\)".*/\1/p')
echo "bank: verify on rotten swap files exited $rc, total '${total}': $(tail -n 1 "$dir/verify.err" | cut -c1-200)"
if [ "$(echo "$ver" | field ok)" = true ]; then   # it read only good pages
  [ $rc -eq 0 ] && [ "$total" = $((accounts * 1000)) ] || fail "verify ok with total $total, exit $rc: $ver"
else   # it must have been refused the data, not given wrong data
  [ $rc -ne 0 ] || fail "verify not ok but exited 0: $ver"
  case $err in
    *"Input/output error"*) ;;
    *) fail "verify read wrong data from rotten swap pages (total $total, want $((accounts * 1000))): $ver" ;;
  esac
fi
alive 0 1
bad=0
for s in 0 1; do
  st=$(tier_stats $s) || fail "no stats from server $s"
  n=$(echo "$st" | field swap_crc_errors)
  echo "bank: server $s: swap_crc_errors '$n'; log: $(grep -m1 "fails its checksum" "$dir/ms$s.err" | cut -c1-200)"
  bad=$((bad + ${n:-0}))
done
[ "$bad" -gt 0 ] || fail "no server counted a bad swap page (swap_crc_errors)"
grep -q "pages.swap.*fails its checksum" "$dir"/ms*.err || fail "no server logged a checksum mismatch"
sigterm_restart 0 1
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$dir/verify2.err") \
  || fail "verify after the SIGTERM restart failed: $ver $(tail -n 3 "$dir/verify2.err")"
echo "bank: verify after the SIGTERM restart: $ver"
[ "$(echo "$ver" | field ok)" = true ] || fail "verify after the restart not ok: $ver"
[ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] || fail "total changed: $ver"
kill -TERM "${CLUSTER_PIDS[1]}"; wait "${CLUSTER_PIDS[1]}"
grep -q '^prev_seq' "$dir/data/ms1/MANIFEST" || fail "server 1 has no previous checkpoint to fall back to"
"$root/scripts/damage-file" forge "$dir/data/ms1" --seed 3 || fail "damage-file forge"
cluster_restart 1 || fail "server 1 did not restart from the previous image: $(grep -i "error\|fail" "$dir/ms1.err" | tail -n 3)"
echo "bank: server 1 restarted: $(grep "has the right CRC\|recovering from the previous" "$dir/ms1.err" | tail -n 2 | cut -c1-160 | tr '\n' '|')"
grep -q "recovering from the previous checkpoint" "$dir/ms1.err" || fail "server 1 did not say it fell back"
ver=$("$L" bank --config "$CLUSTER_INI" --ledger "$led" --verify --json 2>"$dir/verify3.err") \
  || fail "verify after the fallback failed: $ver $(tail -n 3 "$dir/verify3.err")"
[ "$(echo "$ver" | field ok)" = true ] && [ "$(echo "$ver" | field total)" = $((accounts * 1000)) ] \
  || fail "verify after the fallback: $ver"
echo "bank: verify after the image fallback: ok"
echo "ok: bank"
cluster_stop

# --- YCSB, a --digest full read (scan prefetch) -------------------------------------
records=12000
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records $records "$@"; }
digest_of() { sed -n 's/.*"digest":"\([0-9a-f]*\)".*/\1/p'; }
full_read() { Y --threads 1 --no-load --no-run --digest; }
dir=$top/ref; mkdir -p "$dir"
unset CLUSTER_DATA
cluster_start "$dir" 1 --threads 1 --memory 64M || fail "reference server did not start"
ref=$(Y --threads 2 --no-run --digest | digest_of)
[ -n "$ref" ] || fail "no reference digest"
cluster_stop
dir=$top/ycsb; mkdir -p "$dir"
CLUSTER_DATA=$dir/data CLUSTER_DURABILITY=sync
cluster_start "$dir" 1 "${tier[@]}" || fail "ycsb: server did not start: $(tail -n 3 "$dir"/ms0.err)"
d=$(Y --threads 2 --no-run --digest | digest_of)
[ "$d" = "$ref" ] || fail "ycsb: load digest '$d', want $ref"
rot_swap "$dir/data/ms0" 7
out=$("$(dirname "$L")/scan-all" "$CLUSTER_INI" usertable 2>"$dir/scan.err"); rc=$?
rows=$(echo "$out" | field rows)
st=$(tier_stats 0)
echo "ycsb: a full scan on a rotten swap file exited $rc, rows '$rows': $(tail -n 1 "$dir/scan.err" | cut -c1-160); prefetch_reads $(echo "$st" | field prefetch_reads), prefetch_errors $(echo "$st" | field prefetch_errors)"
[ $rc -ne 0 ] || [ "$rows" = $records ] || fail "ycsb: the scan returned $rows rows, want $records or an error"
[ "$(echo "$st" | field prefetch_reads)" -gt 0 ] 2>/dev/null || fail "ycsb: the scan prefetched nothing: $st"
out=$(full_read 2>"$dir/read.err"); rc=$?
d=$(echo "$out" | digest_of)
echo "ycsb: full read on a rotten swap file exited $rc, digest '$d': $(tail -n 1 "$dir/read.err" | cut -c1-200)"
[ -z "$d" ] || [ "$d" = "$ref" ] || fail "ycsb: a full read of rotten swap pages gave digest $d, want $ref or an error"
alive 0
st=$(tier_stats 0)
echo "ycsb: swap_crc_errors $(echo "$st" | field swap_crc_errors), prefetch_errors $(echo "$st" | field prefetch_errors)"
[ "$(echo "$st" | field swap_crc_errors)" -gt 0 ] 2>/dev/null || fail "ycsb: no bad swap page counted: $st"
sigterm_restart 0
d=$(full_read | digest_of)
[ "$d" = "$ref" ] || fail "ycsb: after the SIGTERM restart the digest is '$d', want $ref"
echo "ok: ycsb"
echo ok
