/*
 * test_index_keys.h - the key universe shared by the index tests: keys[] with
 * their sorted order and ranks, the byte-string comparator the index uses
 * (memcmp, then length), a lower bound over the sorted order, and the key
 * callback that maps a value (key id in the low 32 bits) back to its key, as
 * the store maps a location to its record.  Define NKEYS and KEY_BYTES first.
 */
#ifndef LOTUS_TEST_INDEX_KEYS_H
#define LOTUS_TEST_INDEX_KEYS_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct key {
	unsigned char b[KEY_BYTES];
	unsigned len;
};

static struct key keys[NKEYS];
static unsigned order[NKEYS];     /* ids in key order */
static unsigned rank_of[NKEYS];

static int kcmp(const unsigned char *a, unsigned al, const unsigned char *b, unsigned bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

static int order_cmp(const void *x, const void *y)
{
	const struct key *a = &keys[*(const unsigned *)x], *b = &keys[*(const unsigned *)y];
	return kcmp(a->b, a->len, b->b, b->len);
}

/* Sort order[] (ids 0..NKEYS-1) by key and fill rank_of[]. */
static void keys_sort(void)
{
	for (unsigned i = 0; i < NKEYS; i++)
		order[i] = i;
	qsort(order, NKEYS, sizeof(order[0]), order_cmp);
	for (unsigned i = 0; i < NKEYS; i++)
		rank_of[order[i]] = i;
}

/* First rank whose key is >= (b, len). */
static unsigned keys_lower_bound(const unsigned char *b, unsigned len)
{
	unsigned lo = 0, hi = NKEYS;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (kcmp(keys[order[mid]].b, keys[order[mid]].len, b, len) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static unsigned key_fn(void *ctx, uint64_t val, unsigned char *buf)
{
	const struct key *k = &keys[(uint32_t)val % NKEYS];
	(void)ctx;
	memcpy(buf, k->b, k->len);
	return k->len;
}
#endif
