#!/usr/bin/env bash
# timeout: 90
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# Ctrl-C on a --local run stops the client, not its servers first: ycsb
# prints the results it measured (valid JSON with --json) and exits 0, bank
# finishes its in-flight transfers, writes no "maybe" line and verifies.
# `timeout -s INT` signals the whole process group, as a terminal does.
. "$(dirname "$0")/lib.sh"
dir=$T

timeout --preserve-status -s INT 4 "$L" ycsb --local 2 --server-threads 1 --threads 1 --records 2000 \
  --seconds 30 --warmup 0.5 --json --quiet >"$dir/y.json" 2>"$dir/y.err"; rc=$?
[ $rc -eq 0 ] || { cat "$dir/y.err"; fail "ycsb after SIGINT exited $rc, want 0"; }
/usr/bin/python3 - "$dir/y.json" <<'PY' || fail "ycsb --json after SIGINT: $(cat "$dir/y.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["txns_committed"] > 0, r
assert 1 < r["seconds"] < 10, r["seconds"]
print("ok: ycsb interrupted after %.1f s: %d committed, %.0f txn/s"
      % (r["seconds"], r["txns_committed"], r["txn_per_s"]))
PY
[ $? -eq 0 ] || exit 1

timeout --preserve-status -s INT 4 "$L" ycsb --local 2 --server-threads 1 --threads 1 --records 2000 \
  --seconds 30 --warmup 0.5 --quiet >"$dir/y.txt" 2>"$dir/y2.err"; rc=$?
[ $rc -eq 0 ] || { cat "$dir/y2.err"; fail "ycsb (table) after SIGINT exited $rc"; }
grep -q "throughput" "$dir/y.txt" || fail "no results table after SIGINT: $(cat "$dir/y.txt")"
echo "ok: ycsb table after SIGINT"

timeout --preserve-status -s INT 4 "$L" bank --local 2 --server-threads 1 --threads 2 --accounts 100 \
  --seconds 30 --ledger "$dir/ledger" --verify --quiet >"$dir/b.txt" 2>"$dir/b.err"; rc=$?
[ $rc -eq 0 ] || { cat "$dir/b.txt" "$dir/b.err"; fail "bank after SIGINT exited $rc, want 0"; }
grep -q '^maybe' "$dir/ledger" && fail "bank after SIGINT wrote maybe lines: $(grep -c '^maybe' "$dir/ledger")"
grep -q "verify: OK" "$dir/b.txt" || fail "bank --verify after SIGINT: $(cat "$dir/b.txt")"
echo "ok: bank after SIGINT: $(grep committed "$dir/b.txt" | head -1)"

# Ctrl-C during the load is not a result: exit 1, nothing on stdout, the
# reason on stderr (also with --json).
timeout --preserve-status -s INT 1 "$L" ycsb --local 2 --server-threads 1 --threads 1 \
  --records 2000000 --record-size 100 --json --quiet >"$dir/l.json" 2>"$dir/l.err"; rc=$?
[ $rc -eq 1 ] || fail "ycsb interrupted while loading exited $rc, want 1 ($(cat "$dir/l.err"))"
[ -s "$dir/l.json" ] && fail "ycsb interrupted while loading printed: $(cat "$dir/l.json")"
grep -q "interrupted while loading" "$dir/l.err" || fail "no reason on stderr: $(cat "$dir/l.err")"
echo "ok: $(cat "$dir/l.err")"
