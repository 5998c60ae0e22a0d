/*
 * txn_view.c - what a transaction sees: its own writes (read-your-writes)
 * and complete scans (continuation across memory servers).
 *
 * Read-your-writes.  A read staged after a write, insert or delete of the
 * same key in the same transaction is answered from the write set, without a
 * request (ryw_lookup walks the ops before it, latest first):
 *   update / blind write     the value staged
 *   delete                   LOTUS_ENOTFOUND
 *   own insert, executed     its value if it succeeded; if it found the key
 *                            (LOTUS_EEXISTS) the walk goes on to earlier ops,
 *                            and without any, the read goes to the server
 *   own insert, not yet run  RYW_WAIT: decided when the step's replies are
 *                            in (txn_view_followups), maybe by one more
 *                            round trip
 * An insert asks the same question first: if the transaction's own writes
 * say the key exists, the insert fails at once with LOTUS_EEXISTS (no
 * request); if they deleted it, the insert is a write on the X lock already
 * held.  Only when they say nothing does the server decide.
 * A write that a later read or scan has seen is marked observed and never
 * rewritten in place: a later write of the key stages a new op on the X lock
 * already held (op_find_x in txn.c), so every result keeps the value of its
 * position in program order.
 *
 * Scans.  A server answers at most SCAN_MAX_ROWS rows (and a byte budget) per
 * request; a capped reply says so (WIRE_REP_F_SCAN_MORE) and names the last
 * key it covered.  Rows up to B = the smallest such key over the capped
 * servers are complete; rows above B from other servers are not yet safe, as
 * the capped server may hold keys between.  While fewer than `target` rows are
 * complete, the servers whose last key is B continue after it
 * (WIRE_REQ_F_SCAN_AFTER) in further round trips of the same execute step,
 * under the same S locks (and, as always, without gap locks).  target is the
 * count asked for plus the transaction's own deletes in the range, so that the
 * overlay of its writes still leaves count rows.  At the end the complete rows
 * are merged in key order with the transaction's own writes staged before the
 * scan (inserted and updated keys show their new value, deleted keys vanish)
 * and cut to count.
 *
 * Threads: the session's thread, or (replies) the thread holding its group
 * lock, as for the rest of txn.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "compute/twosided.h"

static int key_cmp(const unsigned char *a, unsigned alen, const unsigned char *b, unsigned blen)
{
	int c = memcmp(a, b, MIN(alen, blen));
	return c ? c : (int)alen - (int)blen;
}

static int op_is_key(const struct txn_op *o, uint16_t table, const void *key, uint16_t klen)
{
	return o->table == table && o->klen == klen && !memcmp(o->key, key, klen);
}

/* ---- read-your-writes ------------------------------------------------------ */

/* The transaction's own word on (table, key) for an op at position end. */
static int ryw_lookup(ts_txn_t *t, unsigned end, uint16_t table, const void *key,
		      uint16_t klen, unsigned *src)
{
	if (!t->has_writes)
		return RYW_NONE;
	for (unsigned j = end; j-- > 0;) {
		const struct txn_op *c = &t->ops[j];
		if (c->ryw || !c->write || !op_is_key(c, table, key, klen))
			continue;
		*src = j;
		if (!c->sent) {  /* staged, not executed yet */
			if (c->op == OP_INSERT && c->write == OP_INSERT)
				return RYW_WAIT;
			return RYW_SERVED;  /* applies (a delete of an absent key: absent) */
		}
		if (txn_write_applies(c))
			return RYW_SERVED;
		/* its own insert/delete found the key as it did not need: no effect */
	}
	return RYW_NONE;
}

static void ryw_serve(ts_txn_t *t, struct txn_op *o, struct txn_op *c)
{
	c->observed = 1;
	o->ryw = RYW_SERVED;
	o->rlen = 0;
	if (c->write == OP_DELETE) {
		o->status = LOTUS_ENOTFOUND;
		return;
	}
	if (c->wlen > o->rcap) {
		unsigned char *p = realloc(o->rval, c->wlen);
		if (!p) {
			o->status = -ENOMEM;
			return;
		}
		o->rval = p;
		o->rcap = c->wlen;
	}
	if (c->wlen)
		memcpy(o->rval, c->wval, c->wlen);
	o->rlen = c->wlen;
	o->status = 0;
}

