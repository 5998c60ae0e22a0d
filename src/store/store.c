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
 * (value_len/reserved) as locations without generation.  A thread whose shard
 * is empty takes free slots from the other shards before it carves a new
 * extent, so deletes on one thread and inserts on another do not grow the
 * table; with the pool exhausted it also takes the others' partly carved
 * extents before failing with LOTUS_ENOSPACE.
 *
 * Reservations (all-or-nothing commits).  A struct store_resv holds free
 * slots, per table, popped off the free lists by store_reserve() exactly as
 * an insert would pop them; while held they are on no list (still odd, so
 * free in a checkpoint image).  store_insert_resv() takes its slot from the
 * reservation, store_delete_resv() gives the freed slot to it, and
 * store_resv_release() links whatever is left back onto a free list.  Since
 * updates never need space (fixed-size slots), a caller that reserved one
 * slot per write of an absent key can apply them all without LOTUS_ENOSPACE.
 *
 * Thread rules: store_create/store_destroy from one thread with no other
 * users; everything else from any thread (store_rebuild_page: one thread
 * before other use).  Table creation takes one mutex;
 * table lookup is lock-free (tables are never dropped).  Key bytes and gen are
 * written and read with atomics because the index and store_rec_at read them
 * optimistically from slots that may be concurrently reused.  Record values are
 * the caller's (lock manager's) business.
 *
 * Dirty tracking for the checkpointer: one byte per pool page (tiered: per
 * logical page, apart from the state word's DIRTY), set by every
 * store write (and by store_mark_dirty() after writes through
 * store_rec_value), cleared by store_dirty_collect().
 *
 * Tiered stores (store_create_tiered; the default store is untiered and
 * none of this applies to it).  The pool becomes nframes frames (frame 0
 * unused) and the store holds npages = capacity / page_size logical pages,
 * which is what locations, page_owner[] and dirty[] are indexed by.  A
 * logical page has one 64-bit state word in pstate[]:
 *
 *   | frame (32) | pins (24) | BACKED DIRTY REF LOCKED RESIDENT (8) |
 *
 * RESIDENT: the page is in frame `frame`.  LOCKED: it is being read in (not
 * resident) or written out (a victim): nobody may pin it.  REF: the CLOCK bit,
 * set by every read or write pin.  DIRTY: the frame differs from the backing
 * copy.  BACKED: a backing copy exists (the page was written out once, or
 * rebuilt from an image); a page without one is zero-filled on a miss, no
 * read.  frame_page[f] maps a frame back to its page for the CLOCK hands.
 *
 * Pin: a CAS adding one pin (and REF, and DIRTY for a write) to a RESIDENT,
 * unlocked state; unpin: an atomic subtract.  Record bytes are touched only
 * between the two (store_rec_get/put for callers; the store's own writes pin
 * with DIRTY set before they write, so a page cannot be picked as a clean
 * victim while or after it changes).  A pinner that meets LOCKED backs off and
 * retries.  Miss: the thread CASes the non-resident state to LOCKED, takes a
 * frame (a free one; else it runs the CLOCK itself over all frames and drops
 * the first clean unpinned page whose REF is clear; else, only dirty or
 * pinned pages left, it calls want_frames and waits on fr_cv, bounded by
 * frame_wait_ms, then LOTUS_ENOSPACE), calls read_page (or zero-fills),
 * publishes the page RESIDENT with one pin, and counts the read's latency.
 * A failed read puts the frame back and restores the old state: -EIO for that
 * request only.  Dropping a clean page is one CAS from "resident, unpinned,
 * clean, REF clear" to "not resident", so it cannot race with a pin.
 *
 * Eviction (store_evict_pick, the page writers): writer `part` owns a slice
 * of the frames and a CLOCK hand over it; it clears REF bits as it passes,
 * drops clean victims, and returns dirty unpinned ones LOCKED with DIRTY
 * cleared (so nobody can pin or change the page while it is written).
 * store_evict_done(0) makes the page non-resident and BACKED and frees the
 * frame; a failed write makes it resident, DIRTY and unlocked again.
 * want_frames is called when a miss leaves fewer than low_water frames free.
 *
 * Scan prefetch (store_prefetch): for each page it locks a non-resident one
 * as a miss does (tier_lock_absent), takes a frame without waiting
 * (frame_try, the miss's first steps; none: the batch stops there), reads
 * all of them with one read_batch call and publishes each success resident,
 * unpinned, clean, REF set (tier_publish, as a miss does, without the pin);
 * a failed read puts the frame back and restores the state, so the later pin
 * just misses.  Counted apart from misses (prefetched, prefetch_batches).
 *
 * Layout rules that keep misses off the allocation paths: every extent is
 * one page (table_geometry with one page; a slot that does not fit one page
 * is LOTUS_ETOOBIG), and free slots live on per-shard DRAM arrays (fl[])
 * rather than linked through the slots, so allocating and freeing never read
 * a page.  Slot generations stay in the slots: an insert, a delete (which
 * pins the record's page before it leaves the index, so the bump cannot
 * fail halfway) and every location check pin the page.  The index of a
 * tiered table always owns its keys (index_create_owned), so lookups, inserts
 * and scans never read a page.
 * Recovery (store_rebuild_page) indexes one page image at a time and leaves
 * the page resident and clean if a frame is free, else non-resident BACKED.
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
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <time.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
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
	char name[STORE_TABLE_NAME_MAX + 1];
	struct shard shard[NSHARD];
};

struct store {
	unsigned char *pool;
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
	uint64_t resident, misses, miss_ns_sum, miss_ns_max, miss_errors, miss_zero;
	uint64_t evict_clean, evict_dirty, evict_errors, frame_waits, frame_timeouts;
	uint64_t prefetched, prefetch_batches, prefetch_errors;
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
static struct store_rec *loc_rec(store_t *st, store_loc_t loc, struct table **tp)
{
	struct table *t = loc_table(st, loc);
	if (!t)
		return NULL;
	*tp = t;
	return slot_rec(t, loc_page(loc), loc_slot(loc));
}

/* ---- tiered stores: frames, pins, misses, CLOCK ---- */

static void backoff(unsigned *spins)
{
	if (++*spins < 64) {
		__builtin_ia32_pause();
	} else if (*spins < 256) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

static void want_frames(store_t *st)
{
	if (st->topts.want_frames)
		st->topts.want_frames(st->topts.arg);
}

static void frame_put(store_t *st, uint32_t f)
{
	pthread_mutex_lock(&st->fr_mu);
	st->free_fr[st->nfree] = f;
	STORE(&st->nfree, st->nfree + 1);
	if (st->fr_waiters)
		pthread_cond_broadcast(&st->fr_cv);
	pthread_mutex_unlock(&st->fr_mu);
}

static int frame_pop(store_t *st, uint32_t *f)
{
	uint32_t left = 0;
	int got = 0;
	if (!LOAD(&st->nfree))
		return 0;
	pthread_mutex_lock(&st->fr_mu);
	if (st->nfree) {
		*f = st->free_fr[st->nfree - 1];
		STORE(&st->nfree, st->nfree - 1);
		left = st->nfree;
		got = 1;
	}
	pthread_mutex_unlock(&st->fr_mu);
	if (got && left < st->low_water)
		want_frames(st);
	return got;
}

/* Look at frame f for the CLOCK: 0 skip (free, locked, pinned, or its bit
 * was set: now cleared), 1 a clean victim was dropped (f is now the
 * caller's), 2 a dirty victim was locked for writing (*pagep). */
static int clock_visit(store_t *st, uint32_t f, int take_dirty, uint64_t *pagep)
{
	uint64_t page = LOAD_ACQ(&st->frame_page[f]);
	if (page == 0)
		return 0;
	uint64_t *w = &st->pstate[page];
	uint64_t s = LOAD_ACQ(w);
	for (;;) {
		if ((s & (PS_RESIDENT | PS_LOCKED)) != PS_RESIDENT || PS_FRAME(s) != f)
			return 0;
		if (s & PS_REF) {
			if (CAS(w, &s, s & ~PS_REF))
				return 0;
			continue;
		}
		if (PS_PINS(s))
			return 0;
		if (!(s & PS_DIRTY)) {
			if (!CAS(w, &s, s & PS_BACKED))
				continue;
			STORE(&st->frame_page[f], 0);
			__atomic_fetch_sub(&st->resident, 1, __ATOMIC_RELAXED);
			ADD(&st->evict_clean, 1);
			return 1;
		}
		if (!take_dirty)
			return 0;
		if (!CAS(w, &s, (s | PS_LOCKED) & ~PS_DIRTY))
			continue;
		*pagep = page;
		return 2;
	}
}

/* A miss found no free frame: drop a clean unpinned victim itself. */
static int clock_drop_one(store_t *st, uint32_t *f)
{
	uint32_t nf = st->nframes - 1;
	uint64_t dummy;
	for (uint32_t i = 0; i < 2 * nf; i++) {
		uint32_t c = 1 + (uint32_t)(ADD(&st->hand, 1) % nf);
		if (clock_visit(st, c, 0, &dummy) == 1) {
			*f = c;
			return 1;
		}
	}
	return 0;
}

/* A frame without waiting: a free one or a clean victim.  1 got one. */
static int frame_try(store_t *st, uint32_t *f)
{
	if (frame_pop(st, f))
		return 1;
	if (clock_drop_one(st, f)) {
		want_frames(st);
		return 1;
	}
	return 0;
}

/* A frame for a miss: a free one, a clean victim, or (only dirty ones left)
 * wait for the page writers, bounded.  0 or LOTUS_ENOSPACE. */
static int frame_get(store_t *st, uint32_t *f)
{
	uint64_t deadline = 0;
	for (;;) {
		if (frame_try(st, f))
			return 0;
		want_frames(st);
		uint64_t now = clock_now_ns();
		if (!deadline) {
			deadline = now + (uint64_t)st->topts.frame_wait_ms * 1000000u;
			ADD(&st->frame_waits, 1);
		} else if (now >= deadline) {
			ADD(&st->frame_timeouts, 1);
			return LOTUS_ENOSPACE;
		}
		struct timespec ts;
		clock_deadline_in(CLOCK_REALTIME, &ts, 2);
		pthread_mutex_lock(&st->fr_mu);
		st->fr_waiters++;
		if (!st->nfree)
			pthread_cond_timedwait(&st->fr_cv, &st->fr_mu, &ts);
		st->fr_waiters--;
		pthread_mutex_unlock(&st->fr_mu);
	}
}

/* The page, LOCKED by us (its state was s), is in frame f: make it resident
 * with `bits` (pins, REF, DIRTY) and BACKED as it was. */
static void tier_publish(store_t *st, uint64_t page, uint32_t f, uint64_t s, uint64_t bits)
{
	ADD(&st->resident, 1);
	STORE_REL(&st->frame_page[f], page);
	STORE_REL(&st->pstate[page], (uint64_t)f << 32 | PS_RESIDENT | (s & PS_BACKED) | bits);
}

/* The page is LOCKED by us (its state was s, not resident): bring it in. */
__attribute__((noinline)) static int tier_miss(store_t *st, uint64_t page, uint64_t s, uint64_t how, unsigned char **base)
{
	uint64_t *w = &st->pstate[page];
	uint32_t f;
	int rc = frame_get(st, &f);
	if (rc) {
		STORE_REL(w, s);
		return rc;
	}
	unsigned char *buf = st->pool + ((size_t)f << st->page_shift);
	uint64_t t0 = clock_now_ns();
	int r = (s & PS_BACKED) && st->topts.read_page ? st->topts.read_page(st->topts.arg, page, buf) : 1;
	if (r < 0) {
		frame_put(st, f);
		STORE_REL(w, s);
		if (ADD(&st->miss_errors, 1) < 10)
			log_warn("store: reading page %" PRIu64 " failed: %s", page, strerror(-r));
		return -EIO;
	}
	if (r == 1) {
		memset(buf, 0, st->page_size);
		ADD(&st->miss_zero, 1);
	} else {
		uint64_t ns = clock_now_ns() - t0, m = LOAD(&st->miss_ns_max);
		ADD(&st->miss_ns_sum, ns);
		while (ns > m && !__atomic_compare_exchange_n(&st->miss_ns_max, &m, ns, true,
							      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	ADD(&st->misses, 1);
	tier_publish(st, page, f, s, PS_PIN1 | how);
	*base = buf;
	return 0;
}

/* Try to lock a non-resident, unlocked page for reading it in: 1 locked (its
 * old state in *sp), 0 it is resident or someone else has it locked. */
static int tier_lock_absent(store_t *st, uint64_t page, uint64_t *sp)
{
	uint64_t *w = &st->pstate[page];
	uint64_t s = LOAD_ACQ(w);
	while (!(s & (PS_RESIDENT | PS_LOCKED)))
		if (CAS(w, &s, s | PS_LOCKED)) {
			*sp = s;
			return 1;
		}
	return 0;
}

__attribute__((noinline)) static int tier_pin(store_t *st, uint64_t page, uint64_t how, unsigned char **base)
{
	uint64_t *w = &st->pstate[page];
	uint64_t s = LOAD_ACQ(w);
	unsigned spins = 0;
	for (;;) {
		if ((s & (PS_RESIDENT | PS_LOCKED)) == PS_RESIDENT) {
			if (CAS(w, &s, (s + PS_PIN1) | how)) {
				*base = st->pool + ((size_t)PS_FRAME(s) << st->page_shift);
				return 0;
			}
		} else if (s & PS_LOCKED) {
			backoff(&spins);
			s = LOAD_ACQ(w);
		} else if (CAS(w, &s, s | PS_LOCKED)) {
			return tier_miss(st, page, s, how, base);
		}
	}
}

#define PF_MAX 256u

int store_prefetch(store_t *st, const uint64_t *pages, unsigned n,
		   int (*read_batch)(void *arg, const uint64_t *pages, void *const *bufs,
				     unsigned n, int *res), void *arg)
{
	if (!st->tiered)
		return 0;
	if (!read_batch) {
		read_batch = st->topts.read_batch;
		arg = st->topts.arg;
	}
	if (!read_batch || !n)
		return 0;
	uint64_t pg[PF_MAX], old[PF_MAX];
	uint32_t fr[PF_MAX];
	void *bufs[PF_MAX];
	int res[PF_MAX];
	unsigned k = 0, done = 0;
	n = MIN(n, PF_MAX);
	for (unsigned i = 0; i < n; i++) {
		uint64_t p = pages[i], s;
		int dup = 0;
		if (p == 0 || p >= st->npages)
			continue;
		for (unsigned j = 0; j < k && !dup; j++)
			dup = pg[j] == p;
		if (dup || !tier_lock_absent(st, p, &s))
			continue;
		uint32_t f;
		if (!frame_try(st, &f)) {    /* no frame without waiting: stop here */
			STORE_REL(&st->pstate[p], s);
			break;
		}
		unsigned char *buf = st->pool + ((size_t)f << st->page_shift);
		if (!(s & PS_BACKED)) {      /* no backing copy: zeros, as a miss */
			memset(buf, 0, st->page_size);
			ADD(&st->miss_zero, 1);
			tier_publish(st, p, f, s, PS_REF);
			continue;
		}
		pg[k] = p;
		old[k] = s;
		fr[k] = f;
		bufs[k] = buf;
		res[k] = -EIO;
		k++;
	}
	if (k) {
		int rc = read_batch(arg, pg, bufs, k, res);
		for (unsigned j = 0; j < k; j++) {
			if (rc == 0 && res[j] == 1) {
				memset(bufs[j], 0, st->page_size);
				res[j] = 0;
			}
			if (rc == 0 && res[j] == 0) {
				tier_publish(st, pg[j], fr[j], old[j], PS_REF);
				done++;
			} else {             /* the later pin misses normally */
				frame_put(st, fr[j]);
				STORE_REL(&st->pstate[pg[j]], old[j]);
				ADD(&st->prefetch_errors, 1);
			}
		}
		ADD(&st->prefetch_batches, 1);
		ADD(&st->prefetched, done);
	}
	return (int)done;
}

int store_prefetch_enabled(const store_t *st)
{
	return st->tiered && st->topts.read_batch;
}

uint64_t store_loc_page(store_loc_t loc)
{
	return loc_page(loc);
}

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

/* Free-list link, stored over value_len/reserved of a free slot. */
static inline uint64_t *rec_link(struct store_rec *r)
{
	return (uint64_t *)&r->value_len;
}

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

/* index_key_fn: the full key of the record at loc. */
static unsigned table_key_fn(void *ctx, uint64_t loc, unsigned char *buf)
{
	struct table *t = ctx;      /* untiered only: a tiered index owns its keys */
	if (loc_page(loc) == 0 || loc_page(loc) >= t->st->npages || loc_slot(loc) >= t->nslots)
		return 0;
	return rec_key_load(slot_rec(t, loc_page(loc), loc_slot(loc)), buf);
}

/* ---- dirty pages ---- */

static void mark_range_dirty(store_t *st, size_t off, size_t len)
{
	for (uint64_t p = off >> st->page_shift; p <= (off + len - 1) >> st->page_shift; p++)
		if (!LOAD(&st->dirty[p]))
			STORE(&st->dirty[p], 1);
}

/* r is a record of logical page `page` (a tiered page is pinned for write,
 * which set its DIRTY flag; the checkpointer's mark is separate). */
static void mark_rec_dirty(store_t *st, const struct table *t, uint64_t page,
			   const struct store_rec *r)
{
	if (st->tiered) {
		if (!LOAD(&st->dirty[page]))
			STORE(&st->dirty[page], 1);
		return;
	}
	mark_range_dirty(st, (const unsigned char *)r - st->pool, t->slot_size);
}

void store_mark_dirty(store_t *st, store_loc_t loc)
{
	struct table *t;
	if (st->tiered) {
		if (!(t = loc_table(st, loc)))
			return;
		uint64_t page = loc_page(loc);
		if (LOAD(&st->pstate[page]) & PS_RESIDENT)   /* the caller's pin keeps it so */
			__atomic_fetch_or(&st->pstate[page], PS_DIRTY, __ATOMIC_RELAXED);
		mark_rec_dirty(st, t, page, NULL);
		return;
	}
	struct store_rec *r = loc_rec(st, loc, &t);
	if (r)
		mark_rec_dirty(st, t, loc_page(loc), r);
}

size_t store_dirty_collect(store_t *st, uint64_t *cursor, uint64_t *pages, size_t max)
{
	uint64_t end = LOAD(&st->next_page), p = *cursor;
	size_t n = 0;
	for (; p < end && n < max; p++)
		if (LOAD(&st->dirty[p]) && __atomic_exchange_n(&st->dirty[p], 0, __ATOMIC_ACQ_REL))
			pages[n++] = p;
	*cursor = p;
	return n;
}

void *store_pool(store_t *st, size_t *bytes)
{
	if (bytes)
		*bytes = st->pool_bytes;
	return st->pool;
}

uint32_t store_page_size(const store_t *st)
{
	return st->page_size;
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
static int fl_push(struct shard *sh, store_loc_t l)
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
static store_loc_t slot_alloc(store_t *st, struct table *t)
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
static void slot_link(store_t *st, struct table *t, store_loc_t loc)
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
	if (rc < 0) {
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
	r->reserved = 0;
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
		mark_rec_dirty(st, t, page, r);
	}
	page_unpin(st, page);
	return rc;
}

int store_delete(store_t *st, uint16_t table, const void *key, uint16_t klen)
{
	return store_delete_resv(st, NULL, table, key, klen);
}

/* ---- reservations ---- */

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

/* The group of table (created if asked; a pointer valid until the next
 * creation), or NULL. */
static struct resv_group *resv_group(store_resv_t *r, uint16_t table, int create)
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

static int resv_push(store_resv_t **rp, uint16_t table, store_loc_t l)
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
	if (rc == 0 && (rc = slot_unuse(st, t, old)) != 0)
		index_insert(t->ix, key, klen, old, NULL);   /* moved meanwhile, unreadable */
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
	if (key) {
		unsigned char buf[STORE_KEY_MAX];
		if (klen != rec_key_load(r, buf) || memcmp(buf, key, klen) != 0)
			return 0;
	}
	return 1;
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
	for (unsigned i = 0; i < t->nslots; i++) {
		struct store_rec *r = slot_rec(t, p, i);
		store_loc_t l = loc_make(p, i, 0);
		if (r->gen & 1) {
			rebuild_free_slot(t, r, l, rr);
			continue;
		}
		if (r->key_len == 0 || r->key_len > STORE_KEY_MAX || r->value_len > t->max_value)
			return -EINVAL;
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
		if (rc)
			return rc;
		t->shard[0].records++;
	}
	st->page_owner[p] = (uint16_t)(t->id + 1);
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

/* ---- tiered stores: eviction, page access, stats ---- */

size_t store_evict_pick(store_t *st, unsigned part, unsigned nparts,
			struct store_victim *v, size_t max, size_t *dropped)
{
	if (!st->tiered || nparts == 0 || part >= nparts || max == 0)
		return 0;
	uint64_t nf = st->nframes - 1;
	uint64_t lo = 1 + nf * part / nparts, hi = 1 + nf * (part + 1) / nparts;
	if (hi <= lo)
		return 0;
	uint64_t *hand = &st->part_hand[part % EVICT_PARTS];
	size_t n = 0, freed = 0;
	for (uint64_t i = 0; i < 2 * (hi - lo) && n + freed < max; i++) {
		uint32_t f = (uint32_t)(lo + ADD(hand, 1) % (hi - lo));
		uint64_t page;
		int r = clock_visit(st, f, 1, &page);
		if (r == 1) {
			frame_put(st, f);
			freed++;
		} else if (r == 2) {
			v[n].page = page;
			v[n].frame = f;
			v[n].buf = st->pool + ((size_t)f << st->page_shift);
			n++;
		}
	}
	if (dropped)
		*dropped += freed;
	return n;
}

void store_evict_done(store_t *st, const struct store_victim *v, int status)
{
	uint64_t *w = &st->pstate[v->page];
	uint64_t s = LOAD(w);
	if (!(s & PS_LOCKED) || PS_FRAME(s) != v->frame) {
		log_error("store: evict_done for page %" PRIu64 " that is not a victim", v->page);
		return;
	}
	if (status < 0) {            /* stays resident; to be written again */
		ADD(&st->evict_errors, 1);
		STORE_REL(w, (s & ~PS_LOCKED) | PS_DIRTY);
		return;
	}
	STORE(&st->frame_page[v->frame], 0);
	__atomic_fetch_sub(&st->resident, 1, __ATOMIC_RELAXED);
	ADD(&st->evict_dirty, 1);
	STORE_REL(w, PS_BACKED);
	frame_put(st, v->frame);
}

unsigned store_free_frames(const store_t *st)
{
	return st->tiered ? LOAD(&st->nfree) : 0;
}

void *store_page_get(store_t *st, uint64_t page, int *err)
{
	unsigned char *base;
	int rc = page == 0 || page >= st->npages ? -EINVAL : page_pin(st, page, PIN_QUIET, &base);
	if (err)
		*err = rc;
	return rc ? NULL : base;
}

void store_page_put(store_t *st, uint64_t page)
{
	page_unpin(st, page);
}

void store_tier_stats(store_t *st, struct store_tier_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!st->tiered)
		return;
	s->frames = st->nframes - 1;
	s->pages = st->npages;
	s->resident = LOAD(&st->resident);
	s->free_frames = LOAD(&st->nfree);
	for (uint32_t f = 1; f < st->nframes; f++) {
		uint64_t page = LOAD(&st->frame_page[f]);
		if (page && (LOAD(&st->pstate[page]) & (PS_RESIDENT | PS_DIRTY)) ==
			    (PS_RESIDENT | PS_DIRTY))
			s->dirty++;
	}
	s->misses = LOAD(&st->misses);
	s->miss_ns_sum = LOAD(&st->miss_ns_sum);
	s->miss_ns_max = LOAD(&st->miss_ns_max);
	s->miss_errors = LOAD(&st->miss_errors);
	s->miss_zero = LOAD(&st->miss_zero);
	s->evict_clean = LOAD(&st->evict_clean);
	s->evict_dirty = LOAD(&st->evict_dirty);
	s->evict_errors = LOAD(&st->evict_errors);
	s->frame_waits = LOAD(&st->frame_waits);
	s->frame_timeouts = LOAD(&st->frame_timeouts);
	s->prefetched = LOAD(&st->prefetched);
	s->prefetch_batches = LOAD(&st->prefetch_batches);
	s->prefetch_errors = LOAD(&st->prefetch_errors);
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
	uint64_t ibytes = 0;
	for (unsigned i = 0; i < n; i++) {
		struct table *t = LOAD_ACQ(&st->tables[i]);
		for (unsigned s = 0; s < NSHARD; s++)
			records += LOAD(&t->shard[s].records);
		ibytes += index_bytes(t->ix);
	}
	out->records = records > 0 ? (uint64_t)records : 0;
	out->pages_used = LOAD(&st->next_page) - 1;
	out->pool_bytes = st->pool_bytes;
	out->index_bytes = ibytes;
}
