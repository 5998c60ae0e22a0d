#!/usr/bin/python3
"""elle_check.py - a list-append serializability checker for lotus histories.

In the spirit of Jepsen's Elle (list-append): every key holds a list, every
append adds an element that is unique in the whole history, so each observed
list names the exact sequence of writes that built it and the version order
of every key can be read off the longest list.  From it the checker builds the
dependency graph of the committed transactions (ww: the next version of a key,
wr: a read of the version a transaction wrote, rw: a read of the version that
another transaction overwrote) and reports every cycle, plus every anomaly
that needs no cycle.  It knows nothing of lotus's internals: its input is the
JSON-lines log of la-client (tests/checker/la_client.c; format in
docs/checker.md).

How deletes, inserts and scans are modelled (docs/checker.md has the long form):
- A delete ends an incarnation of a key.  An incarnation starts with an insert
  of [e] (a blind insert, or an append to an absent key) and is named by its
  first element, which is unique, so the versions of every incarnation stay
  recoverable.  The deleter read the list it deleted, so it is the last
  writer of that incarnation (ww from the last appender, rw from every reader
  of the final list).  Incarnations of one key are not ordered with respect
  to each other (an absent key reads as null, and one null looks like
  another), so nulls give no edges.
- Every write in this workload is a read-modify-write: the writer read the
  version it replaces.  Two committed writers of one version is a lost update.
- A scan row is a read of that key.  Rows must come in key order, at most
  count of them, and a key the transaction knows to exist within the scanned
  range must be among them.  Scans of the static cold table must return
  exactly min(count, rows loaded) rows, in order.

Anomalies: G0, G1c, G-single, G2 (cycles, with the transactions in them), G1a
(an aborted or failed transaction's write visible, or its delete effective),
G1b (a read of a version in the middle of a transaction), lost-append (an
acknowledged write missing from a later complete list), lost-update,
garbage-read (an element no transaction wrote), incompatible-order (reads
that disagree on a key's prefix), internal (a transaction contradicts its own
earlier reads), read-your-writes (a read, scan or insert that does not see
the transaction's own earlier write), phantom (a key read as absent was
inserted by another transaction before this one committed), torn (a
transaction of unknown outcome, e.g. its client was killed in its commit, is
visible on one key while its write of another is missing), sticky-error (a
commit succeeded after a staging call failed), phantom-delete (an incarnation ended
with no transaction deleting it), scan-order, scan-incomplete.

Usage: elle_check.py [--json] [--max-examples N] LOG...
       elle_check.py --self-test
Exit status: 0 no anomaly, 1 anomalies found, 2 bad input.
"""
import json
import sys
from collections import defaultdict, deque

COMMITTED = ("ok", "unknown")


class Txn:
    __slots__ = ("id", "ops", "end", "rc", "doomed", "final", "visible")

    def __init__(self, tid):
        self.id = tid
        self.ops = None
        self.end = None
        self.rc = ""
        self.doomed = 0
        self.final = False
        self.visible = False

    @property
    def outcome(self):
        return self.end or "unknown"

    @property
    def good(self):  # the transaction is meant to have taken effect
        return self.outcome == "ok" and not self.doomed

    @property
    def maybe(self):  # it may have taken effect
        return self.outcome in COMMITTED and not self.doomed


class Report:
    def __init__(self, max_examples):
        self.counts = defaultdict(int)
        self.examples = defaultdict(list)
        self.max = max_examples

    def add(self, kind, msg):
        self.counts[kind] += 1
        if len(self.examples[kind]) < self.max:
            self.examples[kind].append(msg)


