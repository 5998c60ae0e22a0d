# lib-netns.sh - helpers for the fault tests on the netns test bed
# (scripts/netns-cluster).  Source it with L set to the lotus binary, then:
#   bed_up N TEMPLATE [up options] [-- memserver options]
#                       a bed in a fresh mktemp directory: sets BED (its
#                       state directory), INI (its cluster.ini), WORK (a
#                       scratch directory); exits the test with 77 when
#                       network namespaces are unavailable
#   bed_down            stops it and removes everything (call it from the
#                       EXIT trap; the trap bed_up installs does)
#   nc CMD...           scripts/netns-cluster --dir $BED CMD...
#   on HOST CMD...      run CMD in HOST's namespace
#   on_bg HOST CMD...   the same in the background; BG_PID is CMD's own pid
#                       (kill -9 reaches it), added to BED_PIDS
#   probe_free HOST LEDGER CC T0_NS MAX_S
#                       run `lotus bank --verify` from HOST on a copy of
#                       LEDGER, over and over, until one passes or MAX_S
#                       seconds after T0_NS (date +%s%N) have passed; sets
#                       FREE_S (seconds from T0_NS to the end of the passing
#                       verify, empty if none passed), PROBES, PROBE_LAST
#   verify HOST LEDGER CC   a final `lotus bank --verify --json`; fails the
#                       test unless it passes with the total unchanged
#   lease_ms            the lease the tests configure (LEASE_MS, default 2000)
#   ms_since T0_NS      milliseconds since T0_NS, as seconds with 2 decimals
# fail() must be defined by the test.
NETNS_CLUSTER_BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns-cluster"
BED= INI= WORK=
BED_PIDS=()   # clients a test started: killed by bed_down

nc() { "$NETNS_CLUSTER_BIN" --dir "$BED" "$@"; }
on() { local h=$1; shift; "$NETNS_CLUSTER_BIN" --dir "$BED" exec "$h" -- "$@"; }
on_bg() {
  local h=$1; shift
  "$NETNS_CLUSTER_BIN" --dir "$BED" exec "$h" -- "$@" &   # execs: $! is CMD
  BG_PID=$!
  BED_PIDS+=("$BG_PID")
}
lease_ms() { echo "${LEASE_MS:-2000}"; }
ms_since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN { printf "%.2f", (b - a) / 1e9 }'; }

# lotus_knows KEY VALUE: the lotus binary accepts "KEY = VALUE" in [cluster]
# (a binary older than the feature refuses the key as unknown).  It asks
# `lotus txn-status` with a config naming a closed loopback port.
lotus_knows() {
  local f out
  f=$(mktemp)
  printf '[cluster]\n%s = %s\n[memserver 0]\nlisten = 127.0.0.1:1\n' "$1" "$2" >"$f"
  out=$(timeout 10 "$L" txn-status --config "$f" --server 0 --txn 1 2>&1)
  rm -f "$f"
  ! echo "$out" | grep -q "unknown key"
}

bed_down() {
  local st=$? p f
  if [ $st -ne 0 ] && [ $st -ne 77 ] && [ -n "$BED" ]; then   # a failure: the servers' last words
    for f in "$BED"/ms*.err; do
      [ -f "$f" ] && { echo "--- $(basename "$f") (last lines)"; tail -n 8 "$f"; }
    done
  fi
  for p in "${BED_PIDS[@]}"; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  for p in "${BED_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  BED_PIDS=()
  [ -z "$BED" ] || [ ! -f "$BED/bed.env" ] || nc down
  [ -z "$WORK" ] || rm -rf "$WORK"
}

bed_up() {
  local n=$1 tmpl=$2 rc
  shift 2
  WORK=$(mktemp -d)
  if declare -F at_exit >/dev/null; then at_exit bed_down; else trap bed_down EXIT; fi
  trap 'exit 143' TERM INT
  BED=$WORK/bed
  "$NETNS_CLUSTER_BIN" up "$n" --dir "$BED" --config "$tmpl" --lotus "$L" "$@" >/dev/null 2>"$WORK/up.err"
  rc=$?
  if [ $rc -eq 77 ]; then echo "SKIP: $(cat "$WORK/up.err")"; exit 77; fi
  [ $rc -eq 0 ] || fail "netns-cluster up failed: $(cat "$WORK/up.err")"
  INI=$BED/cluster.ini
}

probe_free() {
  local host=$1 led=$2 cc=$3 t0=$4 max=$5 probe=$WORK/probe.ledger out
  FREE_S= PROBES=0 PROBE_LAST=
  while :; do
    cp "$led" "$probe"
    PROBES=$((PROBES + 1))
    out=$(timeout -s KILL 20 "$NETNS_CLUSTER_BIN" --dir "$BED" exec "$host" -- "$L" bank \
          --config "$INI" --cc "$cc" --compute-id $((4000 + PROBES % 90)) --ledger "$probe" --verify --json 2>&1)
    if [ $? -eq 0 ] && echo "$out" | grep -q '"ok":true'; then
      FREE_S=$(ms_since "$t0")
      PROBE_LAST=$out
      return 0
    fi
    PROBE_LAST=$out
    [ "$(awk -v s="$(ms_since "$t0")" -v m="$max" 'BEGIN { print (s >= m) }')" = 0 ] || return 1
    sleep 0.05
  done
}

verify() {
  local host=$1 led=$2 cc=$3 out rc
  out=$(timeout -s KILL 30 "$NETNS_CLUSTER_BIN" --dir "$BED" exec "$host" -- "$L" bank \
        --config "$INI" --cc "$cc" --compute-id 4095 --ledger "$led" --verify --json 2>"$WORK/verify.err")
  rc=$?
  [ $rc -ne 137 ] || fail "verify still blocked after 30 s"
  [ $rc -eq 0 ] && echo "$out" | grep -q '"ok":true' || fail "verify failed: $out $(tail -n 3 "$WORK/verify.err")"
  local total expected
  total=$(echo "$out" | sed -n 's/.*"total":\([0-9-]*\).*/\1/p')
  expected=$(echo "$out" | sed -n 's/.*"expected_total":\([0-9-]*\).*/\1/p')
  [ -n "$total" ] && [ "$total" = "$expected" ] || fail "verify: total $total, expected $expected"
  VERIFY_OUT=$out
}
