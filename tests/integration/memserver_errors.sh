#!/usr/bin/env bash
# timeout: 40
# The common mistakes when starting a memory server get one lotus line that
# names the problem, not UCX's log lines: a port already in use, and an --id
# whose config section lists an address of another host.  The second runs in
# a network namespace of its own, where 192.0.2.1 is not an address.
. "$(dirname "$0")/lib.sh"
dir=$T; pid=
at_exit '[ -n "$pid" ] && kill $pid 2>/dev/null; wait 2>/dev/null'

"$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 16M --ready-json >"$dir/ready" 2>"$dir/s.err" &
pid=$!
for _ in $(seq 100); do grep -q '"port"' "$dir/ready" 2>/dev/null && break; sleep 0.1; done
port=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/ready")
[ -n "$port" ] || fail "first server did not start: $(cat "$dir/s.err")"

out=$("$L" memserver --listen 127.0.0.1:$port --threads 1 --memory 16M 2>&1); rc=$?
[ $rc -eq 1 ] || fail "port in use: exit $rc, want 1"
echo "$out" | grep -q "127.0.0.1:$port is already in use" || fail "port in use not named: $out"
echo "$out" | grep -q "UCX" && fail "raw UCX error for a port in use: $out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "want one line, got: $out"
echo "ok: $out"

cat >"$dir/c.ini" <<INI
[cluster]
transport = tcp
[memserver 0]
listen = 127.0.0.1:$port
memory = 16M
[memserver 1]
listen = 192.0.2.1:7000
memory = 16M
INI
if unshare -rn true 2>/dev/null; then
  out=$(unshare -rn sh -c "ip link set lo up 2>/dev/null; exec '$L' memserver --config '$dir/c.ini' --id 1 --threads 1 --insecure" 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "wrong --id: exit $rc, want 1"
  echo "$out" | grep -q "not an address of this host: is --id 1" || fail "wrong --id not named: $out"
  echo "$out" | grep -q "UCX" && fail "raw UCX error for a wrong --id: $out"
  echo "ok: $out"
else
  echo "note: no user namespaces; wrong-address case skipped"
fi

out=$("$L" memserver --config "$dir/c.ini" --id 5 2>&1); rc=$?
[ $rc -eq 2 ] || fail "--id 5 of 2 servers: exit $rc, want 2"
echo "$out" | grep -q "no \[memserver 5\]" || fail "--id out of range not named: $out"
echo "ok: $out"