def load(lines_iter, rep):
    txns = {}
    cold = 0
    for item in lines_iter:
        lineno, line = item[0], item[1]
        torn = len(item) > 2 and item[2]
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
        except ValueError:
            if torn:
                # a file's last line without its newline: the client was
                # killed inside the write (a kill -9 can cut a write of more
                # than a page short).  That transaction's record is lost, as
                # if it had been killed before writing: its outcome is
                # unknown, which is no anomaly.
                continue
            rep.add("bad-log-line", "%s: not JSON: %.80s" % (lineno, line))
            continue
        if "cold_loaded" in r:
            cold = max(cold, int(r["cold_loaded"]))
            continue
        tid = r.get("id")
        if tid is None:
            continue
        t = txns.get(tid)
        if t is None:
            t = txns[tid] = Txn(tid)
        if "ops" in r:
            t.ops = r["ops"]
            t.doomed = r.get("doomed", 0)
            t.final = bool(r.get("final"))
        if "end" in r:
            t.end = r["end"]
            t.rc = r.get("rc", "")
    for t in txns.values():
        if t.ops is None:
            t.ops = []
    return txns, cold


def describe(t):
    return "%s(%s%s)" % (t.id, t.outcome, ",doomed" if t.doomed else "")


def check(txns, cold, rep):
    elem = {}          # element -> (txn, key, the list its write produced)
    observations = []  # (reader txn, key, tuple list), every reader
    claims = defaultdict(list)    # (key, base tuple) -> writers that replaced it
    deleters = []      # (txn, key, base tuple)
    final_state = {}   # key -> tuple or None, from the final read
    last_write = {}    # (txn id, key) -> tuple of the txn's last list written
    has_final = False

    # ---- pass 1: writes, reads and each transaction's internal consistency
    for t in txns.values():
        if t.doomed and t.end == "ok":
            rep.add("sticky-error", "%s: a staging call failed (%s), yet the commit "
                    "succeeded" % (t.id, next((o[2] for o in t.ops if o[0] == "oversize"),
                                             "?")))
        state = {}      # key -> tuple, None (absent), or "present"
        first_write = set()
        base0 = {}      # key -> what the txn had read before its first write

        def own(k):  # a contradiction of the txn's own write, or of its reads
            return "read-your-writes" if k in first_write else "internal"
        for op in t.ops:
            kind = op[0]
            if kind in ("r", "x"):
                k, val = op[1], op[2]
                val = tuple(val) if val is not None else None
                if k in state and state[k] != "present" and state[k] != val and t.good:
                    rep.add(own(k), "%s read key %s = %s but had %s %s"
                            % (t.id, k, short(val), "written" if k in first_write
                               else "read", short(state[k])))
                elif k in state and state[k] == "present" and val is None and t.good:
                    rep.add("internal", "%s: key %s absent after an insert said it exists"
                            % (t.id, k))
                state[k] = val
                if val is not None:
                    observations.append((t, k, val))
                if t.final:
                        has_final = True
                        final_state[k] = val
            elif kind == "a":
                k, e, w = op[1], op[2], tuple(op[3])
                base = state.get(k, "unknown")
                if k not in first_write:
                    first_write.add(k)
                    base0[k] = base
                    if isinstance(base, tuple) and t.maybe:
                        claims[(k, base)].append(t)
                elem[e] = (t, k, w)
                last_write[(t.id, k)] = w
                state[k] = w
            elif kind == "a-failed":
                elem[op[2]] = (t, op[1], None)  # refused: must never be seen
            elif kind == "i":
                k, e, res = op[1], op[2], op[3]
                if res in ("ok", "staged"):
                    if t.good and k in state and state[k] not in (None, "present") \
                            and res == "ok":
                        rep.add(own(k), "%s: insert of key %s succeeded though the txn "
                                "had %s %s" % (t.id, k, "written" if k in first_write
                                               else "read", short(state[k])))
                    elem[e] = (t, k, (e,))
                    last_write[(t.id, k)] = (e,)
                    if k not in first_write:
                        base0[k] = None
                    first_write.add(k)
                    state[k] = (e,)
                else:
                    elem[e] = (t, k, None)  # never written: must never be seen
                    if res == "exists":
                        if t.good and k in state and state[k] is None:
                            rep.add("phantom" if k not in first_write else own(k),
                                    "%s: insert of key %s found it existing though the txn "
                                    "%s it absent" % (t.id, k, "made" if k in first_write
                                                      else "read"))
                        if state.get(k) is None:
                            state[k] = "present"
            elif kind == "d":
                k, res = op[1], op[2]
                base = base0.get(k, state.get(k, "unknown"))
                if res in ("ok", "staged"):
                    if isinstance(base, tuple):
                        deleters.append((t, k, base))
                        if k not in first_write and t.maybe:
                            claims[(k, base)].append(t)
                    first_write.add(k)
                    last_write[(t.id, k)] = None
                    state[k] = None
                elif res == "not found" or "not found" in str(res) or res == "notfound":
                    if t.good and isinstance(base, tuple):
                        rep.add("internal", "%s: delete of key %s found nothing though the "
                                "txn saw %s" % (t.id, k, short(base)))
            elif kind == "s":
                start, count, rows = op[1], op[2], op[3]
                keys = [r[0] for r in rows]
                if len(rows) > count or any(a >= b for a, b in zip(keys, keys[1:])) or \
                        any(x < start for x in keys):
                    rep.add("scan-order", "%s: scan from key %s count %s returned keys %s"
                            % (t.id, start, count, keys))
                hi = keys[-1] if len(rows) >= count and keys else None
                for k, v in state.items():
                    if k >= start and (hi is None or k <= hi) and k not in keys and \
                            isinstance(v, tuple) and t.good:
                        rep.add(own(k), "%s: scan from key %s missed key %s, which the "
                                "txn had %s as %s" % (t.id, start, k, "written" if k in
                                                      first_write else "read", short(v)))
                for k, v in rows:
                    if v == "bad":
                        rep.add("garbage-read", "%s: scan row of key %s is not a list"
                                % (t.id, k))
                        continue
                    v = tuple(v)
                    if k in state and isinstance(state[k], tuple) and state[k] != v and t.good:
                        rep.add(own(k), "%s: scan row of key %s = %s but the txn had "
                                "seen or written %s" % (t.id, k, short(v), short(state[k])))
                    state[k] = v
                    observations.append((t, k, v))
            elif kind == "S":
                count, rows = op[1], op[2]
                want = list(range(min(count, cold)))
                if cold and rows != want:
                    bad = next((i for i, (a, b) in enumerate(zip(rows, want)) if a != b),
                               min(len(rows), len(want)))
                    rep.add("scan-incomplete", "%s: scan of %d cold rows (of %d) returned %d; "
                            "first wrong row %d" % (t.id, count, cold, len(rows), bad))
            elif kind == "bad-read":
                if t.maybe:
                    rep.add("garbage-read", "%s: key %s read as a value that is not a list "
                            "(status %s, %s bytes)" % (t.id, op[1], op[2],
                                                       op[3] if len(op) > 3 else "?"))

    # ---- pass 2: every observed list against the writes that built it
    distinct = defaultdict(set)   # key -> set of observed tuples
    for t, k, v in observations:
        # a transaction's view of its own appends (read-your-writes) is no
        # version another transaction can see: its final write stands for it,
        # and pass 1 already checked the view against what the txn wrote
        if v and v[-1] in elem and elem[v[-1]][0] is t:
            continue
        distinct[k].add(v)
    for k, vals in distinct.items():
        for v in vals:
            check_list(k, v, elem, last_write, rep)

    # ---- pass 3: version order of each incarnation
    inc = defaultdict(list)  # (key, first element) -> observed tuples
    for k, vals in distinct.items():
        for v in vals:
            inc[(k, v[0])].append(v)
    chains = {}
    for (k, f), vals in inc.items():
        vals.sort(key=len)
        longest = vals[-1]
        for v in vals:
            if longest[:len(v)] != v:
                rep.add("incompatible-order", "key %s: %s and %s are not prefixes of one "
                        "another" % (k, short(v), short(longest)))
                break
        chains[(k, f)] = longest

    # lost updates: two writers replaced the same version
    seen_writers = set()
    for vals in distinct.values():
        for v in vals:
            for e in v:
                if e in elem:
                    seen_writers.add(elem[e][0].id)
    for (k, base), ws in claims.items():
        winners = [w for w in ws if w.good or (w.maybe and w.id in seen_writers)]
        if len(winners) > 1:
            rep.add("lost-update", "key %s: %s all replaced version %s"
                    % (k, ", ".join(describe(w) for w in winners), short(base)))

    # enders of incarnations
    enders = defaultdict(list)
    for t, k, base in deleters:
        enders[(k, base[0])].append((t, base))
    ended = {}
    for (k, f), c in chains.items():
        cur = final_state.get(k)
        current = has_final and cur is not None and cur[0] == f
        # a deleter of unknown outcome counts only if the incarnation is gone
        ok_end = [t for t, b in enders.get((k, f), []) if b == c and
                  (t.good or (t.maybe and has_final and not current))]
        ok_end.sort(key=lambda t: not t.good)
        if ok_end:
            ended[(k, f)] = ok_end[0]
        if not has_final:
            continue
        if current or ok_end:
            continue
        bad = [t for t, b in enders.get((k, f), []) if b == c]
        if bad:
            rep.add("G1a", "key %s: incarnation %s... (%d elements) is gone; only %s "
                    "deleted it" % (k, f, len(c), ", ".join(describe(t) for t in bad)))
        else:
            rep.add("phantom-delete", "key %s: incarnation %s (%d elements, last %s) is gone, "
                    "but no transaction deleted it" % (k, f, len(c), c[-1]))

    # lost appends: an acknowledged write missing from a complete list
    for (tid, k), w in last_write.items():
        t = txns[tid]
        # an acknowledged write, or one of a txn whose outcome is unknown but
        # whose other writes are visible (then all must be: atomicity)
        torn = not t.good and t.maybe and t.id in seen_writers
        if not (t.good or torn) or w is None or t.final:
            continue
        c = chains.get((k, w[0]))
        complete = c is not None and ((k, w[0]) in ended or
                                      (has_final and final_state.get(k) == c))
        if c is not None and c[:len(w)] == w:
            continue
        if c is None and not has_final:
            continue
        # lost if the key's list went another way after a common prefix, or
        # if the list is complete (deleted, or final) without it
        m = min(len(c), len(w)) if c is not None else 0
        if c is None or complete or c[:m] != w[:m]:
            rep.add("torn" if torn else "lost-append",
                    "%s: its write of key %s (%s) is missing%s; key's list: %s"
                    % (describe(t), k, short(w), ", yet other writes of it are visible"
                       if torn else "", short(c) if c else "never seen"))

    # ---- pass 4: the dependency graph and its cycles
    edges = defaultdict(dict)  # a -> {b: (type, key)}

    def edge(a, b, typ, k):
        if a is not b and b.id not in edges[a.id]:
            edges[a.id][b.id] = (typ, k)

    # nodes: what committed, what may have and shows, and the final read
    confirmed = {t.id for t in ended.values()}
    node_ok = lambda t: t.good or t.final or (
        t.maybe and (t.id in seen_writers or t.id in confirmed))
    order_of = {}
    for (k, f), c in chains.items():
        order = []
        for e in c:
            t = elem[e][0] if e in elem else None
            if t is None or not node_ok(t):
                continue
            if not order or order[-1] is not t:
                order.append(t)
        if (k, f) in ended:
            order.append(ended[(k, f)])
        for a, b in zip(order, order[1:]):
            edge(a, b, "ww", k)
        order_of[(k, f)] = {t.id: i for i, t in enumerate(order)}, order
    for r, k, v in observations:
        if not node_ok(r) or v[0] not in elem or v[-1] not in elem:
            continue
        idx, order = order_of.get((k, v[0]), ({}, []))
        w = elem[v[-1]][0]
        i = idx.get(w.id)
        if i is None:
            continue
        edge(w, r, "wr", k)
        if i + 1 < len(order):
            edge(r, order[i + 1], "rw", k)
    find_cycles(edges, txns, rep)


