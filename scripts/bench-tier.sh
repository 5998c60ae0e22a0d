#!/usr/bin/env bash
# bench-tier.sh - tiered memory servers (issue 16), the Oracle paper's §5 in
# lotus terms.  One durable standalone memory server on 127.0.0.1, `lotus ycsb`
# as the client; figures from `lotus ycsb --json` and the server's STATS
# ("tier" object, read with build/bin/srv-stats).
#
#   scripts/bench-tier.sh [--json] [options]
#
#   update  random single-record transactions (YCSB A, 1 op/txn, uniform keys:
#           half of them updates), data 3x the pool, --durability sync; per
#           LOTUS_IO=uring|aio and --page-writers N: page-writer write IOPS,
#           pages/s, writer CPU per page written (the writer threads; apart,
#           the io_uring workers iou-wrk-*: the writers' if the server names
#           its threads, else all of them, the redo log's too), txn/s.  Rounds alternate the
#           order of the configurations; medians are reported.
#   scan    a cold full-table read: (1) recovery of a checkpoint image larger
#           than the pool (large batched direct reads; MB/s, process CPU per
#           page less that of a start with nothing to recover), (2) a full read of every key after the restart (miss
#           preads; worker CPU per page read); per LOTUS_IO.
#   ycsb    YCSB C and A (zipfian) with the data 3x the pool against the same
#           data fully in memory (untiered, --memory 2x the data): txn/s, miss preads
#           per operation, client p99, miss pread p99.
#   miss    misses that do not block (issue 24): YCSB C and A (zipfian, --miss-threads
#           client threads) at each of --scales times the pool, tiered against the same
#           data in memory, at 1 transaction in flight per thread and at --batch inter
#           --inflight 8; misses/s, the tiered/in-memory ratio, the ring reads' p99
#           and in-flight depth, beside fio's 8 KiB random-read IOPS at queue depth 1
#           and 32 on the same file system, measured before and after in the same run;
#           the tiered server's process CPU per transaction (warm-up included).
#           LOTUS_MISS_SLEEP=0 in the environment gives the old worker that polls
#           while reads are in flight, for side-by-side runs.  Not in the default --parts.
#
# options:
#   --json             one JSON object on stdout (progress on stderr)
#   --parts LIST       which parts, comma-separated (default update,scan,ycsb)
#   --memory MIB       the buffer pool, in MiB (default 32)
#   --records N        records of 1 KiB (default: 3x the pool)
#   --seconds S        measured seconds per run (default 5)
#   --warm S           warm-up before each measured run (default 1)
#   --rounds N         rounds per configuration (default 3)
#   --writers LIST     page writer counts (default 1,2,4)
#   --backends LIST    I/O backends (default uring,aio)
#   --threads T        client threads (default 4)
#   --server-threads W memory server worker threads (default 1)
#   --dir DIR          where the data directories go (default: a temp dir)
#   --scales LIST      miss: data sizes in multiples of the pool (default 3,10)
#   --miss-threads T   miss: client threads (default 2)
#   -h, --help         this text
set -euo pipefail
cd "$(dirname "$0")/.."
L=${LOTUS_BIN:-$PWD/build/bin/lotus}
export LOTUS_NET_SPIN_US=${LOTUS_NET_SPIN_US:-0} UCX_TLS=${UCX_TLS:-tcp}
JSON=0 PARTS=update,scan,ycsb MEM=32 RECORDS="" SECS=5 WARM=1 ROUNDS=3 WRITERS=1,2,4
BACKENDS=uring,aio THREADS=4 SRV_THREADS=1 BASE="" SCALES=3,10 MISS_THREADS=2
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench-tier: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --json) JSON=1; shift ;;
    --parts) PARTS=${2:?}; shift 2 ;;
    --memory) MEM=${2:?}; shift 2 ;;
    --records) RECORDS=${2:?}; shift 2 ;;
    --seconds) SECS=${2:?}; shift 2 ;;
    --warm) WARM=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --writers) WRITERS=${2:?}; shift 2 ;;
    --backends) BACKENDS=${2:?}; shift 2 ;;
    --threads) THREADS=${2:?}; shift 2 ;;
    --server-threads) SRV_THREADS=${2:?}; shift 2 ;;
    --dir) BASE=${2:?}; shift 2 ;;
    --scales) SCALES=${2:?}; shift 2 ;;
    --miss-threads) MISS_THREADS=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
