/*
 * store_int.h - the record store's internals, shared by its files and by no
 * one else: the structs of a store, its tables and their shards, and of a
 * reservation; the layout of a location; the helpers every file needs.
 * Only src/store/store*.c include it (scripts/check-layers checks).
 *
 *   store.c       the store and its tables, locations and slots, slot
 *                 allocation, records, scan and stats
 *   store_tier.c  the tier buffer manager: frames, pins, misses, CLOCK,
 *                 dirty pages, eviction, page access, tier stats
 *   store_resv.c  reservations (all-or-nothing commits)
 *   store_rebuild.c
 *                 recovery from a checkpoint image
 *
 * What runs per record access stays static inline here (locations, the
 * untiered side of page_pin/page_unpin, the dirty marks), so that no call on
 * the hot path became an out-of-line one when store.c was split.
 */
#ifndef LOTUS_STORE_INT_H
#define LOTUS_STORE_INT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include "common/common.h"
#include "store/hashidx.h"
#include "store/index.h"
#include "store/store.h"

#define NSHARD           16
#define EXTENT_MAGIC     0x5845544cu   /* "LTEX" (little-endian) */
#define EXT_MAX_PAGES    64
#define SLOTS_MAX        4096u
#define LOC_GEN_BITS     12
#define LOC_SLOT_BITS    12
#define LOC_PAGE_SHIFT   (LOC_GEN_BITS + LOC_SLOT_BITS)
#define PAGE_MAX         ((1ull << 40) - 1)

#define LOAD(p)          __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v)      __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define LOAD_ACQ(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v)        __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define CAS(p, e, n)     __atomic_compare_exchange_n((p), (e), (n), false, __ATOMIC_ACQ_REL, \
						 __ATOMIC_ACQUIRE)

/* Tiered stores: the state word of a logical page. */
#define PS_RESIDENT      0x01ull   /* in frame PS_FRAME(s) */
#define PS_LOCKED        0x02ull   /* being read in or written out: no pins */
#define PS_REF           0x04ull   /* CLOCK bit: used since the hand passed */
#define PS_DIRTY         0x08ull   /* frame differs from the backing copy */
#define PS_BACKED        0x10ull   /* a backing copy exists (else: zeros) */
#define PS_PIN1          (1ull << 8)
#define PS_PINS(s)       (((s) >> 8) & 0xffffffu)
#define PS_FRAME(s)      ((uint32_t)((s) >> 32))
#define PIN_QUIET        0ull                    /* checkpointer, key reads */
#define PIN_READ         PS_REF
#define PIN_WRITE        (PS_REF | PS_DIRTY)
#define EVICT_PARTS      64

_Static_assert(sizeof(struct store_rec) == 16, "record header is 16 bytes");

/* At the start of an extent's first page.  16 bytes, so that an 8 KiB page
 * holds seven slots of a 1 KiB-value table (7 * 1168 + 16 = 8192). */
struct extent_hdr {
	uint32_t magic;
	uint16_t table;
	uint16_t npages;
	uint16_t nslots;     /* 0 means SLOTS_MAX */
	uint16_t reserved;
	uint32_t slot_size;
};
_Static_assert(sizeof(struct extent_hdr) == 16, "extent header is 16 bytes");

struct shard {
	pthread_mutex_t mu;
	store_loc_t free;          /* free slots (loc without gen), 0 = none */
	uint64_t carve_page;       /* extent being carved, 0 = none */
	uint32_t carve_next;       /* its next never-used slot */
	int64_t records;           /* inserts - deletes through this shard (atomic) */
	store_loc_t *fl;           /* tiered: free slots in DRAM, fl[0..fl_n) */
	uint32_t fl_n, fl_cap;
} __attribute__((aligned(CACHELINE)));

struct table {
	store_t *st;
	uint16_t id;
	uint32_t max_value;
	uint32_t slot_size;
	uint32_t nslots;           /* per extent */
	uint32_t ext_pages;
	index_t *ix;
	/* The hash point index (untiered stores): point lookups use it while
	 * hx_on (atomic; cleared for good if a put ever fails for memory, then
	 * the B+tree answers them all).  Every insert into and delete from ix
	 * is mirrored here (table_hx_add/table_hx_del). */
	hidx_t *hx;
	int hx_on;
	char name[STORE_TABLE_NAME_MAX + 1];
	struct shard shard[NSHARD];
};

