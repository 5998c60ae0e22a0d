/*
 * test_ckpt_fuzzy_image - recovery from a fuzzy checkpoint image in which a
 * record moved while the checkpoint ran, deterministically.
 *
 * A checkpoint copies its pages at different moments (and a page that was
 * clean when it collected its dirty pages keeps an older copy), so a record
 * that was deleted and re-inserted into a slot on another page between two
 * page copies shows up in both slots of the image.  store_rebuild must keep
 * one copy and free the other (log replay settles the key), not refuse the
 * image as corrupt: that refusal made test_ckpt_recover fail about 4 runs in
 * 10 ("rebuilding the store from .../pages-b.dat failed: Invalid argument").
 *
 * Here the image is built by hand: the page of the record's first slot from
 * before the move, every other page from after it.  Then rebuild, replay the
 * moves by key as redo replay does, and compare.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/store.h"
#include "check.h"

#define MAXV 3000u       /* 3144-byte slots: several slots per page, slots span pages */

enum { K, F1, F2, F3, J, NKEYS };

static unsigned char val[MAXV];

static store_t *fresh(uint16_t *t)
{
	store_t *st;
	CHECK(store_create(64u << 20, 0, &st) == 0);
	CHECK(store_table_create(st, "big values", MAXV, t) == 0);
	return st;
}

static const unsigned char *value_of(unsigned key, unsigned version)
{
	memset(val, (int)(key * 16 + version), sizeof(val));
	return val;
}

static void insert(store_t *st, uint16_t t, unsigned key, unsigned version, store_loc_t *loc)
{
	unsigned char k[8];
	key_from_u64(key, k);
	CHECK(store_insert(st, t, k, 8, value_of(key, version), 100 + key, loc) == 0);
}

/* The redo replay of the test model: upsert or delete by key. */
static void replay_upsert(store_t *st, uint16_t t, unsigned key, unsigned version)
{
	unsigned char k[8];
	store_loc_t loc;
	key_from_u64(key, k);
	if (store_get(st, t, k, 8, &loc) == 0)
		CHECK(store_update(st, loc, value_of(key, version), 100 + key) == 0);
	else
		insert(st, t, key, version, &loc);
}

static void replay_delete(store_t *st, uint16_t t, unsigned key)
{
	unsigned char k[8];
	key_from_u64(key, k);
	int rc = store_delete(st, t, k, 8);
	CHECK(rc == 0 || rc == LOTUS_ENOTFOUND);
}

static void check_value(store_t *st, uint16_t t, unsigned key, unsigned version)
{
	unsigned char k[8];
	store_loc_t loc;
	key_from_u64(key, k);
	CHECK(store_get(st, t, k, 8, &loc) == 0);
	struct store_rec *r = store_rec_at(st, loc, t, k, 8);
	CHECK(r && r->value_len == 100 + key);
	CHECK(memcmp(store_rec_value(r), value_of(key, version), r->value_len) == 0);
}

int main(void)
{
	uint16_t t, t2;
	store_loc_t loc[NKEYS], moved;
	store_t *a = fresh(&t);
	uint32_t ps = store_page_size(a);
	unsigned char *pool = store_pool(a, NULL);

	/* Before the checkpoint: K in the first slot of an extent, three more
	 * records so that the next never-used slot sits on a later page. */
	for (unsigned i = K; i <= F3; i++)
		insert(a, t, i, 1, &loc[i]);
	uint64_t page_k = loc[K] >> 24;

	/* The checkpoint copies K's page here ... */
	unsigned char *old_page = malloc(ps);
	CHECK(old_page);
	memcpy(old_page, pool + page_k * ps, ps);

	/* ... then K moves: deleted, its slot taken by J, re-inserted elsewhere
	 * (all logged above the checkpoint's begin LSN) ... */
	replay_delete(a, t, K);
	insert(a, t, J, 1, &loc[J]);
	CHECK(loc[J] >> 12 == loc[K] >> 12);            /* J took K's old slot */
	insert(a, t, K, 2, &moved);
	/* The new slot's header must sit on another page than K's old one
	 * (extent header 16 bytes, slot = ALIGN8(16 + STORE_KEY_MAX + MAXV)),
	 * or the stale page would hide the move. */
	uint64_t off = 16 + ((moved >> 12) & 4095) * ((16 + STORE_KEY_MAX + MAXV + 7) & ~7ull);
	CHECK((moved >> 24) + off / ps != page_k);

	/* ... and copies the page with K's new slot afterwards. */
	struct store_stats s;
	store_stats(a, &s);
	size_t used = (size_t)s.pages_used * ps;
	unsigned char *image = malloc(used);
	CHECK(image);
	memcpy(image, pool + ps, used);
	memcpy(image + (page_k - 1) * ps, old_page, ps);

	/* Recovery: the image holds K twice.  Rebuild keeps one copy. */
	store_t *b = fresh(&t2);
	CHECK(t2 == t);
	memcpy((unsigned char *)store_pool(b, NULL) + ps, image, used);
	int rc = store_rebuild(b, s.pages_used);
	if (rc)
		fprintf(stderr, "store_rebuild: %s\n", rc == -EINVAL ? "EINVAL" : lotus_strerror(rc));
	CHECK(rc == 0);
	struct store_stats s2;
	store_stats(b, &s2);
	CHECK(s2.records == 4);                         /* K once, F1..F3; J not yet */

	/* Replay from the begin LSN: the move, by key. */
	replay_delete(b, t, K);
	replay_upsert(b, t, J, 1);
	replay_upsert(b, t, K, 2);

	check_value(b, t, K, 2);
	check_value(b, t, J, 1);
	for (unsigned i = F1; i <= F3; i++)
		check_value(b, t, i, 1);
	store_stats(b, &s2);
	CHECK(s2.records == NKEYS);                     /* the stale copy did not leak */

	store_destroy(b);
	store_destroy(a);
	free(image);
	free(old_page);
	printf("ok\n");
	return 0;
}