def short(v, n=6):
    if v is None:
        return "null"
    if isinstance(v, str):
        return v
    if len(v) <= n:
        return "[" + ",".join(str(x) for x in v) + "]"
    return "[%s,...,%s](%d)" % (v[0], v[-1], len(v))


def check_list(k, v, elem, last_write, rep):
    """One observed list against the writes that made it."""
    for j, e in enumerate(v):
        info = elem.get(e)
        if info is None:
            rep.add("garbage-read", "key %s: element %s in %s was written by no "
                    "transaction" % (k, e, short(v)))
            return
        t, wk, w = info
        if not t.maybe and not t.final:
            rep.add("G1a", "key %s: element %s of %s, which did not commit, is visible "
                    "in %s" % (k, e, describe(t), short(v)))
            return
        if wk != k or w is None:
            rep.add("incompatible-order", "key %s: element %s, written to key %s by %s, "
                    "appears in %s" % (k, e, wk, t.id, short(v)))
            return
        if j + 1 < len(v) and v[j + 1] in elem and elem[v[j + 1]][0] is t:
            continue   # check at the end of each writer's run
        if v[:j + 1] != w[:j + 1] or len(w) <= j or w[j] != e:
            rep.add("incompatible-order", "key %s: %s has %s after %s, but %s appended it "
                    "to %s" % (k, short(v), e, short(v[:j]), t.id, short(w[:-1])))
            return
        if j + 1 == len(v):
            final = last_write.get((t.id, k))
            if final is not None and final != v and final[:len(v)] == v:
                rep.add("G1b", "key %s: %s is an intermediate version of %s, which wrote %s"
                        % (k, short(v), t.id, short(final)))


