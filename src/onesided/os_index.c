/*
 * os_index.c - the one-sided engine's RMA primitives and index walk
 * (os_int.h).
 *
 * Every access to a memory server is an RMA operation on its region
 * (os_layout.h) through the session's endpoint to it, waited for before the
 * next one (os_rma_get/put/cas/faa; each counts one op of its type, its
 * payload bytes and one round trip into the current tally).  Inside a step's
 * coroutine the wait yields to the session's other steps.  Each operation
 * uses the rkey of the chunk its address falls in; an address in no chunk
 * the session knows (a page or record another client put in a newer chunk)
 * makes it fetch the server's chunk table once, and an address in none of
 * those is the server's or a peer's error (LOTUS_EPROTO).
 *
 * Index: os_find_level() descends from the root (its address read once
 * from the region header) to the page of a level that holds the key.
 * Internal pages come from the session's page cache when present
 * (direct-mapped by address, cache_bytes / 1 KiB slots), else they are read
 * and cached; leaves are always read.  A read page is accepted only when its two version words
 * agree (a torn read is read again).  A page whose high fence is at or below
 * the key sends the reader right (B-link); a page whose low fence is above it
 * means a cached parent was stale: the descent restarts without the cache.
 */
#include <string.h>
#include <ucp/api/ucp.h>
#include "common/clock.h"
#include "common/common.h"
#include "lotus.h"
#include "onesided/os_int.h"

/* ---- RMA, one operation at a time ---------------------------------------------- */

static int rma_wait(os_session_t *s, ucs_status_ptr_t req)
{
	if (req == NULL)
		return 0;
	if (UCS_PTR_IS_ERR(req)) {
		s->broken = 1;
		return LOTUS_EUNAVAIL;
	}
	uint64_t deadline = 0;
	for (unsigned i = 0;; i++) {
		ucs_status_t st = ucp_request_check_status(req);
		if (st != UCS_INPROGRESS) {
			ucp_request_free(req);
			if (st == UCS_OK)
				return 0;
			s->broken = 1;
			return LOTUS_EUNAVAIL;
		}
		if (s->running)      /* a step's coroutine: let the others run meanwhile */
			os_step_yield(s);
		else
			ucp_worker_progress(s->uw);
		if ((i & 1023) == 1023 || s->running) {
			uint64_t now = clock_now_ns();
			if (!deadline)
				deadline = now + (uint64_t)s->e->o.timeout_ms * 1000000;
			else if (now > deadline) {
				ucp_request_cancel(s->uw, req);
				ucp_worker_progress(s->uw);
				ucp_request_free(req);
				s->broken = 1;
				return LOTUS_ETIMEOUT;
			}
		}
	}
}

static void count(os_session_t *s, enum os_op_type t, size_t out, size_t in)
{
	s->cur->ops[t]++;
	s->cur->out[t] += out;
	s->cur->in[t] += in;
	s->cur->round_trips++;
}

static ucp_rkey_h chunk_rkey(const struct os_srv_table *st, uint64_t addr, size_t len)
{
	for (unsigned i = st->nch; i-- > 0;)   /* new pages and records: the last chunks */
		if (addr >= st->ch[i].base && addr - st->ch[i].base <= st->ch[i].size &&
		    len <= st->ch[i].size - (addr - st->ch[i].base))
			return st->ch[i].rkey;
	return NULL;
}

/* The rkey of [addr, addr + len) in table tid's region at sv. */
static int rkey_of(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, size_t len,
		   ucp_rkey_h *out)
{
	struct os_srv_table *st = &s->tabs[tid].sv[sv];
	if ((*out = chunk_rkey(st, addr, len)) != NULL)
		return 0;
	struct os_tally *cur = s->cur;   /* the chunk table is not this op's traffic */
	s->cur = &s->cnt.other;
	int rc = os_chunks_refresh(s, tid, sv, 0);
	s->cur = cur;
	if (rc)
		return rc;
	if ((*out = chunk_rkey(st, addr, len)) != NULL)
		return 0;
	return LOTUS_EPROTO;
}

int os_rma_get(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, void *buf,
		   size_t len)
{
	if (s->broken)
		return LOTUS_EUNAVAIL;
	ucp_request_param_t p = { 0 };
	ucp_rkey_h rk;
	int rc = rkey_of(s, tid, sv, addr, len, &rk);
	if (rc)
		return rc;
	count(s, OS_READ, 0, len);
	return rma_wait(s, ucp_get_nbx(s->ep[sv], buf, len, addr, rk, &p));
}

int os_rma_put(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, const void *buf,
		   size_t len)
{
	if (s->broken)
		return LOTUS_EUNAVAIL;
	ucp_request_param_t p = { 0 };
	ucp_rkey_h rk;
	int rc = rkey_of(s, tid, sv, addr, len, &rk);
	if (rc)
		return rc;
	count(s, OS_WRITE, len, 0);
	return rma_wait(s, ucp_put_nbx(s->ep[sv], buf, len, addr, rk, &p));
}

static int rma_atomic(os_session_t *s, unsigned tid, unsigned sv, ucp_atomic_op_t op,
		      uint64_t addr, uint64_t value, uint64_t *result)
{
	if (s->broken)
		return LOTUS_EUNAVAIL;
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER,
		.datatype = ucp_dt_make_contig(8),
		.reply_buffer = result,
	};
	ucp_rkey_h rk;
	int rc = rkey_of(s, tid, sv, addr, 8, &rk);
	if (rc)
		return rc;
	if (op == UCP_ATOMIC_OP_CSWAP)
		count(s, OS_CAS, 16, 8);
	else
		count(s, OS_FAA, 8, 8);
	return rma_wait(s, ucp_atomic_op_nbx(s->ep[sv], op, &value, 1, addr, rk, &p));
}

