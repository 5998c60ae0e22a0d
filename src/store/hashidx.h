/*
 * hashidx.h - a concurrent hash point index: key hash -> 64-bit value (a
 * record location), beside a table's B+tree (index.h), for point lookups.
 *
 * The index holds no keys.  Each entry is a 16-bit tag of the key's hash and
 * the value; a lookup hands every value whose tag matches to the owner's
 * match function, which reads the record and says whether it holds the key
 * (and is live).  Growth needs each entry's hash again: the owner's rehash
 * function gives the hash of the key behind a value.  So a lookup costs one
 * cache line of the index plus the record it finds.
 *
 * Values are unique (one value names one record): delete removes the entry
 * of a value, not of a key.  put adds an entry and never looks for an older
 * one of the same key: the owner inserts a key only once it knows it is new
 * (its B+tree said so).  An entry left behind by a race of the owner (a value
 * whose record was freed) is harmless: match refuses it, and it disappears
 * at the next rehash of its bucket.
 *
 * Threads: hidx_get/hidx_peek/hidx_prefetch from any thread at any time,
 * lock-free (readers never write shared memory).  Writers (put, del)
 * serialise on one mutex per index, held for a few bucket writes.
 *
 * Returns 0, LOTUS_ENOTFOUND or -ENOMEM.
 */
#ifndef LOTUS_STORE_HASHIDX_H
#define LOTUS_STORE_HASHIDX_H
#include <stddef.h>
#include <stdint.h>

typedef struct hidx hidx_t;

/* Does the record behind val hold key (and is it live)?  1 or 0.  Called
 * from any thread, with values that may have just been deleted: it must not
 * fault on those (and say 0). */
typedef int (*hidx_match_fn)(void *ctx, uint64_t val, const void *key, unsigned klen);
/* The hidx_hash of the key behind val (a value being migrated by a
 * rehash; called under the writer mutex).  A stale val may give any hash. */
typedef uint64_t (*hidx_rehash_fn)(void *ctx, uint64_t val);

int hidx_create(hidx_match_fn match, hidx_rehash_fn rehash, void *ctx, hidx_t **out);
void hidx_destroy(hidx_t *h);      /* no other thread may be using it */

uint64_t hidx_hash(const void *key, unsigned klen);

/* 0 with *val, or LOTUS_ENOTFOUND.  hash = hidx_hash(key, klen). */
int hidx_get(hidx_t *h, uint64_t hash, const void *key, unsigned klen, uint64_t *val);
/* Add (hash, val).  0 or -ENOMEM (the index is full and could not grow:
 * the entry is not there). */
int hidx_put(hidx_t *h, uint64_t hash, uint64_t val);
/* Remove the entry (hash, val).  0 or LOTUS_ENOTFOUND. */
int hidx_del(hidx_t *h, uint64_t hash, uint64_t val);

/* Batched lookups (AMAC): prefetch the bucket of hash; later peek returns
 * the first value whose tag matches (unverified: a guess the caller checks),
 * or 0. */
void hidx_prefetch(hidx_t *h, uint64_t hash);
uint64_t hidx_peek(hidx_t *h, uint64_t hash);

struct hidx_stats {
	uint64_t entries;       /* entries held (both tables while migrating) */
	uint64_t buckets;       /* of the current table */
	uint64_t bytes;         /* bucket memory mapped and in use */
	uint64_t rehashes;      /* migrations started (growth or clean-up) */
	uint64_t retired;       /* finished tables kept mapped (given back, for reuse) */
	uint64_t retired_bytes; /* their mappings (not in bytes: no memory in use) */
	uint64_t reused;        /* migrations that took a retired table, not a new one */
	int migrating;
};
void hidx_stats(hidx_t *h, struct hidx_stats *s);

#endif
