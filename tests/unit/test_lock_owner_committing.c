/*
 * test_lock_owner_committing - lock_release_owner_committing(): of a lost
 * client's COMMITTING transactions, the ones the caller keeps (prepared,
 * waiting for a decision) keep their locks and lose their owner, every other
 * one is released; RUNNING ones are not touched.  More kept txns than one
 * collection batch (64) must not make it loop.  Exit 0 pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "lock/lock.h"
#include "check.h"


#define N 300          /* COMMITTING txns of the lost client: even ids kept */

static int asked[N + 1];

static void on_notify(void *arg, struct lock_waiter *w, int result)
{
	(void)arg; (void)w; (void)result;
}

static int keep_even(void *arg, uint64_t id)
{
	CHECK(arg == (void *)asked && id >= 1 && id <= N);
	asked[id]++;
	return id % 2 == 0;
}

int main(void)
{
	lock_table_t *lt;
	int lost, other;
	lock_txn_t *t[N + 1];
	unsigned char key[8];
	CHECK(lock_table_create(6, on_notify, NULL, &lt) == 0);   /* few buckets: long chains */
	for (uint64_t i = 1; i <= N; i++) {
		t[i] = lock_txn_get(lt, i, i, &lost);
		key_from_u64(i, key);
		CHECK(lock_acquire(lt, t[i], 1, key, 8, LOCK_X, CC_NO_WAIT, NULL) == 0);
		CHECK(lock_txn_begin_commit(lt, t[i]) == 0);
	}
	lock_txn_t *run = lock_txn_get(lt, 1000, 1, &lost);        /* RUNNING: not ours */
	lock_txn_t *o = lock_txn_get(lt, 1001, 1, &other);         /* another owner's */
	CHECK(lock_txn_begin_commit(lt, o) == 0);
	key_from_u64(5000, key);
	CHECK(lock_acquire(lt, run, 1, key, 8, LOCK_X, CC_NO_WAIT, NULL) == 0);

	CHECK(lock_release_owner_committing(lt, &lost, keep_even, asked) == N / 2);
	for (uint64_t i = 1; i <= N; i++) {
		CHECK(asked[i] == 1);                       /* each asked once */
		key_from_u64(i, key);
		lock_txn_t *f = lock_txn_find(lt, i);
		if (i % 2) {
			CHECK(f == NULL);                   /* released */
		} else {
			CHECK(f == t[i] && lock_held(lt, f, 1, key, 8, LOCK_X));
			lock_txn_put(lt, f);
		}
	}
	CHECK(lock_txn_status(run) == TXN_RUNNING && lock_txn_find(lt, 1001) == o);
	lock_txn_put(lt, o);
	/* the kept ones have no owner now: a second loss of the client finds none */
	CHECK(lock_release_owner_committing(lt, &lost, keep_even, asked) == 0);
	CHECK(lock_release_owner(lt, &lost) == 1);          /* run */
	for (uint64_t i = 1; i <= N; i++) {
		CHECK(asked[i] == 1);
		if (i % 2 == 0)
			lock_txn_release(lt, t[i]);         /* the resolver decides later */
		else
			lock_txn_put(lt, t[i]);             /* our ref from get */
	}
	lock_txn_put(lt, run);
	lock_txn_release(lt, o);
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.txns_active == 0 && lock_table_nlocks(lt) == 0);
	lock_table_destroy(lt);
	printf("release_owner_committing ok\n");
	return 0;
}
