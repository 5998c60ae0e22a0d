/*
 * test_hashidx.c - the hash point index (src/store/hashidx.c) on its own,
 * with a fake owner: "records" are entries of an array (value = index + 1),
 * each with an immutable key and a live flag, so match and rehash behave as
 * the store's do (a deleted record stops matching).
 *
 *  1. growth: 300k inserts from an empty index (many incremental rehashes),
 *     every key found with its value; the worst single put (thread CPU
 *     time) is printed
 *     (HX_KEYS=10000000 measures it at 10M keys: the bound is 1 ms);
 *  2. deletes: every other key deleted, then misses for those and hits for
 *     the rest; deleting an absent value says LOTUS_ENOTFOUND;
 *  3. free-entry reuse: delete/insert churn at a constant key count does
 *     not grow the table (freed entries are reused; stale overflow flags
 *     are dropped by same-size rehashes);
 *  4. lookups during growth: two reader threads look up a stable key set
 *     (always found, with its value) and keys deleted for good (never
 *     found) while the main thread inserts enough to double the table
 *     several times and churns other keys;
 *  5. retired tables are reused: churn at a constant count near the load
 *     limit makes the index rehash into a table of the same size again and
 *     again (to drop stale overflow flags); the process's VmSize must not
 *     grow with the number of those rehashes (each used to map a fresh
 *     table and keep the one before mapped until hidx_destroy), and a
 *     reader thread looks up a stable key set (always found) and keys
 *     deleted for good (never found) while tables are being recycled.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/common.h"
#include "store/hashidx.h"
#include "check.h"

struct rec {
	unsigned char key[24];
	unsigned klen;
	int live;                   /* atomic */
};

static struct rec *recs;
static unsigned nrecs_max;

static int match(void *ctx, uint64_t val, const void *key, unsigned klen)
{
	(void)ctx;
	if (val == 0 || val > nrecs_max)
		return 0;
	struct rec *r = &recs[val - 1];
	return __atomic_load_n(&r->live, __ATOMIC_ACQUIRE) && r->klen == klen &&
	       memcmp(r->key, key, klen) == 0;
}

static uint64_t rehash(void *ctx, uint64_t val)
{
	(void)ctx;
	struct rec *r = &recs[val - 1];
	return hidx_hash(r->key, r->klen);
}

/* Record i holds key "k<i>" padded to a length that varies with i. */
static void rec_make(unsigned i, unsigned name)
{
	struct rec *r = &recs[i];
	r->klen = (unsigned)snprintf((char *)r->key, sizeof(r->key), "k%u-%.*s", name,
				     (int)(name % 9), "xxxxxxxxx");
}

/* This thread's CPU time (page faults included, time off the CPU not: the
 * machine is shared). */
static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int put(hidx_t *h, unsigned i)
{
	struct rec *r = &recs[i];
	__atomic_store_n(&r->live, 1, __ATOMIC_RELEASE);
	return hidx_put(h, hidx_hash(r->key, r->klen), i + 1);
}

static int del(hidx_t *h, unsigned i)
{
	struct rec *r = &recs[i];
	int rc = hidx_del(h, hidx_hash(r->key, r->klen), i + 1);
	__atomic_store_n(&r->live, 0, __ATOMIC_RELEASE);
	return rc;
}

static int get(hidx_t *h, unsigned i, uint64_t *v)
{
	struct rec *r = &recs[i];
	return hidx_get(h, hidx_hash(r->key, r->klen), r->key, r->klen, v);
}

static void test_growth_deletes(unsigned n)
{
	hidx_t *h;
	uint64_t v, worst = 0;
	struct hidx_stats s;
	CHECK_RC(hidx_create(match, rehash, NULL, &h));
	for (unsigned i = 0; i < n; i++) {
		rec_make(i, i);
		uint64_t t0 = now_ns();
		CHECK_RC(put(h, i));
		uint64_t d = now_ns() - t0;
		if (d > worst)
			worst = d;
	}
	hidx_stats(h, &s);
	printf("growth: %u keys, %llu buckets, %llu rehashes, %.1f bytes/key, worst put %.1f us of CPU\n",
	       n, (unsigned long long)s.buckets, (unsigned long long)s.rehashes,
	       (double)s.bytes / n, worst / 1000.0);
	CHECK_EQ(s.entries, n);
	CHECK(s.rehashes >= 10, "only %llu rehashes", (unsigned long long)s.rehashes);
	for (unsigned i = 0; i < n; i++) {
		CHECK_RC(get(h, i, &v));
		CHECK_EQ(v, i + 1);
	}
	/* deletes */
	for (unsigned i = 0; i < n; i += 2)
		CHECK_RC(del(h, i));
	EXPECT(hidx_del(h, hidx_hash(recs[0].key, recs[0].klen), 1), LOTUS_ENOTFOUND);
	for (unsigned i = 0; i < n; i++) {
		int rc = get(h, i, &v);
		if (i % 2)
			CHECK(rc == 0 && v == i + 1, "key %u lost after deletes", i);
		else
			EXPECT(rc, LOTUS_ENOTFOUND);
	}
	hidx_stats(h, &s);
	CHECK_EQ(s.entries, n / 2);
	hidx_destroy(h);
}

