/*
 * hash.h - the hash of a key's bytes that the store's hash index and the lock
 * table share (hashidx.c, lock.c), so that a request hashes its key once: the
 * memory server's lookup phases compute it for the index and hand it to the
 * lock table (lock_acquire_hashed).  64 bits, mixed so that any bit range
 * serves as a bucket number or a tag.
 */
#ifndef LOTUS_COMMON_HASH_H
#define LOTUS_COMMON_HASH_H
#include <stdint.h>
#include <string.h>

static inline uint64_t lotus_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

/* Eight bytes at a time. */
static inline uint64_t lotus_key_hash(const void *key, unsigned klen)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)klen * 0x87c37b91114253d5ull);
	uint64_t w;
	for (; klen >= 8; p += 8, klen -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ (w * 0x87c37b91114253d5ull)) * 0x4cf5ad432745937full;
		h ^= h >> 29;
	}
	if (klen) {
		w = 0;
		memcpy(&w, p, klen);
		h = (h ^ (w * 0x87c37b91114253d5ull)) * 0x4cf5ad432745937full;
	}
	return lotus_mix64(h);
}

#endif