def find_cycles(edges, txns, rep):
    """Tarjan's strongly connected components (iterative), then one short
    cycle per component, classified as Elle does."""
    index, low, onstack, stack, sccs = {}, {}, set(), [], []
    counter = 0
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(edges.get(root, {})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        onstack.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    onstack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, {}))))
                elif nxt in onstack:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    onstack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(comp)
    for comp in sccs:
        members = set(comp)
        cyc = shortest_cycle(comp[0], edges, members)
        if not cyc:
            continue
        types = [edges[a][b][0] for a, b in zip(cyc, cyc[1:])]
        rw = types.count("rw")
        if rw == 0:
            kind = "G0" if all(x == "ww" for x in types) else "G1c"
        elif rw == 1:
            kind = "G-single"
        else:
            kind = "G2"
        steps = " ".join("%s -%s(k%s)->" % (a, edges[a][b][0], edges[a][b][1])
                         for a, b in zip(cyc, cyc[1:]))
        rep.add(kind, "cycle of %d txns (component of %d): %s %s"
                % (len(cyc) - 1, len(comp), steps, cyc[0]))


def shortest_cycle(s, edges, members):
    prev = {s: None}
    q = deque([s])
    while q:
        v = q.popleft()
        for w in edges.get(v, {}):
            if w not in members:
                continue
            if w == s:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                path.reverse()
                return path + [s]
            if w not in prev:
                prev[w] = v
                q.append(w)
    return None