void txn_view_stage_read(ts_txn_t *t, struct txn_op *o)
{
	unsigned idx = (unsigned)(o - t->ops), src;
	int r = ryw_lookup(t, idx, o->table, o->key, o->klen, &src);
	if (r == RYW_SERVED) {
		ryw_serve(t, o, &t->ops[src]);
	} else if (r == RYW_WAIT) {
		o->ryw = RYW_WAIT;
		o->ryw_src = src;
		t->ops[src].observed = 1;
	}
}

int txn_view_stage_insert(ts_txn_t *t, uint16_t table, const void *key, uint16_t klen)
{
	unsigned src;
	int r = ryw_lookup(t, t->nops, table, key, klen, &src);
	if (r == RYW_WAIT)  /* after an own insert: the key exists either way */
		return INSERT_EXISTS;
	if (r == RYW_SERVED)
		return t->ops[src].write == OP_DELETE ? INSERT_UPSERT : INSERT_EXISTS;
	return INSERT_REMOTE;
}

/* The insert a read waited for has run: serve the read, or send it. */
static int ryw_settle(ts_txn_t *t, unsigned idx)
{
	struct txn_op *o = &t->ops[idx];
	struct txn_op *c = &t->ops[o->ryw_src];
	unsigned src;
	if (txn_write_applies(c)) {
		ryw_serve(t, o, c);
		return 0;
	}
	if (ryw_lookup(t, o->ryw_src, o->table, o->key, o->klen, &src) == RYW_SERVED) {
		ryw_serve(t, o, &t->ops[src]);
		return 0;
	}
	o->ryw = RYW_NONE;  /* the stored value it is: ask its server */
	int rc = txn_op_send(t, idx);
	if (rc)
		txn_op_result(t, o, rc);
	return rc ? 0 : 1;
}

/* ---- scans ----------------------------------------------------------------- */

int txn_view_stage_scan(ts_txn_t *t, struct txn_op *o)
{
	unsigned idx = (unsigned)(o - t->ops);
	uint64_t target = o->count;
	if (o->count == 0) {  /* nothing to read, nothing to lock */
		o->ryw = RYW_SERVED;
		o->finished = 1;
		return 0;
	}
	/* freeze the writes the scan may show; count the deletes it may hide */
	for (unsigned j = 0; j < idx; j++) {
		struct txn_op *c = &t->ops[j];
		if (c->table != o->table || c->op == OP_READ || c->op == OP_SCAN || c->ryw ||
		    key_cmp(c->key, c->klen, o->key, o->klen) < 0)
			continue;
		c->observed = 1;
		target += c->write == OP_DELETE;
	}
	if (!o->scan && !(o->scan = malloc(sizeof(*o->scan))))
		return -ENOMEM;
	o->scan->more = 0;
	o->scan->target = (unsigned)MIN(target, UINT32_MAX);
	return 0;
}

void txn_view_scan_reply(ts_txn_t *t, unsigned sv, struct txn_op *o, const struct wire_rep *r,
			 const unsigned char *key)
{
	struct scan_cont *sc = o->scan;
	if (!sc)
		return;
	sc->more &= ~(1ULL << sv);
	if (r->status == 0 && (r->flags & WIRE_REP_F_SCAN_MORE) && r->key_len > 0 &&
	    r->key_len <= sizeof(sc->key[0])) {
		sc->more |= 1ULL << sv;
		sc->klen[sv] = r->key_len;
		memcpy(sc->key[sv], key, r->key_len);
	}
}

/* B: the smallest last key of a capped server (-1 if none is capped). */
static int scan_bound(const struct scan_cont *sc)
{
	int b = -1;
	for (unsigned sv = 0; sv < LOTUS_MAX_SERVERS; sv++)
		if (sc->more >> sv & 1 &&
		    (b < 0 || key_cmp(sc->key[sv], sc->klen[sv], sc->key[b], sc->klen[b]) < 0))
			b = (int)sv;
	return b;
}

struct row_view {
	const unsigned char *key, *val;
	uint16_t klen;
	uint32_t vlen;
	uint64_t loc;
	int del;
};

static int view_cmp(const void *a, const void *b)
{
	const struct row_view *x = a, *y = b;
	return key_cmp(x->key, x->klen, y->key, y->klen);
}

