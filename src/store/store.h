/*
 * store.h - the memory server's record store: tables, fixed-size pages in one
 * buffer pool, slots with generations, and one ordered index per table.
 *
 * Invariants:
 *  - A record never moves while it exists, so a store_loc_t is stable until the
 *    record is deleted.  Freeing a slot bumps its generation, so an old location
 *    (a cached hint) no longer validates.
 *  - Record *contents* are protected by the lock manager, not by the store: a
 *    caller reads a value only under an S or X lock on its key and writes it only
 *    under an X lock.  The store protects its own structures (index, free lists)
 *    and is safe to call from any thread.
 *  - Index readers never block writers for long (optimistic lock coupling).
 *  - Tiered stores (store_create_tiered): record bytes are reachable only
 *    through a pin (store_rec_get/put, store_page_get/put); a pointer is valid
 *    until its unpin.  A page that is not resident is read in by the thread
 *    that needs it (which may then fail with -EIO or LOTUS_ENOSPACE).
 *
 * Returns 0 or -errno, or LOTUS_ENOTFOUND / LOTUS_EEXISTS / LOTUS_ETOOBIG /
 * LOTUS_ENOSPACE / LOTUS_ENOTABLE.
 */
#ifndef LOTUS_STORE_H
#define LOTUS_STORE_H
#include <stddef.h>
#include <stdint.h>

#define STORE_KEY_MAX       128
#define STORE_VALUE_MAX     (64u * 1024)
#define STORE_DEFAULT_PAGE  8192u
#define STORE_MAX_TABLES    256
#define STORE_TABLE_NAME_MAX 63   /* addition: longer names give LOTUS_ETOOBIG */

/* page number (40 bits) | slot in page (12 bits) | generation (12 bits); 0 = none */
typedef uint64_t store_loc_t;

typedef struct store store_t;

/* The record as it sits in its slot.  The key follows the header, the value
 * follows the key.  value_len <= the table's max_value. */
struct store_rec {
	uint32_t gen;        /* slot generation; odd = free, even = in use (or a flag) */
	uint16_t key_len;
	uint16_t table;
	uint32_t value_len;
	uint32_t version;    /* update counter: see store_rec_version */
	unsigned char data[]; /* key, then value */
};
static inline const unsigned char *store_rec_key(const struct store_rec *r) { return r->data; }
static inline unsigned char *store_rec_value(struct store_rec *r) { return r->data + r->key_len; }

/* The record's version (lotus_txn_result_version): the store's incarnation
 * (random, new at each store_create) in the top 32 bits, the record's counter
 * below.  Every store_update adds 1 to the counter; an insert starts it above
 * every counter this store has handed out or rebuilt (a store-wide clock), so
 * a key deleted and inserted again never repeats a version it had.  The
 * counter is part of the record, so checkpoints and replay carry it; the
 * incarnation is not, so every version read after a restart differs from
 * every version read before it.  Read it under the record's lock. */
uint64_t store_rec_version(const store_t *st, const struct store_rec *r);

/* memory_bytes: size of the buffer pool (mapped lazily, so RSS follows use).
 * page_size: 0 for the default 8 KiB. */
int store_create(size_t memory_bytes, uint32_t page_size, store_t **out);
void store_destroy(store_t *st);

/* ---- tiered stores (data larger than memory) ----
 * The pool (memory_bytes) becomes a set of frames; records live in logical
 * pages 1..capacity/page_size, each resident in some frame or not resident
 * (its bytes then live wherever the durable side put them).  A location still
 * names a logical page.  Every extent is one page.  See store_tier.c. */
