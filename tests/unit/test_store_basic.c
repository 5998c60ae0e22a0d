/*
 * test_store_basic.c - record store behaviour, single-threaded:
 *  - table create is idempotent by name; another max_value is LOTUS_EEXISTS;
 *  - insert/get/update/delete/scan and their error codes;
 *  - slot reuse bumps the generation: stale locations are rejected, and no
 *    location is ever 0 (also across the 12-bit generation wrap);
 *  - 64 KiB values (multi-page extents) round-trip;
 *  - a full pool gives LOTUS_ENOSPACE, and a delete makes room again;
 *  - dirty-page tracking.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"

#define LOC_SLOT_GEN_MASK ((1ull << 24) - 1)

static void test_tables(store_t *st)
{
	uint16_t a, b, c;
	uint32_t mv;
	CHECK(store_table_create(st, "users", 0, &a) == 0);
	CHECK(store_table_create(st, "users", 1024, &b) == 0 && a == b);
	CHECK(store_table_create(st, "users", 2048, &b) == LOTUS_EEXISTS);
	CHECK(store_table_create(st, "big", STORE_VALUE_MAX, &c) == 0 && c != a);
	CHECK(store_table_create(st, "huge", STORE_VALUE_MAX + 1, &b) == LOTUS_ETOOBIG);
	CHECK(store_table_find(st, "users", &b, &mv) == 0 && b == a && mv == 1024);
	CHECK(store_table_find(st, "nope", &b, &mv) == LOTUS_ENOTABLE);
	CHECK(store_table_max_value(st, c) == STORE_VALUE_MAX);
	CHECK(store_table_max_value(st, 200) == 0);
	CHECK(store_insert(st, 200, "k", 1, "v", 1, NULL) == LOTUS_ENOTABLE);
}

static void test_records(store_t *st, uint16_t t)
{
	store_loc_t loc, loc2;
	unsigned char key[STORE_KEY_MAX + 1];
	memset(key, 'k', sizeof(key));
	CHECK(store_insert(st, t, key, STORE_KEY_MAX + 1, "v", 1, &loc) == LOTUS_ETOOBIG);
	static unsigned char val[2048];
	CHECK(store_insert(st, t, "k", 1, val, 1025, &loc) == LOTUS_ETOOBIG);

	CHECK(store_insert(st, t, key, STORE_KEY_MAX, val, 1024, &loc) == 0 && loc != 0);
	CHECK(store_insert(st, t, "apple", 5, "red", 3, &loc) == 0);
	CHECK(store_insert(st, t, "apple", 5, "green", 5, &loc2) == LOTUS_EEXISTS && loc2 == loc);
	CHECK(store_get(st, t, "apple", 5, &loc2) == 0 && loc2 == loc);
	CHECK(store_get(st, t, "apples", 6, &loc2) == LOTUS_ENOTFOUND);

	struct store_rec *r = store_rec_at(st, loc, t, "apple", 5);
	CHECK(r && r->key_len == 5 && r->value_len == 3 && r->table == t);
	CHECK(memcmp(store_rec_key(r), "apple", 5) == 0);
	CHECK(memcmp(store_rec_value(r), "red", 3) == 0);
	CHECK(store_rec_at(st, loc, t, "apply", 5) == NULL);
	CHECK(store_rec_at(st, loc, t + 1, NULL, 0) == NULL);
	CHECK(store_rec_at(st, loc, t, NULL, 0) == r);
	CHECK(store_rec_at(st, 0, t, NULL, 0) == NULL);
	CHECK(store_rec_at(st, ~0ull, t, NULL, 0) == NULL);

	CHECK(store_update(st, loc, "yellow", 6) == 0);
	CHECK(r->value_len == 6 && memcmp(store_rec_value(r), "yellow", 6) == 0);
	CHECK(store_update(st, loc, val, 1025) == LOTUS_ETOOBIG);

	/* delete, then reuse: same slot, new generation */
	CHECK(store_delete(st, t, "apple", 5) == 0);
	CHECK(store_delete(st, t, "apple", 5) == LOTUS_ENOTFOUND);
	CHECK(store_rec_at(st, loc, t, NULL, 0) == NULL);
	CHECK(store_update(st, loc, "x", 1) == LOTUS_ENOTFOUND);
	CHECK(store_insert(st, t, "apple", 5, "new", 3, &loc2) == 0);
	CHECK(loc2 != loc && (loc2 >> 12) == (loc >> 12));   /* same page and slot */
	CHECK(store_rec_at(st, loc, t, NULL, 0) == NULL);
	CHECK(store_rec_at(st, loc2, t, "apple", 5) != NULL);

	/* cycle one slot through more than 4096 generations */
	store_loc_t first = loc2, prev = loc2;
	for (unsigned i = 0; i < 9000; i++) {
		CHECK(store_delete(st, t, "apple", 5) == 0);
		CHECK(store_insert(st, t, "apple", 5, "v", 1, &loc2) == 0);
		CHECK(loc2 != 0 && loc2 != prev);
		CHECK(store_rec_at(st, prev, t, NULL, 0) == NULL);
		prev = loc2;
	}
	CHECK((loc2 >> 12) == (first >> 12));
}

struct scan_acc {
	char last[STORE_KEY_MAX + 1];
	unsigned n;
};

