# lib-tier.sh - helpers for the tiered-memory-server tests and scripts/bench-tier.sh
# (issue 16).  Source it after lib-cluster.sh, with L set to the lotus binary.
#   tier_stats [ID]        the STATS JSON line of memory server ID (default 0) of
#                          $CLUSTER_INI, from srv-stats (next to $L)
#   tier_counts JSON       "misses=N miss_reads=N evictions=N ..." from the
#                          "tier" object of a STATS line (top level or inside
#                          "durability") (0 where a counter is
#                          missing; pw_* are summed over the page writers), for
#                          `eval`; miss_reply_msgs and miss_sleeps come from
#                          the STATS line's top level
#   tier_need              fail unless `lotus memserver` has --capacity
SRV_STATS=${SRV_STATS:-$(dirname "$L")/srv-stats}

tier_stats() {
  "$SRV_STATS" "$CLUSTER_INI" "${1:-0}"
}

tier_counts() {
  /usr/bin/python3 -c '
import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    r = {}
t = r.get("tier") or (r.get("durability") or {}).get("tier") or {}
w = t.get("page_writers") or []
g = lambda k: int(t.get(k) or 0)
out = {
    "misses": g("misses"), "miss_zero": g("miss_zero"), "miss_reads": g("miss_reads"),
    "miss_errors": g("miss_errors"), "miss_mean_ns": g("miss_read_mean_ns"),
    "miss_p99_ns": g("miss_read_p99_ns"), "miss_max_ns": g("miss_read_max_ns"),
    "evict_clean": g("evict_clean"), "evict_dirty": g("evict_dirty"),
    "evictions": g("evict_clean") + g("evict_dirty"), "evict_errors": g("evict_errors"),
    "resident": g("resident"), "frames": g("frames"), "frame_timeouts": g("frame_timeouts"),
    "registrations": g("registrations"), "clones": g("clones"), "fallbacks": g("fallbacks"),
    "prefetched": g("prefetched"), "prefetch_batches": g("prefetch_batches"),
    "swap_crc_errors": g("swap_crc_errors"), "image_crc_errors": g("image_crc_errors"),
    "prefetch_errors": g("prefetch_errors"), "prefetch_ns": g("prefetch_ns"),
    "misses_async": g("misses_async"), "miss_async_reads": g("miss_async_reads"),
    "miss_sync_reads": g("miss_sync_reads"), "miss_async_errors": g("miss_async_errors"),
    "miss_parked": g("miss_parked"), "miss_depth_max": g("miss_depth_max"),
    "miss_async_p99_ns": g("miss_async_p99_ns"),
    "miss_reply_msgs": int(r.get("miss_reply_msgs") or 0), "miss_sleeps": int(r.get("miss_sleeps") or 0),
    "writers": len(w),
    "pw_ios": sum(int(x.get("ios") or 0) for x in w),
    "pw_pages": sum(int(x.get("pages") or 0) for x in w),
    "pw_bytes": sum(int(x.get("bytes") or 0) for x in w),
    "pw_errors": sum(int(x.get("errors") or 0) for x in w),
    "pw_cpu_ns": sum(int(x.get("cpu_ns") or 0) for x in w),
    "pw_uring": sum(1 for x in w if x.get("backend") == "uring"),
    "pw_aio": sum(1 for x in w if x.get("backend") == "aio"),
}
print(" ".join("%s=%d" % kv for kv in out.items()))
' "$1"
}

tier_need() {
  grep -q -- --capacity <<<"$("$L" memserver --help 2>&1)" \
    || { echo "FAIL: lotus memserver has no --capacity: this build has no tiered memory servers (issue 16)"; exit 1; }
}