struct store_tier_opts {
	uint64_t capacity;          /* bytes of logical page space (> memory_bytes) */
	/* Read logical page `page` into buf (page_size bytes): 0 done, 1 there
	 * is no backing copy (the store zero-fills it), <0 -errno (the request
	 * that missed fails with -EIO).  Called by the thread that missed, with
	 * the page locked (nobody else can pin it), from any thread. */
	int (*read_page)(void *arg, uint64_t page, void *buf);
	/* Free frames fell below the low watermark (or a miss found only dirty
	 * victims): wake the page writers.  Cheap, any thread, may be NULL. */
	void (*want_frames)(void *arg);
	/* Optional: read pages[0..n) into bufs[0..n) in one batch (all LOCKED
	 * by the caller); res[i] as read_page's result.  Returns 0, or <0 when
	 * nothing was read.  store_prefetch's default reader. */
	int (*read_batch)(void *arg, const uint64_t *pages, void *const *bufs, unsigned n,
			  int *res);
	void *arg;
	unsigned frame_wait_ms;     /* a miss waits this long for a frame, 0: 10000 */
	/* Frames to keep free for reads that do not block (the memory server:
	 * --miss-depth x workers): a miss that parks takes a free frame or a
	 * clean victim without waiting, so the page writers start cleaning once
	 * fewer than this many are free (the low watermark is at least this,
	 * at most a quarter of the pool).  0: the default watermark alone. */
	unsigned reserve_frames;
};
int store_create_tiered(size_t memory_bytes, uint32_t page_size,
			const struct store_tier_opts *o, store_t **out);
int store_tiered(const store_t *st);         /* 1 for a tiered store */
/* Change frame_wait_ms of a tiered store (0: 10000); any thread, takes
 * effect at the next wait. */
void store_tier_set_frame_wait(store_t *st, unsigned ms);
uint64_t store_npages(const store_t *st);    /* logical pages (incl. page 0) */

/* Eviction, for the page writers.  A victim is a dirty unpinned page whose
 * CLOCK bit was clear; it is returned LOCKED (nobody can pin it until
 * store_evict_done) with its DIRTY flag cleared; buf is its frame. */
struct store_victim {
	uint64_t page;
	uint32_t frame;
	void *buf;
};
/* CLOCK over the frames of part `part` of `nparts` (a writer's share):
 * clears CLOCK bits as it passes, drops clean unpinned victims at once
 * (*dropped += n, may be NULL), and returns up to max dirty victims.  It
 * visits each frame of the part at most twice per call. */
size_t store_evict_pick(store_t *st, unsigned part, unsigned nparts,
			struct store_victim *v, size_t max, size_t *dropped);
/* status 0: the page was written to its backing copy: it becomes non-resident
 * and the frame free.  status < 0: it stays resident and DIRTY, unlocked
 * (counted as an eviction write error); nothing is lost. */
void store_evict_done(store_t *st, const struct store_victim *v, int status);
unsigned store_free_frames(const store_t *st);

/* Page access for the checkpointer and recovery (both kinds of store): pin
 * logical page `page` (faulting it in) and return its bytes, or NULL with
 * *err = -EIO / LOTUS_ENOSPACE / -EINVAL (page out of range).  Does not set
 * the CLOCK bit.  store_page_put unpins. */
void *store_page_get(store_t *st, uint64_t page, int *err);
void store_page_put(store_t *st, uint64_t page);

/* Lazy recovery of a tiered store, single thread, fresh store, tables
 * re-created first (as store_rebuild): index the records of the checkpoint
 * image img (page_size bytes) of logical page `page` and put its free slots
 * on the free lists; the page is installed resident and clean if a frame is
 * free (or must be changed: a stale duplicate is freed), else left
 * non-resident with a backing copy (read_page fetches it later).  An
 * all-zero / foreign page is skipped.  0, -EINVAL, -ENOMEM, LOTUS_ENOSPACE.
 * Then store_rebuild_finish(pages_used) sets the bump pointer. */
int store_rebuild_page(store_t *st, uint64_t page, const void *img);
int store_rebuild_finish(store_t *st, uint64_t pages_used);
/* Would store_rebuild_page accept img (the extent header and every in-use
 * slot)?  0 or -EINVAL; changes nothing (tables re-created first).  Recovery
 * checks a whole image this way before it rebuilds any page of it, so that a
 * CRC-valid image that holds a damaged copy is refused while the other image
 * can still be used. */
int store_rebuild_page_check(store_t *st, uint64_t page, const void *img);

