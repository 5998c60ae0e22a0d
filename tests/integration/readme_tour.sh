#!/usr/bin/env bash
# timeout: 120
# sanitizers: skip (a walk through binaries the other tests cover, 35 s under ASan; CI time)
# The README's five-minute tour, as printed: its three shell blocks (a --local
# cluster; a durable 2-server cluster from a config file with a secret, one
# server killed -9 and recovered, then bank --verify; lotus serve on that
# cluster with redis-cli) run in one shell with `lotus` on PATH.  Only what a
# test must change is changed: scratch paths for /tmp, free ports for the
# fixed ones, shorter runs.
. "$(dirname "$0")/lib.sh"
need redis-cli
tour() {   # the Nth ```sh block between "## A five-minute tour" and the next "## "
  awk -v want="$1" '/^## A five-minute tour/ {on=1; next} on && /^## / {exit}
      on && $0 == "```sh" {n++; if (n == want) {inb=1; next}} inb && /^```/ {exit} inb {print}' \
      "$ROOT/README.md"
}
ports=$($PY -c 'import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
read -r p0 p1 ps <<<"$ports"
{
  echo 'trap '\''kill $(jobs -p) 2>/dev/null; wait'\'' EXIT'
  # the README's `sleep 1` (time to listen), made patient for a loaded host
  echo "up() { for p in \"\$@\"; do for _ in \$(seq 300); do (exec 3<>/dev/tcp/127.0.0.1/\$p) 2>/dev/null && break; sleep 0.1; done; done; }"
  for i in 1 2 3; do tour $i; done
  echo 'wait'
} | sed -e "s|/tmp/tour|$T/tour|g; s|/tmp/l1|$T/l1|g; s|--seconds [0-9]*|--seconds 1|g" \
        -e "s|127.0.0.1:7000|127.0.0.1:$p0|; s|127.0.0.1:7001|127.0.0.1:$p1|" \
        -e "s|redis-cli|redis-cli -p $ps|g; s|lotus serve --config cluster.ini|& --listen 127.0.0.1:$ps|" \
        -e "s|--records [0-9]*|--records 2000|" \
        -e "s|^sleep 1 *#.*|up $p0 $p1|; s|^sleep 1\$|up $ps|" >"$T/tour.sh"
[ "$(grep -c 'lotus ' "$T/tour.sh")" -ge 8 ] || { cat "$T/tour.sh"; fail "the tour's blocks are missing"; }
# As a user pastes it: no set -e (a shell does not stop at an error); what it
# printed is checked instead, and the time it took.
PATH="$(cd "$(dirname "$L")" && pwd):$PATH" timeout 100 bash "$T/tour.sh" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -ne 124 ] || { tail -n 20 "$T/out" "$T/err"; fail "the tour did not end within 100 s"; }
cat "$T/out"
grep -i 'error\|usage' "$T/err" && fail "the tour printed errors"
[ "$(grep -c 'lotus bank --verify: OK' "$T/out")" -eq 2 ] || fail "want two bank --verify: OK"
grep -qx v "$T/out" || fail "redis-cli GET k did not print v"
[ "$(grep -cx 1 "$T/out")" -ge 2 ] || fail "MULTI/EXEC did not return its two INCRs"
grep -q 'recovered ms1' "$T/err" || fail "server 1 did not recover its data dir: $(tail -n 5 "$T/err")"
echo ok
