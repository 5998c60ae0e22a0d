/*
 * os_insert.c - the one-sided engine's inserts and splits (os_int.h).
 *
 * Inserts (at commit): the record is allocated by FAA on the region's cursor
 * and written, then the leaf is locked by CAS on its page lock, read, and
 * the entry added; a full page splits Sherman-style: the new right page is
 * written first, then the left one with its new fence and sibling, then the
 * separator goes into the parent the same way (a new root is installed by
 * CAS on the region header's root word).
 *
 * Deletes (at commit, the record X-locked): the leaf is locked and read the
 * same way, the entry's ptr set to 0 (the mark), and the page put back with
 * both versions raised; the record's release then leaves it dead
 * (os_layout.h).  Marks stay in the leaf (splits carry them) until an
 * insert of the key fills them.
 *
 * A page found full splits its right half into a newly allocated page,
 * written before the left one names it; the separator then goes one level
 * up (into the parent the descent passed, or a fresh descent when the
 * parent is not known), and a split root grows the tree by one level.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"
#include "onesided/os_int.h"

/* ---- inserts and splits -------------------------------------------------------- */

/* FAA on the last known chunk's cursor; a cursor past the chunk's end means
 * it is full: ask the server for the next chunk (it adds one if nobody has
 * yet) and allocate there.  The chunk table is fetched at most a few times
 * per allocation; a server that adds none is out of room (LOTUS_ENOSPACE). */
int os_region_alloc(os_session_t *s, unsigned tid, unsigned sv, uint64_t bytes, uint64_t *addr)
{
	struct os_srv_table *st = &s->tabs[tid].sv[sv];
	for (unsigned tries = 0; tries < 4; tries++) {
		const struct os_chunk_ref *c = &st->ch[st->nch - 1];
		int rc = os_rma_faa(s, tid, sv, c->base + offsetof(struct os_region_hdr, alloc),
				    bytes, addr);
		if (rc)
			return rc;
		if (*addr >= c->base && *addr - c->base <= c->size &&
		    bytes <= c->size - (*addr - c->base))
			return 0;
		unsigned known = st->nch;
		if ((rc = os_chunks_refresh(s, tid, sv, 1)) != 0)
			return rc;
		if (st->nch == known)
			return LOTUS_ENOSPACE;
	}
	return LOTUS_ENOSPACE;
}

static int page_lock(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr)
{
	uint64_t old;
	for (unsigned i = 0; i < OS_PAGE_SPINS; i++) {
		int rc = os_rma_cas(s, tid, sv, addr, 0, 1, &old);
		if (rc || old == 0)
			return rc;
		os_maybe_poll(s);
		os_step_yield(s);
	}
	return LOTUS_ETIMEOUT;
}

/* Write a locked page back (all but its lock word), then unlock it. */
static int page_write_unlock(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr,
			     struct os_page *pg)
{
	uint64_t zero = 0;
	pg->front++;
	pg->rear = pg->front;
	int rc = os_rma_put(s, tid, sv, addr + 8, (unsigned char *)pg + 8, sizeof(*pg) - 8);
	os_rma_fence(s, sv);
	if (rc == 0)
		rc = os_rma_put(s, tid, sv, addr, &zero, 8);
	return rc;
}

static void page_insert_at(struct os_page *pg, unsigned pos, uint64_t key, uint64_t ptr)
{
	memmove(&pg->e[pos + 1], &pg->e[pos], (pg->count - pos) * sizeof(pg->e[0]));
	pg->e[pos].key = key;
	pg->e[pos].ptr = ptr;
	pg->count++;
}

/* Add (key, ptr) at `level` of the tree: the page found from start (0: a
 * descent), moving right as needed; split and recurse upwards if full. */