/* *old gets the word's value before the CAS (== expect: it was swapped).
 * UCX's CSWAP compares with the operand buffer and swaps in the reply
 * buffer's value, which then receives the old one. */
int os_rma_cas(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, uint64_t expect,
		   uint64_t swap, uint64_t *old)
{
	*old = swap;
	return rma_atomic(s, tid, sv, UCP_ATOMIC_OP_CSWAP, addr, expect, old);
}

int os_rma_faa(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, uint64_t add,
		   uint64_t *old)
{
	return rma_atomic(s, tid, sv, UCP_ATOMIC_OP_ADD, addr, add, old);
}

/* Order the puts before it before those after it.  UCX 1.13 has no
 * ucp_ep_fence: the worker's fence covers every endpoint of the session. */
void os_rma_fence(os_session_t *s, unsigned sv)
{
	(void)sv;
	ucp_worker_fence(s->uw);
}

/* ---- the page cache and the index --------------------------------------------- */

static struct os_cpage *cache_slot(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr)
{
	if (!s->ncache)
		return NULL;
	uint64_t h = (addr / OS_PAGE_SIZE) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)sv << 8 | tid);
	return &s->cache[(h >> 17) % s->ncache];
}

static const struct os_page *cache_find(os_session_t *s, unsigned tid, unsigned sv,
					uint64_t addr)
{
	struct os_cpage *c = cache_slot(s, tid, sv, addr);
	if (c && c->addr == addr && c->sv == sv && c->tid == tid) {
		s->cnt.cache_hits++;
		return &c->page;
	}
	return NULL;
}

static void cache_put(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr,
		      const struct os_page *pg)
{
	struct os_cpage *c = cache_slot(s, tid, sv, addr);
	if (!c)
		return;
	c->addr = addr;
	c->sv = sv;
	c->tid = tid;
	c->page = *pg;
}

void os_cache_drop(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr)
{
	struct os_cpage *c = cache_slot(s, tid, sv, addr);
	if (c && c->addr == addr && c->sv == sv && c->tid == tid)
		c->addr = 0;
}

/* Read a page, again while its two versions differ (a torn read). */
int os_read_page(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr,
		     struct os_page *pg)
{
	for (unsigned i = 0; i < OS_TORN_MAX; i++) {
		int rc = os_rma_get(s, tid, sv, addr, pg, sizeof(*pg));
		if (rc)
			return rc;
		if (pg->front == pg->rear)
			return 0;
		s->cnt.torn_reads++;
	}
	return LOTUS_ETIMEOUT;
}

int os_read_root(os_session_t *s, unsigned tid, unsigned sv, uint64_t *root)
{
	struct os_srv_table *st = &s->tabs[tid].sv[sv];
	int rc = os_rma_get(s, tid, sv, st->base + offsetof(struct os_region_hdr, root), root, 8);
	if (rc == 0)
		st->root = *root;
	return rc;
}

/* Index of the child of internal page pg that covers key. */
unsigned os_child_index(const struct os_page *pg, uint64_t key)
{
	unsigned lo = 0, hi = pg->count;   /* the last e[i].key <= key */
	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (pg->e[mid].key <= key)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Position of key in leaf pg, or -(insertion point) - 1. */
int os_leaf_search(const struct os_page *pg, uint64_t key)
{
	int lo = 0, hi = pg->count - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (pg->e[mid].key == key)
			return mid;
		if (pg->e[mid].key < key)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -lo - 1;
}

/* Descend to the page of `level` that holds key: *addr and a validated copy
 * in *out.  path (may be NULL) gets the address of each internal page passed
 * at its level (0 where the descent did not pass one). */
int os_find_level(os_session_t *s, unsigned tid, unsigned sv, uint64_t key, unsigned level,
		      uint64_t *addr_out, struct os_page *out, uint64_t *path)
{
	int use_cache = 1, rc;
	uint64_t root = s->tabs[tid].sv[sv].root;
	if (!root && (rc = os_read_root(s, tid, sv, &root)) != 0)
		return rc;
	for (int restarts = 0; restarts < 8; restarts++) {
		uint64_t addr = root;
		if (path)
			memset(path, 0, OS_MAX_DEPTH * sizeof(*path));
		for (unsigned step = 0; step < OS_MAX_DEPTH * 4; step++) {
			const struct os_page *pg = use_cache ? cache_find(s, tid, sv, addr) : NULL;
			if (!pg) {
				if ((rc = os_read_page(s, tid, sv, addr, out)) != 0)
					return rc;
				pg = out;
				if (pg->level > 0) {
					s->cnt.cache_misses++;
					cache_put(s, tid, sv, addr, pg);
				}
			}
			if (key < pg->low || pg->level < level) {   /* a stale way here */
				os_cache_drop(s, tid, sv, addr);
				break;
			}
			if (pg->high != OS_KEY_INF && key >= pg->high && pg->sibling) {
				if (pg != out)
					os_cache_drop(s, tid, sv, addr);
				addr = pg->sibling;
				continue;
			}
			if (pg->level == level) {
				if (pg != out)
					*out = *pg;
				*addr_out = addr;
				return 0;
			}
			if (path && pg->level < OS_MAX_DEPTH)
				path[pg->level] = addr;
			addr = pg->e[os_child_index(pg, key)].ptr;
		}
		use_cache = 0;
		if ((rc = os_read_root(s, tid, sv, &root)) != 0)
			return rc;
	}
	return LOTUS_ETIMEOUT;
}
