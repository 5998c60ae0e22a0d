/*
 * store_rebuild.c - recovery of a store from a checkpoint image: an untiered
 * store's whole image at once (store_rebuild), a tiered store's page by page
 * (store_rebuild_page), and the checks that look at an image before anything
 * is indexed (store_rebuild_check, store_rebuild_page_check).
 *
 * Recovery (store_rebuild) reads a fuzzy checkpoint image: each page is
 * consistent by itself (the checkpointer's change gate), but pages were
 * copied at different moments after the checkpoint's begin LSN, and a page
 * that was clean when the checkpoint collected its dirty pages keeps an older
 * copy.  A record that moved during the checkpoint (delete, then insert of
 * the same key into another slot) can therefore show up in both slots.  Both
 * moves are in the log above the begin LSN, and log replay applies them by
 * key, so rebuild keeps the first copy it meets, frees the other and leaves
 * the rest to replay.  This is not corruption (page CRCs catch that).
 *
 * Recovery (store_rebuild_page) indexes one page image at a time and leaves
 * the page resident and clean if a frame is free, else non-resident BACKED.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "store/store_int.h"

/* ---- recovery ---- */

/* Put a free slot found during store_rebuild() on a free list. */
static void rebuild_free_slot(struct table *t, struct store_rec *r, store_loc_t l, unsigned *rr)
{
	struct shard *sh = &t->shard[(*rr)++ % NSHARD];
	*rec_link(r) = sh->free;
	STORE(&sh->free, l);
}

/* Take over one extent found at page p during store_rebuild().  *moved
 * counts the stale copies of records that moved during the checkpoint. */
static int rebuild_extent(store_t *st, uint64_t p, struct table *t, unsigned *rr,
			  uint64_t *moved)
{
	/* owned first: the hash index's rehash (table_hx_add may grow it)
	 * reads the keys of the slots indexed so far through their locations */
	st->page_owner[p] = (uint16_t)(t->id + 1);
	for (unsigned i = 0; i < t->nslots; i++) {
		struct store_rec *r = slot_rec(t, p, i);
		store_loc_t l = loc_make(p, i, 0);
		if (r->gen & 1) {
			rebuild_free_slot(t, r, l, rr);
			continue;
		}
		if (r->key_len == 0 || r->key_len > STORE_KEY_MAX || r->value_len > t->max_value) {
			st->page_owner[p] = 0;
			return -EINVAL;
		}
		vclock_see(st, r->version);
		int rc = index_insert(t->ix, r->data, r->key_len, l | gen_tag(r->gen), NULL);
		if (rc == LOTUS_EEXISTS) {
			/* The key is already in another slot: a record that moved
			 * during a fuzzy checkpoint (see the top of this file).
			 * Replay settles the key; this copy becomes a free slot. */
			r->gen++;
			rebuild_free_slot(t, r, l, rr);
			mark_rec_dirty(st, t, p, r);
			(*moved)++;
			continue;
		}
		if (rc) {
			st->page_owner[p] = 0;
			return rc;
		}
		table_hx_add(t, r->data, r->key_len, l | gen_tag(r->gen));
		t->shard[0].records++;
	}
	return 0;
}

int store_rebuild(store_t *st, uint64_t pages_used)
{
	unsigned rr = 0;
	uint64_t p = 1, moved = 0;
	if (st->tiered || pages_used >= st->npages || st->next_page != 1)
		return -EINVAL;
	while (p <= pages_used) {
		const struct extent_hdr *h = (const void *)(st->pool + (p << st->page_shift));
		struct table *t = h->magic == EXTENT_MAGIC ? table_get(st, h->table) : NULL;
		if (!t) {
			p++;             /* never written back: its records are in the log */
			continue;
		}
		if (h->npages != t->ext_pages || h->slot_size != t->slot_size ||
		    (h->nslots ? h->nslots : SLOTS_MAX) != t->nslots || p + h->npages - 1 > pages_used)
			return -EINVAL;
		int rc = rebuild_extent(st, p, t, &rr, &moved);
		if (rc)
			return rc;
		p += h->npages;
	}
	st->next_page = p;
	if (moved)
		log_debug("store: rebuild freed %" PRIu64 " stale copies of records that moved "
			  "during the checkpoint (log replay settles their keys)", moved);
	return 0;
}

/* Does the extent header h (of page p) fit table t?  (npages: the pages the
 * image holds from p on.) */
static int hdr_ok(const struct extent_hdr *h, const struct table *t, uint64_t p, uint64_t last)
{
	return h->npages == t->ext_pages && h->slot_size == t->slot_size &&
	       (h->nslots ? h->nslots : SLOTS_MAX) == t->nslots && p + h->npages - 1 <= last;
}

