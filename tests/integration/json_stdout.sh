#!/usr/bin/env bash
# timeout: 150
# Every --json output is pure JSON on stdout, with the environment a user has
# (no UCX_* variables at all, unlike the runner's UCX_TLS): one document, or
# JSON Lines where --help says so, and nothing but JSON reaches stdout.  UCX prints
# no warning about the settings lotus makes.
set -u
fail() { echo "FAIL: $*"; exit 1; }
L=${LOTUS_BIN:?}
dir=$(mktemp -d); pid=
trap '[ -n "$pid" ] && kill -9 $pid 2>/dev/null; rm -rf "$dir"' EXIT
for v in $(env | sed -n 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# check name file [lines]: file is one JSON document (as README and --help say
# of ycsb and memserver --ready-json), or with "lines" JSON Lines, every line one
# JSON object (netbench, bank, iobench, durbench).
check() {
  local name=$1 f=$2 mode=${3:-doc}
  [ -s "$f" ] || fail "$name printed nothing on stdout"
  if [ "$mode" = lines ]; then
    /usr/bin/python3 -m json.tool --json-lines "$f" >/dev/null
  else
    /usr/bin/python3 -m json.tool "$f" >/dev/null
  fi || { sed 's/^/    /' "$f" | head -n 5; fail "$name: stdout is not JSON ($mode)"; }
  "$L" "$name" --help | grep -- '--json' | grep -q 'JSON Lines' && [ "$mode" != lines ] &&
    fail "$name --help says JSON Lines, the test expects one document"
  [ "$mode" != lines ] || "$L" "$name" --help | grep -A1 -- '--json' | grep -q 'JSON Lines' ||
    fail "$name --help does not say its --json prints JSON Lines"
  echo "ok   $name ($(wc -l <"$f") line(s), $mode)"
}

"$L" ycsb --local 2 --records 1000 --seconds 0.5 --warmup 0 --threads 1 --server-threads 1 \
  --json --quiet >"$dir/ycsb" 2>"$dir/err" || fail "ycsb: $(tail -n3 "$dir/err")"
check ycsb "$dir/ycsb"
/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert "digest" not in r, r["digest"]' \
  "$dir/ycsb" || fail "ycsb --json without --digest prints a digest"

"$L" bank --local 2 --ledger "$dir/ledger" --seconds 0.5 --accounts 50 --threads 1 \
  --server-threads 1 --verify --json --quiet >"$dir/bank" 2>"$dir/err" ||
  fail "bank: $(tail -n3 "$dir/err")"
check bank "$dir/bank" lines

"$L" netbench --seconds 0.2 --warmup 0 --json >"$dir/netbench" 2>"$dir/err" ||
  fail "netbench: $(tail -n3 "$dir/err")"
check netbench "$dir/netbench" lines
# ... and UCX has nothing to warn about in lotus's own settings.
if grep -q "UCX.*WARN" "$dir/err"; then grep "UCX.*WARN" "$dir/err" | head -n 3; fail "UCX warnings"; fi

"$L" iobench table3 --seconds 0.2 --file-size 8M --dir "$dir" --json --quiet \
  >"$dir/iobench" 2>"$dir/err" || fail "iobench: $(tail -n3 "$dir/err")"
check iobench "$dir/iobench" lines

"$L" durbench --only log --seconds 0.3 --threads 1 --dir "$dir" --json \
  >"$dir/durbench" 2>"$dir/err" || fail "durbench: $(tail -n3 "$dir/err")"
check durbench "$dir/durbench" lines

# memserver --ready-json: the ready line is the first thing on stdout.
"$L" memserver --listen 127.0.0.1:0 --threads 1 --memory 64M --ready-json \
  >"$dir/ms" 2>"$dir/err" & pid=$!
for _ in $(seq 100); do [ -s "$dir/ms" ] && break; sleep 0.1; done
kill $pid; wait $pid 2>/dev/null; pid=
check memserver "$dir/ms"
grep -q '"ready":true' "$dir/ms" || fail "no ready line"
# ... with the fields README shows
/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert set(r)=={"ready","id","port"}, r' \
  "$dir/ms" || fail "ready line fields differ from README's: $(cat "$dir/ms")"
grep -q '{"ready":true,"id":N,"port":P}' "$(dirname "$0")/../../README.md" || fail "README's ready line is out of date"

echo ok
