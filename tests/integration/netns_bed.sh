#!/usr/bin/env bash
# timeout: 60
# sanitizers: skip (waits out leases, timeouts or fault windows; its code paths run under ASan in other tests)
# The netns test bed itself (scripts/netns-cluster, docs/netns.md): its
# faults must be real.  A bed of three server hosts and one client host,
# with a plain TCP listener (python3) on port 7000 of every server host in
# place of lotus.  Checks, by connecting from one namespace to another:
# every host reaches every server; `partition ms0 ms1` cuts exactly that pair
# (each still reaches ms2, c0 reaches both); a second, different pair is
# refused while one is cut; `partition c0` cuts c0 from everybody; `heal`
# undoes both; a second bed runs beside the first with other namespace names;
# `down` ends what runs in its namespaces and deletes them; bad usage exits 2.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
. scripts/lib-netns.sh
tmpl=$(mktemp)
printf '[cluster]\ncc = wait_die\n[memserver 1]\nthreads = 3\nlisten = 1.2.3.4:9\n' >"$tmpl"
bed_up 3 "$tmpl" --clients 1 --no-start
rm -f "$tmpl"
grep -q '^cc = wait_die$' "$INI" && grep -q '^threads = 3$' "$INI" \
  && grep -q '^listen = 10.77.0.11:7000$' "$INI" && ! grep -q 1.2.3.4 "$INI" \
  || fail "the config does not carry the template's keys with the bed's addresses: $(cat "$INI")"
for h in ms0 ms1 ms2; do
  on_bg $h /usr/bin/python3 -c 'import socket, time
s = socket.socket(); s.bind(("0.0.0.0", 7000)); s.listen(64); time.sleep(50)'
done
# reach FROM TO: a TCP connection from host FROM to TO's port 7000 opens within 1 s
reach() {
  on "$1" /usr/bin/python3 -c 'import socket, sys
socket.create_connection((sys.argv[1], 7000), timeout=1).close()' "$(nc addr "$2")" 2>/dev/null
}
for i in $(seq 50); do reach c0 ms2 && break; sleep 0.1; done
expect() {   # expect yes|no FROM TO; a "yes" gets a few tries (a healed port
             # and its neighbour entries take a moment on a loaded machine)
  local tries=1
  [ "$1" = yes ] && tries=6
  for _ in $(seq $tries); do reach "$2" "$3" && break; sleep 0.5; done
  if reach "$2" "$3"; then [ "$1" = yes ] || fail "$2 reaches $3 ($4)"
  else [ "$1" = no ] || fail "$2 cannot reach $3 ($4)"; fi
}
for f in ms0 ms1 ms2 c0; do for t in ms0 ms1 ms2; do
  [ $f = $t ] || expect yes $f $t "no fault"
done; done
nc partition ms0 ms1 || fail "partition ms0 ms1 failed"
expect no ms0 ms1 "ms0 cut from ms1"; expect no ms1 ms0 "ms0 cut from ms1"
expect yes ms0 ms2 "ms0 cut from ms1"; expect yes ms1 ms2 "ms0 cut from ms1"
expect yes c0 ms0 "ms0 cut from ms1"; expect yes c0 ms1 "ms0 cut from ms1"
nc partition ms0 ms2 2>/dev/null && fail "a second cut was accepted while ms0|ms1 is cut"
nc status | grep -q '^ms1 .*cut' || fail "status does not show the cut: $(nc status)"
nc heal ms0 ms1
expect yes ms0 ms1 "healed"
nc partition c0
expect no c0 ms0 "c0 partitioned"; expect no c0 ms2 "c0 partitioned"; expect yes ms0 ms2 "c0 partitioned"
nc status | grep -q '^c0 .*link down' || fail "status does not show c0's link down: $(nc status)"
nc heal
expect yes c0 ms0 "healed all"
nc shape c0 10mbit && nc status | grep -q '^c0 .*shaped' || fail "shape failed"
nc shape c0 off
expect yes c0 ms1 "shaped and unshaped"
echo "faults: two-host cut, one-host partition, heal, shape: as expected"

# a second bed beside the first
bed2=$WORK/bed2
scripts/netns-cluster up 1 --dir "$bed2" --clients 1 --no-start --lotus "$L" >/dev/null \
  || fail "a second bed did not come up"
n1=$(nc ns ms0); n2=$(scripts/netns-cluster --dir "$bed2" ns ms0)
[ "$n1" != "$n2" ] || fail "two beds share the namespace name $n1"
scripts/netns-cluster --dir "$bed2" down
[ ! -e "/var/run/netns/$n2" ] || fail "down left $n2"
expect yes c0 ms0 "the second bed went down"

# usage errors
scripts/netns-cluster --dir "$BED" partition ms7 >/dev/null 2>&1; [ $? -eq 2 ] || fail "an unknown host is not a usage error"
scripts/netns-cluster up 0 >/dev/null 2>&1; [ $? -eq 2 ] || fail "up 0 is not a usage error"
scripts/netns-cluster --dir "$BED" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || fail "an unknown command is not a usage error"
scripts/netns-cluster --help | grep -q 'partition A B' || fail "--help does not list partition A B"

pids=("${BED_PIDS[@]}")
names=$(for h in hub ms0 ms1 ms2 c0; do nc ns $h; done)
nc down
for n in $names; do [ ! -e "/var/run/netns/$n" ] || fail "down left namespace $n"; done
sleep 0.2
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && fail "down left pid $p running in its namespace"; done
BED_PIDS=()
echo ok
