#!/usr/bin/env bash
# bench-tier-scan.sh - a cold full-table scan on a tiered memory server, with
# and without the scan prefetch (LOTUS_TIER_PREFETCH=0), on io_uring and on
# libaio (LOTUS_IO=aio).  One durable server on 127.0.0.1 (--memory MIB,
# RECORDS x 1 KiB: 3x the pool by default) is loaded once and stopped; each
# run restarts it (nothing resident) and times build/bin/scan-all (the whole
# table in key order, 1000 rows per scan).  Reports per configuration the
# medians over the rounds (configurations alternate within a round): wall
# seconds, pages read (prefetch + miss preads), pages/s, and worker CPU per
# page read (the worker threads' CPU from the server's stats).
#   scripts/bench-tier-scan.sh [--memory MIB] [--records N] [--rounds N]
set -euo pipefail
cd "$(dirname "$0")/.."
L=${LOTUS_BIN:-$PWD/build/bin/lotus}
SCAN=$(dirname "$L")/scan-all
MEM=16 RECORDS="" ROUNDS=3
while [ $# -gt 0 ]; do
  case $1 in
    --memory) MEM=$2; shift 2 ;;
    --records) RECORDS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench-tier-scan: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
RECORDS=${RECORDS:-$((MEM * 1024 * 3 * 7 / 8))}
CAP=$((MEM * 8))
. scripts/lib-cluster.sh
. scripts/lib-tier.sh
work=$(mktemp -d)
trap 'cluster_stop; rm -rf "$work"' EXIT
data=$work/data
start() { CLUSTER_DATA=$data CLUSTER_DURABILITY=sync cluster_start "$work/s" 1 --threads 1 \
  --durability sync --memory "${MEM}M" --capacity "${CAP}M"; }
mkdir -p "$work/s"
unset LOTUS_TIER_PREFETCH LOTUS_IO
start
"$L" ycsb --config "$CLUSTER_INI" --quiet --json --records "$RECORDS" --threads 2 --no-run >/dev/null
cluster_stop
res=$work/res; : >"$res"
for ((r = 1; r <= ROUNDS; r++)); do
  for cfg in uring:1 uring:0 aio:1 aio:0; do
    be=${cfg%:*} pf=${cfg#*:}
    LOTUS_IO=$be LOTUS_TIER_PREFETCH=$pf start
    s0=$(tier_stats)
    j=$("$SCAN" "$CLUSTER_INI" usertable) || { echo "bench-tier-scan: scan-all failed ($be, prefetch $pf)" >&2; exit 1; }
    s1=$(tier_stats)
    cluster_stop
    /usr/bin/python3 - "$be" "$pf" "$j" "$s0" "$s1" >>"$res" <<'PY'
import json, sys
be, pf, j = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
a, b = json.loads(sys.argv[4]), json.loads(sys.argv[5])
t = lambda r: r.get("tier") or (r.get("durability") or {}).get("tier") or {}
ta, tb = t(a), t(b)
d = lambda k: int(tb.get(k) or 0) - int(ta.get(k) or 0)
pages = d("prefetch_reads") + d("miss_reads")
print(json.dumps({"backend": be, "prefetch": pf, "rows": j["rows"], "s": j["seconds"],
    "pages": pages, "prefetched": d("prefetched"), "batches": d("prefetch_batches"),
    "miss_reads": d("miss_reads"), "pages_per_s": pages / j["seconds"],
    "cpu_us_per_page": (b["cpu_ns"] - a["cpu_ns"]) / 1e3 / pages if pages else None}))
PY
    echo "bench-tier-scan: round $r: $(tail -n 1 "$res")" >&2
  done
done
/usr/bin/python3 - "$res" "$MEM" "$RECORDS" "$ROUNDS" <<'PY'
import json, sys, statistics as S
rows = [json.loads(l) for l in open(sys.argv[1])]
print("cold full-table scan: pool %s MiB, %s records of 1 KiB, median of %s rounds" % tuple(sys.argv[2:5]))
print("  %-6s %-8s %8s %8s %9s %8s %10s %11s" % ("io", "prefetch", "rows", "s", "pages", "batches", "pages/s", "cpu us/page"))
for be in ("uring", "aio"):
    for pf in (1, 0):
        g = [r for r in rows if r["backend"] == be and r["prefetch"] == pf]
        m = lambda k: S.median([r[k] for r in g if r[k] is not None])
        print("  %-6s %-8s %8d %8.3f %9d %8d %10.0f %11.2f" % (be, "on" if pf else "off", m("rows"), m("s"),
              m("pages"), m("batches"), m("pages_per_s"), m("cpu_us_per_page")))
PY