struct store_tier_stats {
	uint64_t frames;            /* usable frames (pool pages - 1) */
	uint64_t pages;             /* logical pages (capacity / page size) */
	uint64_t resident, free_frames, dirty;   /* dirty: resident and DIRTY */
	uint64_t misses, miss_ns_sum, miss_ns_max, miss_errors, miss_zero;
	uint64_t evict_clean, evict_dirty, evict_errors, frame_waits, frame_timeouts;
	uint64_t prefetched, prefetch_batches, prefetch_errors;   /* store_prefetch */
	uint64_t misses_async;      /* of misses: through store_miss_begin/end */
};
/* Zeros (frames = 0) for an untiered store.  Any thread. */
void store_tier_stats(store_t *st, struct store_tier_stats *s);
/* Scan prefetch (tiered; 0 and nothing done on an untiered store): lock each
 * of pages[0..n) (at most 256) that is neither resident nor locked, take a
 * frame for it without waiting (as a miss does; no frame: stop), read them
 * all with one read_batch call (NULL: topts.read_batch; pages without a
 * backing copy are zero-filled, not read) and make the ones read resident,
 * unpinned and clean with REF set.  A failed read restores the page: its
 * later pin misses as usual.  Returns the pages made resident.  Any thread. */
int store_prefetch(store_t *st, const uint64_t *pages, unsigned n,
		   int (*read_batch)(void *arg, const uint64_t *pages, void *const *bufs,
				     unsigned n, int *res), void *arg);
int store_prefetch_enabled(const store_t *st);   /* tiered with topts.read_batch */
uint64_t store_loc_page(store_loc_t loc);        /* the logical page of a location */
/* Misses that do not block (the memory server's parked misses, issue 24).
 * store_miss_begin looks at logical page `page` of a tiered store without
 * waiting: 0 it is resident (or had no backing copy and was zero-filled
 * here: resident now); 1 it was not resident and is now LOCKED for the
 * caller with a frame taken for it (*m filled: read page_size bytes into
 * m->buf, then store_miss_end); STORE_MISS_BUSY someone else has it LOCKED
 * (being read in or written out); -EAGAIN no frame free without waiting (the
 * caller takes the blocking path).  store_miss_end(m, 0) makes the page
 * resident, unpinned, clean, REF set (so the CLOCK spares it until its
 * waiters pin it); res < 0 puts the frame back and restores the page (its
 * next pin misses again).  Counted as misses (misses_async).  Any thread. */
#define STORE_MISS_BUSY 2
struct store_miss {
	uint64_t page, old;
	uint32_t frame;
	void *buf;
	uint64_t t0;
};
int store_miss_begin(store_t *st, uint64_t page, struct store_miss *m);
/* Is the page resident and unlocked (a pin would not miss)?  Untiered: 1. */
int store_page_resident(const store_t *st, uint64_t page);
void store_miss_end(store_t *st, const struct store_miss *m, int res);
/* A thread that may hold pages LOCKED for reads of its own in flight (the
 * memory server's workers) names a poll function: a pin of that thread that
 * meets a LOCKED page calls it while it backs off, so that it can complete
 * its own reads instead of waiting for itself.  NULL: none.  This thread. */
void store_thread_poll(void (*poll)(void *arg), void *arg);
/* How the indexes of tables created after the call hold their keys.
 * Own (the default): the index keeps copies of keys longer than 8 bytes
 * (index_create_owned), so no index operation reads a record slot - what a
 * store whose pages may be non-resident needs, and faster for long keys;
 * costs index memory for keys longer than 8 bytes (docs/design.md, "Sizing a
 * memory server").  Borrow: the index reads ties from the record slots
 * (index_create with the slot's key); for tests and comparisons.  A tiered
 * store's indexes always own their keys (borrow is ignored there). */
void store_index_own_keys(store_t *st);
void store_index_borrow_keys(store_t *st);
/* Whether tables created after the call get a hash point index beside the
 * B+tree (untiered stores; default on, off when the environment has
 * LOTUS_HASH_INDEX=0).  With it, store_get finds a key with one read of a
 * 64-byte bucket and one of the record (hashidx.h); scans and ordered
 * inserts keep using the B+tree.  It reads record slots to check keys, so a
 * tiered store never has one (its lookups must not read pages). */
void store_index_hash(store_t *st, int on);

/* Create a table or return the existing one of that name (same max_value, else
 * LOTUS_EEXISTS).  max_value 0 means 1 KiB; at most STORE_VALUE_MAX. */
int store_table_create(store_t *st, const char *name, uint32_t max_value, uint16_t *table_id);
int store_table_find(store_t *st, const char *name, uint16_t *table_id, uint32_t *max_value);
uint32_t store_table_max_value(store_t *st, uint16_t table);  /* 0 if no such table */

