/*
 * test_store_rebuild.c - store_rebuild(): copy a store's used pages into a
 * fresh store (as recovery reads the page file), rebuild, and check that every
 * record is found at the same location, deleted keys stay deleted, old
 * locations stay stale, free slots are reused, and a header that does not
 * match its table is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"

#define N 3000
#define NBIG 12

static store_loc_t locs[N], big_locs[NBIG], stale[N];
static unsigned char val[STORE_VALUE_MAX];

static unsigned mkkey(unsigned i, unsigned char *k)
{
	if (i % 2) {
		key_from_u64(i, k);
		return 8;
	}
	return (unsigned)sprintf((char *)k, "a-long-shared-prefix-%u", i);
}

static store_t *fresh(uint16_t *t, uint16_t *big)
{
	store_t *st;
	CHECK(store_create(64u << 20, 0, &st) == 0);
	CHECK(store_table_create(st, "small", 300, t) == 0);
	CHECK(store_table_create(st, "big", STORE_VALUE_MAX, big) == 0);
	return st;
}

static void load(store_t *st, uint16_t t, uint16_t big)
{
	unsigned char k[64];
	for (unsigned i = 0; i < N; i++) {
		unsigned kl = mkkey(i, k);
		memset(val, (int)i, 300);
		CHECK(store_insert(st, t, k, (uint16_t)kl, val, 1 + i % 300, &locs[i]) == 0);
	}
	for (unsigned i = 0; i < N; i += 3) {             /* delete a third */
		unsigned kl = mkkey(i, k);
		CHECK(store_delete(st, t, k, (uint16_t)kl) == 0);
		stale[i] = locs[i];
		locs[i] = 0;
	}
	for (unsigned i = 0; i < NBIG; i++) {
		key_from_u64(i, k);
		memset(val, (int)i + 7, sizeof(val));
		CHECK(store_insert(st, big, k, 8, val, sizeof(val), &big_locs[i]) == 0);
	}
}

static void verify(store_t *st, uint16_t t, uint16_t big)
{
	unsigned char k[64], want[300];
	for (unsigned i = 0; i < N; i++) {
		unsigned kl = mkkey(i, k);
		store_loc_t l;
		int rc = store_get(st, t, k, (uint16_t)kl, &l);
		if (!locs[i]) {
			CHECK(rc == LOTUS_ENOTFOUND);
			CHECK(store_rec_at(st, stale[i], t, NULL, 0) == NULL);
			continue;
		}
		CHECK(rc == 0 && l == locs[i]);
		struct store_rec *r = store_rec_at(st, l, t, k, (uint16_t)kl);
		memset(want, (int)i, sizeof(want));
		CHECK(r && r->value_len == 1 + i % 300 && memcmp(store_rec_value(r), want, r->value_len) == 0);
	}
	for (unsigned i = 0; i < NBIG; i++) {
		key_from_u64(i, k);
		struct store_rec *r = store_rec_at(st, big_locs[i], big, k, 8);
		CHECK(r && r->value_len == STORE_VALUE_MAX);
		CHECK(store_rec_value(r)[STORE_VALUE_MAX - 1] == (unsigned char)(i + 7));
	}
}

int main(void)
{
	uint16_t t, big, t2, big2;
	struct store_stats s1, s2;
	size_t bytes;

	store_t *a = fresh(&t, &big);
	load(a, t, big);
	verify(a, t, big);
	store_stats(a, &s1);
	uint32_t ps = store_page_size(a);
	unsigned char *pa = store_pool(a, &bytes);
	size_t used = (size_t)s1.pages_used * ps;
	unsigned char *image = malloc(used);
	CHECK(image);
	memcpy(image, pa + ps, used);

	store_t *b = fresh(&t2, &big2);
	CHECK(t2 == t && big2 == big);
	memcpy((unsigned char *)store_pool(b, NULL) + ps, image, used);
	CHECK(store_rebuild(b, s1.pages_used) == 0);
	verify(b, t, big);
	store_stats(b, &s2);
	CHECK(s2.records == s1.records && s2.pages_used == s1.pages_used);
	/* new inserts reuse the free slots: no new pages */
	for (unsigned i = 0; i < N; i += 3) {
		unsigned char k[64];
		unsigned kl = mkkey(i, k);
		CHECK(store_insert(b, t, k, (uint16_t)kl, val, 10, &locs[i]) == 0);
		CHECK(locs[i] != stale[i]);
	}
	store_stats(b, &s2);
	CHECK(s2.pages_used == s1.pages_used);
	store_destroy(b);

	/* a table of another size than the one that wrote the pages is refused */
	CHECK(store_create(64u << 20, 0, &b) == 0);
	CHECK(store_table_create(b, "small", 400, &t2) == 0);
	memcpy((unsigned char *)store_pool(b, NULL) + ps, image, used);
	CHECK(store_rebuild(b, s1.pages_used) == -EINVAL);
	store_destroy(b);

	store_destroy(a);
	free(image);
	printf("ok\n");
	return 0;
}
