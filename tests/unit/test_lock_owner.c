/*
 * test_lock_owner - lock_release_owner(): a lost compute server's transactions
 * are released (locks freed, parked requests dropped without notify, waiters
 * of other owners granted), except a COMMITTING one, which its commit path
 * releases later.  Exit 0 pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "lock/lock.h"
#include "check.h"


static struct { struct lock_waiter *w; int result; } notes[16];
static int nnotes;

static void on_notify(void *arg, struct lock_waiter *w, int result)
{
	(void)arg;
	CHECK(nnotes < (int)ARRAY_SIZE(notes));
	notes[nnotes].w = w;
	notes[nnotes].result = result;
	nnotes++;
}

static int acq(lock_table_t *lt, lock_txn_t *t, uint64_t k, enum lock_mode m,
	       struct lock_waiter *w)
{
	unsigned char key[8];
	key_from_u64(k, key);
	return lock_acquire(lt, t, 3, key, 8, m, CC_WOUND_WAIT, w);
}

static bool held(lock_table_t *lt, lock_txn_t *t, uint64_t k, enum lock_mode m)
{
	unsigned char key[8];
	key_from_u64(k, key);
	return lock_held(lt, t, 3, key, 8, m);
}

int main(void)
{
	lock_table_t *lt;
	int lost, alive;
	CHECK(lock_table_create(8, on_notify, NULL, &lt) == 0);
	/* alive's txns: k holds key 100; z (young) will wait for key 1 */
	lock_txn_t *k = lock_txn_get(lt, 10, 1, &alive);
	lock_txn_t *z = lock_txn_get(lt, 11, 90, &alive);
	/* lost's txns: a, b hold many keys, p is parked on key 100, q commits */
	lock_txn_t *a = lock_txn_get(lt, 20, 20, &lost), *b = lock_txn_get(lt, 21, 21, &lost);
	lock_txn_t *p = lock_txn_get(lt, 22, 22, &lost), *q = lock_txn_get(lt, 23, 23, &lost);
	struct lock_waiter wp = { 0 }, wz = { 0 };
	CHECK(acq(lt, k, 100, LOCK_X, NULL) == 0);
	for (uint64_t i = 0; i < 50; i++) {
		CHECK(acq(lt, a, i, i % 3 ? LOCK_S : LOCK_X, NULL) == 0);
		if (i % 3)
			CHECK(acq(lt, b, i, LOCK_S, NULL) == 0);   /* shared with a */
	}
	CHECK(acq(lt, p, 100, LOCK_X, &wp) == 1);            /* waits for older k */
	CHECK(acq(lt, z, 1, LOCK_X, &wz) == 1);               /* waits for a, b */
	CHECK(acq(lt, q, 200, LOCK_X, NULL) == 0);
	CHECK(lock_txn_begin_commit(lt, q) == 0);
	CHECK(lock_table_nlocks(lt) == 52);
	lock_txn_t *keep_a = lock_txn_find(lt, 20);           /* a connection's ref */

	CHECK(lock_release_owner(lt, &lost) == 3);           /* a, b, p; not q */
	CHECK(nnotes == 1 && notes[0].w == &wz && notes[0].result == 0);
	CHECK(held(lt, z, 1, LOCK_X));
	CHECK(lock_txn_find(lt, 20) == NULL && lock_txn_find(lt, 22) == NULL);
	CHECK(lock_txn_status(keep_a) == TXN_PREEMPTED);     /* later requests fail */
	CHECK(acq(lt, keep_a, 7, LOCK_S, NULL) == LOTUS_EPREEMPTED);
	CHECK(held(lt, q, 200, LOCK_X));
	CHECK(lock_table_nlocks(lt) == 3);                    /* 1 (z), 100 (k), 200 (q) */
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.txns_active == 3);                            /* k, z, q */
	CHECK(lock_release_owner(lt, &lost) == 0);
	lock_txn_release(lt, keep_a);                         /* harmless: already released */
	lock_txn_release(lt, k);                              /* p's waiter is gone */
	CHECK(nnotes == 1);
	lock_txn_release(lt, q);
	lock_txn_release(lt, z);
	lock_txn_put(lt, a);                                  /* the refs of a, b, p from get */
	lock_txn_put(lt, b);
	lock_txn_put(lt, p);
	lock_table_stats(lt, &s);
	CHECK(s.txns_active == 0 && lock_table_nlocks(lt) == 0);
	lock_table_destroy(lt);
	printf("release_owner ok\n");
	return 0;
}
