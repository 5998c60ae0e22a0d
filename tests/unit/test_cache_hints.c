/*
 * test_cache_hints.c - record cache hint entries: put/get/drop, replace,
 * admission probability (0, 1, 0.3), capacity in bytes, and that hints and
 * data entries do not overwrite each other.
 */
#include <errno.h>
#include <stdio.h>
#include "common/common.h"
#include "compute/cache.h"
#include "testutil.h"

#define KLEN 8

static void key_of(uint64_t i, unsigned char k[KLEN])
{
	key_from_u64(i, k);
}

static void test_basic(void)
{
	rcache_t *c;
	unsigned char k[KLEN];
	uint64_t loc = 0;
	struct rcache_stats st;
	CHECK(rcache_create(1 << 20, 1.0, 1, NULL, NULL, &c) == 0);
	for (uint64_t i = 0; i < 100; i++) {
		key_of(i, k);
		CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 0);
		rcache_hint_put(c, 1, k, KLEN, 1000 + i);
	}
	for (uint64_t i = 0; i < 100; i++) {
		key_of(i, k);
		CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 1 && loc == 1000 + i);
		CHECK(rcache_hint_get(c, 2, k, KLEN, &loc) == 0);  /* other table */
	}
	key_of(7, k);
	rcache_hint_put(c, 1, k, KLEN, 77);                    /* replace */
	CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 1 && loc == 77);
	rcache_drop(c, 1, k, KLEN);
	CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 0);
	rcache_drop(c, 1, k, KLEN);                            /* dropping twice is fine */
	rcache_stats(c, &st);
	CHECK(st.entries == 99 && st.admits == 100 && st.rejects == 0);
	CHECK(st.bytes == 99 * rcache_entry_charge(KLEN, 0));
	CHECK(st.hits == 101 && st.misses == 201);
	/* A short key and a long one. */
	unsigned char big[128];
	memset(big, 'x', sizeof(big));
	rcache_hint_put(c, 3, big, 1, 5);
	rcache_hint_put(c, 3, big, 128, 6);
	CHECK(rcache_hint_get(c, 3, big, 1, &loc) == 1 && loc == 5);
	CHECK(rcache_hint_get(c, 3, big, 128, &loc) == 1 && loc == 6);
	rcache_destroy(c);
}

/* Fraction of distinct misses admitted with probability p. */
static void test_admit(double p, uint64_t seed)
{
	rcache_t *c;
	unsigned char k[KLEN];
	struct rcache_stats st;
	const uint64_t n = 20000;
	CHECK(rcache_create(64 << 20, p, seed, NULL, NULL, &c) == 0);
	for (uint64_t i = 0; i < n; i++) {
		key_of(i, k);
		rcache_hint_put(c, 1, k, KLEN, i);
	}
	rcache_stats(c, &st);
	CHECK(st.admits + st.rejects == n && st.entries == st.admits);
	double frac = (double)st.admits / n;
	printf("admit %.2f: %.4f of %llu misses admitted\n", p, frac, (unsigned long long)n);
	if (p == 0.0)
		CHECK(st.admits == 0 && st.bytes == 0);
	else if (p == 1.0)
		CHECK(st.admits == n);
	else
		CHECK(frac > p - 0.02 && frac < p + 0.02);
	/* An admitted key is replaced without a new draw. */
	uint64_t loc;
	for (uint64_t i = 0; i < n; i++) {
		key_of(i, k);
		if (rcache_hint_get(c, 1, k, KLEN, &loc)) {
			rcache_hint_put(c, 1, k, KLEN, loc + 1);
			CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) && loc == i + 1);
		}
	}
	rcache_stats(c, &st);
	CHECK(st.admits + st.rejects == n);
	rcache_destroy(c);
}

static void test_capacity(void)
{
	rcache_t *c;
	unsigned char k[KLEN];
	struct rcache_stats st;
	const uint64_t slots = 50, cap = slots * rcache_entry_charge(KLEN, 0) + 7;
	CHECK(rcache_create(cap, 1.0, 2, NULL, NULL, &c) == 0);
	for (uint64_t i = 0; i < 10000; i++) {
		key_of(i, k);
		rcache_hint_put(c, 1, k, KLEN, i);
		rcache_stats(c, &st);
		CHECK(st.bytes <= cap && st.entries <= slots);
	}
	CHECK(st.entries == slots && st.admits == 10000 && st.evictions == 10000 - slots);
	rcache_destroy(c);

	CHECK(rcache_create(0, 1.0, 3, NULL, NULL, &c) == 0);    /* caches nothing */
	key_of(1, k);
	rcache_hint_put(c, 1, k, KLEN, 1);
	uint64_t loc;
	CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 0);
	rcache_stats(c, &st);
	CHECK(st.entries == 0 && st.bytes == 0 && st.rejects == 1);
	rcache_destroy(c);
	CHECK(rcache_create(100, 1.5, 3, NULL, NULL, &c) == -EINVAL);
	CHECK(rcache_create(100, -0.1, 3, NULL, NULL, &c) == -EINVAL);
}

/* A hint never replaces a data entry; a data write replaces a hint. */
static void test_kinds(void)
{
	rcache_t *c;
	unsigned char k[KLEN], buf[16];
	uint64_t loc;
	uint32_t vlen;
	struct rcache_stats st;
	CHECK(rcache_create(1 << 20, 1.0, 4, NULL, NULL, &c) == 0);
	key_of(1, k);
	CHECK(rcache_data_write(c, 1, k, KLEN, "value", 5) == 0);
	rcache_hint_put(c, 1, k, KLEN, 9);
	CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 0);
	rcache_drop(c, 1, k, KLEN);                             /* hints only */
	CHECK(rcache_data_read(c, 1, k, KLEN, buf, sizeof(buf), &vlen) == 1 && vlen == 5);
	key_of(2, k);
	rcache_hint_put(c, 1, k, KLEN, 9);
	CHECK(rcache_data_read(c, 1, k, KLEN, buf, sizeof(buf), &vlen) == 0);
	CHECK(rcache_data_write(c, 1, k, KLEN, "abc", 3) == 0);
	CHECK(rcache_hint_get(c, 1, k, KLEN, &loc) == 0);
	CHECK(rcache_data_read(c, 1, k, KLEN, buf, sizeof(buf), &vlen) == 1 && vlen == 3);
	rcache_stats(c, &st);
	CHECK(st.entries == 2);
	CHECK(st.bytes == rcache_entry_charge(KLEN, 5) + rcache_entry_charge(KLEN, 3));
	rcache_data_drop(c, 1, k, KLEN);
	key_of(1, k);
	rcache_data_drop(c, 1, k, KLEN);
	rcache_stats(c, &st);
	CHECK(st.entries == 0 && st.bytes == 0);
	rcache_destroy(c);
}

int main(void)
{
	test_basic();
	test_admit(0.0, 11);
	test_admit(1.0, 12);
	test_admit(0.3, 13);
	test_admit(0.3, 14);
	test_capacity();
	test_kinds();
	printf("ok\n");
	return 0;
}
