/*
 * test_cache_concurrent.c - 4 threads on one small record cache: data
 * writes, fills, reads and drops, and hint puts/gets/drops, on overlapping
 * keys.  Writes (and fills) of a key come from its owner thread only, so the
 * model is exact: per key, the last value written.  Reads and evictions (and
 * so write-backs) overlap across all threads.
 *
 * Two rounds: a cache for a tenth of the keys, and one for six values with
 * concurrent flushes.  Checked: every value read or written back is intact; write-backs of a key
 * arrive in version order (a stale write-back would go backwards); bytes
 * never exceed the capacity; and after a final flush, every key's last
 * written value is what the model memory server holds (and what the cache
 * holds, if it still caches the key).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "compute/cache.h"
#include "testutil.h"

#define THREADS   4
#define KEYS      512           /* data keys; key k is owned by thread k % THREADS */
#define HINTS     512
#define VMIN      16
#define VMAX      96
#define OPS       150000        /* per thread, unless the time limit comes first */
#define SECONDS   4             /* per round */

struct backing_slot {
	pthread_mutex_t mu;
	uint64_t ver;
	uint32_t len;
	unsigned char b[VMAX];
};
static struct backing_slot backing[KEYS];
static _Atomic uint64_t latest[KEYS];      /* version last written (set just before) */
static _Atomic int failed;
static rcache_t *cache;
static uint64_t capacity;
static _Atomic uint64_t enomem_writes;
static int flush_every;                    /* thread 0 flushes when (i & this) == 0 */

/* A value: version (8 bytes), then bytes derived from key and version. */
static uint32_t make_val(unsigned char *b, uint64_t k, uint64_t ver)
{
	uint32_t len = VMIN + (uint32_t)((k * 13 + ver * 7) % (VMAX - VMIN + 1));
	memcpy(b, &ver, 8);
	for (uint32_t i = 8; i < len; i++)
		b[i] = (unsigned char)(k * 131 + ver * 7 + i);
	return len;
}

/* The version a value carries, or a failure if it is damaged. */
static uint64_t check_val(const unsigned char *b, uint32_t len, uint64_t k)
{
	unsigned char want[VMAX];
	uint64_t ver;
	if (len < 8 || len > VMAX) {
		fprintf(stderr, "key %llu: bad length %u\n", (unsigned long long)k, len);
		exit(1);
	}
	memcpy(&ver, b, 8);
	if (make_val(want, k, ver) != len || memcmp(want, b, len)) {
		fprintf(stderr, "key %llu: damaged value\n", (unsigned long long)k);
		exit(1);
	}
	return ver;
}

static int writeback(void *arg, uint32_t table, const void *key, uint16_t klen,
		     const void *value, uint32_t vlen)
{
	uint64_t k = key_to_u64(key);
	CHECK(table == 1 && klen == 8 && k < KEYS);
	uint64_t ver = check_val(value, vlen, k);
	struct backing_slot *s = &backing[k];
	pthread_mutex_lock(&s->mu);
	if (ver <= s->ver) {
		fprintf(stderr, "key %llu: write-back of v%llu after v%llu\n",
			(unsigned long long)k, (unsigned long long)ver,
			(unsigned long long)s->ver);
		failed = 1;
	}
	s->ver = ver;
	s->len = vlen;
	memcpy(s->b, value, vlen);
	pthread_mutex_unlock(&s->mu);
	if ((ver & 15) == 0)
		sched_yield();                  /* a slow write-back now and then */
	return 0;
}

static void owner_write(uint64_t k, uint64_t ver)
{
	unsigned char key[8], v[VMAX];
	key_from_u64(k, key);
	uint32_t len = make_val(v, k, ver);
	atomic_store(&latest[k], ver);          /* before a reader can see it */
	int rc = rcache_data_write(cache, 1, key, 8, v, len);
	if (rc == 0)
		return;
	/* No room: write through, as the transaction path does.  The cache
	 * dropped any older value of the key (nobody else writes or fills it). */
	CHECK(rc == -ENOMEM);
	atomic_fetch_add(&enomem_writes, 1);
	unsigned char buf[VMAX];
	CHECK(rcache_data_read(cache, 1, key, 8, buf, sizeof(buf), &len) == 0);
	len = make_val(v, k, ver);
	CHECK(writeback(NULL, 1, key, 8, v, len) == 0);
}

/* A miss on an owned key: fetch from the model memory server and fill. */
static void owner_fill(uint64_t k)
{
	unsigned char key[8], v[VMAX];
	uint32_t len;
	key_from_u64(k, key);
	if (rcache_data_read(cache, 1, key, 8, v, sizeof(v), &len))
		return;
	struct backing_slot *s = &backing[k];
	pthread_mutex_lock(&s->mu);
	len = s->len;
	memcpy(v, s->b, len);
	pthread_mutex_unlock(&s->mu);
	if (len)
		CHECK(rcache_data_fill(cache, 1, key, 8, v, len) >= 0 || 1);
}

static void any_read(uint64_t k)
{
	unsigned char key[8], v[VMAX];
	uint32_t len;
	key_from_u64(k, key);
	if (rcache_data_read(cache, 1, key, 8, v, sizeof(v), &len)) {
		uint64_t ver = check_val(v, len, k);
		CHECK(ver <= atomic_load(&latest[k]));
	}
}

