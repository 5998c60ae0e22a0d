#!/usr/bin/env bash
# timeout: 60
# `lotus backup` keeps its pause below half the cluster's lease.  A hold
# keeps a memory server's worker waiting for up to the pause (a two-phase
# decision that arrives during it, the MARK that collects the cut), so a
# pause of half the lease or more could starve that worker's clients and
# peers of keep-alives past their leases.  With lease_ms = 2000:
# --max-pause-ms 1500 and --pause-ms 1000 are refused (exit 2, saying the
# bound, creating nothing), --pause-ms 999 runs, and so does the default
# (--max-pause-ms 2000 becomes 999).
. "$(dirname "$0")/lib.sh"
lib_use cluster
at_exit cluster_stop
CLUSTER_DATA=$T/data CLUSTER_DURABILITY=sync CLUSTER_LEASE_MS=2000
cluster_start "$T" 2 --threads 1 --memory 64M || fail "servers did not start"
for arg in "--max-pause-ms 1500" "--pause-ms 1000"; do
  "$L" backup --config "$CLUSTER_INI" --out "$T/refused" $arg --quiet >"$T/b.out" 2>"$T/b.err"
  rc=$?
  [ $rc -eq 2 ] || fail "backup $arg with a 2000 ms lease: exit $rc, want 2: $(tail -n 2 "$T/b.err")"
  grep -q "below half the cluster's lease (2000 ms" "$T/b.err" || fail "backup $arg: $(cat "$T/b.err")"
  [ ! -e "$T/refused" ] || fail "backup $arg: refused, but made its --out directory"
  echo "ok: $arg refused: $(cut -c1-110 "$T/b.err")..."
done
out=$("$L" backup --config "$CLUSTER_INI" --out "$T/b999" --pause-ms 999 --quiet --json 2>"$T/b.err") \
  || fail "backup --pause-ms 999: $(tail -n 3 "$T/b.err")"
echo "$out" | grep -q '"pause_asked_ms":999' || fail "backup --pause-ms 999: $out"
[ -e "$T/b999/BACKUP" ] || fail "backup --pause-ms 999 wrote no BACKUP"
"$L" backup --config "$CLUSTER_INI" --out "$T/bdef" --quiet >/dev/null 2>"$T/b.err" \
  || fail "backup with the default pauses: $(tail -n 3 "$T/b.err")"
"$L" backup --help | grep -q "below half the cluster's lease" || fail "--help does not say the bound"
echo "ok: --pause-ms 999 and the defaults run: $(echo "$out" | cut -c1-80)..."
