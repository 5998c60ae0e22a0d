/*
 * test_index_model.c - the B+tree against a model, single-threaded.
 *
 * A fixed universe of keys (1..128 bytes, many sharing prefixes longer than
 * the index's 8-byte leaf prefix, some with zero bytes, some prefixes of
 * others) is sorted once; the model is a "present" flag and value per key.
 * Random insert/delete/get/update/scan operations are checked against it, then
 * the whole contents are compared and the index is emptied and refilled.
 * Values are key id | version << 32, and the key callback maps a value back to
 * its key the way the store maps a location to its record.
 * Everything runs twice: with borrowed keys (index_create + the callback) and
 * with owned keys (index_create_owned), where deleting and reloading every key
 * must reuse the key copies' memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/index.h"

#define NKEYS 30000
/* ASan: a quarter of the operations (it took 78 s of the ASan stage); they
 * still fill, split and empty the index twice, and the normal build runs
 * them all. */
#if defined(__SANITIZE_ADDRESS__)
#define NOPS  100000
#else
#define NOPS  400000
#endif

#define KEY_BYTES INDEX_KEY_MAX
#include "test_index_keys.h"
#include "check.h"
static int present[NKEYS];
static uint64_t model_val[NKEYS];
static uint64_t rng = 88172645463325252ull;


static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void make_key(struct key *k)
{
	static const char *const pfx[] = { "", "user", "shared-prefix-longer-than-16-",
					   "shared-prefix-longer-than-16-x", "\0\0\0\0\0\0\0\0\0" };
	unsigned kind = rnd() % 6;
	if (kind == 5) {                        /* 8-byte big-endian integer */
		key_from_u64(rnd() % 100000, k->b);
		k->len = 8;
		return;
	}
	const char *p = pfx[kind];
	unsigned plen = kind == 4 ? 9 : (unsigned)strlen(p);
	unsigned extra = rnd() % (kind == 0 ? 12 : 24) + (plen == 0);
	if (rnd() % 50 == 0)
		extra = INDEX_KEY_MAX - plen;
	memcpy(k->b, p, plen);
	for (unsigned i = 0; i < extra; i++)
		k->b[plen + i] = (unsigned char)(rnd() % 4 == 0 ? 0 : 'a' + rnd() % 3);
	k->len = plen + extra;
}

static void make_universe(void)
{
	for (unsigned i = 0; i < NKEYS; i++)
		order[i] = i;
	for (unsigned i = 0; i < NKEYS; i++) {
		make_key(&keys[i]);
	}
	qsort(order, NKEYS, sizeof(order[0]), order_cmp);
	/* drop duplicates by regenerating until unique */
	for (int again = 1; again;) {
		again = 0;
		for (unsigned i = 1; i < NKEYS; i++) {
			if (order_cmp(&order[i - 1], &order[i]) == 0) {
				struct key *k = &keys[order[i]];
				k->len = 8 + rnd() % 100;
				for (unsigned j = 0; j < k->len; j++)
					k->b[j] = (unsigned char)rnd();
				again = 1;
			}
		}
		qsort(order, NKEYS, sizeof(order[0]), order_cmp);
	}
	keys_sort();
}

struct scan_state {
	unsigned next_rank;   /* where the model expects the next key */
	unsigned n;
	unsigned stop_after;
};

static int scan_cb(void *arg, const unsigned char *key, unsigned klen, uint64_t val)
{
	struct scan_state *s = arg;
	while (s->next_rank < NKEYS && !present[order[s->next_rank]])
		s->next_rank++;
	CHECK(s->next_rank < NKEYS);
	unsigned id = order[s->next_rank];
	CHECK(kcmp(key, klen, keys[id].b, keys[id].len) == 0);
	CHECK(val == model_val[id]);
	s->next_rank++;
	s->n++;
	return s->stop_after && s->n == s->stop_after;
}

static unsigned model_count_from(unsigned rank, unsigned limit)
{
	unsigned n = 0;
	for (; rank < NKEYS && n < limit; rank++)
		n += present[order[rank]];
	return n;
}

static void do_scan(index_t *ix)
{
	unsigned char start[INDEX_KEY_MAX];
	unsigned slen;
	if (rnd() % 2) {
		struct key *k = &keys[rnd() % NKEYS];
		slen = k->len;
		memcpy(start, k->b, slen);
		if (rnd() % 2 && slen > 1)
			slen--;            /* a start key that is usually absent */
	} else {
		slen = rnd() % 12;
		for (unsigned i = 0; i < slen; i++)
			start[i] = (unsigned char)(rnd() % 4 == 0 ? 0 : 'a' + rnd() % 30);
	}
	unsigned limit = 1 + rnd() % 200;
	struct scan_state s = { keys_lower_bound(start, slen), 0, 0 };
	unsigned want = model_count_from(s.next_rank, limit);
	if (rnd() % 8 == 0)
		s.stop_after = 1 + rnd() % limit;
	int got = index_scan(ix, start, slen, limit, scan_cb, &s);
	if (s.stop_after && s.stop_after < want)
		want = s.stop_after;
	CHECK(got == (int)want && s.n == want);
}

