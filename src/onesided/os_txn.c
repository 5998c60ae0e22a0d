/*
 * os_txn.c - the one-sided engine's transactions (os_engine.h): staging,
 * record locks, execute, commit and abort, and steps run as coroutines so
 * that several transactions of a session have operations outstanding.
 *
 * Locks (the record's 16-byte header): read the header, then CAS.
 *   S: free when the writer bit is clear; CAS lock -> lock + 1 (a CAS lost to
 *      another reader retries with the value it returned).  Released by FAA -1.
 *   X: free when the word is 0 (1: our own S lock, an upgrade); CAS -> W.
 *      Released by a put of 0, after the data put and a fence.
 *   A record whose lock word has OS_LOCK_DEAD was deleted (os_layout.h):
 *      the op finds its key again through the index.
 *   NO_WAIT aborts on a conflict.  WAIT_DIE puts its priority into the
 *   header's ts word after each CAS it wins; on a conflict a transaction older
 *   than the ts there re-reads the header until the lock is free (for at
 *   most wait_ms), a younger one aborts.  Nothing orders the waiters: when
 *   the lock is released the first CAS wins, whichever transaction sent it
 *   (the paper's Fig. 3), so WAIT_DIE here is not starvation-free.
 *
 * Deletes take the X lock at execute like writes and mark the leaf entry at
 * commit (os_tree_delete).  A scan (at execute) reads, on every server, the
 * leaf holding its start key and then its right siblings until it has
 * `count` live entries at or after the start (each page a validated copy:
 * os_read_page's version check), merges the servers' candidates in key
 * order, keeps the first `count`, S-locks their records (NO_WAIT/WAIT_DIE
 * as any read) and reads their data once every lock is held.  A record
 * found dead when locked aborts the scan's transaction (a retry walks the
 * leaves again).  Keys inserted into the range meanwhile are not locked
 * (no gap locks): a scan may miss a key committed after it read the leaf.
 *
 * The public calls claim the session (os_int.h) for their length; a step's
 * coroutine never does, so a step suspended between its user's calls leaves
 * the session claimable by the lease keeper.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <ucp/api/ucp.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/vec.h"
#include "lotus.h"
#include "onesided/os_int.h"

/* ---- transactions --------------------------------------------------------------- */

static uint64_t next_priority(os_session_t *s)
{
	/* Older = smaller.  Unique per process: the low 8 bits are the session. */
	uint64_t p = (clock_now_ns() << 8) | (s->sid & 0xff);
	if (p <= s->last_prio)
		p = s->last_prio + 256;
	s->last_prio = p;
	return p;
}

int os_txn_begin(os_session_t *s, os_txn_t **out)
{
	os_txn_t *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->s = s;
	t->prio = next_priority(s);
	*out = t;
	return 0;
}

static void ops_clear(os_txn_t *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		free(t->ops[i].val);
		free(t->ops[i].res);
		for (unsigned j = 0; j < t->ops[i].nrows; j++)
			free(t->ops[i].rows[j].res);
		free(t->ops[i].rows);
	}
	t->n = 0;
}

static int txn_abort(os_txn_t *t);

void os_txn_free(os_txn_t *t)
{
	if (!t)
		return;
	os_session_t *s = t->s;
	claim(s);
	if (t->stepping)   /* a step cannot be cut off: run it to its end */
		while (t->stepping)
			os_session_run(t->s);
	free(t->stack);
	if (t->state == TX_EXECUTED || t->state == TX_FAILED || (t->state == TX_IDLE && t->n))
		txn_abort(t);
	ops_clear(t);
	free(t->ops);
	free(t);
	unclaim(s);
}

static int txn_reset(os_txn_t *t)
{
	if (t->state == TX_EXECUTED || t->state == TX_FAILED || (t->state == TX_IDLE && t->n))
		txn_abort(t);
	ops_clear(t);
	memset(&t->tally, 0, sizeof(t->tally));
	t->state = TX_IDLE;
	os_maybe_poll(t->s);
	return t->s->broken ? LOTUS_EUNAVAIL : 0;
}

int os_txn_recycle(os_txn_t *t)
{
	claim(t->s);
	t->prio = next_priority(t->s);
	int rc = txn_reset(t);
	unclaim(t->s);
	return rc;
}

