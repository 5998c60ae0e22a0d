/*
 * test_cache_lfu.c - sampled-LFU eviction keeps a hot set.  100 hot keys
 * take 90% of accesses, 100k cold keys the rest; the cache holds 200 hints.
 * After warm-up the hot keys must hit > 90%.  Then the hot set moves to new
 * keys: aging must let the new set take over (> 90% again) within a bounded
 * number of accesses, and the old hot keys must be gone (they would stay
 * without aging).  Run with admission 1.0 and 0.1.
 */
#include <stdio.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "compute/cache.h"
#include "testutil.h"

#define HOT     100
#define COLD    100000
#define SLOTS   200
#define WARMUP  100000
#define MEASURE 200000

/* One access: get, and put on a miss (as the transaction path does). */
static bool access_key(rcache_t *c, uint64_t id)
{
	unsigned char k[8];
	uint64_t loc;
	key_from_u64(id, k);
	if (rcache_hint_get(c, 1, k, 8, &loc)) {
		CHECK(loc == id * 3);
		return true;
	}
	rcache_hint_put(c, 1, k, 8, id * 3);
	return false;
}

/* Hot-set hit rate over n accesses; the hot keys are base..base+HOT-1. */
static double run(rcache_t *c, struct rng *r, uint64_t base, uint64_t n)
{
	uint64_t hot = 0, hit = 0;
	for (uint64_t i = 0; i < n; i++) {
		if (rng_double(r) < 0.9) {
			hot++;
			hit += access_key(c, base + rng_below(r, HOT));
		} else {
			access_key(c, 1000000 + rng_below(r, COLD));
		}
	}
	return (double)hit / (double)hot;
}

static void test_hot_set(double admit)
{
	rcache_t *c;
	struct rng r;
	struct rcache_stats st;
	rng_seed(&r, 42);
	CHECK(rcache_create(SLOTS * rcache_entry_charge(8, 0), admit, 7, NULL, NULL, &c) == 0);
	run(c, &r, 0, WARMUP);
	double rate = run(c, &r, 0, MEASURE);
	rcache_stats(c, &st);
	printf("admit %.1f: hot hit rate %.4f (entries %llu, evictions %llu)\n", admit, rate,
	       (unsigned long long)st.entries, (unsigned long long)st.evictions);
	CHECK(rate > 0.90);
	CHECK(st.entries <= SLOTS && st.bytes <= st.capacity);

	/* The hot set moves; old popularity must fade. */
	run(c, &r, 500000, 4 * WARMUP);
	rate = run(c, &r, 500000, MEASURE);
	printf("admit %.1f: after the shift, new hot hit rate %.4f\n", admit, rate);
	CHECK(rate > 0.90);
	/* Without aging the old hot keys would keep their slots for ever. */
	uint64_t kept = 0, loc;
	unsigned char k[8];
	for (uint64_t id = 0; id < HOT; id++) {
		key_from_u64(id, k);
		kept += rcache_hint_get(c, 1, k, 8, &loc);
	}
	printf("admit %.1f: %llu of %d old hot keys still cached\n", admit,
	       (unsigned long long)kept, HOT);
	CHECK(kept < HOT / 2);
	rcache_destroy(c);
}

/* Without skew nothing sticks: a uniform stream over 10x the capacity hits
 * about capacity/keys of the time (sanity check that hits are not free). */
static void test_uniform(void)
{
	rcache_t *c;
	struct rng r;
	uint64_t hit = 0, n = 100000;
	rng_seed(&r, 43);
	CHECK(rcache_create(SLOTS * rcache_entry_charge(8, 0), 1.0, 8, NULL, NULL, &c) == 0);
	for (uint64_t i = 0; i < n; i++)
		hit += access_key(c, rng_below(&r, 10 * SLOTS));
	printf("uniform: hit rate %.4f\n", (double)hit / n);
	CHECK((double)hit / n < 0.2);
	rcache_destroy(c);
}

int main(void)
{
	test_hot_set(1.0);
	test_hot_set(0.1);
	test_uniform();
	printf("ok\n");
	return 0;
}