static void one_op(index_t *ix, unsigned ver)
{
	unsigned id = rnd() % NKEYS;
	struct key *k = &keys[id];
	uint64_t val = id | (uint64_t)ver << 32, got = 0;
	int rc;
	switch (rnd() % 10) {
	case 0: case 1: case 2: case 3:
		rc = index_insert(ix, k->b, k->len, val, &got);
		CHECK(rc == (present[id] ? LOTUS_EEXISTS : 0));
		if (rc == 0) {
			present[id] = 1;
			model_val[id] = val;
		} else {
			CHECK(got == model_val[id]);
		}
		break;
	case 4: case 5:
		rc = index_delete(ix, k->b, k->len, &got);
		CHECK(rc == (present[id] ? 0 : LOTUS_ENOTFOUND));
		if (rc == 0)
			CHECK(got == model_val[id]);
		present[id] = 0;
		break;
	case 6:
		rc = index_update(ix, k->b, k->len, val, &got);
		CHECK(rc == (present[id] ? 0 : LOTUS_ENOTFOUND));
		if (rc == 0) {
			CHECK(got == model_val[id]);
			model_val[id] = val;
		}
		break;
	case 7: case 8:
		rc = index_get(ix, k->b, k->len, &got);
		CHECK(rc == (present[id] ? 0 : LOTUS_ENOTFOUND));
		if (rc == 0)
			CHECK(got == model_val[id]);
		break;
	default:
		do_scan(ix);
	}
}

static void check_all(index_t *ix)
{
	struct scan_state s = { 0, 0, 0 };
	unsigned want = model_count_from(0, NKEYS);
	CHECK(index_scan(ix, NULL, 0, NKEYS + 1, scan_cb, &s) == (int)want);
	for (unsigned i = 0; i < NKEYS; i++) {
		uint64_t v;
		int rc = index_get(ix, keys[i].b, keys[i].len, &v);
		CHECK(rc == (present[i] ? 0 : LOTUS_ENOTFOUND));
	}
}

static void run(int owned)
{
	index_t *ix;
	uint64_t v;
	memset(present, 0, sizeof(present));
	memset(model_val, 0, sizeof(model_val));
	if (owned)
		CHECK(index_create_owned(&ix) == 0 && index_owns_keys(ix));
	else
		CHECK(index_create(key_fn, NULL, &ix) == 0 && !index_owns_keys(ix));
	CHECK(index_key_bytes(ix) == 0);

	unsigned char big[INDEX_KEY_MAX + 1] = { 0 };
	CHECK(index_insert(ix, big, INDEX_KEY_MAX + 1, 1, NULL) == LOTUS_ETOOBIG);
	CHECK(index_insert(ix, big, 0, 1, NULL) == -EINVAL);
	CHECK(index_get(ix, "a", 1, &v) == LOTUS_ENOTFOUND);
	CHECK(index_scan(ix, NULL, 0, 10, scan_cb, &(struct scan_state){ 0 }) == 0);

	for (unsigned round = 0; round < 2; round++) {
		for (unsigned i = 0; i < NOPS; i++) {
			one_op(ix, i + 1);
			if (i % 100000 == 0)
				check_all(ix);
		}
		check_all(ix);
		/* empty it (leaves stay, empty) and make sure it still works */
		for (unsigned i = 0; i < NKEYS; i++) {
			int rc = index_delete(ix, keys[i].b, keys[i].len, NULL);
			CHECK(rc == (present[i] ? 0 : LOTUS_ENOTFOUND));
			present[i] = 0;
		}
		check_all(ix);
	}
	/* sequential (append-order) load: the left-heavy split path */
	for (unsigned r = 0; r < NKEYS; r++) {
		unsigned id = order[r];
		CHECK(index_insert(ix, keys[id].b, keys[id].len, id, NULL) == 0);
		present[id] = 1;
		model_val[id] = id;
	}
	check_all(ix);
	size_t kb = index_key_bytes(ix);
	CHECK(owned ? kb > 0 : kb == 0);
	/* delete and reload everything: key copies come back from the free lists */
	for (unsigned r = 0; r < NKEYS; r++) {
		unsigned id = order[(r * 7919u) % NKEYS];
		CHECK(index_delete(ix, keys[id].b, keys[id].len, NULL) == 0);
		present[id] = 0;
	}
	check_all(ix);
	for (unsigned r = 0; r < NKEYS; r++) {
		unsigned id = order[(r * 104729u) % NKEYS];
		CHECK(index_insert(ix, keys[id].b, keys[id].len, id, NULL) == 0);
		present[id] = 1;
	}
	check_all(ix);
	CHECK(index_key_bytes(ix) == kb);
	printf("%s keys: index bytes %zu (key copies %zu) for %u keys\n",
	       owned ? "owned" : "borrowed", index_bytes(ix), kb, NKEYS);
	index_destroy(ix);
}

int main(void)
{
	index_t *ix;
	make_universe();
	CHECK(index_create(NULL, NULL, &ix) == -EINVAL);
	run(0);
	run(1);
	printf("ok\n");
	return 0;
}