int os_txn_restart(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_reset(t);
	unclaim(t->s);
	return rc;
}

uint64_t os_txn_priority(const os_txn_t *t)
{
	return t->prio;
}

void os_txn_set_priority(os_txn_t *t, uint64_t prio)
{
	t->prio = prio;
}

static struct os_op *op_find(os_txn_t *t, unsigned tid, uint64_t key)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->ops[i].tid == tid && t->ops[i].key == key && t->ops[i].kind != K_INSERT &&
		    t->ops[i].kind != K_SCAN)
			return &t->ops[i];
	return NULL;
}

static int stage(os_txn_t *t, int kind, unsigned tid, const void *key, size_t klen,
		 const void *val, size_t vlen, unsigned count)
{
	os_session_t *s = t->s;
	if (t->state != TX_IDLE && t->state != TX_EXECUTED)
		return LOTUS_ESTATE;
	if (tid >= s->ntabs)
		return LOTUS_ENOTABLE;
	if (klen != 8)
		return LOTUS_EUNSUPPORTED;
	if (vlen > s->tabs[tid].value_max)
		return LOTUS_ETOOBIG;
	uint64_t k = os_key_u64(key);
	if (kind == K_WRITE) {           /* a key read for update takes the value */
		struct os_op *prev = op_find(t, tid, k);
		if (prev && (prev->kind == K_READ_X || prev->kind == K_WRITE)) {
			unsigned char *v = malloc(vlen ? vlen : 1);
			if (!v)
				return -ENOMEM;
			memcpy(v, val, vlen);
			free(prev->val);
			prev->val = v;
			prev->vlen = vlen;
			prev->has_val = 1;
			return (int)(prev - t->ops);
		}
	}
	if (kind == K_DELETE) {          /* a key read for update or written: delete it */
		struct os_op *prev = op_find(t, tid, k);
		if (prev && (prev->kind == K_READ_X || prev->kind == K_WRITE)) {
			prev->kind = K_DELETE;
			prev->has_val = 0;
			return (int)(prev - t->ops);
		}
	}
	if (vec_reserve(t->ops, t->cap, t->n + 1, 16))
		return -ENOMEM;
	struct os_op *op = &t->ops[t->n];
	memset(op, 0, sizeof(*op));
	op->kind = (uint8_t)kind;
	op->tid = tid;
	op->key = k;
	memcpy(op->kb, key, 8);
	op->sv = (unsigned)(fnv1a64(key, 8) % s->nsrv);   /* lotus's routing */
	op->count = count;
	if (kind == K_WRITE || kind == K_INSERT) {
		op->val = malloc(vlen ? vlen : 1);
		if (!op->val)
			return -ENOMEM;
		memcpy(op->val, val, vlen);
		op->vlen = vlen;
		op->has_val = 1;
	}
	return (int)t->n++;
}

int os_txn_read(os_txn_t *t, unsigned tid, const void *key, size_t klen)
{
	return stage(t, K_READ, tid, key, klen, NULL, 0, 0);
}

int os_txn_read_for_update(os_txn_t *t, unsigned tid, const void *key, size_t klen)
{
	return stage(t, K_READ_X, tid, key, klen, NULL, 0, 0);
}

int os_txn_write(os_txn_t *t, unsigned tid, const void *key, size_t klen, const void *val,
		 size_t vlen)
{
	return stage(t, K_WRITE, tid, key, klen, val, vlen, 0);
}

int os_txn_insert(os_txn_t *t, unsigned tid, const void *key, size_t klen, const void *val,
		  size_t vlen)
{
	return stage(t, K_INSERT, tid, key, klen, val, vlen, 0);
}

int os_txn_delete(os_txn_t *t, unsigned tid, const void *key, size_t klen)
{
	return stage(t, K_DELETE, tid, key, klen, NULL, 0, 0);
}

int os_txn_scan(os_txn_t *t, unsigned tid, const void *start, size_t slen, unsigned count)
{
	return stage(t, K_SCAN, tid, start, slen, NULL, 0, count);
}

