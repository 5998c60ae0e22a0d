#!/usr/bin/env bash
# timeout: 300
# The same seeded workload gives the same final table with the record cache
# on or off, co-partitioned or not, and with every batching mode, under all
# three protocols.  Workload F's read-modify-writes increment a byte, so the
# final table does not depend on the order transactions commit in; --digest
# reads every key at the end and hashes the table.
#
# Then co-partitioned write-through: a run with a cache far smaller than the
# hot set against standalone memory servers; every committed write is applied
# on the memory servers at commit, so the cache never holds a dirty record
# (no write-backs), and a second, uncached client reads the table straight
# from the memory servers and must see the same digest.
. "$(dirname "$0")/lib.sh"
common=(--workload F --records 2000 --threads 2 --inflight 2 --txns 150 --ops-per-txn 8
        --server-threads 1 --digest --json --quiet --zipf 0.9)
digest_of() { sed 's/.*"digest":"\([0-9a-f]*\)".*/\1/'; }
for cc in no_wait wait_die wound_wait; do
  ref=""
  for variant in "--batch none" "--batch intra" "--batch inter" \
                 "--batch intra --cache 1M" "--batch inter --cache 1M --cache-admit 0.5" \
                 "--batch intra --partitioning co --cache 1M" \
                 "--batch inter --partitioning co --cache 64K"; do
    out=$("$L" ycsb --local 2 --cc $cc "${common[@]}" $variant) || fail "$cc $variant: ycsb failed"
    d=$(echo "$out" | digest_of)
    c=$(echo "$out" | sed 's/.*"txns_committed":\([0-9]*\).*/\1/')
    echo "$cc $variant: committed $c digest $d"
    [ "$c" -eq 300 ] || fail "$cc $variant: committed $c, want 300"
    [ -n "$ref" ] || ref=$d
    [ "$d" = "$ref" ] || fail "$cc $variant: digest $d differs from $ref"
  done
done

# --- co-partitioned write-through against standalone servers ------------------
. "$(dirname "$0")/../../scripts/lib-cluster.sh"
dir=$T
at_exit 'cluster_stop'
cluster_start "$dir" 2 --threads 1 --memory 128M || fail "servers did not start"
out=$("$L" ycsb --config "$CLUSTER_INI" --partitioning co --cache 32K "${common[@]}" --cc wait_die) \
  || fail "co run failed"
co=$(echo "$out" | digest_of)
wb=$(echo "$out" | sed 's/.*"writebacks":\([0-9]*\).*/\1/')
echo "co-partitioned run: digest $co, $wb write-backs during the run"
[ "$wb" -eq 0 ] || fail "the cache wrote $wb dirty records back: committed writes waited in it"
out=$("$L" ycsb --config "$CLUSTER_INI" --no-load --no-run --digest --json --quiet --records 2000 --threads 1) \
  || fail "reader failed"
direct=$(echo "$out" | digest_of)
echo "read back from the memory servers: digest $direct"
[ "$co" = "$direct" ] || fail "memory servers lack committed values: $direct != $co"
echo ok
