/*
 * store_resv.c - reservations: the free slots (and, tiered, the pinned
 * pages) a commit holds so that applying its writes cannot fail.
 *
 * Reservations (all-or-nothing commits).  A struct store_resv holds free
 * slots, per table, popped off the free lists by store_reserve() exactly as
 * an insert would pop them; while held they are on no list (still odd, so
 * free in a checkpoint image).  store_insert_resv() takes its slot from the
 * reservation, store_delete_resv() gives the freed slot to it (both are in
 * store.c, with the other record writes; they use resv_group/resv_push), and
 * store_resv_release() links whatever is left back onto a free list.  Since
 * updates never need space (fixed-size slots), a caller that reserved one
 * slot per write of an absent key can apply them all without LOTUS_ENOSPACE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "store/store_int.h"

/* ---- reservations ---- */

/* The group of table (created if asked; a pointer valid until the next
 * creation), or NULL. */
struct resv_group *resv_group(store_resv_t *r, uint16_t table, int create)
{
	for (unsigned i = 0; r && i < r->ngroups; i++)
		if (r->group[i].table == table)
			return &r->group[i];
	if (!r || !create)
		return NULL;
	if (r->ngroups == r->cap) {
		unsigned cap = r->cap ? 2 * r->cap : 2;
		struct resv_group *g = realloc(r->group, cap * sizeof(*g));
		if (!g)
			return NULL;
		r->group = g;
		r->cap = cap;
	}
	struct resv_group *g = &r->group[r->ngroups++];
	memset(g, 0, sizeof(*g));
	g->table = table;
	return g;
}

int resv_push(store_resv_t **rp, uint16_t table, store_loc_t l)
{
	if (!*rp && !(*rp = calloc(1, sizeof(**rp))))
		return -ENOMEM;
	struct resv_group *g = resv_group(*rp, table, 1);
	if (!g)
		return -ENOMEM;
	if (g->n == g->cap) {
		unsigned cap = g->cap ? 2 * g->cap : 8;
		store_loc_t *p = realloc(g->loc, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		g->loc = p;
		g->cap = cap;
	}
	g->loc[g->n++] = l;
	return 0;
}

unsigned store_reserved(const store_resv_t *r, uint16_t table)
{
	struct resv_group *g = resv_group((store_resv_t *)r, table, 0);
	return g ? g->n : 0;
}

int store_reserve(store_t *st, store_resv_t **rp, uint16_t table, unsigned n)
{
	struct table *t = table_get(st, table);
	if (!t)
		return LOTUS_ENOTABLE;
	unsigned before = store_reserved(*rp, table);
	/* the index nodes their inserts may need, too: applying cannot fail */
	int rc = index_reserve(t->ix, n);
	if (rc == 0) {
		struct resv_group *g = (*rp || (*rp = calloc(1, sizeof(**rp))))
				       ? resv_group(*rp, table, 1) : NULL;
		if (g)
			g->ix_n += n;
		else {
			index_unreserve(t->ix, n);
			rc = -ENOMEM;
		}
	}
	if (rc)
		return rc;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		store_loc_t l = slot_alloc(st, t);
		if (!l)
			rc = LOTUS_ENOSPACE;
		else if ((rc = resv_push(rp, table, l)) != 0)
			slot_link(st, t, l);
	}
	if (rc) {       /* give back what this call took */
		struct resv_group *g = resv_group(*rp, table, 0);
		while (g && g->n > before)
			slot_link(st, t, g->loc[--g->n]);
		if (g) {
			g->ix_n -= n;
			index_unreserve(t->ix, n);
		}
	}
	return rc;
}

void store_resv_release(store_t *st, store_resv_t *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < r->ngroups; i++) {
		struct resv_group *g = &r->group[i];
		struct table *t = table_get(st, g->table);
		while (t && g->n)
			slot_link(st, t, g->loc[--g->n]);
		if (t)
			index_unreserve(t->ix, g->ix_n);
		free(g->loc);
	}
	for (unsigned i = 0; i < r->npinned; i++)
		page_unpin(st, r->pinned[i]);
	free(r->pinned);
	free(r->group);
	free(r);
}

/* Pin page for the reservation (once per page). */
static int resv_pin_page(store_t *st, store_resv_t **rp, uint64_t page)
{
	store_resv_t *r = *rp;
	unsigned char *base;
	for (unsigned i = 0; i < r->npinned; i++)
		if (r->pinned[i] == page)
			return 0;
	if (r->npinned == r->cap_pinned) {
		unsigned cap = r->cap_pinned ? 2 * r->cap_pinned : 8;
		uint64_t *p = realloc(r->pinned, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		r->pinned = p;
		r->cap_pinned = cap;
	}
	int rc = page_pin(st, page, PIN_READ, &base);
	if (rc == 0)
		r->pinned[r->npinned++] = page;
	return rc;
}

int store_resv_pin(store_t *st, store_resv_t **rp, store_loc_t loc)
{
	if (!st->tiered)
		return 0;
	if (!loc_table(st, loc))
		return LOTUS_ENOTFOUND;
	if (!*rp && !(*rp = calloc(1, sizeof(**rp))))
		return -ENOMEM;
	return resv_pin_page(st, rp, loc_page(loc));
}

int store_resv_pin_slots(store_t *st, store_resv_t **rp)
{
	int rc = 0;
	if (!st->tiered || !*rp)
		return 0;
	for (unsigned i = 0; i < (*rp)->ngroups && !rc; i++) {
		struct resv_group *g = &(*rp)->group[i];
		for (unsigned j = 0; j < g->n && !rc; j++)
			rc = resv_pin_page(st, rp, loc_page(g->loc[j]));
	}
	return rc;
}
