/*
 * store.c - the memory server's record store: buffer pool, pages (extents),
 * slots with generations, per-table free lists, and one index per table.
 *
 * Buffer pool.  One anonymous MAP_NORESERVE mapping of memory_bytes, touched
 * only when a page is handed out, so RSS follows use; being one region it can
 * be registered with io_uring as one buffer.  Pool page 0 is reserved (so no
 * record location is ever 0).  Pages are handed out by an atomic bump pointer
 * and never returned: a page belongs to one table for the life of the store.
 *
 * Extents.  A table's records live in fixed-size slots of
 * ALIGN8(16 + STORE_KEY_MAX + max_value) bytes, so any key fits with any
 * value.  A table allocates pages in extents of ext_pages contiguous pages
 * (chosen at table creation to waste < 1/32 of the extent if possible: one
 * 8 KiB page holds seven 1 KiB-value slots; 64 KiB values use 264 KiB
 * extents of four slots).  The first page of an extent starts with a
 * struct extent_hdr; the slots follow.  page_owner[] marks first pages with
 * their table id + 1, which is what validates a location.
 *
 *   | extent_hdr | slot 0 | slot 1 | ... | slot nslots-1 | (waste) |
 *   slot = | struct store_rec (16 B) | key (klen) | value (vlen) | (unused) |
 *
 * Locations.  loc = first page of the extent (40 bits) | slot (12) | gen (12).
 * A slot's rec->gen is odd while free and even while in use; allocating and
 * freeing each add 1, and a location carries (gen >> 1) & 0xfff.  So a freed
 * or reused slot fails store_rec_at() for every older location (up to 12-bit
 * wrap-around, which the key check in store_rec_at also guards).
 *
 * Free lists.  Each table has NSHARD shards {mutex, free list, extent being
 * carved}; a thread uses the shard of its thread number, so threads rarely
 * share a mutex.  Free slots (of an untiered store) are linked through the 8 bytes after gen
 * (value_len/version) as locations without generation.  A thread whose shard
 * is empty takes free slots from the other shards before it carves a new
 * extent, so deletes on one thread and inserts on another do not grow the
 * table; with the pool exhausted it also takes the others' partly carved
 * extents before failing with LOTUS_ENOSPACE.
 *
 * Files.  store.c (this one) has the store and its tables, locations and
 * slots, slot allocation, records, scan and stats; store_tier.c the buffer
 * manager of a tiered store (frames, pins, misses, CLOCK, dirty pages,
 * eviction); store_resv.c the reservations that make a commit
 * all-or-nothing; store_rebuild.c recovery from a checkpoint image;
 * store_int.h the structs and helpers they share.
 *
 * Thread rules: store_create/store_destroy from one thread with no other
 * users; everything else from any thread (store_rebuild_page: one thread
 * before other use).  Table creation takes one mutex;
 * table lookup is lock-free (tables are never dropped).  Key bytes and gen are
 * written and read with atomics because the index and store_rec_at read them
 * optimistically from slots that may be concurrently reused.  Record values are
 * the caller's (lock manager's) business.
 *
 * Tiered stores (store_tier.c) keep misses off the allocation paths with
 * two layout rules: every extent is one page (table_geometry with one page;
 * a slot that does not fit one page is LOTUS_ETOOBIG), and free slots live
 * on per-shard DRAM arrays (fl[]) rather than linked through the slots, so
 * allocating and freeing never read a page.  Slot generations stay in the
 * slots: an insert, a delete (which pins the record's page before it leaves
 * the index, so the bump cannot fail halfway) and every location check pin
 * the page.  The index of a tiered table always owns its keys
 * (index_create_owned), so lookups, inserts and scans never read a page.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>
#include <time.h>
#include "common/common.h"
#include "common/log.h"
#include "store/index.h"
#include "store/store.h"
#include "store/store_int.h"

/* ---- locations and slots ---- */

/* Copy the key of a slot that may be concurrently reused: atomic 8-byte words,
 * then atomic bytes for the tail (the word after it overlaps the value). */
static unsigned rec_key_load(const struct store_rec *r, unsigned char *buf)
{
	unsigned len = LOAD(&r->key_len);
	if (len > STORE_KEY_MAX)
		len = STORE_KEY_MAX;
	const uint64_t *w = (const uint64_t *)r->data;
	unsigned i;
	for (i = 0; i < len / 8; i++) {
		uint64_t x = LOAD(&w[i]);
		memcpy(buf + 8 * i, &x, 8);
	}
	for (i *= 8; i < len; i++)
		buf[i] = LOAD(&r->data[i]);
	return len;
}

