#!/usr/bin/env bash
# timeout: 90
# `lotus status` against a real 2-server cluster with a secret (docs/operations.md,
# "status" and "metrics"), as an operator and a monitoring stack meet it:
#  - --json is one document that /usr/bin/python3 parses: a row per server with
#    id, up, pid (the servers' real pids), address, durability and data dir,
#    the records a ycsb load left, a checkpoint; exit 0;
#  - a status client with the wrong secret gets every row down and exit 1, and
#    the servers count it among their door refusals;
#  - --prometheus parses with prometheus_client's text parser and a grammar
#    check that knows nothing of lotus; lotus_up per server;
#  - a stopped server (SIGSTOP) does not hang status: its row is down within
#    --timeout-ms; a killed one (kill -9) is a row with up false and the reason,
#    exit non-zero, the other still up.
. "$(dirname "$0")/lib.sh"
dir=$T; pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  wait 2>/dev/null
}
at_exit cleanup

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/key"; chmod 600 "$dir/key"
echo "another secret" >"$dir/wrong"; chmod 600 "$dir/wrong"
start_ms() {   # start_ms ID ARGS...: sets PORT
  local id=$1; shift
  "$L" memserver --listen 127.0.0.1:0 --id "$id" --memory 32M --threads 1 --ready-json \
    --secret-file "$dir/key" --cluster-id 00000000000000a5 "$@" \
    >"$dir/ms$id.out" 2>"$dir/ms$id.err" &
  pids[$id]=$!
  for _ in $(seq 200); do grep -q '"port"' "$dir/ms$id.out" 2>/dev/null && break; sleep 0.05; done
  PORT=$(sed -n 's/.*"port":\([0-9]*\).*/\1/p' "$dir/ms$id.out")
  [ -n "$PORT" ] || fail "server $id did not start: $(cat "$dir/ms$id.err")"
}
start_ms 0 --data-dir "$dir/ms0" --init --checkpoint-log 64K; p0=$PORT
start_ms 1; p1=$PORT
printf '[cluster]\nsecret_file = key\ncluster_id = 00000000000000a5\n[memserver 0]\nlisten = 127.0.0.1:%s\ndata_dir = ms0\n[memserver 1]\nlisten = 127.0.0.1:%s\n' \
  "$p0" "$p1" >"$dir/c.ini"
timeout 60 "$L" ycsb --config "$dir/c.ini" --records 2000 --seconds 1 --threads 1 >/dev/null 2>"$dir/y.err" \
  || fail "ycsb: $(tail -n 3 "$dir/y.err")"

# ---- all up: table and JSON ----
timeout 30 "$L" status --config "$dir/c.ini" >"$dir/table" 2>"$dir/table.err"; rc=$?
cat "$dir/table"
[ $rc -eq 0 ] || fail "status exited $rc with every server up: $(cat "$dir/table.err")"
[ "$(grep -c ' up ' "$dir/table")" -eq 2 ] || fail "the table does not show 2 servers up"
# the checkpoint is taken on log growth (64K): wait for one (bounded)
for _ in $(seq 100); do
  timeout 30 "$L" status --config "$dir/c.ini" --json >"$dir/up.json" 2>"$dir/up.err"; rc=$?
  grep -q '"checkpoint":{' "$dir/up.json" && break
  sleep 0.1
