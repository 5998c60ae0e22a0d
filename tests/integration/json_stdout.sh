#!/usr/bin/env bash
# timeout: 150
# Every --json output is pure JSON on stdout, with the environment a user has
# (no UCX_* variables at all, unlike the runner's UCX_TLS): exactly one document
# that `python3 -m json.tool` reads, and nothing but JSON reaches stdout.  UCX prints
# no warning about the settings lotus makes.
. "$(dirname "$0")/lib.sh"
dir=$T; pid=
at_exit '[ -n "$pid" ] && kill -9 $pid 2>/dev/null'
for v in $(env | sed -n 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# check name file: file is one JSON document, read strictly by json.tool (as README
# and every --help say), and no --help mentions JSON Lines any more.
check() {
  local name=$1 f=$2
  [ -s "$f" ] || fail "$name printed nothing on stdout"
  /usr/bin/python3 -m json.tool "$f" >/dev/null ||
    { sed 's/^/    /' "$f" | head -n 5; fail "$name: stdout is not one JSON document"; }
  ! "$L" "$name" --help | grep -A1 -- '--json' | grep -q 'JSON Lines' ||
    fail "$name --help still says JSON Lines"
  echo "ok   $name ($(wc -l <"$f") line(s), one document)"
}
# shape name file python-expr: the document has the shape the --help describes
shape() {
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert $3, d" "$2" ||
    fail "$1: unexpected shape: $(head -c 300 "$2")"
}

"$L" ycsb --local 2 --records 1000 --seconds 0.5 --warmup 0 --threads 1 --server-threads 1 \
  --json --quiet >"$dir/ycsb" 2>"$dir/err" || fail "ycsb: $(tail -n3 "$dir/err")"
check ycsb "$dir/ycsb"
# A UCX variable this UCX does not know (as UCX_ASYNC_MODE on 1.13): UCX warns,
# and the warning must go to stderr, never into the JSON on stdout.
UCX_ASYNC_MODE=poll "$L" ycsb --local 1 --records 500 --seconds 0.3 --warmup 0 --threads 1 \
  --server-threads 1 --json --quiet >"$dir/ycsb_env" 2>"$dir/err" ||
  fail "ycsb with a stray UCX variable: $(tail -n3 "$dir/err")"
check ycsb "$dir/ycsb_env"
/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert "digest" not in r, r["digest"]' \
  "$dir/ycsb" || fail "ycsb --json without --digest prints a digest"

"$L" bank --local 2 --ledger "$dir/ledger" --seconds 0.5 --accounts 50 --threads 1 \
  --server-threads 1 --verify --json --quiet >"$dir/bank" 2>"$dir/err" ||
  fail "bank: $(tail -n3 "$dir/err")"
check bank "$dir/bank"
shape bank "$dir/bank" 'set(d)=={"run","verify"} and d["run"]["committed"]>0 and d["verify"]["ok"]'
# a lone run and a lone verify stay single objects
"$L" bank --local 2 --ledger "$dir/ledger1" --seconds 0.3 --accounts 20 --threads 1 \
  --server-threads 1 --json --quiet >"$dir/bank1" 2>"$dir/err" || fail "bank run: $(tail -n3 "$dir/err")"
check bank "$dir/bank1"
shape bank "$dir/bank1" '"committed" in d and "verify" not in d'
"$L" bank --local 2 --data-dir "$dir/bdata" --ledger "$dir/ledger2" --seconds 0.3 --accounts 20 \
  --threads 1 --server-threads 1 --quiet >/dev/null 2>"$dir/err" || fail "bank data-dir run: $(tail -n3 "$dir/err")"
"$L" bank --local 2 --data-dir "$dir/bdata" --ledger "$dir/ledger2" --server-threads 1 --verify \
  --json >"$dir/bank2" 2>"$dir/err" || fail "bank verify: $(tail -n3 "$dir/err")"
check bank "$dir/bank2"
shape bank "$dir/bank2" 'd["ok"] is True and "committed" not in d'

"$L" netbench --seconds 0.2 --warmup 0 --json >"$dir/netbench" 2>"$dir/err" ||
  fail "netbench: $(tail -n3 "$dir/err")"
check netbench "$dir/netbench"
shape netbench "$dir/netbench" 'set(d)=={"runs"} and len(d["runs"])==2 and all("rtt_per_s" in r for r in d["runs"])'
# ... and UCX has nothing to warn about in lotus's own settings.
if grep -q "UCX.*WARN" "$dir/err"; then grep "UCX.*WARN" "$dir/err" | head -n 3; fail "UCX warnings"; fi

"$L" iobench table3 --seconds 0.2 --file-size 8M --dir "$dir" --json --quiet \
  >"$dir/iobench" 2>"$dir/err" || fail "iobench: $(tail -n3 "$dir/err")"
check iobench "$dir/iobench"
shape iobench "$dir/iobench" 'isinstance(d, list) and d and all("experiment" in r for r in d)'

"$L" durbench --only log --seconds 0.3 --threads 1 --dir "$dir" --json \
  >"$dir/durbench" 2>"$dir/err" || fail "durbench: $(tail -n3 "$dir/err")"
check durbench "$dir/durbench"
shape durbench "$dir/durbench" 'isinstance(d, list) and len(d)>1 and all(r["bench"]=="log" for r in d)'

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
