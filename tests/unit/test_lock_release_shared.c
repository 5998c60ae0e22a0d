/*
 * test_lock_release_shared - lock_txn_release_shared (a PREPARE past its lock
 * point gives up its S locks, keeps its X locks):
 *   a txn holding S on a, S->X on b and X on c releases its shared ones: a
 *   is free for an X lock of another txn (a parked writer is granted), b and
 *   c stay X (lock_held; readers of them wait, even under NO_WAIT, since p
 *   is COMMITTING, and are granted at its release); after the full release
 *   nothing is left.  Also lock_txn_dep_note keeps the maximum.
 * Exit 0 pass, 1 fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "lock/lock.h"
#include "check.h"


static int granted;
static void on_notify(void *arg, struct lock_waiter *w, int result)
{
	(void)arg;
	(void)w;
	if (result == 0)
		granted++;
}

static int acq(lock_table_t *lt, lock_txn_t *t, const char *key, enum lock_mode m,
	       enum cc_proto cc, struct lock_waiter *w)
{
	return lock_acquire(lt, t, 1, key, (uint16_t)strlen(key), m, cc, w);
}

int main(void)
{
	lock_table_t *lt;
	int owner;
	struct lock_waiter w1 = { 0 }, w2 = { 0 }, w3 = { 0 }, w4 = { 0 }, wp = { 0 };
	CHECK(lock_table_create(6, on_notify, NULL, &lt) == 0);
	lock_txn_t *p = lock_txn_get(lt, 1, 10, &owner);   /* the preparer: older */
	lock_txn_t *o = lock_txn_get(lt, 2, 20, &owner);   /* another txn */
	w1.txn = w2.txn = w3.txn = w4.txn = p;
	wp.txn = o;
	CHECK(acq(lt, p, "a", LOCK_S, CC_NO_WAIT, &w1) == 0);
	CHECK(acq(lt, p, "b", LOCK_S, CC_NO_WAIT, &w2) == 0);
	CHECK(acq(lt, p, "b", LOCK_X, CC_NO_WAIT, &w3) == 0);   /* upgrade */
	CHECK(acq(lt, p, "c", LOCK_X, CC_NO_WAIT, &w4) == 0);
	CHECK(acq(lt, o, "a", LOCK_X, CC_WOUND_WAIT, &wp) == 1);  /* younger: waits */
	CHECK(lock_txn_begin_commit(lt, p) == 0);

	lock_txn_dep_note(p, 500);
	lock_txn_dep_note(p, 300);
	CHECK(lock_txn_dep(p) == 500);

	lock_txn_release_shared(lt, p);
	CHECK(granted == 1);                                   /* the writer got a */
	CHECK(lock_held(lt, o, 1, "a", 1, LOCK_X));
	CHECK(!lock_held(lt, p, 1, "a", 1, LOCK_S));
	CHECK(lock_held(lt, p, 1, "b", 1, LOCK_X));
	CHECK(lock_held(lt, p, 1, "c", 1, LOCK_X));
	/* p is COMMITTING: a reader of its X keys waits, even under NO_WAIT
	 * (the prepared-owner rule), and is granted at p's release */
	struct lock_waiter xb = { .txn = o }, xc = { .txn = o };
	CHECK(acq(lt, o, "b", LOCK_S, CC_NO_WAIT, &xb) == 1);
	CHECK(acq(lt, o, "c", LOCK_S, CC_NO_WAIT, &xc) == 1);
	lock_txn_release_shared(lt, p);                        /* nothing more to do */
	CHECK(lock_held(lt, p, 1, "c", 1, LOCK_X) && granted == 1);

	lock_txn_release(lt, p);
	CHECK(granted == 3);
	CHECK(lock_held(lt, o, 1, "b", 1, LOCK_S) && lock_held(lt, o, 1, "c", 1, LOCK_S));
	lock_txn_release(lt, o);
	CHECK(lock_table_nlocks(lt) == 0);
	lock_table_destroy(lt);
	printf("ok\n");
	return 0;
}