done
[ $rc -eq 0 ] || fail "status --json exited $rc with every server up: $(cat "$dir/up.err")"
$PY - "$dir/up.json" "${pids[0]}" "${pids[1]}" "$p0" "$p1" "$dir/ms0" <<'EOF' || fail "status --json (all up)"
import json, sys
doc = json.load(open(sys.argv[1]))      # one document, nothing else on stdout
pids, ports, d0 = [int(sys.argv[2]), int(sys.argv[3])], [sys.argv[4], sys.argv[5]], sys.argv[6]
rows = doc["servers"]
assert [r["id"] for r in rows] == [0, 1], rows
for i, r in enumerate(rows):
    assert r["up"] is True, r
    assert r["pid"] == pids[i], (r["pid"], pids[i])
    assert r["address"] == "127.0.0.1:" + ports[i], r
    for k in ("pool_used_bytes", "pool_free_bytes", "tables", "records", "clients",
              "prepared", "lease_losses", "door_refusals"):
        assert isinstance(r[k], int) and r[k] >= 0, (k, r)
    assert r["tables"] >= 1 and r["records"] > 0, r
    assert r["pool_used_bytes"] + r["pool_free_bytes"] == 32 << 20, r
assert sum(r["records"] for r in rows) == 2000, rows
a, b = rows
assert a["durability"] == "sync" and a["data_dir"] == d0, a
assert a["lsn"] > 0 and a["durable_lsn"] <= a["lsn"] and a["log_bytes"] > 0, a
ck = a["checkpoint"]
assert ck and ck["seq"] >= 1 and ck["begin_lsn"] <= a["lsn"] and ck["unix_ms"] > 1.6e12, a
assert b["durability"] == "none" and b["data_dir"] is None and b["checkpoint"] is None, b
print("ok: json rows", [(r["id"], r["pid"], r["records"]) for r in rows],
      "server 0 lsn", a["lsn"], "checkpoint", ck["seq"])
EOF

# ---- the wrong secret: every row down, and the servers count the refusal ----
timeout 30 "$L" status --config "$dir/c.ini" --secret-file "$dir/wrong" --json \
  >"$dir/wrong.json" 2>"$dir/wrong.err"; rc=$?
[ $rc -ne 0 ] || fail "status with the wrong secret exited 0"
$PY -c '
import json, sys
rows = json.load(open(sys.argv[1]))["servers"]
assert len(rows) == 2 and all(r["up"] is False and r["reason"] for r in rows), rows
print("ok: wrong secret:", rows[0]["reason"])' "$dir/wrong.json" || fail "wrong secret rows: $(cat "$dir/wrong.json")"
timeout 30 "$L" status --config "$dir/c.ini" --json >"$dir/ref.json" || fail "status after the wrong secret"
$PY -c '
import json, sys
rows = json.load(open(sys.argv[1]))["servers"]
assert all(r["door_refusals"] >= 1 for r in rows), rows' "$dir/ref.json" \
  || fail "door refusals not counted: $(cat "$dir/ref.json")"

# ---- Prometheus text format ----
check_prom() {   # check_prom FILE UP0 UP1
  $PY - "$@" <<'EOF'
import re, sys
try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    text_string_to_metric_families = None
text = open(sys.argv[1]).read()
want = {"0": float(sys.argv[2]), "1": float(sys.argv[3])}
# the exposition grammar, line by line, independent of the parser
name = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
lab = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
sample = re.compile(r"^(%s)(\{%s(?:,%s)*\})? (-?[0-9.e+]+|NaN|[+-]Inf)$" % (name, lab, lab))
typed, seen = {}, set()
for ln in text.splitlines():
    if ln.startswith("# HELP "):
        assert re.match(r"^# HELP %s .+$" % name, ln), ln
    elif ln.startswith("# TYPE "):
        m = re.match(r"^# TYPE (%s) (counter|gauge|untyped|histogram|summary)$" % name, ln)
        assert m and m.group(1) not in typed, ln
        typed[m.group(1)] = m.group(2)
    else:
        m = sample.match(ln)
        assert m, "not a sample line: %r" % ln
        assert m.group(1) in typed, "sample before its TYPE: %r" % ln
        assert (m.group(1), m.group(2)) not in seen, "duplicate series: %r" % ln
        seen.add((m.group(1), m.group(2)))
if text_string_to_metric_families is None:   # scripts/deps.sh installs it
    up = {re.search(r'server="(\d+)"', l).group(1): float(l.split()[-1])
          for l in text.splitlines() if l.startswith("lotus_up{")}
    assert up == want, up
    print("ok: prometheus grammar (no prometheus_client: parser check skipped), lotus_up", up)
    sys.exit(0)
fams = {f.name: f for f in text_string_to_metric_families(text)}
up = {s.labels["server"]: s.value for s in fams["lotus_up"].samples}
assert up == want, up
assert fams["lotus_up"].type == "gauge"
assert fams["lotus_requests"].type == "counter"   # the parser drops _total
recs = [s for s in fams["lotus_records"].samples]
assert recs and all(s.labels["server"] in want for s in recs), recs
for s in recs:
    assert want[s.labels["server"]] == 1 and s.value > 0, s
print("ok: prometheus: %d families, %d series, lotus_up %s" % (len(fams), len(seen), up))
EOF
}
timeout 30 "$L" status --config "$dir/c.ini" --prometheus >"$dir/up.prom" || fail "status --prometheus (all up)"
check_prom "$dir/up.prom" 1 1 || fail "prometheus output (all up): $(head -n 20 "$dir/up.prom")"

