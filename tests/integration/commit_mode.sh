#!/usr/bin/env bash
# timeout: 90
# The commit mode as a user sets it: `--commit two_phase|one_phase` on ycsb
# and bank, `commit = ...` in the config's [cluster].  Two-phase (the
# default) PREPAREs transactions that write on both servers: YCSB A sends
# PREPARE requests (about 2 per transaction), one_phase none.  (Since the
# COMMIT notices ride on the next transaction's messages, both send about as
# many messages.)  Bad values exit 2 with one line.
. "$(dirname "$0")/lib.sh"
dir=$T
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
at_exit 'cluster_stop'
field() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" | tail -n1; }
# PREPARE requests per committed transaction (the first by_type: the run's)
prep() { grep -o '"prepare":{"ops_per_txn":[0-9.]*' | head -n1 | cut -d: -f3; }

expect2() {
  local out rc
  out=$("$L" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "lotus $* exited $rc, want 2"
  [ "$(printf '%s\n' "$out" | grep -vc 'UCX  WARN')" -eq 1 ] || fail "lotus $*: want one line: $out"
  echo "ok: lotus $* -> $out"
}
expect2 ycsb --commit three_phase
expect2 bank --ledger "$dir/l" --commit sometimes
printf '[cluster]\ncommit = sometimes\n\n[memserver 0]\nlisten = 127.0.0.1:7000\n' >"$dir/bad.ini"
expect2 bank --ledger "$dir/l" --config "$dir/bad.ini"
"$L" ycsb --help | grep -q -- '--commit' || fail "ycsb --help lacks --commit"
"$L" bank --help | grep -q -- '--commit' || fail "bank --help lacks --commit"

declare -A msgs
for c in default two_phase one_phase; do
  extra=(); [ $c = default ] || extra=(--commit $c)
  j=$("$L" ycsb --local 2 --server-threads 1 --threads 1 --records 2000 --txns 300 --warmup 0 \
        --workload A --json --quiet "${extra[@]}" 2>"$dir/err") || fail "ycsb $c: $(cat "$dir/err")"
  msgs[$c]=$(echo "$j" | prep)
  echo "ycsb A, commit $c: $(echo "$j" | field txn_per_s) txn/s, $(echo "$j" | field msgs_per_txn) msgs/txn, ${msgs[$c]} PREPAREs/txn"
done
awk -v a="${msgs[two_phase]}" -v b="${msgs[one_phase]}" 'BEGIN{exit !(a > 1 && b == 0)}' \
  || fail "two_phase does not send its PREPARE round (${msgs[two_phase]} vs ${msgs[one_phase]} PREPAREs/txn)"
awk -v a="${msgs[default]}" 'BEGIN{exit !(a > 1)}' \
  || fail "the default is not two_phase (${msgs[default]} PREPAREs/txn)"

# a bank on one_phase still verifies when nothing fails
out=$("$L" bank --local 2 --commit one_phase --accounts 30 --seconds 0.5 --threads 2 \
      --server-threads 1 --ledger "$dir/b.ledger" --verify --json --quiet) \
  || fail "bank one_phase: $out"
[ "$(echo "$out" | tail -n1 | field ok)" = true ] || fail "bank one_phase verify: $out"
echo "bank one_phase: $(echo "$out" | tail -n1)"

# commit = one_phase in [cluster] is what a --config client uses
cluster_start "$dir" 2 --threads 1 --memory 64M || fail "servers did not start"
sed 's/^\[cluster\]$/[cluster]\ncommit = one_phase/' "$CLUSTER_INI" >"$dir/one.ini"
grep -q '^commit = one_phase' "$dir/one.ini" || fail "cannot write the config"
for ini in "$CLUSTER_INI" "$dir/one.ini"; do
  j=$("$L" ycsb --config "$ini" --threads 1 --records 2000 --txns 300 --warmup 0 --workload A \
        --json --quiet 2>"$dir/err") || fail "ycsb --config $ini: $(cat "$dir/err")"
  m=$(echo "$j" | prep)
  echo "ycsb A --config $(basename "$ini"): $m PREPAREs/txn"
  [ "$ini" = "$CLUSTER_INI" ] && m2=$m
done
awk -v a="$m2" -v b="$m" 'BEGIN{exit !(a > 1 && b == 0)}' \
  || fail "commit = one_phase in the config is ignored ($m2 vs $m PREPAREs/txn)"
echo ok