static int level_insert(os_txn_t *t, unsigned tid, unsigned sv, unsigned level, uint64_t key,
			uint64_t ptr, uint64_t start, uint64_t *path)
{
	os_session_t *s = t->s;
	struct os_page pg;
	uint64_t addr = start, old;
	int rc;
	if (!addr && (rc = os_find_level(s, tid, sv, key, level, &addr, &pg, path)) != 0)
		return rc;
	for (;;) {
		if ((rc = page_lock(s, tid, sv, addr)) != 0)
			return rc;
		if ((rc = os_read_page(s, tid, sv, addr, &pg)) != 0)
			return rc;
		if (pg.high != OS_KEY_INF && key >= pg.high && pg.sibling) {
			uint64_t zero = 0;
			os_rma_put(s, tid, sv, addr, &zero, 8);
			addr = pg.sibling;
			continue;
		}
		break;
	}
	os_cache_drop(s, tid, sv, addr);
	unsigned pos;
	if (level == 0) {
		int i = os_leaf_search(&pg, key);
		if (i >= 0 && pg.e[i].ptr == 0) {   /* a deleted key's mark: fill it */
			pg.e[i].ptr = ptr;
			return page_write_unlock(s, tid, sv, addr, &pg);
		}
		if (i >= 0) {
			uint64_t zero = 0;
			os_rma_put(s, tid, sv, addr, &zero, 8);
			return LOTUS_EEXISTS;
		}
		pos = (unsigned)(-i - 1);
	} else {
		pos = os_child_index(&pg, key) + 1;
	}
	if (pg.count < OS_PAGE_ENTRIES) {
		page_insert_at(&pg, pos, key, ptr);
		return page_write_unlock(s, tid, sv, addr, &pg);
	}
	/* split: the right half goes to a new page, written before the left one */
	struct os_page right;
	uint64_t raddr;
	if ((rc = os_region_alloc(s, tid, sv, OS_PAGE_SIZE, &raddr)) != 0)
		return rc;
	unsigned half = pg.count / 2;
	memset(&right, 0, sizeof(right));
	right.level = pg.level;
	right.count = (uint16_t)(pg.count - half);
	memcpy(right.e, &pg.e[half], right.count * sizeof(right.e[0]));
	right.low = right.e[0].key;
	right.high = pg.high;
	right.sibling = pg.sibling;
	pg.count = (uint16_t)half;
	pg.high = right.low;
	pg.sibling = raddr;
	if (key >= right.low)
		page_insert_at(&right, pos - half, key, ptr);
	else
		page_insert_at(&pg, pos, key, ptr);
	if ((rc = os_rma_put(s, tid, sv, raddr, &right, sizeof(right))) != 0)
		return rc;
	os_rma_fence(s, sv);
	if ((rc = page_write_unlock(s, tid, sv, addr, &pg)) != 0)
		return rc;
	s->cnt.splits++;
	/* the separator into the parent; a new root if this page was the root */
	uint64_t parent = path && level + 1 < OS_MAX_DEPTH ? path[level + 1] : 0;
	if (parent)
		return level_insert(t, tid, sv, level + 1, right.low, raddr, parent, path);
	uint64_t root;
	if ((rc = os_read_root(s, tid, sv, &root)) != 0)
		return rc;
	if (root == addr) {
		struct os_page nr;
		uint64_t naddr;
		if ((rc = os_region_alloc(s, tid, sv, OS_PAGE_SIZE, &naddr)) != 0)
			return rc;
		memset(&nr, 0, sizeof(nr));
		nr.level = (uint16_t)(level + 1);
		nr.high = OS_KEY_INF;
		nr.count = 2;
		nr.e[0].key = 0;
		nr.e[0].ptr = addr;
		nr.e[1].key = right.low;
		nr.e[1].ptr = raddr;
		if ((rc = os_rma_put(s, tid, sv, naddr, &nr, sizeof(nr))) != 0)
			return rc;
		os_rma_fence(s, sv);
		struct os_srv_table *st = &s->tabs[tid].sv[sv];
		rc = os_rma_cas(s, tid, sv, st->base + offsetof(struct os_region_hdr, root), addr,
			     naddr, &old);
		if (rc)
			return rc;
		if (old == addr) {
			st->root = naddr;
			return 0;
		}
		st->root = old;   /* someone else grew the tree: insert below theirs */
	}
	return level_insert(t, tid, sv, level + 1, right.low, raddr, 0, NULL);
}

int os_tree_insert(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	uint64_t rec, path[OS_MAX_DEPTH];
	uint32_t vmax = s->tabs[op->tid].value_max;
	int rc = os_region_alloc(s, op->tid, op->sv, os_rec_size(vmax), &rec);
	if (rc)
		return rc;
	size_t n = sizeof(struct os_rec_hdr) + op->vlen;
	unsigned char *buf = calloc(1, n);
	if (!buf)
		return -ENOMEM;
	((struct os_rec_hdr *)buf)->len = op->vlen;
	memcpy(buf + sizeof(struct os_rec_hdr), op->val, op->vlen);
	rc = os_rma_put(s, op->tid, op->sv, rec, buf, n);
	free(buf);
	os_rma_fence(s, op->sv);   /* the record is whole before the leaf names it */
	struct os_page leaf;
	uint64_t laddr;
	if (rc == 0)
		rc = os_find_level(s, op->tid, op->sv, op->key, 0, &laddr, &leaf, path);
	if (rc == 0)
		rc = level_insert(t, op->tid, op->sv, 0, op->key, rec, laddr, path);
	return rc;
}

int os_tree_delete(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	struct os_page pg;
	uint64_t addr, zero = 0;
	int rc = os_find_level(s, op->tid, op->sv, op->key, 0, &addr, &pg, NULL);
	for (;;) {
		if (rc == 0)
			rc = page_lock(s, op->tid, op->sv, addr);
		if (rc == 0)
			rc = os_read_page(s, op->tid, op->sv, addr, &pg);
		if (rc)
			return rc;
		if (pg.high != OS_KEY_INF && op->key >= pg.high && pg.sibling) {
			os_rma_put(s, op->tid, op->sv, addr, &zero, 8);
			addr = pg.sibling;
			continue;
		}
		break;
	}
	int i = os_leaf_search(&pg, op->key);
	if (i < 0 || pg.e[i].ptr != op->rec) {   /* cannot be while we hold its X lock */
		os_rma_put(s, op->tid, op->sv, addr, &zero, 8);
		return LOTUS_EPROTO;
	}
	pg.e[i].ptr = 0;
	rc = page_write_unlock(s, op->tid, op->sv, addr, &pg);
	if (rc == 0)
		op->dead = 1;
	return rc;
}