/* The rows received so far, complete or not: *n of them, or NULL (-ENOMEM). */
static struct row_view *scan_rows(const struct txn_op *o, unsigned *n)
{
	struct wire_iter it;
	const struct wire_row *row;
	const unsigned char *k, *v;
	struct row_view *rv = malloc((o->rows ? o->rows : 1) * sizeof(*rv));
	*n = 0;
	if (!rv)
		return NULL;
	wire_iter_bytes(&it, o->rval, o->rlen, o->rows);
	while (*n < o->rows && wire_next_row(&it, &row, &k, &v) == 1) {
		struct wire_row rw;
		memcpy(&rw, row, sizeof(rw));
		rv[(*n)++] = (struct row_view){ .key = k, .val = v, .klen = rw.key_len,
						.vlen = rw.value_len, .loc = rw.loc };
	}
	return rv;
}

/* Rows known complete: key <= B, or all of them when no server is capped. */
static unsigned scan_complete(const struct txn_op *o, const struct row_view *rv, unsigned n,
			      int b)
{
	unsigned c = 0;
	if (b < 0)
		return n;
	for (unsigned i = 0; i < n; i++)
		c += key_cmp(rv[i].key, rv[i].klen, o->scan->key[b], o->scan->klen[b]) <= 0;
	return c;
}

/* Ask the servers whose last key is B for the rows after it.  Returns the
 * requests sent, or an error. */
static int scan_continue(ts_txn_t *t, unsigned idx)
{
	lotus_cluster_t *c = t->s->cl;
	struct txn_op *o = &t->ops[idx];
	struct scan_cont *sc = o->scan;
	unsigned n, sent = 0;
	int b = scan_bound(sc);
	if (b < 0)
		return 0;
	struct row_view *rv = scan_rows(o, &n);
	if (!rv)
		return -ENOMEM;
	unsigned done = scan_complete(o, rv, n, b);
	free(rv);
	if (done >= sc->target)
		return 0;
	uint64_t more = sc->more;
	for (unsigned sv = 0; more; sv++, more >>= 1) {
		if (!(more & 1) ||
		    key_cmp(sc->key[sv], sc->klen[sv], sc->key[b], sc->klen[b]) != 0)
			continue;
		struct wire_req r = { .op = OP_SCAN, .flags = WIRE_REQ_F_SCAN_AFTER,
				      .key_len = sc->klen[sv], .tag = t->sl.idx << 16 | idx,
				      .table = c->tables[o->table].ids[sv],
				      .arg = sc->target - done };
		int rc = txn_send(t, sv, &r, sc->key[sv], NULL);
		if (rc)
			return rc;
		o->replies_due++;
		sent++;
	}
	return (int)sent;
}

/* The transaction's writes a scan shows: applying writes staged before it,
 * in its range and at most up to bound (NULL: no bound), latest per key,
 * sorted.  *n of them, or NULL. */
static struct row_view *scan_overlay(ts_txn_t *t, unsigned idx, const unsigned char *bk,
				     unsigned bklen, unsigned *n)
{
	const struct txn_op *o = &t->ops[idx];
	struct row_view *w = NULL;
	unsigned cap = 0;
	*n = 0;
	for (unsigned j = idx; j-- > 0;) {
		const struct txn_op *c = &t->ops[j];
		if (!txn_write_applies(c) || c->table != o->table ||
		    key_cmp(c->key, c->klen, o->key, o->klen) < 0 ||
		    (bk && key_cmp(c->key, c->klen, bk, bklen) > 0))
			continue;
		unsigned i;
		for (i = 0; i < *n; i++)  /* a later write of the key is already in */
			if (!key_cmp(w[i].key, w[i].klen, c->key, c->klen))
				break;
		if (i < *n)
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			struct row_view *p = realloc(w, cap * sizeof(*w));
			if (!p) {
				free(w);
				return NULL;
			}
			w = p;
		}
		w[(*n)++] = (struct row_view){ .key = c->key, .klen = c->klen, .val = c->wval,
					       .vlen = c->write == OP_DELETE ? 0 : c->wlen,
					       .del = c->write == OP_DELETE };
	}
	if (!w)
		w = malloc(sizeof(*w));
	if (w)
		qsort(w, *n, sizeof(*w), view_cmp);
	return w;
}