/* Point operations through the index. */
int store_get(store_t *st, uint16_t table, const void *key, uint16_t klen, store_loc_t *loc);
int store_insert(store_t *st, uint16_t table, const void *key, uint16_t klen,
		 const void *val, uint32_t vlen, store_loc_t *loc);
/* Batched lookups (the memory server's AMAC phases: prefetch every
 * request's bucket, then every guessed record, then do the requests).
 * store_lookup_prefetch hashes the key and prefetches its hash bucket;
 * it returns a token for store_lookup_guess (0: the table has no hash
 * index, nothing to do).  store_lookup_guess reads the bucket and returns
 * the location of the first entry whose tag matches, with its record's
 * first lines prefetched, or 0.  The location is a guess, not checked
 * against the key: validate it as a hint (store_rec_get with the key).
 * Any thread; both change nothing. */
uint64_t store_lookup_prefetch(store_t *st, uint16_t table, const void *key, uint16_t klen);
/* pf (may be NULL): the guessed record's lines after the first two (its
 * value, up to 4 KiB), for store_pf_issue a few requests before the value
 * is copied out: a 1 KiB value is 16 lines from DRAM. */
struct store_pf {
	const char *p;
	uint32_t n;                /* bytes; 0: nothing to prefetch */
};
store_loc_t store_lookup_guess(store_t *st, uint16_t table, uint64_t token,
			       struct store_pf *pf);
static inline void store_pf_issue(const struct store_pf *pf)
{
	for (uint32_t off = 0; off < pf->n; off += 64)
		__builtin_prefetch(pf->p + off, 0, 3);
}
/* Overwrite the value in place (vlen <= max_value).  Location unchanged. */
int store_update(store_t *st, store_loc_t loc, const void *val, uint32_t vlen);
int store_delete(store_t *st, uint16_t table, const void *key, uint16_t klen);

/* ---- slot reservations (all or nothing commits) ----
 * Records live in fixed-size slots, so an update never needs space; only a
 * record that does not exist yet does.  A reservation holds free slots taken
 * out of the table's free lists (or carved from new extents) for one user, a
 * transaction: once store_reserve() returned 0, store_insert_resv() of that
 * table cannot fail for space.  store_delete_resv() puts the freed slot into
 * the reservation, so a later insert of the same commit can use it.  Taking
 * slots is atomic against other threads: a slot belongs to one reservation.
 * A reservation is used by one thread at a time (its owner's). */
typedef struct store_resv store_resv_t;
/* Take n more free slots of table into *rp (created on first use).  0, or
 * LOTUS_ENOSPACE / LOTUS_ENOTABLE / -ENOMEM with nothing more taken. */
int store_reserve(store_t *st, store_resv_t **rp, uint16_t table, unsigned n);
/* Slots of table that *r holds (r may be NULL). */
unsigned store_reserved(const store_resv_t *r, uint16_t table);
/* Put the slots r still holds back on the free lists, unpin the pages it
 * pinned, and free r (NULL: no-op). */
void store_resv_release(store_t *st, store_resv_t *r);
/* Tiered stores: keep the page of loc (store_resv_pin) or the pages of every
 * slot *rp holds (store_resv_pin_slots) pinned, hence resident, until
 * store_resv_release, so that the writes of a commit that was checked and
 * logged cannot miss when they are applied.  0, -EIO / LOTUS_ENOSPACE (a page
 * could not be read in), -ENOMEM, LOTUS_ENOTFOUND (loc names no slot).
 * No-ops (0) on an untiered store. */
int store_resv_pin(store_t *st, store_resv_t **rp, store_loc_t loc);
int store_resv_pin_slots(store_t *st, store_resv_t **rp);
/* store_insert / store_delete through a reservation (rp may point to NULL:
 * then as store_insert / store_delete, except that a delete starts one). */
int store_insert_resv(store_t *st, store_resv_t **rp, uint16_t table, const void *key,
		      uint16_t klen, const void *val, uint32_t vlen, store_loc_t *loc);
int store_delete_resv(store_t *st, store_resv_t **rp, uint16_t table, const void *key,
		      uint16_t klen);
/* The bytes of pool one more record of table may need (its slot size, or
 * one extent when a new extent must be carved for it): for messages that say
 * how much --memory would be needed. */
uint64_t store_table_extent_bytes(store_t *st, uint16_t table, unsigned *slots_per_extent);

