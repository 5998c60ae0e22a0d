/*
 * index.h - a concurrent ordered index (B+tree with optimistic lock coupling)
 * mapping byte-string keys (1..INDEX_KEY_MAX bytes, memcmp-then-length order)
 * to 64-bit values.
 *
 * Two ways to hold keys:
 *  - borrowed (index_create): the index stores only an 8-byte key prefix and
 *    the key length per leaf entry.  When two keys longer than 8 bytes share
 *    that prefix, it asks the owner for the full key of an entry through
 *    index_key_fn(value).  The owner promises that the key behind a value
 *    never changes while the value is in the index, and that reading it after
 *    the value was removed is harmless (memory stays mapped); the index
 *    validates such reads with the leaf's version.
 *  - owned (index_create_owned): the index keeps a copy of every key longer
 *    than 8 bytes itself and never calls back, so no index operation touches
 *    the owner's memory (a tiered store's record pages may not be resident).
 *    index_bytes() counts the copies.
 * Both behave the same otherwise (order, results, threads, errors).
 *
 * Threads: every function except index_create/index_destroy may be called
 * from any thread at the same time.  Readers (get, scan) never write shared
 * memory; writers latch one or two nodes briefly.
 *
 * Returns 0, LOTUS_ENOTFOUND, LOTUS_EEXISTS, LOTUS_ETOOBIG or -ENOMEM.
 */
#ifndef LOTUS_STORE_INDEX_H
#define LOTUS_STORE_INDEX_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INDEX_KEY_MAX 128

typedef struct index index_t;

/* Copy the full key of the entry whose value is val into buf (at least
 * INDEX_KEY_MAX bytes); return its length (0..INDEX_KEY_MAX).  May be called
 * with a value that was just removed: it must then return some length in
 * range without faulting.  Called concurrently; must not call the index. */
typedef unsigned (*index_key_fn)(void *ctx, uint64_t val, unsigned char *buf);

/* -EINVAL if key_fn is NULL. */
int index_create(index_key_fn key_fn, void *ctx, index_t **out);
/* An index that owns copies of its keys (no key callback). */
int index_create_owned(index_t **out);
/* No other thread may be using the index. */
void index_destroy(index_t *ix);

/* Reserve the nodes n more inserts may need in the worst case (spare blocks,
 * allocated now), so that they cannot fail for memory: 0 or -ENOMEM
 * (nothing reserved).  unreserve gives a reservation back once its inserts
 * are done (or will not happen).  Any thread. */
int index_reserve(index_t *ix, unsigned n);
void index_unreserve(index_t *ix, unsigned n);

int index_get(index_t *ix, const void *key, unsigned klen, uint64_t *val);
/* LOTUS_EEXISTS (and *old, if non-NULL, gets the present value) if present. */
int index_insert(index_t *ix, const void *key, unsigned klen, uint64_t val, uint64_t *old);
/* Replace the value of a present key; *old (if non-NULL) gets the old one. */
int index_update(index_t *ix, const void *key, unsigned klen, uint64_t val, uint64_t *old);
int index_delete(index_t *ix, const void *key, unsigned klen, uint64_t *old);

/* Ascending scan from the first key >= start (slen 0: from the beginning).
 * cb gets a copy of the key; it runs with no latch held, so it may call the
 * index.  cb returns 0 to continue, 1 to stop.  At most limit entries are
 * visited; returns the number visited.  Under concurrent writers the keys of
 * one scan are strictly ascending, and every key present during the whole
 * scan (within the range it covered) is visited. */
typedef int (*index_scan_cb)(void *arg, const unsigned char *key, unsigned klen, uint64_t val);
int index_scan(index_t *ix, const void *start, unsigned slen, unsigned limit,
	       index_scan_cb cb, void *arg);

/* Bytes held by nodes and, when owned, key copies (approximate under
 * concurrent splits).  The copies live in 64 KiB slabs per size class that
 * are kept (and reused through free lists) until index_destroy. */
size_t index_bytes(const index_t *ix);
/* The part of index_bytes() held by key copies (0 when keys are borrowed). */
size_t index_key_bytes(const index_t *ix);
bool index_owns_keys(const index_t *ix);

#endif