# ---- a stopped server does not hang status ----
kill -STOP "${pids[1]}"
# SIGSTOP lands asynchronously: wait until every thread of it is stopped
for _ in $(seq 100); do
  ! grep -qv '^[0-9]* (.*) T' /proc/"${pids[1]}"/task/*/stat 2>/dev/null && break
  sleep 0.05
done
t0=$(date +%s%N)
timeout 30 "$L" status --config "$dir/c.ini" --json --timeout-ms 1000 >"$dir/stop.json" 2>"$dir/stop.err"; rc=$?
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill -CONT "${pids[1]}"
[ $rc -eq 1 ] || fail "status with a stopped server exited $rc (want 1): $(cat "$dir/stop.json" "$dir/stop.err"; grep -h "" /proc/"${pids[1]}"/task/*/stat | cut -d" " -f1-3)"
$PY -c '
import json, sys
a, b = json.load(open(sys.argv[1]))["servers"]
assert a["up"] is True and b["up"] is False and b["reason"], (a, b)
print("ok: stopped server:", b["reason"], "in", sys.argv[2], "ms")' "$dir/stop.json" "$ms" \
  || fail "stopped server rows: $(cat "$dir/stop.json")"

# ---- a killed server ----
kill -9 "${pids[1]}"; wait "${pids[1]}" 2>/dev/null
timeout 30 "$L" status --config "$dir/c.ini" --json >"$dir/down.json" 2>"$dir/down.err"; rc=$?
[ $rc -eq 1 ] || fail "status with a killed server exited $rc (want 1)"
$PY - "$dir/down.json" "${pids[0]}" "$p1" <<'EOF' || fail "status --json (one down): $(cat "$dir/down.json")"
import json, sys
rows = json.load(open(sys.argv[1]))["servers"]
a, b = rows
assert a["id"] == 0 and a["up"] is True and a["pid"] == int(sys.argv[2]), a
assert b["id"] == 1 and b["up"] is False and b["pid"] is None, b
assert b["address"] == "127.0.0.1:" + sys.argv[3] and b["reason"], b
print("ok: killed server:", b)
EOF
timeout 30 "$L" status --config "$dir/c.ini" --prometheus >"$dir/down.prom"; rc=$?
[ $rc -eq 1 ] || fail "status --prometheus with a killed server exited $rc (want 1)"
check_prom "$dir/down.prom" 1 0 || fail "prometheus output (one down): $(head -n 20 "$dir/down.prom")"
timeout 30 "$L" status --config "$dir/c.ini" >"$dir/down.table"; rc=$?
[ $rc -eq 1 ] && grep -q "^1 *down" "$dir/down.table" || fail "table with a killed server: $(cat "$dir/down.table")"
cat "$dir/down.table"
echo ok