/* The record at loc, or NULL if loc is stale (slot free, other generation).
 * If key is non-NULL it must also match (the shortcut-hint check).
 * UNTIERED stores only (a pointer without a pin); on a tiered store it
 * returns NULL.  Code that may run on either kind uses store_rec_get/put. */
struct store_rec *store_rec_at(store_t *st, store_loc_t loc, uint16_t table,
			       const void *key, uint16_t klen);

/* The record at loc, pinned: *out stays valid (its page resident, in the
 * same frame) until store_rec_put(st, loc).  Checks as store_rec_at.
 * 0, LOTUS_ENOTFOUND (stale loc, key mismatch), -EIO (the page was not
 * resident and reading it failed; nothing changed, a later call retries),
 * LOTUS_ENOSPACE (no frame could be freed in time).  Reading through the pin
 * sets the page's CLOCK bit; writing through it is for store_update only
 * (or call store_mark_dirty while still pinned).  On an untiered store this
 * is store_rec_at and the put does nothing. */
int store_rec_get(store_t *st, store_loc_t loc, uint16_t table, const void *key,
		  uint16_t klen, struct store_rec **out);
void store_rec_put(store_t *st, store_loc_t loc);

/* Ascending scan from the first key >= start.  cb returns 0 to continue, 1 to
 * stop.  At most limit records are visited.  Returns the number visited. */
typedef int (*store_scan_cb)(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc);
int store_scan(store_t *st, uint16_t table, const void *start, uint16_t slen,
	       unsigned limit, store_scan_cb cb, void *arg);

struct store_stats {
	uint64_t records, pages_used, pool_bytes, index_bytes;
	/* entries of the tables' hash indexes (those that have one and use it:
	 * then one per record) and how many of the tables have one */
	uint64_t hash_entries, hash_tables;
};
void store_stats(store_t *st, struct store_stats *out);

/* ---- additions for the I/O layer and the checkpointer (any thread) ---- */

/* The buffer pool: one contiguous region of *bytes (register it with io_uring
 * as one buffer).  Untiered: pool page p starts at base + p *
 * store_page_size().  Tiered: this is the frame region (frame f at base + f *
 * page size); reach logical pages through store_page_get. */
void *store_pool(store_t *st, size_t *bytes);
uint32_t store_page_size(const store_t *st);
/* Every store write marks the pool pages under the record dirty (for the
 * checkpointer: per logical page).  A caller that writes a value directly
 * through store_rec_value() calls this after, with the record still pinned. */
void store_mark_dirty(store_t *st, store_loc_t loc);
/* Collect and clear up to max dirty page numbers, from page *cursor on
 * (start with 0); advances *cursor.  Returns the number stored in pages;
 * fewer than max means the end of the used pages was reached.  A page written
 * after it was collected is marked again (fuzzy checkpoints). */
size_t store_dirty_collect(store_t *st, uint64_t *cursor, uint64_t *pages, size_t max);

/* Recovery.  On a fresh store: re-create the tables in their original order
 * (same ids, same max_value), read pool pages 1..pages_used (store_stats'
 * pages_used at checkpoint time) back into store_pool(), then call this.  It
 * walks the extent headers, adopts every extent, indexes the in-use slots and
 * puts the free ones on free lists.  An all-zero page (never written back) is
 * skipped.  Single thread, before any other use.  Returns 0, -EINVAL (a header
 * that does not match its table, a corrupt slot) or -ENOMEM.  A key found in
 * two slots (a fuzzy image caught a record that moved) keeps one copy: the
 * log replay that follows every rebuild settles the key's final value. */
int store_rebuild(store_t *st, uint64_t pages_used);   /* untiered only (-EINVAL) */
/* Would store_rebuild(pages_used) fail on the bytes now in the pool for a
 * header or a slot?  0, or -EINVAL with *bad_page (may be NULL) the first
 * page that it would refuse.  Changes nothing; untiered only. */
int store_rebuild_check(store_t *st, uint64_t pages_used, uint64_t *bad_page);

/* Addition for the checkpoint manifest (any thread): the number of tables
 * (their ids are 0..n-1, in creation order), and one table's name (copied,
 * NUL-terminated, truncated to len) and max_value.  0 or LOTUS_ENOTABLE. */
unsigned store_table_count(store_t *st);
int store_table_info(store_t *st, uint16_t id, char *name, size_t len, uint32_t *max_value);

#endif