/* Would rebuilding the extent of table t whose first page's bytes start at
 * base accept every in-use slot (the checks of rebuild_extent and
 * store_rebuild_page)? */
static int slots_ok(const struct table *t, const unsigned char *base)
{
	for (unsigned i = 0; i < t->nslots; i++) {
		const struct store_rec *r = rec_in(t, (unsigned char *)base, i);
		if (!(r->gen & 1) &&
		    (r->key_len == 0 || r->key_len > STORE_KEY_MAX || r->value_len > t->max_value))
			return 0;
	}
	return 1;
}

int store_rebuild_check(store_t *st, uint64_t pages_used, uint64_t *bad_page)
{
	if (st->tiered || pages_used >= st->npages)
		return -EINVAL;
	for (uint64_t p = 1; p <= pages_used;) {
		const unsigned char *base = st->pool + (p << st->page_shift);
		const struct extent_hdr *h = (const void *)base;
		const struct table *t = h->magic == EXTENT_MAGIC ? table_get(st, h->table) : NULL;
		if (!t) {
			p++;             /* as store_rebuild: never written back */
			continue;
		}
		if (!hdr_ok(h, t, p, pages_used) || !slots_ok(t, base)) {
			if (bad_page)
				*bad_page = p;
			return -EINVAL;
		}
		p += h->npages;
	}
	return 0;
}

int store_rebuild_page_check(store_t *st, uint64_t page, const void *img)
{
	if (!st->tiered || page == 0 || page >= st->npages)
		return -EINVAL;
	const struct extent_hdr *h = img;
	const struct table *t = h->magic == EXTENT_MAGIC ? table_get(st, h->table) : NULL;
	if (!t)
		return 0;            /* as store_rebuild_page: skipped */
	return hdr_ok(h, t, page, page) && slots_ok(t, img) ? 0 : -EINVAL;
}

int store_rebuild_page(store_t *st, uint64_t page, const void *img)
{
	if (!st->tiered || page == 0 || page >= st->npages)
		return -EINVAL;
	const struct extent_hdr *h = img;
	struct table *t = h->magic == EXTENT_MAGIC ? table_get(st, h->table) : NULL;
	if (!t)
		return 0;            /* never written back: its records are in the log */
	if (!hdr_ok(h, t, page, page) || LOAD(&st->pstate[page]) != 0)
		return -EINVAL;
	/* Install the page: resident and clean if a frame is free or a clean
	 * one can be dropped, else non-resident with a backing copy. */
	uint32_t f;
	if (frame_pop(st, &f) || clock_drop_one(st, &f)) {
		memcpy(st->pool + ((size_t)f << st->page_shift), img, st->page_size);
		ADD(&st->resident, 1);
		STORE_REL(&st->frame_page[f], page);
		STORE_REL(&st->pstate[page], (uint64_t)f << 32 | PS_RESIDENT | PS_BACKED);
	} else {
		STORE_REL(&st->pstate[page], PS_BACKED);
	}
	STORE_REL(&st->page_owner[page], (uint16_t)(t->id + 1));
	struct shard *sh = &t->shard[0];
	unsigned char *ib = (unsigned char *)img;
	int64_t n = 0;
	int rc = 0;
	for (unsigned i = 0; i < t->nslots && !rc; i++) {
		const struct store_rec *r = rec_in(t, ib, i);
		store_loc_t l = loc_make(page, i, 0);
		if (r->gen & 1) {
			rc = fl_push(sh, l);
			continue;
		}
		if (r->key_len == 0 || r->key_len > STORE_KEY_MAX || r->value_len > t->max_value)
			return -EINVAL;
		vclock_see(st, r->version);
		rc = index_insert(t->ix, r->data, r->key_len, l | gen_tag(r->gen), NULL);
		if (rc == LOTUS_EEXISTS) {
			/* a record that moved during a fuzzy checkpoint (see
			 * store_rebuild): free this copy, in the page itself */
			unsigned char *base;
			if ((rc = page_pin(st, page, PIN_WRITE, &base)) != 0)
				break;
			struct store_rec *w = rec_in(t, base, i);
			STORE(&w->gen, w->gen + 1);
			mark_rec_dirty(st, t, page, w);
			page_unpin(st, page);
			rc = fl_push(sh, l);
			continue;
		}
		if (rc == 0)
			n++;
	}
	ADD(&sh->records, n);
	return rc;
}

int store_rebuild_finish(store_t *st, uint64_t pages_used)
{
	if (!st->tiered || pages_used >= st->npages)
		return -EINVAL;
	if (LOAD(&st->next_page) < pages_used + 1)
		STORE(&st->next_page, pages_used + 1);
	return 0;
}
