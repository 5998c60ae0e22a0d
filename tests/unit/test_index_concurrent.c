/*
 * test_index_concurrent.c - the B+tree under 4 threads of mixed operations.
 *
 * Key ids are split by id % 8:
 *   0      stable: inserted before the threads start, never deleted (values
 *          are updated) - every scan must return those in its range;
 *   1..4   owned by one thread, which checks every result against its model;
 *   5..7   shared: every thread inserts/deletes/updates them at random.
 * Keys are 8-byte big-endian integers, 22-byte keys sharing a 14-byte prefix
 * and 31-byte keys sharing a 23-byte prefix (longer than the leaf prefix, so
 * leaf ties read the full key; longer than 16 bytes, so with owned keys they
 * read the key copies that deletes recycle under the readers).
 * Every scan checks: keys strictly ascending, each value names its key, and
 * no stable key in the covered range is missing.  At the end the whole
 * contents are checked against the owners' models and the stable set.
 * The whole run happens twice: borrowed keys (the key callback) and owned
 * keys (index_create_owned).
 * LOTUS_TEST_OPS overrides the operations per thread (400000; 40000 on TSan).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/index.h"

#define NKEYS    40000
#define NTHREADS 4
#define SCAN_MAX 300

#define KEY_BYTES 32
#include "test_index_keys.h"
#include "check.h"
static index_t *ix;
/* TSan runs the same code ~20x slower: 400000 operations per thread took
 * over 120 s there on a loaded 2-core machine.  A tenth (160000 operations
 * in all) still races inserts, deletes and updates against scans. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OPS_DEFAULT 40000
#endif
#endif
#if defined(__SANITIZE_THREAD__) && !defined(OPS_DEFAULT)
#define OPS_DEFAULT 40000
#endif
/* ASan: 400000 took 84 s of the ASan stage; a quarter (400000 in all) runs
 * the same races and splits, and the normal build runs them all. */
#if defined(__SANITIZE_ADDRESS__) && !defined(OPS_DEFAULT)
#define OPS_DEFAULT 100000
#endif
#ifndef OPS_DEFAULT
#define OPS_DEFAULT 400000
#endif
static unsigned ops_per_thread = OPS_DEFAULT;
static int failed;


static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void make_keys(void)
{
	for (unsigned i = 0; i < NKEYS; i++) {
		struct key *k = &keys[i];
		if (i % 3 == 0) {
			key_from_u64((uint64_t)i * 7919, k->b);
			k->len = 8;
		} else if (i % 3 == 1) {
			memcpy(k->b, "shared-prefix-", 14);
			key_from_u64((uint64_t)i * 104729 % 1000003, k->b + 14);
			k->len = 22;
		} else {
			memcpy(k->b, "shared-prefix-and-more-", 23);
			key_from_u64((uint64_t)i * 104729 % 1000003, k->b + 23);
			k->len = 31;
		}
	}
	keys_sort();
}

struct scan_res {
	unsigned n;
	unsigned rank[SCAN_MAX];
	int bad;
};

static int scan_cb(void *arg, const unsigned char *key, unsigned klen, uint64_t val)
{
	struct scan_res *r = arg;
	unsigned id = (uint32_t)val % NKEYS;
	if (kcmp(key, klen, keys[id].b, keys[id].len) != 0 ||
	    (r->n && rank_of[id] <= r->rank[r->n - 1]) || r->n == SCAN_MAX) {
		r->bad = 1;
		return 1;
	}
	r->rank[r->n++] = rank_of[id];
	return 0;
}

static void do_scan(uint64_t *seed)
{
	const struct key *s = &keys[rnd(seed) % NKEYS];
	unsigned slen = s->len - (unsigned)(rnd(seed) % 2);   /* present or not */
	unsigned limit = 1 + rnd(seed) % SCAN_MAX;
	struct scan_res r = { 0 };
	int got = index_scan(ix, s->b, slen, limit, scan_cb, &r);
	CHECK(!r.bad && got == (int)r.n && r.n <= limit);
	unsigned from = keys_lower_bound(s->b, slen);
	unsigned to = r.n == limit ? r.rank[r.n - 1] : NKEYS - 1;
	CHECK(r.n == 0 || r.rank[0] >= from);
	unsigned j = 0;
	for (unsigned rk = from; rk <= to && rk < NKEYS; rk++) {
		if (order[rk] % 8 != 0)
			continue;
		while (j < r.n && r.rank[j] < rk)
			j++;
		CHECK(j < r.n && r.rank[j] == rk);          /* stable key missing */
	}
}

struct worker {
	pthread_t tid;
	unsigned me;
	unsigned char present[NKEYS];   /* owned keys only */
	uint64_t val[NKEYS];
};