/* Does r hold key?  Compared in place, a word at a time, with the loads
 * rec_key_load makes (a stale location may name a slot being rewritten). */
static inline int rec_key_equal(const struct store_rec *r, const void *key, unsigned klen)
{
	if (LOAD(&r->key_len) != klen || klen > STORE_KEY_MAX)
		return 0;
	const uint64_t *w = (const uint64_t *)r->data;
	const unsigned char *k = key;
	unsigned i = 0;
	for (; i + 8 <= klen; i += 8) {
		uint64_t y;
		memcpy(&y, k + i, 8);
		if (LOAD(&w[i / 8]) != y)
			return 0;
	}
	for (; i < klen; i++)
		if (LOAD(&r->data[i]) != k[i])
			return 0;
	return 1;
}

static void rec_key_store(struct store_rec *r, const unsigned char *key, unsigned len)
{
	uint64_t *w = (uint64_t *)r->data;
	unsigned i;
	for (i = 0; i < len / 8; i++) {
		uint64_t x;
		memcpy(&x, key + 8 * i, 8);
		STORE(&w[i], x);
	}
	for (i *= 8; i < len; i++)
		STORE(&r->data[i], key[i]);
	STORE(&r->key_len, (uint16_t)len);
}

/* Write a value.  The part inside the first STORE_KEY_MAX data bytes may be
 * read concurrently by rec_key_load() through a stale location (the slot held
 * a longer key before), so it is written atomically; the rest is a memcpy. */
static void rec_value_store(struct store_rec *r, const unsigned char *v, uint32_t vlen)
{
	unsigned off = r->key_len, i = 0;
	unsigned n = off < STORE_KEY_MAX ? MIN(vlen, STORE_KEY_MAX - off) : 0;
	for (; i < n && (off + i) % 8; i++)
		STORE(&r->data[off + i], v[i]);
	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, v + i, 8);
		STORE((uint64_t *)(r->data + off + i), x);
	}
	for (; i < n; i++)
		STORE(&r->data[off + i], v[i]);
	if (vlen > n)
		memcpy(r->data + off + n, v + n, vlen - n);
	r->value_len = vlen;
}

static int table_hx_match(void *ctx, uint64_t loc, const void *key, unsigned klen);
static uint64_t table_hx_rehash(void *ctx, uint64_t loc);

/* index_key_fn: the full key of the record at loc. */
static unsigned table_key_fn(void *ctx, uint64_t loc, unsigned char *buf)
{
	struct table *t = ctx;      /* untiered only: a tiered index owns its keys */
	if (loc_page(loc) == 0 || loc_page(loc) >= t->st->npages || loc_slot(loc) >= t->nslots)
		return 0;
	return rec_key_load(slot_rec(t, loc_page(loc), loc_slot(loc)), buf);
}

/* ---- slot allocation ---- */

static unsigned my_shard(void)
{
	static unsigned next_id;
	static __thread unsigned id_plus1;
	if (!id_plus1)
		id_plus1 = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED) + 1;
	return (id_plus1 - 1) % NSHARD;
}

/* Take an extent from the pool and format it for t; 0 if the pool is full
 * (or, tiered, no frame could be had for the new page: the page is lost). */