/* Churn at a constant count: new records for deleted keys, n/2 live. */
static void test_reuse(unsigned n)
{
	hidx_t *h;
	struct hidx_stats s0, s;
	uint64_t v;
	CHECK_RC(hidx_create(match, rehash, NULL, &h));
	unsigned live = n / 4;
	for (unsigned i = 0; i < live; i++) {
		rec_make(i, i);
		CHECK_RC(put(h, i));
	}
	hidx_stats(h, &s0);
	/* record i is replaced by record i + live (a new key each time) */
	for (unsigned i = 0; i + live < n; i++) {
		CHECK_RC(del(h, i));
		rec_make(i + live, i + live);
		CHECK_RC(put(h, i + live));
	}
	hidx_stats(h, &s);
	printf("reuse: %u live keys, %u replaced: buckets %llu -> %llu, rehashes %llu -> %llu\n",
	       live, n - live, (unsigned long long)s0.buckets, (unsigned long long)s.buckets,
	       (unsigned long long)s0.rehashes, (unsigned long long)s.rehashes);
	CHECK(s.buckets <= s0.buckets, "the table grew under churn at a constant count");
	CHECK_EQ(s.entries, live);
	for (unsigned i = 0; i < n; i++) {
		int rc = get(h, i, &v);
		if (i >= n - live)
			CHECK(rc == 0 && v == i + 1, "key %u lost in churn", i);
		else
			EXPECT(rc, LOTUS_ENOTFOUND);
	}
	hidx_destroy(h);
}

/* ---- lookups during growth ---- */

#define STABLE 5000
#define GONE   5000

static hidx_t *ch;
static int stop;

static void *reader(void *arg)
{
	unsigned long long *lookups = arg;
	uint64_t v, seed = (uint64_t)(uintptr_t)arg | 1;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		unsigned i = (unsigned)(seed % (STABLE + GONE));
		int rc = get(ch, i, &v);
		if (i < STABLE)
			CHECK(rc == 0 && v == i + 1, "stable key %u not found during growth (rc %d)",
			      i, rc);
		else
			CHECK(rc == LOTUS_ENOTFOUND, "deleted key %u found during growth", i);
		(*lookups)++;
	}
	return NULL;
}

static void test_concurrent(unsigned n)
{
	pthread_t t[2];
	unsigned long long lookups[2] = { 0, 0 };
	struct hidx_stats s;
	CHECK_RC(hidx_create(match, rehash, NULL, &ch));
	for (unsigned i = 0; i < STABLE + GONE; i++) {
		rec_make(i, i);
		CHECK_RC(put(ch, i));
	}
	for (unsigned i = STABLE; i < STABLE + GONE; i++)
		CHECK_RC(del(ch, i));
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, reader, &lookups[i]) == 0);
	unsigned base = STABLE + GONE;
	for (unsigned i = base; i < n; i++) {
		rec_make(i, i);
		CHECK_RC(put(ch, i));
		if (i % 3 == 0)       /* churn: some of the new ones go again */
			CHECK_RC(del(ch, i - 1000 * (i > base + 1000)));
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	hidx_stats(ch, &s);
	printf("concurrent: %llu + %llu lookups while the table grew to %llu buckets (%llu "
	       "rehashes)\n", lookups[0], lookups[1], (unsigned long long)s.buckets,
	       (unsigned long long)s.rehashes);
	CHECK(s.rehashes >= 5, "the table did not grow");
	hidx_destroy(ch);
}

/* ---- retired tables reused ---- */

