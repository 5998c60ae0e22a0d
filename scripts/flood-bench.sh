#!/bin/bash
# flood-bench.sh - what one hostile client costs a well-behaved one: YCSB
# throughput of `lotus ycsb` against one memory server, with no flood, with
# a flood of small requests, and with a flood of 15 MiB messages, in
# alternating rounds.  Prints each round and the medians.
#   scripts/flood-bench.sh [ROUNDS [SECONDS]]     (needs `make stress`)
# Only 127.0.0.1; stops what it started.
set -u
case ${1:-} in -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
B=${LOTUS_BUILD:-build}
rounds=${1:-5} secs=${2:-3}
lotus=$B/bin/lotus flood=$B/stress/flood
[ -x "$flood" ] || { echo "build the flood tool first: make stress" >&2; exit 2; }
dir=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
$lotus memserver --listen 127.0.0.1:0 --threads 2 --memory 512M --ready-json >"$dir/ready" 2>"$dir/ms.log" &
pids+=($!)
for _ in $(seq 100); do grep -q ready "$dir/ready" && break; sleep 0.1; done
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/ready")
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" >"$dir/cfg"
ycsb() { $lotus ycsb --config "$dir/cfg" --workload B --records 10000 --threads 1 --inflight 2 \
	--seconds "$secs" --warmup 1 --json "$@" 2>>"$dir/ycsb.log"; }
ycsb --no-run >/dev/null || { echo "load failed" >&2; cat "$dir/ycsb.log" >&2; exit 1; }
tput() { sed -n 's/.*"txn_per_s":\([0-9.]*\).*/\1/p' | head -1; }
declare -A res
for r in $(seq "$rounds"); do
	for mode in none small big; do
		fp=
		case $mode in
		small) $flood 127.0.0.1 "$port" small 0 0 "$((secs + 2))" >/dev/null 2>&1 & fp=$! ;;
		big) (end=$((SECONDS + secs + 2)); while [ $SECONDS -lt $end ]; do
			$flood 127.0.0.1 "$port" big 30 15728640 3 >/dev/null 2>&1; done) & fp=$! ;;
		esac
		t=$(ycsb --no-load | tput)
		[ -n "$fp" ] && { kill "$fp" 2>/dev/null; wait "$fp" 2>/dev/null; }
		echo "round $r $mode: ${t:-?} txn/s"
		res[$mode]="${res[$mode]:-} ${t:-0}"
	done
done
med() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m0=$(med "${res[none]}")
for mode in none small big; do
	m=$(med "${res[$mode]}")
	echo "median $mode: $m txn/s (ratio to none: $(awk -v a="$m" -v b="$m0" 'BEGIN{printf "%.2f", b ? a/b : 0}'))"
done