/* Find op's record through the index. */
static int locate(os_txn_t *t, struct os_op *op)
{
	struct os_page leaf;
	uint64_t addr;
	int rc = os_find_level(t->s, op->tid, op->sv, op->key, 0, &addr, &leaf, NULL);
	if (rc)
		return rc;
	int i = os_leaf_search(&leaf, op->key);
	if (i < 0 || !leaf.e[i].ptr)    /* none, or a deleted key's mark */
		return LOTUS_ENOTFOUND;
	op->rec = leaf.e[i].ptr;
	op->located = 1;
	return 0;
}

/* Take op's record lock in mode (HELD_S or HELD_X) by read-header-then-CAS. */
static int lock_rec(os_txn_t *t, struct os_op *op, int mode)
{
	os_session_t *s = t->s;
	uint64_t hdr[2], old, wait_until = 0;
	int rc = os_rma_get(s, op->tid, op->sv, op->rec, hdr, sizeof(hdr));
	while (rc == 0) {
		uint64_t cur = hdr[0], want;
		int is_free;
		if (cur & OS_LOCK_DEAD)      /* deleted: look for the key again */
			return LOTUS_ENOTFOUND;
		if (mode == HELD_S) {
			is_free = !(cur & OS_LOCK_W);
			want = cur + 1;
		} else {
			is_free = cur == (op->held == HELD_S ? 1u : 0u);
			want = OS_LOCK_W;
		}
		if (is_free) {
			if ((rc = os_rma_cas(s, op->tid, op->sv, op->rec, cur, want, &old)) != 0)
				return rc;
			if (old == cur)
				break;
			hdr[0] = old;   /* lost the race: decide again on what is there */
			continue;
		}
		if (s->e->o.cc == LOTUS_NO_WAIT || !(t->prio < hdr[1]))
			return LOTUS_EABORTED;       /* NO_WAIT, or WAIT_DIE: die */
		uint64_t now = clock_now_ns();       /* WAIT_DIE: older, wait by polling */
		if (!wait_until)
			wait_until = now + (uint64_t)s->e->o.wait_ms * 1000000;
		else if (now > wait_until)
			return LOTUS_EABORTED;
		s->cnt.wait_rereads++;
		os_maybe_poll(s);
		os_step_yield(s);
		rc = os_rma_get(s, op->tid, op->sv, op->rec, hdr, sizeof(hdr));
	}
	if (rc)
		return rc;
	op->held = (uint8_t)mode;
	if (s->e->o.cc == LOTUS_WAIT_DIE)    /* the owner's priority, for others to compare */
		rc = os_rma_put(s, op->tid, op->sv, op->rec + 8, &t->prio, 8);
	return rc;
}

static int release_rec(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	int rc = 0;
	uint64_t old, zero = 0;
	uint64_t dead = OS_LOCK_DEAD;
	for (unsigned j = 0; j < op->nrows; j++) {   /* a scan's rows (the op holds none) */
		int r2 = release_rec(t, &op->rows[j]);
		if (r2 && !rc)
			rc = r2;
	}
	if (op->held == HELD_S)
		rc = os_rma_faa(s, op->tid, op->sv, op->rec, (uint64_t)-1, &old);
	else if (op->held == HELD_X)
		rc = os_rma_put(s, op->tid, op->sv, op->rec, op->dead ? &dead : &zero, 8);
	op->held = HELD_NONE;
	return rc;
}

static void attempt_end(os_txn_t *t, int committed)
{
	os_session_t *s = t->s;
	os_tally_add(committed ? &s->cnt.committed : &s->cnt.aborted, &t->tally);
	if (committed)
		s->cnt.commits++;
	else
		s->cnt.aborts++;
	memset(&t->tally, 0, sizeof(t->tally));
	s->cur = &s->cnt.other;
}

/* ---- scans ---------------------------------------------------------------------- */

