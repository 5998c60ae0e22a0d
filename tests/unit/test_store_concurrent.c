/*
 * test_store_concurrent.c - the record store under 4 threads.
 *
 * All threads create the same tables at once (one id each).  Each thread
 * then inserts, updates, deletes and reads its own keys (checking values and
 * that every old location goes stale once its record is deleted), churns a
 * shared key range with the others (slots move between the per-thread free
 * lists), and scans.  At the end the record count in store_stats matches the
 * contents.  The pool is small, so slots are reused many times.
 * It runs twice: with the index borrowing keys from the record slots
 * (store_index_borrow_keys), and with the index owning key copies (default).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"

#define NTHREADS 4
#define OWNED    2000
#define SHARED   2000
#define VLEN     100

static store_t *st;
static uint16_t table_ids[NTHREADS][2];
static unsigned ops = 200000;
static int failed;


struct worker {
	pthread_t tid;
	unsigned me;
	uint64_t seed;
	store_loc_t loc[OWNED];     /* 0 = absent */
	uint32_t ver[OWNED];
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Owned keys are longer than the index's 8-byte prefix and share it. */
static unsigned owned_key(unsigned me, unsigned i, unsigned char *k)
{
	memcpy(k, "owned-key-", 10);
	k[10] = (unsigned char)me;
	key_from_u64(i, k + 11);
	return 19;
}

static void fill(unsigned char *v, unsigned i, uint32_t ver)
{
	memset(v, (int)(i + ver), VLEN);
	memcpy(v, &ver, sizeof(ver));
}

static void owned_op(struct worker *w, uint16_t t)
{
	unsigned char k[32], v[VLEN], want[VLEN];
	unsigned i = (unsigned)(rnd(&w->seed) % OWNED), kl = owned_key(w->me, i, k);
	store_loc_t loc;
	struct store_rec *r;
	int rc;
	switch (rnd(&w->seed) % 4) {
	case 0:
		fill(v, i, ++w->ver[i]);
		rc = store_insert(st, t, k, (uint16_t)kl, v, VLEN, &loc);
		CHECK(rc == (w->loc[i] ? LOTUS_EEXISTS : 0));
		CHECK(loc != 0 && (rc || w->loc[i] == 0));
		w->loc[i] = loc;
		if (rc)
			w->ver[i]--;
		break;
	case 1:
		rc = store_delete(st, t, k, (uint16_t)kl);
		CHECK(rc == (w->loc[i] ? 0 : LOTUS_ENOTFOUND));
		if (w->loc[i])
			CHECK(store_rec_at(st, w->loc[i], t, NULL, 0) == NULL);
		w->loc[i] = 0;
		break;
	case 2:
		if (!w->loc[i])
			break;
		fill(v, i, ++w->ver[i]);
		CHECK(store_update(st, w->loc[i], v, VLEN) == 0);
		break;
	default:
		rc = store_get(st, t, k, (uint16_t)kl, &loc);
		CHECK(rc == (w->loc[i] ? 0 : LOTUS_ENOTFOUND));
		if (rc)
			break;
		CHECK(loc == w->loc[i]);
		r = store_rec_at(st, loc, t, k, (uint16_t)kl);
		fill(want, i, w->ver[i]);
		CHECK(r && r->value_len == VLEN && memcmp(store_rec_value(r), want, VLEN) == 0);
	}
}

static void shared_op(struct worker *w, uint16_t t)
{
	unsigned char k[8], v[VLEN] = { 0 };
	key_from_u64(rnd(&w->seed) % SHARED, k);
	store_loc_t loc;
	int rc;
	if (rnd(&w->seed) % 2) {
		rc = store_insert(st, t, k, 8, v, VLEN, &loc);
		CHECK(rc == 0 || rc == LOTUS_EEXISTS);
	} else {
		rc = store_delete(st, t, k, 8);
		CHECK(rc == 0 || rc == LOTUS_ENOTFOUND);
	}
}

struct last_key {
	unsigned char b[STORE_KEY_MAX];
	unsigned len;
};

/* Keys of one scan must be strictly ascending (memcmp, then length). */
static int scan_cb(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc)
{
	struct last_key *l = arg;
	int c = memcmp(key, l->b, MIN(klen, l->len));
	if (c < 0 || (c == 0 && klen <= l->len) || loc == 0)
		__atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
	memcpy(l->b, key, klen);
	l->len = klen;
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	table_ids[w->me][0] = 0xffff;
	if (store_table_create(st, "shared", 512, &table_ids[w->me][0]) ||
	    store_table_create(st, "other", 200, &table_ids[w->me][1])) {
		fprintf(stderr, "table create failed\n");
		failed = 1;
	}
	uint16_t t = table_ids[w->me][0];
	for (unsigned n = 0; n < ops && !__atomic_load_n(&failed, __ATOMIC_RELAXED); n++) {
		unsigned r = rnd(&w->seed) % 100;
		if (r < 60) {
			owned_op(w, t);
		} else if (r < 99) {
			shared_op(w, t);
		} else {
			struct last_key last = { .len = 0 };
			unsigned char start[8];
			key_from_u64(rnd(&w->seed) % SHARED, start);
			store_scan(st, t, start, 8, 100, scan_cb, &last);
		}
	}
	return NULL;
}

static int run(int own_keys)
{
	static struct worker w[NTHREADS];
	memset(w, 0, sizeof(w));
	memset(table_ids, 0, sizeof(table_ids));
	/* enough for every key of both ranges plus the per-thread partial extents */
	if (store_create(16u << 20, 0, &st))
		return 1;
	if (!own_keys)
		store_index_borrow_keys(st);
	for (unsigned i = 0; i < NTHREADS; i++) {
		w[i].me = i;
		w[i].seed = 0x2545f4914f6cdd1dull * (i + 7);
		pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
	}
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(w[i].tid, NULL);
	for (unsigned i = 1; i < NTHREADS; i++)
		if (table_ids[i][0] != table_ids[0][0] || table_ids[i][1] != table_ids[0][1] ||
		    table_ids[0][0] == table_ids[0][1])
			failed = 1;
	uint64_t present = 0;
	for (unsigned i = 0; i < NTHREADS; i++)
		for (unsigned j = 0; j < OWNED; j++)
			present += w[i].loc[j] != 0;
	for (unsigned j = 0; j < SHARED; j++) {
		unsigned char k[8];
		key_from_u64(j, k);
		present += store_get(st, table_ids[0][0], k, 8, NULL) == 0;
	}
	struct store_stats s;
	store_stats(st, &s);
	printf("%s keys: records %llu (expected %llu), pages %llu, index %llu bytes\n",
	       own_keys ? "owned" : "borrowed",
	       (unsigned long long)s.records, (unsigned long long)present,
	       (unsigned long long)s.pages_used, (unsigned long long)s.index_bytes);
	if (s.records != present)
		failed = 1;
	store_destroy(st);
	return failed;
}

int main(void)
{
	const char *e = getenv("LOTUS_TEST_OPS");
	if (e)
		ops = (unsigned)atoi(e);
	int bad = run(0) || run(1);
	printf(bad ? "FAILED\n" : "ok\n");
	return bad ? 1 : 0;
}
