#!/usr/bin/env bash
# timeout: 90
# sanitizers: skip (it checks a benchmark driver's output: two fresh servers loaded
# and timed, 67 s under ASan, for code the ycsb tests run there too)
# scripts/bench-percore --records-sweep: one row per record count, each from
# a fresh server loaded with that many records, a growth figure over the
# first count, pure JSON on stdout with --json; a bad count is a clear error.
. "$(dirname "$0")/lib.sh"
[ "$(nproc)" -ge 2 ] || { echo "skip: needs 2 cores"; exit 77; }
command -v taskset >/dev/null || { echo "skip: no taskset"; exit 77; }
cd "$(dirname "$0")/../.."
dir=$T
LOTUS_BIN=$L scripts/bench-percore --records-sweep "2000 5000" --transports tcp --sizes 64 \
    --workloads C --seconds 1 --no-redis --json >"$dir/out" 2>"$dir/err" \
  || fail "sweep failed: $(tail -n 5 "$dir/err")"
/usr/bin/python3 - "$dir/out" <<'EOF' || fail "bad sweep output: $(cat "$dir/out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["records"] == [2000, 5000], d["records"]
rows = d["rows"]
assert [r["records"] for r in rows] == [2000, 5000], rows
for r in rows:
    assert r["txn_per_s"] > 0 and r["server_us_per_req"] > 0 and r["load_s"] >= 0, r
    assert r["server_proc_us_per_req"] > 0, r
assert rows[0]["growth"] == 1.0, rows[0]
assert abs(rows[1]["growth"] - rows[1]["server_us_per_req"] / rows[0]["server_us_per_req"]) < 0.01, rows
assert d["redis"] is None, d["redis"]
EOF
echo "ok: two rows, growth $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rows"][1]["growth"])' "$dir/out")"
scripts/bench-percore --records-sweep "1e5" >/dev/null 2>"$dir/bad"; rc=$?
[ $rc -eq 2 ] || fail "a bad record count exited $rc"
grep -q "record count 1e5" "$dir/bad" || fail "no clear error: $(cat "$dir/bad")"
echo "ok: a bad count is refused: $(cat "$dir/bad")"