static int row_cmp(const void *a, const void *b)
{
	const struct os_op *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* Up to op->count live entries at or after op->key on server sv, appended
 * to *rows (cap *cap): the leaf of the start key, then its right siblings. */
static int scan_server(os_txn_t *t, struct os_op *op, unsigned sv, struct os_op **rows,
		       size_t *cap, unsigned *n)
{
	os_session_t *s = t->s;
	struct os_page pg;
	uint64_t addr;
	unsigned got = 0;
	int rc = os_find_level(s, op->tid, sv, op->key, 0, &addr, &pg, NULL);
	for (unsigned pages = 0; rc == 0; pages++) {
		int i = os_leaf_search(&pg, op->key);
		for (unsigned j = i >= 0 ? (unsigned)i : (unsigned)(-i - 1);
		     j < pg.count && got < op->count; j++) {
			if (!pg.e[j].ptr || pg.e[j].key < op->key)
				continue;
			if (vec_reserve(*rows, *cap, *n + 1, 16))
				return -ENOMEM;
			struct os_op *r = &(*rows)[(*n)++];
			memset(r, 0, sizeof(*r));
			r->kind = K_READ;
			r->tid = op->tid;
			r->sv = sv;
			r->key = pg.e[j].key;
			for (int b = 0; b < 8; b++)
				r->kb[b] = (unsigned char)(r->key >> (56 - 8 * b));
			r->rec = pg.e[j].ptr;
			r->located = 1;
			got++;
		}
		if (got >= op->count || !pg.sibling)
			break;
		if (pages >= (1u << 20))
			return LOTUS_ETIMEOUT;   /* a sibling chain without end: not a B-link tree */
		addr = pg.sibling;
		rc = os_read_page(s, op->tid, sv, addr, &pg);
	}
	return rc;
}

/* Collect a scan's rows from every server, keep the first count in key
 * order, and S-lock them. */
static int scan_collect(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	struct os_op *rows = NULL;
	size_t cap = 0;
	unsigned n = 0;
	int rc = 0;
	for (unsigned sv = 0; rc == 0 && sv < s->nsrv && op->count; sv++)
		rc = scan_server(t, op, sv, &rows, &cap, &n);
	if (rc) {
		free(rows);
		return rc;
	}
	if (n > 1)
		qsort(rows, n, sizeof(*rows), row_cmp);
	op->rows = rows;
	op->nrows = MIN(n, op->count);
	op->located = 1;
	for (unsigned j = 0; rc == 0 && j < op->nrows; j++) {
		rc = lock_rec(t, &op->rows[j], HELD_S);
		if (rc == LOTUS_ENOTFOUND)   /* deleted since the leaf was read */
			rc = LOTUS_EABORTED;
	}
	return rc;
}

/* Locate and lock every op not locked yet (inserts: at commit). */
static int lock_all(os_txn_t *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct os_op *op = &t->ops[i];
		int mode = op->kind == K_READ ? HELD_S : HELD_X;
		if (op->kind == K_SCAN) {
			if (!op->located) {
				int rc = scan_collect(t, op);
				if (rc)
					return rc;
			}
			continue;
		}
		if (op->kind == K_INSERT || op->held >= mode)
			continue;
		if (op->missing)
			continue;
		int rc = op->located ? 0 : locate(t, op);
		for (unsigned again = 0; rc == 0 && again < 8; again++) {
			rc = lock_rec(t, op, mode);
			if (rc != LOTUS_ENOTFOUND)
				break;
			op->located = 0;     /* its record was deleted: find the key again */
			rc = locate(t, op);
		}
		if (rc == LOTUS_ENOTFOUND) {   /* per op, as lotus reports it */
			if (op->kind == K_WRITE) {
				op->kind = K_INSERT;   /* a blind write of a new key */
				op->upsert = 1;
			} else
				op->missing = 1;
			continue;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Read op's record data (its lock held) into op->res. */
static int read_data(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	uint32_t vmax = s->tabs[op->tid].value_max;
	op->res = malloc(8 + (size_t)vmax);
	if (!op->res)
		return -ENOMEM;
	int rc = os_rma_get(s, op->tid, op->sv, op->rec + OS_REC_DATA, op->res, 8 + (size_t)vmax);
	uint64_t len;
	memcpy(&len, op->res, 8);
	op->rlen = MIN(len, vmax);
	op->found = rc == 0;
	return rc;
}

/* The public calls claim the session; a step's coroutine calls txn_* (it may
 * be suspended between its user's calls, when the session must be
 * claimable). */
static int txn_execute(os_txn_t *t)
{
	os_session_t *s = t->s;
	if (t->state != TX_IDLE && t->state != TX_EXECUTED)
		return LOTUS_ESTATE;
	s->cur = &t->tally;
	int rc = lock_all(t);
	/* the data, only once every lock is held */
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct os_op *op = &t->ops[i];
		if (op->kind == K_SCAN) {
			for (unsigned j = 0; rc == 0 && j < op->nrows; j++)
				if (!op->rows[j].found)
					rc = read_data(t, &op->rows[j]);
			op->found = 1;
			continue;
		}
		if (op->kind == K_DELETE && !op->missing && !op->found) {
			op->found = 1;   /* a result of no bytes */
			op->res = calloc(1, 8);
			rc = op->res ? 0 : -ENOMEM;
			continue;
		}
		if ((op->kind != K_READ && op->kind != K_READ_X) || op->found || op->missing)
			continue;
		rc = read_data(t, op);
	}
	s->cur = &s->cnt.other;
	if (rc) {
		t->state = TX_FAILED;
		return rc;
	}
	t->state = TX_EXECUTED;
	return 0;
}

int os_txn_finished(const os_txn_t *t)
{
	return t->state == TX_DONE;
}

int os_txn_result(const os_txn_t *t, int op, const void **val, size_t *vlen)
{
	if (op < 0 || (unsigned)op >= t->n || !t->ops[op].found || t->ops[op].kind == K_SCAN)
		return LOTUS_ENOTFOUND;
	*val = t->ops[op].res + 8;
	*vlen = t->ops[op].rlen;
	return 0;
}

int os_txn_scan_rows(const os_txn_t *t, int op)
{
	if (op < 0 || (unsigned)op >= t->n || t->ops[op].kind != K_SCAN)
		return -EINVAL;
	if (t->state != TX_EXECUTED && t->state != TX_DONE)
		return LOTUS_ESTATE;
	return (int)t->ops[op].nrows;
}

int os_txn_scan_row(const os_txn_t *t, int op, unsigned i, const void **key, size_t *klen,
		    const void **val, size_t *vlen)
{
	if (op < 0 || (unsigned)op >= t->n || t->ops[op].kind != K_SCAN ||
	    i >= t->ops[op].nrows || !t->ops[op].rows[i].found)
		return -EINVAL;
	const struct os_op *r = &t->ops[op].rows[i];
	*key = r->kb;
	*klen = 8;
	*val = r->res + 8;
	*vlen = r->rlen;
	return 0;
}

int os_tree_insert(os_txn_t *t, struct os_op *op);

static int txn_commit(os_txn_t *t)
{
	os_session_t *s = t->s;
	if (t->state != TX_IDLE && t->state != TX_EXECUTED)
		return LOTUS_ESTATE;
	s->cur = &t->tally;
	int rc = lock_all(t);            /* writes staged after the execute */
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct os_op *op = &t->ops[i];
		if (op->kind == K_INSERT || !op->has_val || op->missing)
			continue;
		unsigned char *buf = malloc(8 + op->vlen);
		if (!buf) {
			rc = -ENOMEM;
			break;
		}
		uint64_t len = op->vlen;
		memcpy(buf, &len, 8);
		memcpy(buf + 8, op->val, op->vlen);
		rc = os_rma_put(s, op->tid, op->sv, op->rec + OS_REC_DATA, buf, 8 + op->vlen);
		free(buf);
	}
	for (unsigned i = 0; rc == 0 && i < t->n; i++)
		if ((t->ops[i].kind == K_INSERT || t->ops[i].missing) && t->ops[i].has_val) {
			rc = os_tree_insert(t, &t->ops[i]);
			if (rc == LOTUS_EEXISTS && (t->ops[i].upsert || t->ops[i].missing))
				rc = LOTUS_EABORTED;   /* inserted meanwhile: try again */
		}
	/* deletes last: only the network can fail them, after every insert that
	 * may find its key taken (and abort) is done */
	for (unsigned i = 0; rc == 0 && i < t->n; i++)
		if (t->ops[i].kind == K_DELETE && t->ops[i].held == HELD_X && !t->ops[i].dead)
			rc = os_tree_delete(t, &t->ops[i]);
	if (rc) {
		s->cur = &s->cnt.other;
		t->state = TX_FAILED;
		if (rc == LOTUS_EEXISTS || rc == LOTUS_ENOTFOUND)
			txn_abort(t);
		return rc;
	}
	for (unsigned sv = 0; sv < s->nsrv; sv++)   /* data before the unlocks */
		os_rma_fence(s, sv);
	for (unsigned i = 0; i < t->n; i++) {
		int r2 = release_rec(t, &t->ops[i]);
		if (r2 && !rc)
			rc = r2;
	}
	attempt_end(t, 1);
	t->state = TX_DONE;
	return rc;
}

static int txn_abort(os_txn_t *t)
{
	os_session_t *s = t->s;
	if (t->state == TX_DONE)
		return LOTUS_ESTATE;
	s->cur = &t->tally;
	int rc = 0;
	for (unsigned i = 0; i < t->n; i++) {
		int r2 = release_rec(t, &t->ops[i]);
		if (r2 && !rc)
			rc = r2;
	}
	attempt_end(t, 0);
	t->state = TX_DONE;
	return rc;
}

int os_txn_execute(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_execute(t);
	unclaim(t->s);
	return rc;
}

int os_txn_commit(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_commit(t);
	unclaim(t->s);
	return rc;
}

int os_txn_abort(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_abort(t);
	unclaim(t->s);
	return rc;
}

/* ---- steps as coroutines: several transactions' operations outstanding ------- */

static void step_main(unsigned hi, unsigned lo)
{
	os_txn_t *t = (os_txn_t *)(uintptr_t)((uint64_t)hi << 32 | lo);
	switch (t->step) {
	case OS_STEP_EXECUTE:
		t->step_rc = txn_execute(t);
		break;
	case OS_STEP_COMMIT:
		t->step_rc = txn_commit(t);
		break;
	default:
		t->step_rc = os_txn_finished(t) ? 0 : txn_abort(t);
		break;
	}
	t->step_done = 1;   /* returns to s->sched through uc_link */
}

/* Run t's coroutine until it waits or ends; an ended step calls back. */
static void step_resume(os_session_t *s, os_txn_t *t)
{
	struct os_tally *cur = s->cur;
	s->running = t;
	s->cur = &t->tally;
	swapcontext(&s->sched, &t->ctx);
	s->running = NULL;
	s->cur = cur;
	if (!t->step_done)
		return;
	for (os_txn_t **pp = &s->active; *pp; pp = &(*pp)->next_active)
		if (*pp == t) {
			*pp = t->next_active;
			break;
		}
	s->nactive--;
	t->stepping = 0;
	t->cb(t, t->step_rc, t->cb_arg);
}

int os_txn_step(os_txn_t *t, enum os_step step, os_step_cb cb, void *arg)
{
	os_session_t *s = t->s;
	if (t->stepping || s->running)
		return LOTUS_ESTATE;
	if (!t->stack && !(t->stack = malloc(OS_STACK)))
		return -ENOMEM;
	claim(s);
	getcontext(&t->ctx);
	t->ctx.uc_stack.ss_sp = t->stack;
	t->ctx.uc_stack.ss_size = OS_STACK;
	t->ctx.uc_link = &s->sched;
	uint64_t p = (uint64_t)(uintptr_t)t;
	makecontext(&t->ctx, (void (*)(void))step_main, 2, (unsigned)(p >> 32), (unsigned)p);
	t->step = step;
	t->step_done = 0;
	t->stepping = 1;
	t->cb = cb;
	t->cb_arg = arg;
	t->next_active = s->active;
	s->active = t;
	s->nactive++;
	step_resume(s, t);    /* runs until its first wait (or to its end) */
	unclaim(s);
	return 0;
}

int os_session_run(os_session_t *s)
{
	unsigned n = 0, max = s->nactive;
	claim(s);
	if (!max) {
		ucp_worker_progress(s->uw);
		unclaim(s);
		return 0;
	}
	os_txn_t *list[max];   /* the steps running now; those they start wait */
	ucp_worker_progress(s->uw);
	for (os_txn_t *t = s->active; t && n < max; t = t->next_active)
		list[n++] = t;
	for (unsigned i = 0; i < n; i++)
		step_resume(s, list[i]);
	unclaim(s);
	return (int)n;
}

unsigned os_session_active(const os_session_t *s)
{
	return s->nactive;
}