/* The process's VmSize (/proc/self/status), in KiB; 0 if unknown. */
static unsigned long long vm_size_kib(void)
{
	char line[256];
	unsigned long long kib = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

#define R_STABLE   1000
#define R_GONE     1000
#define R_WARM     2             /* same-size rehashes before the baseline */
#define R_CYCLES   64            /* ... and after it */

static hidx_t *rh;
static int rstop;

static void *recycle_reader(void *arg)
{
	unsigned long long *lookups = arg;
	uint64_t v, seed = 0x9e3779b97f4a7c15ull;
	while (!__atomic_load_n(&rstop, __ATOMIC_ACQUIRE)) {
		seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
		unsigned i = (unsigned)(seed % (R_STABLE + R_GONE));
		int rc = get(rh, i, &v);
		if (i < R_STABLE)
			CHECK(rc == 0 && v == i + 1, "stable key %u not found while tables are "
			      "recycled (rc %d)", i, rc);
		else
			CHECK(rc == LOTUS_ENOTFOUND, "deleted key %u found while tables are "
			      "recycled", i);
		if (++*lookups % 1024 == 0)
			sched_yield();    /* 2 shared cores: let the writer run */
	}
	return NULL;
}

/* Slots [0, R_STABLE) stay, [R_STABLE, R_STABLE + R_GONE) are deleted for
 * good, the rest is a ring: each step deletes its oldest record and puts a
 * record with a new key into the slot, so the count stays at live. */
static void test_retired(unsigned n)
{
	pthread_t t;
	unsigned long long lookups = 0, vm0 = 0, vm1;
	struct hidx_stats s;
	uint64_t v, rh0 = 0, ops = 0, max_ops = 40000000;
	unsigned base = R_STABLE + R_GONE, ring = n - base;
	/* 4096 buckets (24576 entries) hold up to 19660 at 80%: keep 18500 */
	unsigned live = 18500 - R_STABLE, name = 0;
	CHECK(ring > live);
	CHECK_RC(hidx_create(match, rehash, NULL, &rh));
	for (unsigned i = 0; i < base; i++) {
		rec_make(i, name++);
		CHECK_RC(put(rh, i));
	}
	for (unsigned i = R_STABLE; i < base; i++)
		CHECK_RC(del(rh, i));
	for (unsigned i = base; i < base + live; i++) {
		rec_make(i, name++);
		CHECK_RC(put(rh, i));
	}
	CHECK(pthread_create(&t, NULL, recycle_reader, &lookups) == 0);
	hidx_stats(rh, &s);
	uint64_t nb = s.buckets, rh_start = s.rehashes;
	unsigned head = live, tail = 0;      /* ring positions (slot base + pos % ring) */
	for (;;) {
		hidx_stats(rh, &s);
		if (!vm0 && s.rehashes >= rh_start + R_WARM && !s.migrating) {
			vm0 = vm_size_kib();
			rh0 = s.rehashes;
		}
		if (vm0 && s.rehashes >= rh0 + R_CYCLES && !s.migrating)
			break;
		CHECK(ops < max_ops, "only %llu same-size rehashes in %llu writes",
		      (unsigned long long)(s.rehashes - rh_start), (unsigned long long)ops);
		CHECK_RC(del(rh, base + tail % ring));
		tail++;
		unsigned slot = base + head % ring;
		head++;
		rec_make(slot, name++);
		CHECK_RC(put(rh, slot));
		ops += 2;
	}
	vm1 = vm_size_kib();
	__atomic_store_n(&rstop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	hidx_stats(rh, &s);
	printf("retired: %llu same-size rehashes of %llu buckets (%llu KiB each) in %llu writes, "
	       "%llu lookups beside; VmSize %llu -> %llu KiB (%+lld KiB over the last %u); "
	       "%llu tables reused, %llu retired (%llu KiB)\n",
	       (unsigned long long)(s.rehashes - rh_start), (unsigned long long)nb,
	       (unsigned long long)nb * 64 / 1024, (unsigned long long)ops, lookups, vm0, vm1,
	       (long long)(vm1 - vm0), R_CYCLES, (unsigned long long)s.reused,
	       (unsigned long long)s.retired, (unsigned long long)s.retired_bytes / 1024);
	CHECK_EQ(s.buckets, nb);        /* no growth: a constant count */
	CHECK_EQ(s.entries, R_STABLE + live);
	/* a table's worth of slack for whatever else the process maps */
	CHECK(vm1 <= vm0 + nb * 64 / 1024, "VmSize grew by %llu KiB over %u same-size "
	      "rehashes of a %llu KiB table: retired tables are not reused",
	      vm1 - vm0, R_CYCLES, (unsigned long long)nb * 64 / 1024);
	CHECK(s.reused >= R_CYCLES, "only %llu of the rehashes reused a retired table",
	      (unsigned long long)s.reused);
	CHECK(s.retired_bytes <= 4 * nb * 64, "%llu bytes of retired tables beside a table of "
	      "%llu", (unsigned long long)s.retired_bytes, (unsigned long long)nb * 64);
	for (unsigned i = 0; i < R_STABLE; i++) {
		CHECK_RC(get(rh, i, &v));
		CHECK_EQ(v, i + 1);
	}
	for (unsigned k = 0; k < live; k++) {    /* the live part of the ring */
		unsigned slot = base + (tail + k) % ring;
		CHECK(get(rh, slot, &v) == 0 && v == slot + 1, "ring key in slot %u lost", slot);
	}
	hidx_destroy(rh);
}

int main(void)
{
	const char *e = getenv("HX_KEYS");
	unsigned n = e ? (unsigned)strtoul(e, NULL, 10) : 300000;
	if (n < 20000)
		n = 20000;
	nrecs_max = n < 200000 ? 200000 : n;     /* test_retired's ring */
	recs = calloc(nrecs_max, sizeof(*recs));
	CHECK(recs != NULL);
	test_growth_deletes(n);
	memset(recs, 0, (size_t)n * sizeof(*recs));
	test_reuse(n < 200000 ? n : 200000);
	memset(recs, 0, (size_t)n * sizeof(*recs));
	test_concurrent(n < 300000 ? n : 300000);
	memset(recs, 0, (size_t)nrecs_max * sizeof(*recs));
	test_retired(200000);
	free(recs);
	return CHECK_PASS;
}
