#!/usr/bin/env bash
# timeout: 90
# `lotus serve` driven by redis-cli: SET/GET, binary values, the string
# commands, MULTI/EXEC (read-your-writes inside, EXECABORT, DISCARD), SCAN in
# key order, DBSIZE, Redis-style errors (unknown command, SET EX 0, value over
# the table's limit, key over 128 B, HELLO 3), AUTH with --requirepass,
# the protected-mode rule, and a clean stop on SIGTERM that takes the memory
# servers down too.
. "$(dirname "$0")/lib.sh"
command -v redis-cli >/dev/null || { echo "SKIP: redis-cli (redis-tools) not installed"; exit 77; }
dir=$T
. "$(dirname "$0")/../../scripts/lib-serve.sh"
at_exit 'serve_stop'

serve_start "$dir" --local 2 --threads 2 --max-value 100 || fail "serve did not start"
R() { redis-cli -p "$SERVE_PORT" "$@"; }
want() {  # want EXPECTED redis-cli args...
  local exp=$1; shift
  local got; got=$(R "$@" 2>&1)
  [ "$got" = "$exp" ] || fail "redis-cli $*: got [$got], want [$exp]"
  echo "ok: $* -> $(echo "$got" | head -c 100 | tr '\n' ' ')"
}

want PONG PING
want hi ECHO hi
want OK SET k v
want v GET k
want "" GET missing
want 1 EXISTS k
want 2 EXISTS k k
want 0 EXISTS missing
want 1 STRLEN k
want 4 APPEND k xyz
want vxyz GET k
want vxyz GETSET k w
want w GET k
want 0 SETNX k z
want 1 SETNX k2 z
want "" SET k 9 NX
want OK SET k 9 XX
want "" SET nope 1 XX
want 9 GET k
want 10 INCR k
want 7 INCRBY k -3
want 6 DECR k
want 1 DECRBY k 5
want OK MSET a 1 b 2 c 3
want "$(printf '1\n2\n\n3')" MGET a b nope c
want 2 DEL a b nope
want "" GET a
want 1 INCR fresh
want 2 INCR fresh

# binary values: every byte value, CR LF and NUL included
head -c 256 /dev/urandom >"$dir/bin"; printf '\r\n\0\r\n' >>"$dir/bin"
head -c 90 "$dir/bin" >"$dir/bin90"
R -x SET binkey <"$dir/bin90" >/dev/null || fail "SET binary"
R --raw GET binkey | head -c 90 >"$dir/back"
cmp "$dir/bin90" "$dir/back" || fail "binary value changed on the way"
printf 'k\0\r\nkey' >"$dir/binkey"
R -x SET binval <"$dir/binkey" >/dev/null
R --raw GET binval | head -c 7 | cmp - "$dir/binkey" || fail "binary value 2"
echo "ok: binary values round-trip"

# MULTI/EXEC: one transaction; read-your-writes inside
got=$(printf 'MULTI\nSET m 1\nINCR m\nINCRBY m 10\nGET m\nEXEC\n' | R)
[ "$got" = "$(printf 'OK\nQUEUED\nQUEUED\nQUEUED\nQUEUED\nOK\n2\n12\n12')" ] || fail "MULTI/EXEC: [$got]"
echo "ok: MULTI/EXEC with read-your-writes"
got=$(printf 'MULTI\nSET d 1\nDISCARD\nGET d\n' | R)
[ "$got" = "$(printf 'OK\nQUEUED\nOK\n')" ] || fail "DISCARD: [$got]"
got=$(printf 'MULTI\nSET e 1\nNOSUCH x\nEXEC\n' | R 2>&1)
echo "$got" | grep -q "EXECABORT" || fail "EXECABORT: [$got]"
want "" GET e
got=$(printf 'MULTI\nSET n abc\nINCR n\nSET n2 ok\nEXEC\n' | R 2>&1)
echo "$got" | grep -q "not an integer" || fail "runtime error inside EXEC: [$got]"
want ok GET n2
want "ERR EXEC without MULTI" EXEC
echo "ok: DISCARD, EXECABORT, runtime errors in EXEC"

