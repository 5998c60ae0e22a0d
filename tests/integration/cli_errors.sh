#!/usr/bin/env bash
# Bad command-line arguments exit with status 2 and one line naming the
# problem; a config error names the file and the line.
. "$(dirname "$0")/lib.sh"
expect2() {
  local out rc
  out=$("$L" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "lotus $* exited $rc, want 2"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "lotus $*: want one line, got: $out"
  echo "ok: lotus $* -> $out"
}
expect2 nosuchcommand
expect2 ycsb --records abc
expect2 ycsb --workload Z
expect2 ycsb --zipf
expect2 ycsb --bogus 1
expect2 ycsb --ops-per-txn 0
expect2 ycsb --records 10 --ops-per-txn 16
expect2 ycsb --txns 0
expect2 memserver --listen nocolon
expect2 memserver
expect2 memserver --listen 127.0.0.1:0 --memory 0
expect2 memserver --listen 127.0.0.1:0 --memory 4K
expect2 netbench --outstanding x
expect2 serve --listen 127.0.0.1:99999 --local 1
# ... and the line blames the port, not loopback (protected mode)
for a in 127.0.0.1:99999 localhost:65536 127.0.0.1:http; do
  out=$("$L" serve --listen "$a" --local 1 2>&1 >/dev/null)
  echo "$out" | grep -q "invalid port '${a##*:}'.* 0 to 65535" || fail "serve --listen $a: $out"
  echo "$out" | grep -q loopback && fail "serve --listen $a blames loopback: $out"
done
expect2 iobench --nope
"$L" ycsb --help | grep -q -- '--records' || fail "ycsb --help lacks --records"
"$L" ycsb --help | grep -q -- '--engine E' || fail "ycsb --help lacks --engine"
# The one-sided engine: runs, or says in one line that this build lacks it.
out=$("$L" ycsb --engine onesided --local 1 --records 64 --ops-per-txn 4 --threads 1 --txns 2 \
      --quiet 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ]; then
  [ $rc -eq 1 ] || fail "ycsb --engine onesided exited $rc"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q 'onesided engine is not built' ||
    fail "ycsb --engine onesided: want one line saying it is not built, got: $out"
  echo "ok: lotus ycsb --engine onesided -> $out"
fi
"$L" memserver --help | grep -q -- '--listen' || fail "memserver --help lacks --listen"

dir=$T
cat >"$dir/bad.ini" <<'INI'
[cluster]
transport = tcp

[memserver 0]
listen = 127.0.0.1:7000
threads = many
INI
out=$("$L" memserver --config "$dir/bad.ini" --id 0 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "bad config exited $rc"
echo "$out" | grep -q "bad.ini:6" || fail "config error does not name file:line: $out"
echo "ok: $out"
out=$("$L" ycsb --config "$dir/missing.ini" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "missing config exited $rc"
echo "$out" | grep -q "missing.ini" || fail "missing config not named: $out"
echo "ok: $out"

# A runtime error (no server at the address) is one line, exit 1.
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf '[cluster]\ntransport = tcp\n[memserver 0]\nlisten = 127.0.0.1:%s\n' "$port" >"$dir/down.ini"
for cmd in "ycsb --seconds 1" "bank --seconds 1 --ledger $dir/down.ledger" "tpcc --seconds 1"; do
  out=$("$L" $cmd --config "$dir/down.ini" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 1 ] || fail "lotus $cmd on no server exited $rc, want 1 ($out)"
  [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "lotus $cmd on no server: want one line, got: $out"
  echo "$out" | grep -q "cannot reach memory server 0" || fail "lotus $cmd: unclear: $out"
  echo "ok: lotus ${cmd%% *} -> $out"
done

# A data dir too big for --memory names both sizes in units that show them.
"$L" ycsb --local 1 --server-threads 1 --server-memory 32M --data-dir "$dir/dd" --records 2000 \
    --no-run --quiet >/dev/null 2>"$dir/dd.err" || fail "load of a data dir: $(cat "$dir/dd.err")"
out=$(timeout 20 "$L" memserver --listen 127.0.0.1:0 --threads 1 --data-dir "$dir/dd/ms0" \
      --memory 256K 2>&1 >/dev/null); rc=$?
[ $rc -eq 1 ] || fail "memserver on a too small pool exited $rc, want 1 ($out)"
echo "$out" | grep -q "this server has 256 KiB" || fail "pool size not shown: $out"
echo "ok: $(echo "$out" | head -n1)"

# A --local memory server that exits before it is ready: the client says how
# it ended (here the data dir's check above: exit status 1).
out=$(timeout 30 "$L" ycsb --local 1 --server-threads 1 --server-memory 256K \
      --data-dir "$dir/dd" --seconds 1 --quiet 2>&1 >/dev/null); rc=$?
[ $rc -ne 0 ] || fail "ycsb on a local server that cannot start exited 0"
echo "$out" | grep -q "local memory server 0 did not start: .*(exit status 1)" \
  || fail "no exit status for the local server that did not start: $out"
echo "ok: $(echo "$out" | grep "did not start")"