struct store {
	unsigned char *pool;
	uint32_t incarnation;      /* top half of the versions (store_rec_version) */
	uint32_t vclock;           /* above every record counter (atomic) */
	size_t pool_bytes;
	uint32_t page_size;
	unsigned page_shift;
	uint64_t npages;
	uint64_t next_page;        /* bump pointer (atomic) */
	uint16_t *page_owner;      /* per page: table + 1 on extent first pages */
	uint8_t *dirty;            /* per page */
	size_t meta_bytes;         /* of each of the two arrays above (mapped) */
	pthread_mutex_t tables_mu; /* serialises store_table_create */
	unsigned ntables;          /* atomic; tables[0..ntables) are set */
	bool own_keys;             /* new tables' indexes copy their keys (index.h) */
	bool hash_index;           /* new tables get a hash point index (untiered) */
	struct table *tables[STORE_MAX_TABLES];

	/* tiered stores only (tiered == 0: all zero) */
	int tiered;
	struct store_tier_opts topts;
	uint64_t *pstate;          /* per logical page: the state word */
	size_t pstate_bytes;
	uint32_t nframes;          /* frames incl. the unused frame 0 */
	uint64_t *frame_page;      /* per frame: its logical page (0: none) */
	uint32_t *free_fr;         /* free frames, free_fr[0..nfree) */
	uint32_t nfree;            /* atomic reads; written under fr_mu */
	uint32_t low_water;
	unsigned fr_waiters;       /* under fr_mu */
	pthread_mutex_t fr_mu;
	pthread_cond_t fr_cv;
	uint64_t hand;             /* CLOCK hand of misses (atomic) */
	uint64_t part_hand[EVICT_PARTS];
	uint64_t resident, misses, miss_ns_sum, miss_ns_max, miss_errors, miss_zero, misses_async;
	uint64_t evict_clean, evict_dirty, evict_errors, frame_waits, frame_timeouts;
	uint64_t prefetched, prefetch_batches, prefetch_errors;
};

/* ---- reservations (store_resv.c) ---- */

/* The free slots of one table that a reservation holds (locations, no tag). */
struct resv_group {
	uint16_t table;
	unsigned n, cap;
	unsigned ix_n;                /* inserts reserved in the table's index */
	store_loc_t *loc;
};

struct store_resv {
	unsigned ngroups, cap;
	struct resv_group *group;     /* one per table touched */
	uint64_t *pinned;             /* tiered: pages pinned for the holder */
	unsigned npinned, cap_pinned;
};

/* ---- locations and slots ---- */

static inline uint64_t loc_page(store_loc_t l) { return l >> LOC_PAGE_SHIFT; }
static inline unsigned loc_slot(store_loc_t l) { return (l >> LOC_GEN_BITS) & (SLOTS_MAX - 1); }
static inline unsigned loc_gen(store_loc_t l) { return l & ((1u << LOC_GEN_BITS) - 1); }
static inline unsigned gen_tag(uint32_t gen) { return (gen >> 1) & ((1u << LOC_GEN_BITS) - 1); }

static inline store_loc_t loc_make(uint64_t page, unsigned slot, unsigned tag)
{
	return page << LOC_PAGE_SHIFT | (store_loc_t)slot << LOC_GEN_BITS | tag;
}

static inline struct store_rec *slot_rec(const struct table *t, uint64_t page, unsigned slot)
{
	return (struct store_rec *)(t->st->pool + (page << t->st->page_shift) +
				    sizeof(struct extent_hdr) + (size_t)slot * t->slot_size);
}

/* Slot `slot` of the one-page (tiered) or first-page (untiered) extent
 * whose bytes start at base. */
static inline struct store_rec *rec_in(const struct table *t, unsigned char *base, unsigned slot)
{
	return (struct store_rec *)(base + sizeof(struct extent_hdr) + (size_t)slot * t->slot_size);
}

static inline struct table *table_get(store_t *st, unsigned id)
{
	if (id >= LOAD_ACQ(&st->ntables))
		return NULL;
	return LOAD_ACQ(&st->tables[id]);
}

/* The table owning loc's extent, or NULL if loc cannot name a slot
 * (generation not checked). */
