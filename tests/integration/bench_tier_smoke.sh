#!/usr/bin/env bash
# timeout: 120
# scripts/bench-tier.sh runs end to end with tiny sizes (a 2 MiB pool, 3x
# that in records, 0.3 s runs, one round) and its --json output is one JSON
# object on stdout with every part's figures; its --help works and a bad
# option is refused (exit 2).
. "$(dirname "$0")/lib.sh"
root=$ROOT
B=$root/scripts/bench-tier.sh
dir=$T
"$B" --help >"$dir/help" 2>&1 || fail "--help exited $?"
grep -q -- "--page-writers\|--writers" "$dir/help" || fail "--help: $(head -n 3 "$dir/help")"
"$B" --rounds x >/dev/null 2>"$dir/bad"; rc=$?
[ $rc -eq 2 ] || fail "--rounds x exited $rc, want 2"
echo "ok: $(cat "$dir/bad")"
LOTUS_BIN=$L "$B" --json --memory 2 --seconds 0.3 --warm 0.3 --rounds 1 --writers 1,2 --threads 2 \
    >"$dir/out.json" 2>"$dir/err" || fail "bench-tier.sh exited $?: $(tail -n 5 "$dir/err")"
/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
u, s, y = r["update"], r["scan"], r["ycsb"]
assert sorted((o["backend"], o["writers"]) for o in u) == [("aio", 1), ("aio", 2), ("uring", 1), ("uring", 2)], u
for o in u:
    assert o["txn_per_s"] > 0 and o["pw_pages_per_s"] > 0 and o["cpu_us_per_page"] > 0, o
assert sorted(o["backend"] for o in s) == ["aio", "uring"], s
for o in s:
    assert o["recovery_pages"] > 0 and o["read_pages"] > 0, o
assert sorted((o["workload"], o["mode"]) for o in y) == [("A", "memory"), ("A", "tiered"), ("C", "memory"), ("C", "tiered")], y
for o in y:
    assert o["txn_per_s"] > 0, o
    assert (o["miss_per_op"] or 0) > 0 if o["mode"] == "tiered" and o["workload"] == "C" else True, o
print("ok: update %d, scan %d, ycsb %d rows; uring N=1: %.0f pages/s written" % (len(u), len(s), len(y),
      [o for o in u if o["backend"] == "uring" and o["writers"] == 1][0]["pw_pages_per_s"]))
' "$dir/out.json" || fail "bad JSON: $(head -c 600 "$dir/out.json")"
echo ok
