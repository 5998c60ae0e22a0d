/*
 * txn_view.c - what a transaction sees: complete scans (continuation across
 * memory servers).
 *
 * Scans.  A server answers at most SCAN_MAX_ROWS rows (and a byte budget) per
 * request; a capped reply says so (WIRE_REP_F_SCAN_MORE) and names the last
 * key it covered.  Rows up to B = the smallest such key over the capped
 * servers are complete; rows above B from other servers are not yet safe, as
 * the capped server may hold keys between.  While fewer than `target` rows are
 * complete, the servers whose last key is B continue after it
 * (WIRE_REQ_F_SCAN_AFTER) in further round trips of the same execute step,
 * under the same S locks (and, as always, without gap locks).  target is the
 * count asked for.  At the end the complete rows are merged in key order and
 * cut to count.
 *
 * Threads: the session's thread, or (replies) the thread holding its group
 * lock, as for the rest of txn.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "compute/compute_int.h"

static int key_cmp(const unsigned char *a, unsigned alen, const unsigned char *b, unsigned blen)
{
	int c = memcmp(a, b, MIN(alen, blen));
	return c ? c : (int)alen - (int)blen;
}

/* ---- scans ----------------------------------------------------------------- */

int txn_view_stage_scan(lotus_txn_t *t, struct txn_op *o)
{
	if (o->count == 0) {  /* nothing to read, nothing to lock */
		o->ryw = RYW_SERVED;
		o->finished = 1;
		return 0;
	}
	if (!o->scan && !(o->scan = malloc(sizeof(*o->scan))))
		return -ENOMEM;
	o->scan->more = 0;
	o->scan->target = o->count;
	return 0;
}

void txn_view_scan_reply(lotus_txn_t *t, unsigned sv, struct txn_op *o, const struct wire_rep *r,
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
static int scan_continue(lotus_txn_t *t, unsigned idx)
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
				      .key_len = sc->klen[sv], .tag = t->slot << 16 | idx,
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

static size_t row_size(const struct row_view *r)
{
	return wire_pad8(sizeof(struct wire_row) + r->klen + r->vlen);
}

/* Cut the complete rows at count and lay the result out as wire rows in
 * o->rval with o->row_ptrs in order. */
static int scan_merge(struct txn_op *o, struct row_view *s, unsigned ns)
{
	struct row_view **out = malloc((ns + 1) * sizeof(*out));
	unsigned i = 0, n = 0;
	size_t bytes = 0;
	if (!out)
		return -ENOMEM;
	while (n < o->count && i < ns) {
		struct row_view *r = &s[i++];
		out[n++] = r;
		bytes += row_size(r);
	}
	unsigned char *buf = malloc(bytes ? bytes : 1);
	const unsigned char **ptrs = malloc((n ? n : 1) * sizeof(*ptrs));
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

static void scan_finish(lotus_txn_t *t, unsigned idx)
{
	struct txn_op *o = &t->ops[idx];
	unsigned ns;
	int rc = -ENOMEM;
	o->finished = 1;
	struct row_view *s = scan_rows(o, &ns);
	if (s) {
		qsort(s, ns, sizeof(*s), view_cmp);
		int b = o->scan ? scan_bound(o->scan) : -1;
		ns = scan_complete(o, s, ns, b);  /* sorted: the complete ones lead */
		rc = scan_merge(o, s, ns);
	}
	free(s);
	if (rc)
		txn_op_result(t, o, rc);
}

/* ---- the end of an execute step ------------------------------------------- */

int txn_view_followups(lotus_txn_t *t)
{
	int sent = 0;
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		int rc = 0;
		if (o->op == OP_SCAN && o->sent && !o->finished && o->status == 0 && o->scan)
			rc = scan_continue(t, i);
		if (rc < 0) {
			txn_op_result(t, o, rc);
			return sent;
		}
		sent += rc;
	}
	return sent;
}

void txn_view_finish(lotus_txn_t *t)
{
	for (unsigned i = 0; i < t->nops; i++) {
		struct txn_op *o = &t->ops[i];
		if (o->op == OP_SCAN && o->sent && !o->finished && o->status == 0)
			scan_finish(t, i);
	}
}