static inline __attribute__((always_inline)) struct table *loc_table(store_t *st, store_loc_t loc)
{
	uint64_t page = loc_page(loc);
	if (page == 0 || page >= st->npages)
		return NULL;
	unsigned owner = LOAD_ACQ(&st->page_owner[page]);
	struct table *t = owner ? table_get(st, owner - 1) : NULL;
	if (!t || loc_slot(loc) >= t->nslots)
		return NULL;
	return t;
}

/* Untiered: the table owning loc's extent and the slot's record, or NULL. */
static inline struct store_rec *loc_rec(store_t *st, store_loc_t loc, struct table **tp)
{
	struct table *t = loc_table(st, loc);
	if (!t)
		return NULL;
	*tp = t;
	return slot_rec(t, loc_page(loc), loc_slot(loc));
}

/* ---- pages (store_tier.c for a tiered store) ---- */

/* Pin a page of a tiered store: page_pin's tiered side. */
int tier_pin(store_t *st, uint64_t page, uint64_t how, unsigned char **base);
/* A free frame (frame_pop), or a clean victim the CLOCK dropped
 * (clock_drop_one), for store_rebuild_page: 1 got one in *f, 0 none. */
int frame_pop(store_t *st, uint32_t *f);
int clock_drop_one(store_t *st, uint32_t *f);

/* Pin logical page `page` (valid: 1..npages-1) and get its bytes.  0, -EIO
 * or LOTUS_ENOSPACE.  Untiered: the pool page, never fails. */
static inline int page_pin(store_t *st, uint64_t page, uint64_t how, unsigned char **base)
{
	if (!st->tiered) {
		*base = st->pool + (page << st->page_shift);
		return 0;
	}
	return tier_pin(st, page, how, base);
}

static inline void page_unpin(store_t *st, uint64_t page)
{
	if (st->tiered)
		__atomic_fetch_sub(&st->pstate[page], PS_PIN1, __ATOMIC_RELEASE);
}

/* ---- dirty pages (store_tier.c) ---- */

static inline void mark_range_dirty(store_t *st, size_t off, size_t len)
{
	for (uint64_t p = off >> st->page_shift; p <= (off + len - 1) >> st->page_shift; p++)
		if (!LOAD(&st->dirty[p]))
			STORE(&st->dirty[p], 1);
}

/* r is a record of logical page `page` (a tiered page is pinned for write,
 * which set its DIRTY flag; the checkpointer's mark is separate). */
static inline void mark_rec_dirty(store_t *st, const struct table *t, uint64_t page,
				  const struct store_rec *r)
{
	if (st->tiered) {
		if (!LOAD(&st->dirty[page]))
			STORE(&st->dirty[page], 1);
		return;
	}
	mark_range_dirty(st, (const unsigned char *)r - st->pool, t->slot_size);
}

/* ---- shared by the files ---- */

/* Free-list link, stored over value_len/version of a free slot. */
static inline uint64_t *rec_link(struct store_rec *r)
{
	return (uint64_t *)&r->value_len;
}

/* store.c: a record's counter c is now in the store (rebuilt, replayed or
 * updated): keep the clock at or above it. */
static inline void vclock_see(store_t *st, uint32_t c)
{
	uint32_t v = __atomic_load_n(&st->vclock, __ATOMIC_RELAXED);
	while (c > v && !__atomic_compare_exchange_n(&st->vclock, &v, c, 1, __ATOMIC_RELAXED,
						     __ATOMIC_RELAXED))
		;
}

/* store.c: take a free slot of t (0: no space); put one back; push one on a
 * tiered shard's DRAM free list (under its mutex, or before other use). */
store_loc_t slot_alloc(store_t *st, struct table *t);
void slot_link(store_t *st, struct table *t, store_loc_t loc);
int fl_push(struct shard *sh, store_loc_t l);

/* store.c: mirror an insert into / a delete from t->ix in t->hx (no-ops
 * without a hash index). */
void table_hx_add(struct table *t, const void *key, unsigned klen, store_loc_t l);
void table_hx_del(struct table *t, const void *key, unsigned klen, store_loc_t l);

/* store_resv.c: the reservation's group of a table (created if asked), and
 * a free slot handed to a reservation. */
struct resv_group *resv_group(store_resv_t *r, uint16_t table, int create);
int resv_push(store_resv_t **rp, uint16_t table, store_loc_t l);

#endif