static void hint_op(struct rng *r)
{
	unsigned char key[8];
	uint64_t id = rng_below(r, HINTS), loc, x = rng_below(r, 10);
	key_from_u64(id, key);
	if (x < 6) {
		if (rcache_hint_get(cache, 2, key, 8, &loc))
			CHECK(loc % HINTS == id);
		else
			rcache_hint_put(cache, 2, key, 8, id + HINTS * rng_below(r, 1000));
	} else if (x < 9) {
		rcache_hint_put(cache, 2, key, 8, id + HINTS * rng_below(r, 1000));
	} else {
		rcache_drop(cache, 2, key, 8);
	}
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	uint64_t me = (uint64_t)(uintptr_t)arg, ver[KEYS / THREADS] = { 0 };
	struct rng r;
	struct rcache_stats st;
	double end = now_s() + SECONDS;
	rng_seed(&r, 1000 + me);
	for (uint64_t i = 0; i < OPS && !failed; i++) {
		uint64_t x = rng_below(&r, 100), slot = rng_below(&r, KEYS / THREADS);
		uint64_t own = slot * THREADS + me;
		if (x < 30)
			owner_write(own, ++ver[slot]);
		else if (x < 40)
			owner_fill(own);
		else if (x < 65)
			any_read(rng_below(&r, KEYS));
		else if (x < 66) {
			/* drop an owned key after writing it through */
			unsigned char key[8], v[VMAX];
			uint64_t nv = ++ver[slot];
			uint32_t len = make_val(v, own, nv);
			key_from_u64(own, key);
			atomic_store(&latest[own], nv);
			rcache_data_drop(cache, 1, key, 8);
			CHECK(writeback(NULL, 1, key, 8, v, len) == 0);
		} else
			hint_op(&r);
		if (flush_every && me == 0 && (i & flush_every) == 0)
			CHECK(rcache_flush(cache) >= 0);
		if ((i & 1023) == 0) {
			rcache_stats(cache, &st);
			CHECK(st.bytes <= capacity);
			if (now_s() > end)
				break;
		}
	}
	return NULL;
}

static void run_round(uint64_t cap, double admit, int flush_mask)
{
	pthread_t t[THREADS];
	struct rcache_stats st;
	capacity = cap;
	flush_every = flush_mask;
	enomem_writes = 0;
	for (int k = 0; k < KEYS; k++) {
		backing[k].ver = backing[k].len = 0;
		latest[k] = 0;
	}
	CHECK(rcache_create(capacity, admit, 99, writeback, NULL, &cache) == 0);
	double t0 = now_s();
	for (uint64_t i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	double dt = now_s() - t0;
	CHECK(!failed);
	int n = rcache_flush(cache);
	CHECK(n >= 0);
	rcache_stats(cache, &st);
	printf("%.2f s: hits %llu misses %llu admits %llu rejects %llu evictions %llu "
	       "writebacks %llu (flush %d) entries %llu bytes %llu/%llu, %llu writes "
	       "refused\n", dt,
	       (unsigned long long)st.hits, (unsigned long long)st.misses,
	       (unsigned long long)st.admits, (unsigned long long)st.rejects,
	       (unsigned long long)st.evictions, (unsigned long long)st.writebacks, n,
	       (unsigned long long)st.entries, (unsigned long long)st.bytes,
	       (unsigned long long)st.capacity, (unsigned long long)enomem_writes);
	CHECK(st.bytes <= capacity && st.writeback_errors == 0 && st.evictions > 0);
	for (uint64_t k = 0; k < KEYS; k++) {
		unsigned char key[8], v[VMAX];
		uint32_t len;
		uint64_t want = atomic_load(&latest[k]);
		if (!want)
			continue;
		CHECK(backing[k].ver == want);
		check_val(backing[k].b, backing[k].len, k);
		key_from_u64(k, key);
		if (rcache_data_read(cache, 1, key, 8, v, sizeof(v), &len))
			CHECK(check_val(v, len, k) == want);
	}
	CHECK(rcache_flush(cache) == 0);            /* nothing dirty is left */
	/* Everything dropped: the byte count returns to zero. */
	for (uint64_t k = 0; k < KEYS; k++) {
		unsigned char key[8];
		key_from_u64(k, key);
		rcache_data_drop(cache, 1, key, 8);
		rcache_drop(cache, 2, key, 8);
	}
	rcache_stats(cache, &st);
	CHECK(st.entries == 0 && st.bytes == 0);
	rcache_destroy(cache);
}

int main(void)
{
	for (int k = 0; k < KEYS; k++)
		pthread_mutex_init(&backing[k].mu, NULL);
	/* Room for about a tenth of the data keys plus some hints. */
	run_round(KEYS / 10 * rcache_entry_charge(8, VMAX) + 32 * rcache_entry_charge(8, 0),
		  0.5, 0);
	/* Room for 6 values only, and thread 0 flushes now and then. */
	run_round(6 * rcache_entry_charge(8, VMAX), 1.0, 511);
	/* Room for 2 values: writes may find no room and go through. */
	run_round(2 * rcache_entry_charge(8, VMAX), 1.0, 0);
	printf("ok\n");
	return 0;
}