static uint64_t extent_alloc(store_t *st, struct table *t)
{
	uint64_t p = LOAD(&st->next_page);
	unsigned char *base;
	do {
		if (p + t->ext_pages > st->npages)
			return 0;
	} while (!__atomic_compare_exchange_n(&st->next_page, &p, p + t->ext_pages, false,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	if (page_pin(st, p, PIN_WRITE, &base) != 0) {   /* tiered: a zero-filled frame */
		log_warn("store: no frame for new page %" PRIu64 " of table %s", p, t->name);
		return 0;
	}
	struct extent_hdr *h = (struct extent_hdr *)base;
	h->table = t->id;
	h->npages = (uint16_t)t->ext_pages;
	h->nslots = (uint16_t)(t->nslots == SLOTS_MAX ? 0 : t->nslots);  /* 0 = 4096 */
	h->slot_size = t->slot_size;
	h->magic = EXTENT_MAGIC;
	for (unsigned i = 0; i < t->nslots; i++)
		STORE(&rec_in(t, base, i)->gen, 1u);
	if (st->tiered)
		mark_rec_dirty(st, t, p, NULL);
	else
		mark_range_dirty(st, p << st->page_shift, sizeof(*h));
	page_unpin(st, p);
	STORE_REL(&st->page_owner[p], (uint16_t)(t->id + 1));
	return p;
}

/* Tiered free lists: an array per shard, under its mutex. */
int fl_push(struct shard *sh, store_loc_t l)
{
	if (sh->fl_n == sh->fl_cap) {
		uint32_t cap = sh->fl_cap ? 2 * sh->fl_cap : 64;
		store_loc_t *p = realloc(sh->fl, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		sh->fl = p;
		sh->fl_cap = cap;
	}
	sh->fl[sh->fl_n] = l;
	STORE(&sh->fl_n, sh->fl_n + 1);
	return 0;
}

static inline int shard_has_free(const store_t *st, struct shard *sh)
{
	return st->tiered ? LOAD(&sh->fl_n) != 0 : LOAD(&sh->free) != 0;
}

/* Pop a free or never-used slot of one shard; 0 if it has none. */
static store_loc_t shard_pop(store_t *st, struct table *t, struct shard *sh)
{
	store_loc_t l = 0;
	pthread_mutex_lock(&sh->mu);
	if (st->tiered && sh->fl_n) {
		l = sh->fl[sh->fl_n - 1];
		STORE(&sh->fl_n, sh->fl_n - 1);
	} else if (!st->tiered && sh->free) {
		l = sh->free;
		STORE(&sh->free, LOAD(rec_link(slot_rec(t, loc_page(l), loc_slot(l)))));
	} else if (sh->carve_page) {
		l = loc_make(sh->carve_page, sh->carve_next++, 0);
		if (sh->carve_next == t->nslots)
			sh->carve_page = 0;
	}
	pthread_mutex_unlock(&sh->mu);
	return l;
}

/* Allocate a slot; returns its location (tag not yet set) or 0 (no space).
 * Order: own shard; free slots of other shards (so that slots freed by one
 * thread are reused by another before the table grows); a new extent; any
 * shard's partly carved extent. */
store_loc_t slot_alloc(store_t *st, struct table *t)
{
	unsigned me = my_shard();
	struct shard *sh = &t->shard[me];
	store_loc_t l = shard_pop(st, t, sh);
	if (l)
		return l;
	for (unsigned i = 1; i < NSHARD; i++) {
		struct shard *o = &t->shard[(me + i) % NSHARD];
		if (shard_has_free(st, o) && (l = shard_pop(st, t, o)) != 0)
			return l;
	}
	pthread_mutex_lock(&sh->mu);
	if (!sh->carve_page && !shard_has_free(st, sh)) {
		uint64_t p = extent_alloc(st, t);
		if (p) {
			sh->carve_page = p;
			sh->carve_next = 0;
		}
	}
	pthread_mutex_unlock(&sh->mu);
	for (unsigned i = 0; i < NSHARD; i++)
		if ((l = shard_pop(st, t, &t->shard[(me + i) % NSHARD])) != 0)
			return l;
	return 0;
}

/* Put a free slot (odd generation) on this thread's free list. */
void slot_link(store_t *st, struct table *t, store_loc_t loc)
{
	struct shard *sh = &t->shard[my_shard()];
	store_loc_t l = loc_make(loc_page(loc), loc_slot(loc), 0);
	if (st->tiered) {             /* no page access: the page may be out */
		pthread_mutex_lock(&sh->mu);
		int rc = fl_push(sh, l);
		pthread_mutex_unlock(&sh->mu);
		if (rc)
			log_warn("store: out of memory for a free list: slot lost");
		return;
	}
	struct store_rec *r = slot_rec(t, loc_page(loc), loc_slot(loc));
	pthread_mutex_lock(&sh->mu);
	STORE(rec_link(r), sh->free);
	STORE(&sh->free, l);
	pthread_mutex_unlock(&sh->mu);
}

/* Mark an in-use slot free (the record was removed from the index).  0, or
 * (tiered, page not resident and not readable) -EIO / LOTUS_ENOSPACE. */
static int slot_unuse(store_t *st, struct table *t, store_loc_t loc)
{
	unsigned char *base;
	int rc = page_pin(st, loc_page(loc), PIN_WRITE, &base);
	if (rc)
		return rc;
	struct store_rec *r = rec_in(t, base, loc_slot(loc));
	STORE_REL(&r->gen, LOAD(&r->gen) + 1);          /* odd: free */
	mark_rec_dirty(st, t, loc_page(loc), r);
	page_unpin(st, loc_page(loc));
	return 0;
}

/* Return an in-use slot whose page the caller has pinned. */
static void slot_free(store_t *st, struct table *t, store_loc_t loc)
{
	(void)slot_unuse(st, t, loc);      /* pinned: cannot fail */
	slot_link(st, t, loc);
}

/* ---- store ---- */

static void *map_lazy(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* o == NULL: untiered (npages pool pages); else tiered (memory_bytes of
 * frames, o->capacity of logical pages). */
static int create(size_t memory_bytes, uint32_t page_size, const struct store_tier_opts *o,
		  store_t **out)
{
	if (page_size == 0)
		page_size = STORE_DEFAULT_PAGE;
	if (page_size < 4096 || page_size > (1u << 20) || (page_size & (page_size - 1)))
		return -EINVAL;
	uint64_t nframes = memory_bytes / page_size;
	uint64_t npages = o ? o->capacity / page_size : nframes;
	if (npages < 2 || npages > PAGE_MAX)
		return -EINVAL;
	if (o && (nframes < 3 || nframes > UINT32_MAX || !o->read_page))
		return -EINVAL;
	store_t *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (getrandom(&st->incarnation, sizeof(st->incarnation), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(st->incarnation)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		st->incarnation = (uint32_t)(ts.tv_nsec ^ ts.tv_sec ^ (uint64_t)getpid() << 16);
	}
	st->page_size = page_size;
	st->page_shift = (unsigned)__builtin_ctz(page_size);
	st->npages = npages;
	st->next_page = 1;
	st->pool_bytes = nframes * page_size;
	st->meta_bytes = ALIGN_UP(npages * sizeof(uint16_t), 4096);
	st->pool = map_lazy(st->pool_bytes);
	st->page_owner = map_lazy(st->meta_bytes);
	st->dirty = map_lazy(st->meta_bytes);
	pthread_mutex_init(&st->tables_mu, NULL);
	st->own_keys = true;   /* docs/design.md "Sizing a memory server": faster, more memory */
	{
		const char *e = getenv("LOTUS_HASH_INDEX");   /* 0: B+tree only (comparisons) */
		st->hash_index = !(e && strcmp(e, "0") == 0);
	}
	int bad = !st->pool || !st->page_owner || !st->dirty;
	if (o && !bad) {
		st->tiered = 1;
		st->topts = *o;
		if (!st->topts.frame_wait_ms)
			st->topts.frame_wait_ms = 10000;
		st->nframes = (uint32_t)nframes;
		st->pstate_bytes = ALIGN_UP(npages * sizeof(uint64_t), 4096);
		st->pstate = map_lazy(st->pstate_bytes);
		st->frame_page = calloc(nframes, sizeof(*st->frame_page));
		st->free_fr = calloc(nframes, sizeof(*st->free_fr));
		pthread_mutex_init(&st->fr_mu, NULL);
		pthread_cond_init(&st->fr_cv, NULL);
		bad = !st->pstate || !st->frame_page || !st->free_fr;
		/* frame 0 unused; pop low frames first */
		for (uint32_t f = st->nframes - 1; !bad && f >= 1; f--)
			st->free_fr[st->nfree++] = f;
		st->low_water = (uint32_t)MIN((nframes - 1) / 16, 64);
		st->low_water = MAX(st->low_water,
				    (uint32_t)MIN(st->topts.reserve_frames, (nframes - 1) / 4));
		if (st->low_water < 1)
			st->low_water = 1;
	}
	if (bad) {
		store_destroy(st);
		return -ENOMEM;
	}
	*out = st;
	return 0;
}

int store_create(size_t memory_bytes, uint32_t page_size, store_t **out)
{
	return create(memory_bytes, page_size, NULL, out);
}

int store_create_tiered(size_t memory_bytes, uint32_t page_size,
			const struct store_tier_opts *o, store_t **out)
{
	if (!o)
		return -EINVAL;
	return create(memory_bytes, page_size, o, out);
}

int store_tiered(const store_t *st)
{
	return st->tiered;
}

uint64_t store_npages(const store_t *st)
{
	return st->npages;
}

void store_destroy(store_t *st)
{
	if (!st)
		return;
	for (unsigned i = 0; i < st->ntables; i++) {
		struct table *t = st->tables[i];
		index_destroy(t->ix);
		hidx_destroy(t->hx);
		for (unsigned s = 0; s < NSHARD; s++) {
			pthread_mutex_destroy(&t->shard[s].mu);
			free(t->shard[s].fl);
		}
		free(t);
	}
	if (st->tiered) {
		if (st->pstate)
			munmap(st->pstate, st->pstate_bytes);
		free(st->frame_page);
		free(st->free_fr);
		pthread_mutex_destroy(&st->fr_mu);
		pthread_cond_destroy(&st->fr_cv);
	}
	if (st->pool)
		munmap(st->pool, st->pool_bytes);
	if (st->page_owner)
		munmap(st->page_owner, st->meta_bytes);
	if (st->dirty)
		munmap(st->dirty, st->meta_bytes);
	pthread_mutex_destroy(&st->tables_mu);
	free(st);
}

/* Pick the extent size: the fewest pages wasting < 1/32, else the least waste. */
static void table_geometry(struct table *t, uint32_t page_size, uint32_t max_pages)
{
	uint64_t best_waste_ppm = UINT64_MAX;
	for (uint32_t k = 1; k <= max_pages; k++) {
		uint64_t bytes = (uint64_t)k * page_size;
		uint64_t n = (bytes - sizeof(struct extent_hdr)) / t->slot_size;
		if (n == 0)
			continue;
		if (n > SLOTS_MAX)
			n = SLOTS_MAX;
		uint64_t waste_ppm = (bytes - n * t->slot_size) * 1000000 / bytes;
		if (waste_ppm < best_waste_ppm) {
			best_waste_ppm = waste_ppm;
			t->ext_pages = k;
			t->nslots = (uint32_t)n;
		}
		if (waste_ppm * 32 < 1000000)
			break;
	}
}

static struct table *table_by_name(store_t *st, const char *name)
{
	unsigned n = LOAD_ACQ(&st->ntables);
	for (unsigned i = 0; i < n; i++)
		if (strcmp(st->tables[i]->name, name) == 0)
			return st->tables[i];
	return NULL;
}

static int table_new(store_t *st, const char *name, uint32_t max_value, struct table **out)
{
	struct table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->st = st;
	t->id = (uint16_t)st->ntables;
	t->max_value = max_value;
	t->slot_size = ALIGN_UP((uint32_t)sizeof(struct store_rec) + STORE_KEY_MAX + max_value, 8u);
	strcpy(t->name, name);
	table_geometry(t, st->page_size, st->tiered ? 1 : EXT_MAX_PAGES);
	if (!t->nslots) {          /* tiered: a slot must fit one page */
		log_error("store: table %s: a slot of %u bytes (max_value %u) does not fit one "
			  "%u-byte page of a tiered store", name, t->slot_size, max_value,
			  st->page_size);
		free(t);
		return LOTUS_ETOOBIG;
	}
	for (unsigned s = 0; s < NSHARD; s++)
		pthread_mutex_init(&t->shard[s].mu, NULL);
	/* a tiered store's index always owns its keys: it must never read a page */
	int rc = st->own_keys || st->tiered ? index_create_owned(&t->ix)
					     : index_create(table_key_fn, t, &t->ix);
	if (rc == 0 && st->hash_index && !st->tiered &&
	    (rc = hidx_create(table_hx_match, table_hx_rehash, t, &t->hx)) == 0)
		t->hx_on = 1;
	if (rc < 0) {
		index_destroy(t->ix);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

static void set_own_keys(store_t *st, bool own)
{
	pthread_mutex_lock(&st->tables_mu);
	st->own_keys = own;
	pthread_mutex_unlock(&st->tables_mu);
}

void store_index_own_keys(store_t *st)
{
	set_own_keys(st, true);
}

void store_index_borrow_keys(store_t *st)
{
	set_own_keys(st, false);
}

void store_index_hash(store_t *st, int on)
{
	pthread_mutex_lock(&st->tables_mu);
	st->hash_index = on != 0;
	pthread_mutex_unlock(&st->tables_mu);
}

int store_table_create(store_t *st, const char *name, uint32_t max_value, uint16_t *table_id)
{
	struct table *t;
	int rc = 0;

	if (!name || !*name)
		return -EINVAL;
	if (strlen(name) > STORE_TABLE_NAME_MAX)
		return LOTUS_ETOOBIG;
	if (max_value == 0)
		max_value = 1024;
	if (max_value > STORE_VALUE_MAX)
		return LOTUS_ETOOBIG;
	pthread_mutex_lock(&st->tables_mu);
	if ((t = table_by_name(st, name)) != NULL) {
		rc = t->max_value == max_value ? 0 : LOTUS_EEXISTS;
	} else if (st->ntables == STORE_MAX_TABLES) {
		rc = LOTUS_ENOSPACE;
	} else if ((rc = table_new(st, name, max_value, &t)) == 0) {
		STORE_REL(&st->tables[st->ntables], t);
		STORE_REL(&st->ntables, st->ntables + 1);
	}
	pthread_mutex_unlock(&st->tables_mu);
	if (rc == 0 && table_id)
		*table_id = t->id;
	return rc;
}

int store_table_find(store_t *st, const char *name, uint16_t *table_id, uint32_t *max_value)
{
	struct table *t = name ? table_by_name(st, name) : NULL;
	if (!t)
		return LOTUS_ENOTABLE;
	if (table_id)
		*table_id = t->id;
	if (max_value)
		*max_value = t->max_value;
	return 0;
}

unsigned store_table_count(store_t *st)
{
	return LOAD_ACQ(&st->ntables);
}

int store_table_info(store_t *st, uint16_t id, char *name, size_t len, uint32_t *max_value)
{
	struct table *t = table_get(st, id);
	if (!t)
		return LOTUS_ENOTABLE;
	if (name && len)
		snprintf(name, len, "%s", t->name);
	if (max_value)
		*max_value = t->max_value;
	return 0;
}

uint32_t store_table_max_value(store_t *st, uint16_t table)
{
	struct table *t = table_get(st, table);
	return t ? t->max_value : 0;
}

/* ---- records ---- */

static int check_key(const void *key, uint16_t klen)
{
	if (!key || klen == 0)
		return -EINVAL;
	return klen > STORE_KEY_MAX ? LOTUS_ETOOBIG : 0;
}

int store_get(store_t *st, uint16_t table, const void *key, uint16_t klen, store_loc_t *loc)
{
	struct table *t = table_get(st, table);
	if (!t)
		return LOTUS_ENOTABLE;
	int rc = check_key(key, klen);
	if (rc)
		return rc;
	uint64_t v;
	if (LOAD_ACQ(&t->hx_on))
		rc = hidx_get(t->hx, hidx_hash(key, klen), key, klen, &v);
	else
		rc = index_get(t->ix, key, klen, &v);
	if (rc == 0 && loc)
		*loc = v;
	return rc;
}

/* Put (key, val) into the free slot l of t and index it. */
static int insert_at(store_t *st, struct table *t, store_loc_t l, const void *key, uint16_t klen,
		     const void *val, uint32_t vlen, store_loc_t *loc)
{
	unsigned char *base;
	uint64_t page = loc_page(l);
	int rc = page_pin(st, page, PIN_WRITE, &base);
	if (rc) {
		slot_link(st, t, l);       /* still free (odd): back on a list */
		return rc;
	}
	struct store_rec *r = rec_in(t, base, loc_slot(l));
	uint32_t gen = LOAD(&r->gen) + 1;                  /* even: in use */
	l |= gen_tag(gen);
	r->table = t->id;
	r->version = __atomic_add_fetch(&st->vclock, 1, __ATOMIC_RELAXED);
	rec_key_store(r, key, klen);
	rec_value_store(r, val, vlen);
	STORE_REL(&r->gen, gen);
	uint64_t old = 0;
	rc = index_insert(t->ix, key, klen, l, &old);
	if (rc) {
		slot_free(st, t, l);
		page_unpin(st, page);
		if (rc == LOTUS_EEXISTS && loc)
			*loc = old;
		return rc;
	}
	table_hx_add(t, key, klen, l);
	mark_rec_dirty(st, t, page, r);
	page_unpin(st, page);
	__atomic_fetch_add(&t->shard[my_shard()].records, 1, __ATOMIC_RELAXED);
	if (loc)
		*loc = l;
	return 0;
}

int store_insert(store_t *st, uint16_t table, const void *key, uint16_t klen,
		 const void *val, uint32_t vlen, store_loc_t *loc)
{
	return store_insert_resv(st, NULL, table, key, klen, val, vlen, loc);
}

int store_update(store_t *st, store_loc_t loc, const void *val, uint32_t vlen)
{
	struct table *t = loc_table(st, loc);
	unsigned char *base;
	if (!t)
		return LOTUS_ENOTFOUND;
	if (vlen > t->max_value)
		return LOTUS_ETOOBIG;
	uint64_t page = loc_page(loc);
	int rc = page_pin(st, page, PIN_WRITE, &base);
	if (rc)
		return rc;
	struct store_rec *r = rec_in(t, base, loc_slot(loc));
	uint32_t gen = LOAD_ACQ(&r->gen);
	if ((gen & 1) || gen_tag(gen) != loc_gen(loc)) {
		rc = LOTUS_ENOTFOUND;
	} else {
		rec_value_store(r, val, vlen);
		r->version++;
		vclock_see(st, r->version);
		mark_rec_dirty(st, t, page, r);
	}
	page_unpin(st, page);
	return rc;
}

uint64_t store_rec_version(const store_t *st, const struct store_rec *r)
{
	return (uint64_t)st->incarnation << 32 | r->version;
}

int store_delete(store_t *st, uint16_t table, const void *key, uint16_t klen)
{
	return store_delete_resv(st, NULL, table, key, klen);
}

int store_insert_resv(store_t *st, store_resv_t **rp, uint16_t table, const void *key,
		      uint16_t klen, const void *val, uint32_t vlen, store_loc_t *loc)
{
	struct table *t = table_get(st, table);
	if (!t)
		return LOTUS_ENOTABLE;
	int rc = check_key(key, klen);
	if (rc)
		return rc;
	if (vlen > t->max_value)
		return LOTUS_ETOOBIG;
	struct resv_group *g = rp ? resv_group(*rp, table, 0) : NULL;
	store_loc_t l = g && g->n ? g->loc[--g->n] : slot_alloc(st, t);
	if (!l)
		return LOTUS_ENOSPACE;
	return insert_at(st, t, l, key, klen, val, vlen, loc);
}

int store_delete_resv(store_t *st, store_resv_t **rp, uint16_t table, const void *key,
		      uint16_t klen)
{
	struct table *t = table_get(st, table);
	if (!t)
		return LOTUS_ENOTABLE;
	int rc = check_key(key, klen);
	if (rc)
		return rc;
	uint64_t old, guess = 0;
	unsigned char *base;
	if (st->tiered) {
		/* Pin the record's page before it leaves the index, so that the
		 * slot's generation can be bumped (stale hints must fail). */
		if ((rc = index_get(t->ix, key, klen, &guess)) != 0)
			return rc;
		if ((rc = page_pin(st, loc_page(guess), PIN_WRITE, &base)) != 0)
			return rc;
	}
	rc = index_delete(t->ix, key, klen, &old);
	if (rc == 0)
		table_hx_del(t, key, klen, old);
	if (rc == 0 && (rc = slot_unuse(st, t, old)) != 0) {
		index_insert(t->ix, key, klen, old, NULL);   /* moved meanwhile, unreadable */
		table_hx_add(t, key, klen, old);
	}
	if (guess)
		page_unpin(st, loc_page(guess));
	if (rc)
		return rc;
	if (!rp || resv_push(rp, table, loc_make(loc_page(old), loc_slot(old), 0)) != 0)
		slot_link(st, t, old);
	__atomic_fetch_sub(&t->shard[my_shard()].records, 1, __ATOMIC_RELAXED);
	return 0;
}

uint64_t store_table_extent_bytes(store_t *st, uint16_t table, unsigned *slots_per_extent)
{
	struct table *t = table_get(st, table);
	if (!t)
		return 0;
	if (slots_per_extent)
		*slots_per_extent = t->nslots;
	return (uint64_t)t->ext_pages * st->page_size;
}

/* Does r (of a slot named by loc) hold loc's generation and (if key) key? */
static inline __attribute__((always_inline)) int rec_matches(const struct store_rec *r, store_loc_t loc,
							  const void *key, uint16_t klen)
{
	uint32_t gen = LOAD_ACQ(&r->gen);
	if ((gen & 1) || gen_tag(gen) != loc_gen(loc))
		return 0;
	return !key || rec_key_equal(r, key, klen);
}

/* ---- the hash point index (hashidx.h) ---- */

/* hidx_match_fn: does loc name a live record of t holding key? */
static int table_hx_match(void *ctx, uint64_t loc, const void *key, unsigned klen)
{
	struct table *t = ctx;
	return loc_table(t->st, loc) == t &&
	       rec_matches(slot_rec(t, loc_page(loc), loc_slot(loc)), loc, key, (uint16_t)klen);
}

/* hidx_rehash_fn: the hash of the key of the record at loc (the index's
 * writer mutex is held, and a record leaves the hash index before its slot
 * is freed, so a live entry's key is stable). */
static uint64_t table_hx_rehash(void *ctx, uint64_t loc)
{
	struct table *t = ctx;
	unsigned char buf[STORE_KEY_MAX];
	if (loc_table(t->st, loc) != t)
		return 0;
	unsigned n = rec_key_load(slot_rec(t, loc_page(loc), loc_slot(loc)), buf);
	return hidx_hash(buf, n);
}

void table_hx_add(struct table *t, const void *key, unsigned klen, store_loc_t l)
{
	if (!LOAD(&t->hx_on))
		return;
	if (hidx_put(t->hx, hidx_hash(key, klen), l) != 0) {
		/* no memory to grow it: the B+tree answers every lookup from now on */
		STORE_REL(&t->hx_on, 0);
		log_warn("store: table %s: no memory to grow its hash index: point lookups "
			 "use the B+tree from now on", t->name);
	}
}

void table_hx_del(struct table *t, const void *key, unsigned klen, store_loc_t l)
{
	if (LOAD(&t->hx_on))
		hidx_del(t->hx, hidx_hash(key, klen), l);
}

uint64_t store_lookup_prefetch(store_t *st, uint16_t table, const void *key, uint16_t klen)
{
	struct table *t = table_get(st, table);
	if (!t || !LOAD(&t->hx_on) || check_key(key, klen))
		return 0;
	uint64_t h = hidx_hash(key, klen);
	hidx_prefetch(t->hx, h);
	return h;          /* 0 (one hash in 2^64) only costs the guess */
}

store_loc_t store_lookup_guess(store_t *st, uint16_t table, uint64_t hash,
			       struct store_pf *pf)
{
	struct table *t = table_get(st, table);
	if (pf)
		pf->n = 0;
	if (!hash || !t || !LOAD(&t->hx_on))
		return 0;
	store_loc_t l = hidx_peek(t->hx, hash);
	if (l && loc_table(st, l) == t) {
		const char *r = (const char *)slot_rec(t, loc_page(l), loc_slot(l));
		__builtin_prefetch(r, 0, 3);
		__builtin_prefetch(r + CACHELINE, 0, 3);
		if (pf && t->slot_size > 2 * CACHELINE) {
			pf->p = r + 2 * CACHELINE;
			pf->n = (t->slot_size < 4096 ? t->slot_size : 4096) - 2 * CACHELINE;
		}
	}
	return l;
}

struct store_rec *store_rec_at(store_t *st, store_loc_t loc, uint16_t table,
			       const void *key, uint16_t klen)
{
	struct table *t;
	if (st->tiered)
		return NULL;       /* no pointer without a pin: store_rec_get */
	struct store_rec *r = loc_rec(st, loc, &t);
	if (!r || t->id != table || !rec_matches(r, loc, key, klen))
		return NULL;
	return r;
}

int store_rec_get(store_t *st, store_loc_t loc, uint16_t table, const void *key,
		  uint16_t klen, struct store_rec **out)
{
	struct table *t = loc_table(st, loc);
	if (!st->tiered) {
		struct store_rec *r;
		if (!t || t->id != table ||
		    !rec_matches(r = slot_rec(t, loc_page(loc), loc_slot(loc)), loc, key, klen))
			return LOTUS_ENOTFOUND;
		*out = r;
		return 0;
	}
	unsigned char *base;
	if (!t || t->id != table)
		return LOTUS_ENOTFOUND;
	int rc = tier_pin(st, loc_page(loc), PIN_READ, &base);
	if (rc)
		return rc;
	struct store_rec *r = rec_in(t, base, loc_slot(loc));
	if (!rec_matches(r, loc, key, klen)) {
		page_unpin(st, loc_page(loc));
		return LOTUS_ENOTFOUND;
	}
	*out = r;
	return 0;
}

void store_rec_put(store_t *st, store_loc_t loc)
{
	page_unpin(st, loc_page(loc));
}

/* ---- scan and stats ---- */

struct scan_ctx {
	store_scan_cb cb;
	void *arg;
};

static int scan_thunk(void *arg, const unsigned char *key, unsigned klen, uint64_t val)
{
	struct scan_ctx *c = arg;
	return c->cb(c->arg, key, (uint16_t)klen, val);
}

int store_scan(store_t *st, uint16_t table, const void *start, uint16_t slen,
	       unsigned limit, store_scan_cb cb, void *arg)
{
	struct table *t = table_get(st, table);
	if (!t)
		return LOTUS_ENOTABLE;
	if (slen > STORE_KEY_MAX)
		return LOTUS_ETOOBIG;
	struct scan_ctx c = { cb, arg };
	return index_scan(t->ix, start, start ? slen : 0, limit, scan_thunk, &c);
}

void store_stats(store_t *st, struct store_stats *out)
{
	unsigned n = LOAD_ACQ(&st->ntables);
	int64_t records = 0;
	uint64_t ibytes = 0, hentries = 0, htables = 0;
	for (unsigned i = 0; i < n; i++) {
		struct table *t = LOAD_ACQ(&st->tables[i]);
		for (unsigned s = 0; s < NSHARD; s++)
			records += LOAD(&t->shard[s].records);
		ibytes += index_bytes(t->ix);
		if (t->hx) {
			struct hidx_stats hs;
			hidx_stats(t->hx, &hs);
			ibytes += hs.bytes;
			if (LOAD(&t->hx_on)) {
				hentries += hs.entries;
				htables++;
			}
		}
	}
	out->records = records > 0 ? (uint64_t)records : 0;
	out->pages_used = LOAD(&st->next_page) - 1;
	out->pool_bytes = st->pool_bytes;
	out->index_bytes = ibytes;
	out->hash_entries = hentries;
	out->hash_tables = htables;
}
