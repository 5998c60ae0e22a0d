# lib-tier.sh - helpers for the tiered-memory-server tests and scripts/bench-tier.sh
# (issue 16).  Source it after lib-cluster.sh, with L set to the lotus binary.
#   tier_stats [ID]        the STATS JSON line of memory server ID (default 0) of
#                          $CLUSTER_INI, from srv-stats (next to $L)
#   tier_counts JSON       "misses=N evictions=N evict_dirty=N miss_errors=N
#                          evict_errors=N resident=N frames=N" from a STATS line
#                          (0 where a counter is missing), for `eval`
#   tier_need              fail unless `lotus memserver` has --capacity
# The counters are found by name anywhere in the STATS object (the tiering
# counters may sit in a nested object): misses, evictions/evict_*, the
# *_errors of misses and evictions, resident (pages) and frames.
SRV_STATS=${SRV_STATS:-$(dirname "$L")/srv-stats}

tier_stats() {
  "$SRV_STATS" "$CLUSTER_INI" "${1:-0}"
}

tier_counts() {
  /usr/bin/python3 -c '
import json, re, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    r = {}
leaves = []   # (path, key, value) of every number
def walk(o, path):
    if isinstance(o, dict):
        for k, v in o.items():
            walk(v, path + [k])
    elif isinstance(o, (int, float)) and not isinstance(o, bool) and path:
        leaves.append(("/".join(path), path[-1], o))
walk(r, [])
def first(pat, bad=None):
    for p, k, v in leaves:
        if re.fullmatch(pat, k) and not (bad and re.search(bad, p)):
            return v
    return 0
def total(pat, bad):
    return sum(v for p, k, v in leaves if re.search(pat, p) and not re.search(bad, p))
out = {}
out["misses"] = first(r"(page_)?misses", r"cache|error|_ns|lat")
ev = [v for p, k, v in leaves if k == "evictions" and "cache" not in p]
out["evictions"] = ev[0] if ev else total(r"evict[^/]*$", r"error|_ns|cache")
out["evict_dirty"] = first(r"evict(ions)?_dirty|dirty_writes")
out["miss_errors"] = first(r"miss(_read)?_errors")
out["evict_errors"] = first(r"evict(ion)?(_write)?_errors")
out["resident"] = first(r"resident(_pages)?")
out["frames"] = first(r"frames")
print(" ".join("%s=%d" % (k, v) for k, v in out.items()))
' "$1"
}

tier_need() {
  "$L" memserver --help 2>&1 | grep -q -- --capacity \
    || { echo "FAIL: lotus memserver has no --capacity: this build has no tiered memory servers (issue 16)"; exit 1; }
}
