/*
 * cache.h - the compute server's record cache (the Lotus paper, "Two-sided
 * RDMA Striking Back for Disaggregated Memory Databases", record-level caching).  One cache per compute process, shared by its
 * threads; capacity in bytes; admission with a probability; eviction of the
 * least frequently used record (sampled LFU).
 *
 * Two kinds of entry, one per partitioning mode:
 *   hint  (non-partitioned)  key -> record location in its memory server.  A
 *         hint is only a shortcut: the memory server validates it, so a stale
 *         hint costs an index lookup, never a wrong answer.  Evicting a hint
 *         needs no coherence work.
 *   data  (co-partitioned)   key -> the record's value, clean or dirty.  This
 *         compute server owns the key, so no other compute server caches it.
 *         A dirty entry is written back through the writeback callback when
 *         it is evicted (or flushed), under the entry's latch, so no reader
 *         or writer of that key sees it half-written; a clean one is dropped.
 *
 * Threads: every function may be called from any thread concurrently.  The
 * writeback callback runs in the thread that caused the eviction (or called
 * rcache_flush), with the entry's latch held and no other cache latch; it
 * must not call back into the cache.  It returns 0, or an error, in which
 * case the entry stays dirty in the cache and eviction picks another.
 *
 * Sizes: an entry's charge is its key + value + a fixed overhead, so the
 * cache never holds more than capacity bytes of entries.
 */
#ifndef LOTUS_CACHE_H
#define LOTUS_CACHE_H
#include <stdbool.h>
#include <stdint.h>

typedef struct rcache rcache_t;

typedef int (*rcache_writeback_fn)(void *arg, uint32_t table, const void *key, uint16_t klen,
				   const void *value, uint32_t vlen);

/* capacity 0 is allowed (caches nothing).  admit: probability in [0,1] that a
 * miss is admitted.  seed: for the admission draws. */
int rcache_create(uint64_t capacity, double admit, uint64_t seed, rcache_writeback_fn wb,
		  void *wb_arg, rcache_t **out);
/* Flushes nothing: call rcache_flush() first to write dirty entries back. */
void rcache_destroy(rcache_t *c);

/* Hints.  get: 1 and *loc on a hit, 0 on a miss (the access counts towards the
 * entry's frequency).  put: admit (with the admission probability unless
 * the key is already cached) or replace.  drop: forget. */
int rcache_hint_get(rcache_t *c, uint32_t table, const void *key, uint16_t klen, uint64_t *loc);
void rcache_hint_put(rcache_t *c, uint32_t table, const void *key, uint16_t klen, uint64_t loc);
void rcache_drop(rcache_t *c, uint32_t table, const void *key, uint16_t klen);

/* Data.  read: 1 and the value copied into buf (up to cap; *vlen = full
 * length) on a hit, 0 on a miss.  fill: admit a clean value fetched from the
 * memory server (admission probability applies; never replaces a dirty
 * entry).  write: store a value and mark it dirty (always admitted: a dirty
 * value must not be lost; may evict others, writing them back).  Returns 0 or
 * -ENOMEM / the writeback error when no room can be made.  After a failed
 * write the key is not cached (an older value for it, even dirty, is dropped
 * unwritten): the caller must write the value through. */
int rcache_data_read(rcache_t *c, uint32_t table, const void *key, uint16_t klen, void *buf,
		     uint32_t cap, uint32_t *vlen);
int rcache_data_fill(rcache_t *c, uint32_t table, const void *key, uint16_t klen,
		     const void *value, uint32_t vlen);
int rcache_data_write(rcache_t *c, uint32_t table, const void *key, uint16_t klen,
		      const void *value, uint32_t vlen);
/* Forget a data entry without writing it back (e.g. the key was deleted). */
void rcache_data_drop(rcache_t *c, uint32_t table, const void *key, uint16_t klen);

/* Write back every dirty entry (clean shutdown).  Returns the number written
 * or the first error. */
int rcache_flush(rcache_t *c);

struct rcache_stats {
	uint64_t hits, misses, admits, rejects, evictions, writebacks, writeback_errors;
	uint64_t entries, bytes, capacity;
};
void rcache_stats(rcache_t *c, struct rcache_stats *out);

/* The bytes an entry charges against capacity: klen + vlen + a fixed
 * overhead (vlen 0 for a hint).  For sizing a cache in entries. */
uint64_t rcache_entry_charge(uint16_t klen, uint32_t vlen);

#endif