# SCAN walks the keys in key order
keys=$(for i in $(seq 1 60); do echo "s:$(( (i * 37) % 61 ))"; done)
for k in $keys; do R SET "$k" x >/dev/null; done
R --scan --pattern 's:*' >"$dir/scan"
echo "$keys" | LC_ALL=C sort >"$dir/sorted"
cmp "$dir/scan" "$dir/sorted" || fail "SCAN order: $(head -5 "$dir/scan" | tr '\n' ' ')"
[ "$(R --scan | LC_ALL=C sort -c && echo sorted)" = sorted ] || fail "SCAN of all keys not sorted"
n=$(R --scan | wc -l)
want "$n" DBSIZE
want "$(printf '0\ns:1')" SCAN 0 MATCH 's:1' COUNT 1000
echo "ok: SCAN in key order ($n keys), DBSIZE"

# errors
want "ERR unknown command 'NOSUCH', with args beginning with: 'a' " NOSUCH a
want OK SET k v EX 10
want "ERR invalid expire time in 'set' command" SET k v EX 0
big=$(head -c 101 /dev/zero | tr '\0' x)
want "ERR value is 101 bytes, over this table's limit of 100 bytes (lotus serve --max-value)" SET k "$big"
long=$(head -c 129 /dev/zero | tr '\0' k)
want "ERR key is 129 bytes, over lotus's key limit of 128 bytes" GET "$long"
want OK SET "${long:1}" fits
want "ERR wrong number of arguments for 'get' command" GET
want "ERR value is not an integer or out of range" INCRBY k notanumber
R SET s abc >/dev/null
want "ERR value is not an integer or out of range" INCR s
R SET a 99999999999999999 >/dev/null
want "ERR value is 118 bytes, over this table's limit of 100 bytes (lotus serve --max-value)" APPEND a "$big"
got=$(R HELLO 3 2>&1); echo "$got" | grep -q NOPROTO || fail "HELLO 3: $got"
got=$(R HELLO 2 2>&1); echo "$got" | grep -q lotus || fail "HELLO 2: $got"
want OK WATCH k
want OK UNWATCH
want OK SELECT 0
got=$(R SELECT 1 2>&1); echo "$got" | grep -q "out of range" || fail "SELECT 1: $got"
got=$(R AUTH pw 2>&1); echo "$got" | grep -q "without any password" || fail "AUTH: $got"
want OK CLIENT SETNAME me
got=$(R INFO lotus); echo "$got" | grep -q "lotus_txn_committed:" || fail "INFO: $got"
echo "$got" | grep -q 'lotus_memserver1:{' || fail "INFO lacks memory server counters"
echo "ok: errors and connection commands"

# SIGTERM stops it cleanly, memory servers included
kids=$(serve_children "$SERVE_PID")
[ -n "$kids" ] || fail "no memory server children found"
serve_stop || fail "serve exited $? on SIGTERM"
sleep 0.5
for k in $kids; do kill -0 "$k" 2>/dev/null && fail "memory server $k outlived lotus serve"; done
echo "ok: SIGTERM stops serve and its memory servers"

# --requirepass: NOAUTH until AUTH; the protected-mode rule
serve_start "$dir" --local 1 --requirepass sekrit || fail "serve with a password"
got=$(R GET k 2>&1); echo "$got" | grep -q NOAUTH || fail "no NOAUTH: $got"
got=$(R AUTH wrong 2>&1); echo "$got" | grep -q WRONGPASS || fail "wrong password: $got"
[ "$(R -a sekrit --no-auth-warning SET k v)" = OK ] || fail "AUTH then SET"
[ "$(R -a sekrit --no-auth-warning GET k)" = v ] || fail "AUTH then GET"
got=$(R --no-auth-warning HELLO 2 AUTH default sekrit 2>&1); echo "$got" | grep -q lotus || fail "HELLO AUTH: $got"
echo "ok: AUTH / NOAUTH"
kill -INT "$SERVE_PID"; wait "$SERVE_PID"; rc=$?; SERVE_PID=
[ $rc -eq 0 ] || fail "serve exited $rc on SIGINT"
echo "ok: SIGINT stops it cleanly"
out=$("$L" serve --listen 0.0.0.0:0 --local 1 2>&1); rc=$?
[ $rc -eq 2 ] || fail "non-loopback without a password exited $rc"
echo "$out" | grep -q "requirepass" || fail "refusal does not say why: $out"
out=$("$L" serve --bogus 2>&1); [ $? -eq 2 ] || fail "--bogus"
"$L" serve --help | grep -q -- --max-value || fail "--help"
echo "ok: protected mode, bad arguments"
echo PASS