static int scan_cb(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc)
{
	struct scan_acc *a = arg;
	char k[STORE_KEY_MAX + 1];
	memcpy(k, key, klen);
	k[klen] = 0;
	CHECK(a->n == 0 || strcmp(a->last, k) < 0);
	strcpy(a->last, k);
	a->n++;
	return 0;
}

static void test_scan(store_t *st, uint16_t t)
{
	char k[32];
	for (unsigned i = 0; i < 1000; i++) {
		int n = snprintf(k, sizeof(k), "scan%05u", i * 2);
		CHECK(store_insert(st, t, k, (uint16_t)n, k, (uint32_t)n, NULL) == 0);
	}
	struct scan_acc a = { .n = 0 };
	CHECK(store_scan(st, t, "scan00101", 9, 10, scan_cb, &a) == 10);
	CHECK(a.n == 10 && strcmp(a.last, "scan00120") == 0);
	a.n = 0;
	CHECK(store_scan(st, t, "scan", 4, 5000, scan_cb, &a) == 1000);
	CHECK(store_scan(st, 99, "scan", 4, 10, scan_cb, &a) == LOTUS_ENOTABLE);
}

static void test_big_values(store_t *st)
{
	uint16_t t;
	store_loc_t locs[20];
	static unsigned char val[STORE_VALUE_MAX];
	CHECK(store_table_create(st, "big", STORE_VALUE_MAX, &t) == 0);
	for (unsigned i = 0; i < 20; i++) {
		unsigned char key[8];
		key_from_u64(i, key);
		memset(val, (int)i + 1, sizeof(val));
		CHECK(store_insert(st, t, key, 8, val, STORE_VALUE_MAX, &locs[i]) == 0);
	}
	for (unsigned i = 0; i < 20; i++) {
		unsigned char key[8];
		key_from_u64(i, key);
		struct store_rec *r = store_rec_at(st, locs[i], t, key, 8);
		CHECK(r && r->value_len == STORE_VALUE_MAX);
		memset(val, (int)i + 1, sizeof(val));
		CHECK(memcmp(store_rec_value(r), val, STORE_VALUE_MAX) == 0);
	}
	CHECK(store_insert(st, t, "x", 1, val, STORE_VALUE_MAX + 1, NULL) == LOTUS_ETOOBIG);
}

static void test_nospace(void)
{
	store_t *st;
	uint16_t t;
	unsigned char key[8];
	static unsigned char val[1024];
	unsigned n = 0;
	int rc;
	CHECK(store_create(1 << 20, 0, &st) == 0);         /* 127 usable pages */
	CHECK(store_table_create(st, "t", 0, &t) == 0);
	for (;;) {
		key_from_u64(n, key);
		rc = store_insert(st, t, key, 8, val, sizeof(val), NULL);
		if (rc)
			break;
		n++;
	}
	CHECK(rc == LOTUS_ENOSPACE);
	CHECK(n == 127 * 7);
	CHECK(store_table_create(st, "big", STORE_VALUE_MAX, &t) == 0);
	CHECK(store_insert(st, t, key, 8, val, 1, NULL) == LOTUS_ENOSPACE);
	CHECK(store_table_find(st, "t", &t, NULL) == 0);
	key_from_u64(5, key);
	CHECK(store_delete(st, t, key, 8) == 0);
	key_from_u64(n, key);
	CHECK(store_insert(st, t, key, 8, val, sizeof(val), NULL) == 0);
	CHECK(store_insert(st, t, "y", 1, val, 1, NULL) == LOTUS_ENOSPACE);
	struct store_stats s;
	store_stats(st, &s);
	CHECK(s.records == n && s.pages_used == 127 && s.pool_bytes == 1 << 20);
	store_destroy(st);
	CHECK(store_create(4096, 0, &st) == -EINVAL);
	CHECK(store_create(1 << 20, 1000, &st) == -EINVAL);
}

static void test_dirty(void)
{
	store_t *st;
	uint16_t t;
	store_loc_t loc;
	uint64_t pages[16], cursor = 0;
	size_t bytes;
	CHECK(store_create(1 << 20, 0, &st) == 0);
	CHECK(store_pool(st, &bytes) != NULL && bytes == 1 << 20);
	CHECK(store_page_size(st) == STORE_DEFAULT_PAGE);
	CHECK(store_table_create(st, "t", 0, &t) == 0);
	CHECK(store_insert(st, t, "a", 1, "v", 1, &loc) == 0);
	CHECK(store_dirty_collect(st, &cursor, pages, 16) == 1 && pages[0] == 1);
	cursor = 0;
	CHECK(store_dirty_collect(st, &cursor, pages, 16) == 0);
	CHECK(store_update(st, loc, "w", 1) == 0);
	cursor = 0;
	CHECK(store_dirty_collect(st, &cursor, pages, 16) == 1 && pages[0] == 1);
	store_mark_dirty(st, loc);
	cursor = 0;
	CHECK(store_dirty_collect(st, &cursor, pages, 16) == 1);
	store_destroy(st);
}

int main(void)
{
	store_t *st;
	uint16_t t;
	CHECK(store_create(64u << 20, 0, &st) == 0);
	test_tables(st);
	CHECK(store_table_find(st, "users", &t, NULL) == 0);
	test_records(st, t);
	test_scan(st, t);
	test_big_values(st);
	struct store_stats s;
	store_stats(st, &s);
	CHECK(s.records == 1002 + 20);
	store_destroy(st);
	test_nospace();
	test_dirty();
	printf("ok\n");
	return 0;
}