static size_t row_size(const struct row_view *r)
{
	return wire_pad8(sizeof(struct wire_row) + r->klen + r->vlen);
}

/* Merge the complete rows with the overlay, cut at count, and lay the result
 * out as wire rows in o->rval with o->row_ptrs in order. */
static int scan_merge(struct txn_op *o, struct row_view *s, unsigned ns, struct row_view *w,
		      unsigned nw)
{
	struct row_view **out = malloc((ns + nw + 1) * sizeof(*out));
	unsigned i = 0, j = 0, n = 0;
	size_t bytes = 0;
	if (!out)
		return -ENOMEM;
	while (n < o->count && (i < ns || j < nw)) {
		int c = i == ns ? 1 : j == nw ? -1
			: key_cmp(s[i].key, s[i].klen, w[j].key, w[j].klen);
		struct row_view *r = c < 0 ? &s[i++] : &w[j++];
		if (c == 0)
			i++;  /* the transaction's own write wins */
		if (r->del)
			continue;
		out[n++] = r;
		bytes += row_size(r);
	}
	const unsigned char **ptrs = malloc((n ? n : 1) * sizeof(*ptrs));
	if (ptrs && nw == 0) {  /* only server rows: point into the replies as they are */
		for (unsigned k = 0; k < n; k++)
			ptrs[k] = out[k]->key - sizeof(struct wire_row);
		free(out);
		free(o->row_ptrs);
		o->row_ptrs = ptrs;
		o->rows = n;
		return 0;
	}
	unsigned char *buf = malloc(bytes ? bytes : 1);
	if (!buf || !ptrs) {
		free(buf);
		free(ptrs);
		free(out);
		return -ENOMEM;
	}
	size_t at = 0;
	for (unsigned k = 0; k < n; k++) {
		struct wire_row row = { .key_len = out[k]->klen, .value_len = out[k]->vlen,
					.loc = out[k]->loc };
		size_t sz = row_size(out[k]);
		memset(buf + at, 0, sz);
		memcpy(buf + at, &row, sizeof(row));
		memcpy(buf + at + sizeof(row), out[k]->key, out[k]->klen);
		if (out[k]->vlen)
			memcpy(buf + at + sizeof(row) + out[k]->klen, out[k]->val, out[k]->vlen);
		ptrs[k] = buf + at;
		at += sz;
	}
	free(out);
	free(o->rval);
	free(o->row_ptrs);
	o->rval = buf;
	o->rlen = o->rcap = (uint32_t)bytes;
	o->row_ptrs = ptrs;
	o->rows = n;
	return 0;
}

static void scan_finish(ts_txn_t *t, unsigned idx)
{
	struct txn_op *o = &t->ops[idx];
	unsigned ns, nw;
	int rc = -ENOMEM;
	o->finished = 1;
	struct row_view *s = scan_rows(o, &ns), *w = NULL;
	if (!s)
		goto out;
	qsort(s, ns, sizeof(*s), view_cmp);
	int b = o->scan ? scan_bound(o->scan) : -1;
	const unsigned char *bk = b < 0 ? NULL : o->scan->key[b];
	unsigned bklen = b < 0 ? 0 : o->scan->klen[b];
	ns = b < 0 ? ns : scan_complete(o, s, ns, b);  /* sorted: the complete ones lead */
	w = scan_overlay(t, idx, bk, bklen, &nw);
	if (w)
		rc = scan_merge(o, s, ns, w, nw);
out:
	free(s);
	free(w);
	if (rc)
		txn_op_result(t, o, rc);
}

/* ---- the end of an execute step ------------------------------------------- */

int txn_view_followups(ts_txn_t *t)
{
	int sent = 0;
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		int rc = 0;
		if (o->ryw == RYW_WAIT)
			rc = ryw_settle(t, i);
		else if (o->op == OP_SCAN && o->sent && !o->finished && o->status == 0 && o->scan)
			rc = scan_continue(t, i);
		if (rc < 0) {
			txn_op_result(t, o, rc);
			return sent;
		}
		sent += rc;
	}
	return sent;
}

void txn_view_finish(ts_txn_t *t)
{
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		if (o->op == OP_SCAN && o->sent && !o->finished && o->status == 0)
			scan_finish(t, i);
	}
}