def summarize(txns, rep, cold):
    by = defaultdict(int)
    for t in txns.values():
        if not t.final:
            by[t.outcome] += 1
    return {"valid": not rep.counts, "transactions": dict(by),
            "anomalies": dict(rep.counts), "examples": dict(rep.examples),
            "cold_rows": cold}


def run(paths, max_examples=5):
    rep = Report(max_examples)

    def lines():
        for p in paths:
            with open(p, errors="replace") as f:
                for i, line in enumerate(f, 1):
                    yield "%s:%d" % (p, i), line, not line.endswith("\n")
    txns, cold = load(lines(), rep)
    check(txns, cold, rep)
    return summarize(txns, rep, cold)


# ---- self-test: hand-made histories, one per anomaly ------------------------

def _h(*recs):
    return [("selftest:%d" % i, json.dumps(r)) for i, r in enumerate(recs, 1)]


def T(tid, ops, end="ok", doomed=0, final=False):
    r = {"id": tid, "ops": ops, "doomed": doomed, "end": end, "rc": end}
    if final:
        r["final"] = 1
    return r


def self_test_cases():
    F = lambda ops: T("final", ops, final=True)
    c = {}
    # a clean history: appends, a scan, a delete and a new incarnation
    c["clean"] = ([], _h(
        T("a", [["x", 1, None], ["a", 1, 10, [10]]]),
        T("b", [["x", 1, [10]], ["a", 1, 11, [10, 11]], ["x", 2, None], ["a", 2, 20, [20]]]),
        T("c", [["s", 0, 5, [[1, [10, 11]], [2, [20]]]]]),
        T("d", [["x", 2, [20]], ["d", 2, "ok"]]),
        T("e", [["i", 2, 21, "ok"]]),
        T("f", [["x", 1, [10, 11]], ["a", 1, 12, [10, 11, 12]]], end="aborted"),
        F([["r", 1, [10, 11]], ["r", 2, [21]]])))
    # G0: write cycle on two keys
    c["G0"] = (["G0"], _h(
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]], ["x", 2, [5, 6]], ["a", 2, 7, [5, 6, 7]]]),
        T("b", [["x", 1, [1, 2]], ["a", 1, 3, [1, 2, 3]], ["x", 2, [5]], ["a", 2, 6, [5, 6]]]),
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        F([["r", 1, [1, 2, 3]], ["r", 2, [5, 6, 7]]])))
    # G1c: a reads b's write, b reads a's write
    c["G1c"] = (["G1c"], _h(
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]], ["r", 2, [5, 6]]]),
        T("b", [["x", 2, [5]], ["a", 2, 6, [5, 6]], ["r", 1, [1, 2]]]),
        F([["r", 1, [1, 2]], ["r", 2, [5, 6]]])))
    # G-single: read skew
    c["G-single"] = (["G-single"], _h(
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        T("w", [["x", 1, [1]], ["a", 1, 2, [1, 2]], ["x", 2, [5]], ["a", 2, 6, [5, 6]]]),
        T("r", [["r", 1, [1]], ["r", 2, [5, 6]]]),
        F([["r", 1, [1, 2]], ["r", 2, [5, 6]]])))
    # G2: write skew on two keys
    c["G2"] = (["G2"], _h(
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        T("a", [["r", 2, [5]], ["x", 1, [1]], ["a", 1, 2, [1, 2]]]),
        T("b", [["r", 1, [1]], ["x", 2, [5]], ["a", 2, 6, [5, 6]]]),
        F([["r", 1, [1, 2]], ["r", 2, [5, 6]]])))
    # G1a: an aborted append visible
    c["G1a"] = (["G1a"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]]], end="failed"),
        F([["r", 1, [1, 2]]])))
    # G1a by a deleted incarnation whose only deleter aborted
    c["G1a-delete"] = (["G1a"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("d", [["x", 1, [1]], ["d", 1, "ok"]], end="aborted"),
        F([["r", 1, None]])))
    # G1b: a read of a txn's middle state
    c["G1b"] = (["G1b"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]], ["a", 1, 3, [1, 2, 3]]]),
        T("r", [["r", 1, [1, 2]]]),
        F([["r", 1, [1, 2, 3]]])))
    # lost append: acknowledged, then missing from the final list
    c["lost-append"] = (["lost-append"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]]]),
        F([["r", 1, [1]]])))
    # an unknown deleter whose delete did not happen is not a node (no cycle)
    c["unknown-delete"] = ([], _h(
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        T("d", [["x", 1, [1]], ["d", 1, "ok"], ["r", 2, [5]]], end="unknown"),
        T("w", [["x", 2, [5]], ["a", 2, 6, [5, 6]], ["r", 1, [1]]]),
        F([["r", 1, [1]], ["r", 2, [5, 6]]])))
    # torn: an unknown-outcome txn visible on key 1, missing on key 2
    c["torn"] = (["torn"], _h(
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]], ["x", 2, [5]], ["a", 2, 6, [5, 6]]],
          end="unknown"),
        F([["r", 1, [1, 2]], ["r", 2, [5]]])))
    # lost update: two committed writers of one version
    c["lost-update"] = (["lost-update", "lost-append"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]]]),
        T("b", [["x", 1, [1]], ["a", 1, 3, [1, 3]]]),
        F([["r", 1, [1, 3]]])))
    # garbage read
    c["garbage-read"] = (["garbage-read"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("r", [["r", 1, [1, 99]]]),
        F([["r", 1, [1]]])))
    # incompatible order: two reads that diverge
    c["incompatible-order"] = (["incompatible-order"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]]]),
        T("b", [["x", 1, [1, 2]], ["a", 1, 3, [1, 2, 3]]]),
        T("r", [["r", 1, [1, 3]]]),
        F([["r", 1, [1, 2, 3]]])))
    # no read-your-writes
    c["read-your-writes"] = (["read-your-writes"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]], ["r", 1, [1]]]),
        F([["r", 1, [1, 2]]])))
    # internal: a non-repeatable read
    c["internal"] = (["internal", "G-single"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["a", 1, 2, [1, 2]]]),
        T("r", [["r", 1, [1]], ["r", 1, [1, 2]]]),
        F([["r", 1, [1, 2]]])))
    # phantom: absent, then another txn's insert is seen
    c["phantom"] = (["phantom"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("r", [["x", 1, None], ["i", 1, 2, "exists"]]),
        F([["r", 1, [1]]])))
    # sticky error: the commit after a failed staging call succeeded
    c["sticky-error"] = (["sticky-error", "G1a"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("a", [["x", 1, [1]], ["oversize", 1, "key or value too large"],
                ["a", 1, 2, [1, 2]]], doomed=1),
        F([["r", 1, [1, 2]]])))
    # phantom delete: an incarnation vanished with no deleter
    c["phantom-delete"] = (["phantom-delete"], _h(
        T("i1", [["i", 1, 1, "ok"]]),
        T("r", [["r", 1, [1]]]),
        F([["r", 1, None]])))
    c["scan-order"] = (["scan-order"], _h(
        T("s", [["s", 0, 2, [[2, [5]], [1, [1]]]]]),
        T("i1", [["i", 1, 1, "ok"], ["i", 2, 5, "ok"]]),
        F([["r", 1, [1]], ["r", 2, [5]]])))
    c["scan-incomplete"] = (["scan-incomplete"], [("selftest:0", '{"cold_loaded":5}')] + _h(
        T("s", [["S", 3, [0, 1, 2]], ["S", 5, [0, 1, 3, 4]]])))
    return c