static void owned_op(struct worker *w, uint64_t *seed, unsigned i)
{
	unsigned id = (unsigned)(rnd(seed) % (NKEYS / 8)) * 8 + 1 + w->me;
	const struct key *k = &keys[id];
	uint64_t v = id | (uint64_t)(i + 1) << 32, got = 0;
	int rc;
	switch (rnd(seed) % 4) {
	case 0:
		rc = index_insert(ix, k->b, k->len, v, &got);
		CHECK(rc == (w->present[id] ? LOTUS_EEXISTS : 0));
		if (!rc) {
			w->present[id] = 1;
			w->val[id] = v;
		}
		break;
	case 1:
		rc = index_delete(ix, k->b, k->len, &got);
		CHECK(rc == (w->present[id] ? 0 : LOTUS_ENOTFOUND));
		CHECK(rc || got == w->val[id]);
		w->present[id] = 0;
		break;
	case 2:
		rc = index_update(ix, k->b, k->len, v, &got);
		CHECK(rc == (w->present[id] ? 0 : LOTUS_ENOTFOUND));
		if (!rc)
			w->val[id] = v;
		break;
	default:
		rc = index_get(ix, k->b, k->len, &got);
		CHECK(rc == (w->present[id] ? 0 : LOTUS_ENOTFOUND));
		CHECK(rc || got == w->val[id]);
	}
}

static void shared_op(uint64_t *seed, unsigned i)
{
	unsigned id = (unsigned)(rnd(seed) % (NKEYS / 8)) * 8 + 5 + (unsigned)(rnd(seed) % 3);
	if (rnd(seed) % 4 == 0)
		id = (unsigned)(rnd(seed) % (NKEYS / 8)) * 8;          /* stable */
	const struct key *k = &keys[id];
	uint64_t v = id | (uint64_t)(i + 1) << 32, got;
	int rc;
	switch (id % 8 ? rnd(seed) % 4 : 2 + rnd(seed) % 2) {
	case 0:
		rc = index_insert(ix, k->b, k->len, v, NULL);
		CHECK(rc == 0 || rc == LOTUS_EEXISTS);
		break;
	case 1:
		rc = index_delete(ix, k->b, k->len, NULL);
		CHECK(rc == 0 || rc == LOTUS_ENOTFOUND);
		break;
	case 2:
		rc = index_update(ix, k->b, k->len, v, NULL);
		CHECK(rc == 0 || (rc == LOTUS_ENOTFOUND && id % 8));
		break;
	default:
		rc = index_get(ix, k->b, k->len, &got);
		CHECK((rc == 0 && (uint32_t)got == id) || (rc == LOTUS_ENOTFOUND && id % 8));
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t seed = 0x9e3779b97f4a7c15ull * (w->me + 1);
	for (unsigned i = 0; i < ops_per_thread && !__atomic_load_n(&failed, __ATOMIC_RELAXED); i++) {
		unsigned r = rnd(&seed) % 100;
		if (r < 45)
			owned_op(w, &seed, i);
		else if (r < 95)
			shared_op(&seed, i);
		else
			do_scan(&seed);
	}
	return NULL;
}

static unsigned final_seen[NKEYS];

static int final_cb(void *arg, const unsigned char *key, unsigned klen, uint64_t val)
{
	unsigned *prev = arg, id = (uint32_t)val % NKEYS;
	if (kcmp(key, klen, keys[id].b, keys[id].len) || (*prev != ~0u && rank_of[id] <= *prev))
		__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
	*prev = rank_of[id];
	final_seen[id] = 1;
	return 0;
}

static void final_check(struct worker *w)
{
	unsigned prev = ~0u;
	memset(final_seen, 0, sizeof(final_seen));
	index_scan(ix, NULL, 0, NKEYS + 1, final_cb, &prev);
	for (unsigned id = 0; id < NKEYS; id++) {
		uint64_t v;
		int rc = index_get(ix, keys[id].b, keys[id].len, &v);
		unsigned cls = id % 8;
		CHECK(rc == (final_seen[id] ? 0 : LOTUS_ENOTFOUND));
		if (cls == 0)
			CHECK(rc == 0);
		else if (cls <= 4)
			CHECK(rc == (w[cls - 1].present[id] ? 0 : LOTUS_ENOTFOUND) &&
			      (rc || v == w[cls - 1].val[id]));
	}
}

static int run(int owned)
{
	static struct worker w[NTHREADS];
	memset(w, 0, sizeof(w));
	if (owned ? index_create_owned(&ix) : index_create(key_fn, NULL, &ix))
		return 1;
	for (unsigned id = 0; id < NKEYS; id += 8)
		if (index_insert(ix, keys[id].b, keys[id].len, id, NULL))
			return 1;
	for (unsigned t = 0; t < NTHREADS; t++) {
		w[t].me = t;
		pthread_create(&w[t].tid, NULL, worker_main, &w[t]);
	}
	for (unsigned t = 0; t < NTHREADS; t++)
		pthread_join(w[t].tid, NULL);
	if (!failed)
		final_check(w);
	printf("%s keys: index bytes %zu (key copies %zu)\n", owned ? "owned" : "borrowed",
	       index_bytes(ix), index_key_bytes(ix));
	index_destroy(ix);
	return failed;
}

int main(void)
{
	const char *e = getenv("LOTUS_TEST_OPS");
	if (e)
		ops_per_thread = (unsigned)atoi(e);
	make_keys();
	int bad = run(0) || run(1);
	printf(bad ? "FAILED\n" : "ok\n");
	return bad ? 1 : 0;
}