num() { [[ $2 =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$1 wants a number, not '$2'"; }
num --memory "$MEM"; num --seconds "$SECS"; num --warm "$WARM"; num --rounds "$ROUNDS"; num --threads "$THREADS"
num --server-threads "$SRV_THREADS"
[[ $MEM =~ ^[0-9]+$ ]] && [ "$MEM" -ge 1 ] || die "--memory wants whole MiB >= 1, not '$MEM'"
[ -n "$RECORDS" ] || RECORDS=$((MEM * 128 * 7 * 3))   # 7 slots of 1168 B a page: 3x the pool
num --records "$RECORDS"
for p in ${PARTS//,/ }; do case $p in update|scan|ycsb|miss) ;; *) die "--parts: unknown part $p" ;; esac; done
for b in ${BACKENDS//,/ }; do case $b in uring|aio) ;; *) die "--backends: unknown backend $b" ;; esac; done
for w in ${WRITERS//,/ }; do [[ $w =~ ^[1-9][0-9]*$ ]] || die "--writers: bad count $w"; done
[ -x "$L" ] || die "build first (make): no $L"
SRV_STATS=$(dirname "$L")/srv-stats
[ -x "$SRV_STATS" ] || die "build first (make): no $SRV_STATS"
grep -q -- --capacity <<<"$("$L" memserver --help 2>&1)" || die "this lotus has no --capacity (no tiered memory servers)"
CAP=$(( (MEM * 4 + RECORDS * 1168 / 1048576 * 2 + 64) ))   # MiB of logical space, ample

. scripts/lib-cluster.sh
. scripts/lib-tier.sh
work=$(mktemp -d "${BASE:-${TMPDIR:-/tmp}}/bench-tier.XXXXXX")
res=$work/results.jsonl
: >"$res"
trap 'cluster_stop; rm -rf "$work"' EXIT
say() { echo "bench-tier: $*" >&2; }
jget() { /usr/bin/python3 -c 'import json,sys
r=json.loads(sys.argv[1])
for k in sys.argv[2].split("."): r=r[k]
print(r)' "$1" "$2"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# CPU ticks of the io_uring kernel workers (iou-wrk-TID: they run what the ring
# of thread TID punts to io-wq, not counted in TID's own CPU) of process $1
# alive now.  Those of threads named like page writers (pw*, *writer*) if the
# server names its threads; else all of them (the redo log's ring included).
iowq_ticks() {
  local t n=0 c tids=" "
  for t in /proc/$1/task/*; do
    c=$(cat "$t/comm" 2>/dev/null) || continue
    case $c in pw*|*writer*) tids+="${t##*/} " ;; esac
  done
  for t in /proc/$1/task/*; do
    c=$(cat "$t/comm" 2>/dev/null) || continue
    case $c in
      iou-wrk-*|iou-sqp-*)
        [ "$tids" = " " ] || [[ $tids == *" ${c#iou-???-} "* ]] || continue
        n=$((n + $(awk '{print $14 + $15}' "$t/stat" 2>/dev/null || echo 0))) ;;
    esac
  done
  echo "$n ${tids// /}"
}
TCK=$(getconf CLK_TCK)

# server DIR DATA BACKEND [memserver options]: one durable server on DATA
server() {
  local d=$1 data=$2 be=$3
  shift 3
  mkdir -p "$d"
  local try
  for try in 1 2; do   # a start that hangs (seen once on a loaded machine) gets one more try
    CLUSTER_DATA=$data CLUSTER_DURABILITY=sync LOTUS_IO=$be \
      cluster_start "$d" 1 --threads "$SRV_THREADS" --durability sync "$@" && return 0
    say "memory server did not start (try $try; LOTUS_IO=$be $*): $(tail -n 3 "$d"/ms0.err)"
    [ -n "${CLUSTER_PIDS[0]:-}" ] && say "its state: $(grep State "/proc/${CLUSTER_PIDS[0]}/status" 2>/dev/null)"
    cluster_stop
  done
  die "a memory server did not start"
}
Y() { "$L" ycsb --config "$CLUSTER_INI" --quiet --json --records "$RECORDS" "$@"; }

# The seed: RECORDS records loaded into a tiered server, stopped with SIGTERM
# (a final checkpoint): every run starts from a copy of its data directory.
seed=$work/seed
if [[ $PARTS != miss ]]; then   # the miss part loads its own
say "loading $RECORDS records of 1 KiB into a --memory ${MEM}M server (capacity ${CAP}M)"
server "$work/seed-c" "$seed" uring --memory "${MEM}M" --capacity "${CAP}M"
Y --threads 2 --no-run >"$work/seed.json" 2>"$work/seed.err" || die "load failed: $(tail -n 2 "$work/seed.err")"
cluster_stop
say "loaded: $(cat "$work/seed.json")"
fi
copy_seed() { rm -rf "$1"; mkdir -p "$1"; cp -a "$seed/ms0" "$1/ms0"; cp "$seed/cluster-id" "$1/"; }   # the copy is of the same cluster

# ---- (a) update IOPS ----------------------------------------------------------------
part_update() {
  local r be w order=() i cfg
  for be in ${BACKENDS//,/ }; do for w in ${WRITERS//,/ }; do order+=("$be:$w"); done; done
  for ((r = 1; r <= ROUNDS; r++)); do
    local seq=("${order[@]}")
    if [ $((r % 2)) -eq 0 ]; then   # alternate: every other round backwards
      seq=(); for ((i = ${#order[@]} - 1; i >= 0; i--)); do seq+=("${order[$i]}"); done
    fi
    for cfg in "${seq[@]}"; do
      be=${cfg%%:*} w=${cfg##*:}
      local d=$work/upd data=$work/upd/data
      copy_seed "$data"
      server "$d" "$data" "$be" --memory "${MEM}M" --capacity "${CAP}M" --page-writers "$w"
      Y --no-load --workload A --ops-per-txn 1 --dist uniform --threads "$THREADS" \
        --seconds "$WARM" --warmup 0 >/dev/null 2>&1 || true   # warm: the pool fills with dirty pages
      local s0 s1 j p0 p1 q0 q1 pid=${CLUSTER_PIDS[0]}
      s0=$(tier_stats); p0=$(cpu_ticks "$pid"); q0=$(iowq_ticks "$pid")
      j=$(Y --no-load --workload A --ops-per-txn 1 --dist uniform --threads "$THREADS" \
            --seconds "$SECS" --warmup 0 2>"$work/y.err") || die "update run: $(tail -n 2 "$work/y.err")"
      s1=$(tier_stats); p1=$(cpu_ticks "$pid"); q1=$(iowq_ticks "$pid")
      cluster_stop
      local named=0
      [ -z "${q1#* }" ] || named=1
      /usr/bin/python3 - "$be" "$w" "$r" "$s0" "$s1" "$j" "$((p1 - p0))" "$(( ${q1%% *} - ${q0%% *} ))" "$TCK" "$named" >>"$res" <<'EOF'
import json, sys
be, w, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proc_ticks, iowq, tck, named = int(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9]), sys.argv[10] == "1"
tier = lambda r: r.get("tier") or (r.get("durability") or {}).get("tier") or {}
t0, t1 = tier(json.loads(sys.argv[4])), tier(json.loads(sys.argv[5]))
y = json.loads(sys.argv[6])
secs = y["seconds"]
pw = lambda t, k: sum(x.get(k, 0) for x in t["page_writers"])
ios, pages = pw(t1, "ios") - pw(t0, "ios"), pw(t1, "pages") - pw(t0, "pages")
cpu = pw(t1, "cpu_ns") - pw(t0, "cpu_ns")
print(json.dumps({"part": "update", "backend": be, "writers": w, "round": r,
    "txn_per_s": y["txn_per_s"], "p99_us": y["lat_us"]["p99"],
    "pw_write_iops": ios / secs, "pw_pages_per_s": pages / secs,
    "pw_mb_per_s": (pw(t1, "bytes") - pw(t0, "bytes")) / secs / 1e6,
    "cpu_us_per_page": cpu / 1e3 / pages if pages else None,
    # io_uring workers' CPU per page written (0 for aio; workers that exited are
    # missed): the page writers' own if the server names its threads, else all
    # of the server's (the redo log's appends and syncs included)
    "iowq_cpu_us_per_page": max(iowq, 0) * 1e6 / tck / pages if pages else None,
    "iowq_of": "page_writers" if named else "all_rings",
    "server_cpu_us_per_txn": proc_ticks * 1e6 / tck / (y["txn_per_s"] * secs) if y["txn_per_s"] else None,
    "server_cpu_s": proc_ticks / tck,
    "pages_per_write": pages / ios if ios else None,
    "evict_dirty_per_s": (t1["evict_dirty"] - t0["evict_dirty"]) / secs,
    "miss_reads_per_s": (t1["miss_reads"] - t0["miss_reads"]) / secs,
    "writer_backends": [x["backend"] for x in t1["page_writers"]],
    "registrations": t1.get("registrations"), "clones": t1.get("clones"),
    "fallbacks": t1.get("fallbacks"), "evict_errors": t1["evict_errors"]}))
EOF
      say "update $be N=$w round $r: $(tail -n 1 "$res" | cut -c1-220)"
    done
  done
}

# ---- (b) cold scan ------------------------------------------------------------------
part_scan() {
  local r be
  for ((r = 1; r <= ROUNDS; r++)); do
    for be in ${BACKENDS//,/ }; do
      local d=$work/scan data=$work/scan/data base
      # the CPU a start costs without a checkpoint to recover (UCX, threads)
      rm -rf "$data"
      server "$d" "$data" "$be" --memory "${MEM}M" --capacity "${CAP}M"
      base=$(cpu_ticks "${CLUSTER_PIDS[0]}")
      cluster_stop
      copy_seed "$data"
      server "$d" "$data" "$be" --memory "${MEM}M" --capacity "${CAP}M"
      local pid=${CLUSTER_PIDS[0]} rec c0 c1 s0 s1 t0 t1 j
      rec=$(grep -o '"recovered":{[^}]*}' "$d/ms0.out" | sed 's/^"recovered"://')
      c0=$(cpu_ticks "$pid")
      s0=$(tier_stats)
      t0=$(date +%s%N)
      j=$(Y --threads 1 --no-load --no-run --digest 2>"$work/y.err") || die "full read: $(tail -n 2 "$work/y.err")"
      t1=$(date +%s%N)
      s1=$(tier_stats)
      c1=$(cpu_ticks "$pid")
      cluster_stop
      /usr/bin/python3 - "$be" "$r" "$rec" "$c0" "$TCK" "$s0" "$s1" "$(( (t1 - t0) / 1000 ))" "$c1" "$base" >>"$res" <<'EOF'
import json, sys
be, r = sys.argv[1], int(sys.argv[2])
rec = json.loads(sys.argv[3]) if sys.argv[3] else {}
c0, tck = int(sys.argv[4]), int(sys.argv[5])
a, b = json.loads(sys.argv[6]), json.loads(sys.argv[7])
tier = lambda r: r.get("tier") or (r.get("durability") or {}).get("tier") or {}
a["tier"], b["tier"] = tier(a), tier(b)
us, c1, base = int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
pages = rec.get("pages", 0)
reads = b["tier"]["miss_reads"] - a["tier"]["miss_reads"]
wcpu = b["cpu_ns"] - a["cpu_ns"]   # the worker threads
print(json.dumps({"part": "scan", "backend": be, "round": r,
    "recovery_pages": pages, "recovery_ms": rec.get("ms"), "recovery_mb_s": rec.get("mb_s"),
    # the process from exec to ready, less the same start on an empty data dir
    "recovery_cpu_us_per_page": max(c0 - base, 0) * 1e6 / tck / pages if pages else None,
    "start_cpu_ms": base * 1e3 / tck,
    "read_pages": reads, "read_s": us / 1e6,
    "read_pages_per_s": reads / (us / 1e6) if us else None,
    "read_cpu_us_per_page": wcpu / 1e3 / reads if reads else None,
    "read_process_cpu_us_per_page": (c1 - c0) * 1e6 / tck / reads if reads else None,
    "miss_read_mean_us": b["tier"]["miss_read_mean_ns"] / 1e3,
    "miss_read_p99_us": b["tier"]["miss_read_p99_ns"] / 1e3}))
EOF
      say "scan $be round $r: $(tail -n 1 "$res" | cut -c1-220)"
    done
  done
}

# ---- (c) YCSB C and A: 3x the pool vs in memory --------------------------------------
part_ycsb() {
  local mode r wl
  local memfull=$(( RECORDS * 1168 / 1048576 * 2 + 16 ))
  for mode in tiered memory; do
    local d=$work/y-$mode data=$work/y-$mode/data
    if [ $mode = tiered ]; then
      copy_seed "$data"
      server "$d" "$data" uring --memory "${MEM}M" --capacity "${CAP}M"
    else   # untiered, a pool that holds all of it: the same load
      server "$d" "$data" uring --memory "${memfull}M"
      Y --threads 2 --no-run >/dev/null 2>"$work/y.err" || die "in-memory load: $(tail -n 2 "$work/y.err")"
    fi
    Y --threads 1 --no-load --no-run --digest >/dev/null 2>&1 || true   # touch it all once
    for ((r = 1; r <= ROUNDS; r++)); do
      for wl in C A; do
        local s0 s1 j
        s0=$(tier_stats)
        j=$(Y --no-load --workload $wl --threads "$THREADS" --seconds "$SECS" --warmup "$WARM" \
              2>"$work/y.err") || die "ycsb $wl: $(tail -n 2 "$work/y.err")"
        s1=$(tier_stats)
        /usr/bin/python3 - "$mode" "$wl" "$r" "$s0" "$s1" "$j" "$memfull" "$WARM" >>"$res" <<'EOF'
import json, sys
mode, wl, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
tier = lambda r: r.get("tier") or (r.get("durability") or {}).get("tier") or {}
a, b = tier(json.loads(sys.argv[4])), tier(json.loads(sys.argv[5]))
y = json.loads(sys.argv[6])
g = lambda t, k: t.get(k) or 0   # an untiered server has no "tier" counters: no misses
ops = y["ops_per_s"] * (y["seconds"] + float(sys.argv[8]))   # warm-up at the same rate
reads = g(b, "miss_reads") - g(a, "miss_reads")   # includes the warm-up
print(json.dumps({"part": "ycsb", "mode": mode, "workload": wl, "round": r,
    "memory_mb": None if mode == "tiered" else int(sys.argv[7]),
    "txn_per_s": y["txn_per_s"], "ops_per_s": y["ops_per_s"],
    "p50_us": y["lat_us"]["p50"], "p99_us": y["lat_us"]["p99"],
    "abort_rate": y["abort_rate"],
    "miss_reads": reads, "miss_per_op": reads / ops if ops else None,
    "miss_read_p99_us": g(b, "miss_read_p99_ns") / 1e3 if b else None,
    "miss_read_mean_us": g(b, "miss_read_mean_ns") / 1e3 if b else None,
    "resident": b.get("resident"), "frames": b.get("frames")}))
EOF
        say "ycsb $mode $wl round $r: $(tail -n 1 "$res" | cut -c1-220)"
      done
    done
    cluster_stop
  done
}

# ---- (d) misses that do not block: tiered vs in memory, fio in the same run --------------
fio_run() {   # fio_run QD: 8 KiB random O_DIRECT reads on the data's file system
  command -v fio >/dev/null || { echo '{"part":"fio","qd":'"$1"',"iops":null}'; return; }
  fio --name=r --filename="$work/fio.dat" --size=512M --rw=randread --bs=8k --direct=1 \
    --ioengine=io_uring --iodepth="$1" --runtime="$SECS" --time_based --output-format=json 2>/dev/null |
  /usr/bin/python3 -c 'import json, sys
j = json.load(sys.stdin)["jobs"][0]["read"]; p = j["clat_ns"].get("percentile", {})
print(json.dumps({"part": "fio", "qd": int(sys.argv[1]), "iops": j["iops"],
      "p50_us": p.get("50.000000", 0) / 1e3, "p99_us": p.get("99.000000", 0) / 1e3}))' "$1"
  rm -f "$work/fio.dat"
}
part_miss() {
  local scale mode r wl cfg
  fio_run 1 >>"$res"; fio_run 32 >>"$res"; say "fio: $(tail -n 2 "$res" | tr '\n' ' ')"
  for scale in ${SCALES//,/ }; do
    local recs=$((MEM * 128 * 7 * scale)) cap memfull
    cap=$(( MEM * 4 + recs * 1168 / 1048576 * 2 + 64 )); memfull=$(( recs * 1168 / 1048576 * 2 + 16 ))
    for mode in tiered memory; do
      local d=$work/m-$mode data=$work/m-$mode/data
      rm -rf "$d"
      if [ $mode = tiered ]; then
        server "$d" "$data" uring --memory "${MEM}M" --capacity "${cap}M"
      else
        server "$d" "$data" uring --memory "${memfull}M"
      fi
      "$L" ycsb --config "$CLUSTER_INI" --quiet --records "$recs" --threads 2 --no-run >/dev/null \
        2>"$work/y.err" || die "miss: load of $recs: $(tail -n 2 "$work/y.err")"
      for ((r = 1; r <= ROUNDS; r++)); do
        for wl in C A; do
          for cfg in 1 inter8; do
            local s0 s1 j p0 p1 extra="" pid=${CLUSTER_PIDS[0]}
            [ $cfg = inter8 ] && extra="--batch inter --inflight 8"
            s0=$(tier_stats); p0=$(cpu_ticks "$pid")
            # shellcheck disable=SC2086
            j=$("$L" ycsb --config "$CLUSTER_INI" --quiet --json --records "$recs" --no-load \
                  --workload $wl --threads "$MISS_THREADS" $extra --seconds "$SECS" --warmup "$WARM" \
                  2>"$work/y.err") || die "miss: ycsb $wl: $(tail -n 2 "$work/y.err")"
            s1=$(tier_stats); p1=$(cpu_ticks "$pid")
            /usr/bin/python3 - "$mode" "$wl" "$cfg" "$scale" "$r" "$s0" "$s1" "$j" "$SECS" "$WARM" \
              "$((p1 - p0))" "$(getconf CLK_TCK)" >>"$res" <<'PY'
import json, sys
mode, wl, cfg, scale, r = sys.argv[1:6]
cpu_s = int(sys.argv[11]) / int(sys.argv[12])   # the server process, warm-up included
tier = lambda r: r.get("tier") or (r.get("durability") or {}).get("tier") or {}
a, b = tier(json.loads(sys.argv[6])), tier(json.loads(sys.argv[7]))
y = json.loads(sys.argv[8]); secs = float(sys.argv[9]) + float(sys.argv[10])
g = lambda t, k: t.get(k) or 0
reads = g(b, "miss_reads") - g(a, "miss_reads")
print(json.dumps({"part": "miss", "mode": mode, "workload": wl, "cfg": cfg, "scale": int(scale),
    "round": int(r), "txn_per_s": y["txn_per_s"], "p99_us": y["lat_us"]["p99"],
    "misses_per_s": reads / secs, "misses_per_txn": reads / (y["txn_per_s"] * secs) if y["txn_per_s"] else None,
    "async_reads": g(b, "miss_async_reads") - g(a, "miss_async_reads"),
    "sync_reads": g(b, "miss_sync_reads") - g(a, "miss_sync_reads"),
    "pread_p99_us": g(b, "miss_read_p99_ns") / 1e3, "ring_p99_us": g(b, "miss_async_p99_ns") / 1e3,
    "ring_p50_us": g(b, "miss_async_p50_ns") / 1e3,
    "depth_mean": g(b, "miss_depth_mean"), "depth_max": g(b, "miss_depth_max"),
    "server_cpu_s": cpu_s, "server_cpu_us_per_txn":
        cpu_s * 1e6 / (y["txn_per_s"] * secs) if y["txn_per_s"] else None}))
PY
            say "miss ${scale}x $mode $wl $cfg round $r: $(tail -n 1 "$res" | cut -c1-200)"
          done
        done
      done
      cluster_stop
    done
  done
  fio_run 1 >>"$res"; fio_run 32 >>"$res"; say "fio: $(tail -n 2 "$res" | tr '\n' ' ')"
}

for p in ${PARTS//,/ }; do "part_$p"; done

if [[ ,$PARTS, == *,miss,* ]]; then   # the miss part's own table
  /usr/bin/python3 - "$res" "$JSON" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = lambda v: statistics.median(v) if v else None
fio = {qd: med([x["iops"] for x in rows if x["part"] == "fio" and x["qd"] == qd and x["iops"]]) for qd in (1, 32)}
m = [x for x in rows if x["part"] == "miss"]
out = []
for scale in sorted({x["scale"] for x in m}):
    for wl in ("C", "A"):
        for cfg in ("1", "inter8"):
            sel = lambda mode: [x for x in m if (x["scale"], x["workload"], x["cfg"], x["mode"]) == (scale, wl, cfg, mode)]
            t, i = sel("tiered"), sel("memory")
            if not t or not i: continue
            tt, it = med([x["txn_per_s"] for x in t]), med([x["txn_per_s"] for x in i])
            mps = med([x["misses_per_s"] for x in t])
            out.append({"scale": scale, "workload": wl, "cfg": cfg, "tiered_txn_per_s": tt, "memory_txn_per_s": it,
                        "ratio": tt / it if it else None, "misses_per_s": mps,
                        "misses_per_s_vs_qd32": mps / fio[32] if fio[32] else None,
                        "misses_per_txn": med([x["misses_per_txn"] for x in t if x["misses_per_txn"]]),
                        "ring_p99_us": med([x["ring_p99_us"] for x in t]), "pread_p99_us": med([x["pread_p99_us"] for x in t]),
                        "ring_p50_us": med([x["ring_p50_us"] for x in t]),
                        "depth_max": max(x["depth_max"] for x in t), "p99_us": med([x["p99_us"] for x in t]),
                        "server_cpu_us_per_txn": med([x["server_cpu_us_per_txn"] for x in t if x.get("server_cpu_us_per_txn")]),
                        "memory_server_cpu_us_per_txn": med([x["server_cpu_us_per_txn"] for x in i if x.get("server_cpu_us_per_txn")])})
if sys.argv[2] == "1":
    print(json.dumps({"miss": out, "fio_iops": fio}))
    sys.exit(0)
print("\nmisses that do not block: fio 8 KiB random reads QD1 %s IOPS, QD32 %s IOPS (median of before/after)" % (fio[1], fio[32]))
print("  %-3s %-2s %-6s %9s %9s %6s %9s %8s %8s %9s %10s %10s %5s %11s" % ("x", "wl", "cfg", "tiered/s", "memory/s", "ratio", "misses/s", "vs QD32", "miss/txn", "ring p50", "ring p99", "pread p99", "depth", "cpu us/txn"))
f = lambda v, p=1: "-" if v is None else ("%.*f" % (p, v))
for o in out:
    print("  %-3s %-2s %-6s %9s %9s %6s %9s %8s %8s %9s %10s %10s %5s %11s" % (o["scale"], o["workload"], o["cfg"], f(o["tiered_txn_per_s"], 0),
          f(o["memory_txn_per_s"], 0), f(o["ratio"], 3), f(o["misses_per_s"], 0), f(o["misses_per_s_vs_qd32"], 2),
          f(o["misses_per_txn"], 2), f(o["ring_p50_us"], 0), f(o["ring_p99_us"], 0), f(o["pread_p99_us"], 0), o["depth_max"],
          f(o["server_cpu_us_per_txn"], 0)))
PY
  [[ $PARTS == miss ]] && exit 0
fi

/usr/bin/python3 - "$res" "$JSON" "$MEM" "$RECORDS" "$SECS" "$ROUNDS" "$THREADS" "$SRV_THREADS" <<'EOF'
import json, sys, statistics, os
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
as_json = sys.argv[2] == "1"
conf = {"memory_mb": int(sys.argv[3]), "records": int(sys.argv[4]), "record_size": 1024,
        "seconds": float(sys.argv[5]), "rounds": int(sys.argv[6]), "threads": int(sys.argv[7]),
        "server_threads": int(sys.argv[8]), "cores": os.cpu_count(), "durability": "sync"}
def med(rs, k):
    v = [x[k] for x in rs if x.get(k) is not None]
    return round(statistics.median(v), 3) if v else None
def group(part, keys, metrics, extra=()):
    out, seen = [], []
    for x in rows:
        if x["part"] != part: continue
        g = tuple(x[k] for k in keys)
        if g not in seen: seen.append(g)
    for g in seen:
        rs = [x for x in rows if x["part"] == part and tuple(x[k] for k in keys) == g]
        o = dict(zip(keys, g)); o["runs"] = len(rs)
        for m in metrics: o[m] = med(rs, m)
        for e in extra: o[e] = rs[-1].get(e)
        out.append(o)
    return out
res = {"config": conf,
  "update": group("update", ["backend", "writers"],
      ["txn_per_s", "p99_us", "pw_write_iops", "pw_pages_per_s", "pw_mb_per_s", "cpu_us_per_page",
       "iowq_cpu_us_per_page", "server_cpu_s", "server_cpu_us_per_txn", "pages_per_write", "evict_dirty_per_s", "miss_reads_per_s"],
      ["writer_backends", "registrations", "clones", "fallbacks", "iowq_of"]),
  "scan": group("scan", ["backend"],
      ["recovery_pages", "recovery_ms", "recovery_mb_s", "recovery_cpu_us_per_page", "start_cpu_ms", "read_pages",
       "read_s", "read_pages_per_s", "read_cpu_us_per_page", "read_process_cpu_us_per_page",
       "miss_read_mean_us", "miss_read_p99_us"]),
  "ycsb": group("ycsb", ["workload", "mode"],
      ["txn_per_s", "ops_per_s", "p50_us", "p99_us", "abort_rate", "miss_per_op",
       "miss_read_mean_us", "miss_read_p99_us"], ["memory_mb", "resident", "frames"]),
  "runs": rows}
if as_json:
    print(json.dumps(res))
    sys.exit(0)
print("bench-tier: pool %d MiB, %d records of 1 KiB, %s s per run, median of %d rounds, %d client threads, %d server threads, %s cores"
      % (conf["memory_mb"], conf["records"], conf["seconds"], conf["rounds"], conf["threads"],
         conf["server_threads"], conf["cores"]))
f = lambda v, p=1: "-" if v is None else ("%.*f" % (p, v))
if res["update"]:
    print("\nupdate (YCSB A, 1 op/txn, uniform, sync):")
    print("  %-6s %2s %9s %9s %10s %10s %9s %10s %9s" % ("io", "N", "txn/s", "p99 us", "writes/s", "pages/s", "us/page", "iowq us/pg", "pg/write"))
    for o in res["update"]:
        print("  %-6s %2d %9s %9s %10s %10s %9s %10s %9s" % (o["backend"], o["writers"], f(o["txn_per_s"], 0), f(o["p99_us"], 0),
              f(o["pw_write_iops"], 0), f(o["pw_pages_per_s"], 0), f(o["cpu_us_per_page"], 2),
              f(o["iowq_cpu_us_per_page"], 2), f(o["pages_per_write"], 1)))
    if any(o.get("iowq_of") == "all_rings" for o in res["update"]):
        print("  (iowq: CPU of every io_uring worker of the server, the redo log's included, per page written)")
if res["scan"]:
    print("\ncold scan:")
    print("  %-6s %8s %9s %12s %9s %11s %12s" % ("io", "pages", "rec MB/s", "rec us/page", "read pg/s", "read us/pg", "pread p99 us"))
    for o in res["scan"]:
        print("  %-6s %8s %9s %12s %9s %11s %12s" % (o["backend"], f(o["recovery_pages"], 0), f(o["recovery_mb_s"], 0),
              f(o["recovery_cpu_us_per_page"], 2), f(o["read_pages_per_s"], 0), f(o["read_cpu_us_per_page"], 2), f(o["miss_read_p99_us"], 1)))
if res["ycsb"]:
    print("\nYCSB (zipfian 0.99), data 3x the pool vs in memory:")
    print("  %-2s %-7s %9s %9s %9s %10s %12s" % ("wl", "mode", "txn/s", "p50 us", "p99 us", "miss/op", "pread p99 us"))
    for o in res["ycsb"]:
        print("  %-2s %-7s %9s %9s %9s %10s %12s" % (o["workload"], o["mode"], f(o["txn_per_s"], 0), f(o["p50_us"], 0),
              f(o["p99_us"], 0), f(o["miss_per_op"], 4), f(o["miss_read_p99_us"], 1)))
EOF