def self_test():
    bad = 0
    for name, (want, lines) in self_test_cases().items():
        rep = Report(3)
        txns, cold = load(iter(lines), rep)
        check(txns, cold, rep)
        got = set(rep.counts)
        ok = got == set(want)
        bad += not ok
        print("%-20s %s  want %s, got %s" % (name, "ok  " if ok else "FAIL", sorted(want),
                                            {k: rep.counts[k] for k in sorted(got)}))
        if not ok:
            for k in sorted(got):
                for m in rep.examples[k]:
                    print("      %s: %s" % (k, m))
    print("self-test: %d cases, %d failed" % (len(self_test_cases()), bad))
    return 1 if bad else 0


def main(argv):
    js, paths, max_ex = False, [], 5
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--json":
            js = True
        elif a == "--self-test":
            return self_test()
        elif a == "--max-examples" and i + 1 < len(argv):
            i += 1
            max_ex = int(argv[i])
        elif a in ("-h", "--help"):
            print(__doc__.split("\n\n")[0])
            print("usage: elle_check.py [--json] [--max-examples N] LOG...\n"
                  "       elle_check.py --self-test\n"
                  "exit: 0 serializable (no anomaly), 1 anomalies, 2 bad input")
            return 0
        elif a.startswith("-"):
            print("elle_check.py: unknown option %s (see --help)" % a, file=sys.stderr)
            return 2
        else:
            paths.append(a)
        i += 1
    if not paths:
        print("elle_check.py: no log files (see --help)", file=sys.stderr)
        return 2
    try:
        res = run(paths, max_ex)
    except OSError as e:
        print("elle_check.py: %s" % e, file=sys.stderr)
        return 2
    if js:
        print(json.dumps(res))
    else:
        print("transactions: %s" % ", ".join("%s %d" % kv for kv in
                                             sorted(res["transactions"].items())))
        if res["valid"]:
            print("anomalies: none")
        for k, n in sorted(res["anomalies"].items()):
            print("anomaly %s: %d" % (k, n))
            for m in res["examples"][k]:
                print("    %s" % m)
    return 0 if res["valid"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
