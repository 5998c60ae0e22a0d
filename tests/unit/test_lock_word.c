/*
 * test_lock_word - the lock word's cases (lock.c): each is decided from the
 * word alone or falls back to the owner list and queue, and the outcome must
 * be what the protocols say either way.
 *   many readers of one key, and a txn holding more locks than its inline
 *   owner slots, are granted and released (no entry left behind);
 *   a PREEMPTED reader stays on a lock while readers join it, and a
 *   conflicting request reaps it on contact;
 *   the waiter flag: readers do not join an X lock or barge past a waiter,
 *   the release hands the lock to the waiter, readers join again after;
 *   an upgrade makes the word X, so readers are refused until its release.
 * Priorities: smaller is older.  Exit 0 pass, 1 fail.
 */
#include <stdio.h>
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

static int acq(lock_table_t *lt, lock_txn_t *t, const char *key, enum lock_mode m,
	       enum cc_proto cc, struct lock_waiter *w)
{
	return lock_acquire(lt, t, 1, key, (uint16_t)strlen(key), m, cc, w);
}

static bool held(lock_table_t *lt, lock_txn_t *t, const char *key, enum lock_mode m)
{
	return lock_held(lt, t, 1, key, (uint16_t)strlen(key), m);
}

static lock_table_t *setup(void)
{
	lock_table_t *lt;
	CHECK(lock_table_create(6, on_notify, NULL, &lt) == 0);
	lock_table_set_fast_reads(lt, false);   /* these cases are the entries' */
	nnotes = 0;
	return lt;
}

static void teardown(lock_table_t *lt)
{
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK_EQ(s.txns_active, 0);
	CHECK_EQ(lock_table_nlocks(lt), 0);
	lock_table_destroy(lt);
}

static void many_readers_many_locks(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *r[20];
	for (int i = 0; i < 20; i++) {
		r[i] = lock_txn_get(lt, 100 + i, 100 + i, NULL);
		CHECK_EQ(acq(lt, r[i], "hot", LOCK_S, CC_NO_WAIT, NULL), 0);
	}
	for (int i = 0; i < 20; i++)
		CHECK(held(lt, r[i], "hot", LOCK_S));
	/* one txn, 40 keys (more than its inline owner slots), S and X */
	lock_txn_t *big = lock_txn_get(lt, 1, 1, NULL);
	char key[16];
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CHECK_EQ(acq(lt, big, key, i % 2 ? LOCK_X : LOCK_S, CC_NO_WAIT, NULL), 0);
		CHECK_EQ(acq(lt, big, key, LOCK_S, CC_NO_WAIT, NULL), 0);   /* covered */
	}
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		CHECK(held(lt, big, key, i % 2 ? LOCK_X : LOCK_S));
		CHECK(held(lt, r[0], key, LOCK_S) == false);
	}
	CHECK_EQ(lock_table_nlocks(lt), 41);
	/* the readers leave one by one: the lock stays until the last */
	for (int i = 0; i < 19; i++)
		lock_txn_release(lt, r[i]);
	CHECK(held(lt, r[19], "hot", LOCK_S));
	lock_txn_t *w = lock_txn_get(lt, 200, 200, NULL);
	CHECK_EQ(acq(lt, w, "hot", LOCK_X, CC_NO_WAIT, NULL), LOTUS_EABORTED);
	lock_txn_release(lt, r[19]);
	CHECK_EQ(acq(lt, w, "hot", LOCK_X, CC_NO_WAIT, NULL), 0);
	lock_txn_release(lt, w);
	lock_txn_release(lt, big);
	CHECK_EQ(nnotes, 0);
	teardown(lt);
}

static void preempted_reader_reaped_on_contact(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *a = lock_txn_get(lt, 50, 50, NULL);
	lock_txn_t *old = lock_txn_get(lt, 10, 10, NULL);
	lock_txn_t *c = lock_txn_get(lt, 70, 70, NULL);
	lock_txn_t *d = lock_txn_get(lt, 80, 80, NULL);
	CHECK_EQ(acq(lt, a, "k", LOCK_S, CC_WOUND_WAIT, NULL), 0);
	CHECK_EQ(acq(lt, a, "j", LOCK_X, CC_WOUND_WAIT, NULL), 0);
	CHECK_EQ(acq(lt, old, "j", LOCK_X, CC_WOUND_WAIT, NULL), 0);   /* wounds a */
	CHECK_EQ(lock_txn_status(a), TXN_PREEMPTED);
	CHECK_EQ(acq(lt, c, "k", LOCK_S, CC_NO_WAIT, NULL), 0);      /* joins a */
	CHECK_EQ(acq(lt, d, "k", LOCK_X, CC_NO_WAIT, NULL), LOTUS_EABORTED);  /* c reads */
	lock_txn_release(lt, c);
	/* only the preempted a is left on k: d's request drops it and gets k */
	CHECK_EQ(acq(lt, d, "k", LOCK_X, CC_NO_WAIT, NULL), 0);
	CHECK(held(lt, d, "k", LOCK_X));
	CHECK(!held(lt, a, "k", LOCK_S));
	CHECK_EQ(acq(lt, a, "z", LOCK_S, CC_WOUND_WAIT, NULL), LOTUS_EPREEMPTED);
	lock_txn_release(lt, a);
	lock_txn_release(lt, old);
	lock_txn_release(lt, d);
	CHECK_EQ(nnotes, 0);
	teardown(lt);
}

static void waiter_flag_handoff(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *o = lock_txn_get(lt, 50, 50, NULL);
	lock_txn_t *r = lock_txn_get(lt, 10, 10, NULL);
	lock_txn_t *n = lock_txn_get(lt, 60, 60, NULL);
	lock_txn_t *n2 = lock_txn_get(lt, 70, 70, NULL);
	lock_txn_t *x = lock_txn_get(lt, 5, 5, NULL);
	struct lock_waiter wr = { 0 }, wx = { 0 };
	CHECK_EQ(acq(lt, o, "k", LOCK_X, CC_WAIT_DIE, NULL), 0);
	CHECK_EQ(acq(lt, r, "k", LOCK_S, CC_WAIT_DIE, &wr), 1);       /* older: waits */
	CHECK_EQ(acq(lt, n, "k", LOCK_S, CC_WAIT_DIE, NULL), LOTUS_EABORTED);  /* younger */
	CHECK_EQ(acq(lt, n2, "k", LOCK_S, CC_NO_WAIT, NULL), LOTUS_EABORTED);
	lock_txn_release(lt, o);                                     /* hands over to r */
	CHECK_EQ(nnotes, 1);
	CHECK(notes[0].w == &wr && notes[0].result == 0);
	CHECK(held(lt, r, "k", LOCK_S));
	CHECK_EQ(acq(lt, n2, "k", LOCK_S, CC_NO_WAIT, NULL), 0);       /* readers join */
	/* an older writer waits for both readers; a reader behind it does not barge */
	CHECK_EQ(acq(lt, x, "k", LOCK_X, CC_WAIT_DIE, &wx), 1);
	CHECK_EQ(acq(lt, n, "k", LOCK_S, CC_NO_WAIT, NULL), LOTUS_EABORTED);
	lock_txn_release(lt, n2);
	CHECK_EQ(nnotes, 1);                                         /* r still reads */
	lock_txn_release(lt, r);
	CHECK_EQ(nnotes, 2);
	CHECK(notes[1].w == &wx && notes[1].result == 0);
	CHECK(held(lt, x, "k", LOCK_X));
	lock_txn_release(lt, x);
	CHECK_EQ(acq(lt, n, "k", LOCK_S, CC_NO_WAIT, NULL), 0);
	lock_txn_release(lt, n);
	teardown(lt);
}

static void upgrade_makes_x(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *u = lock_txn_get(lt, 50, 50, NULL);
	lock_txn_t *r = lock_txn_get(lt, 60, 60, NULL);
	CHECK_EQ(acq(lt, u, "k", LOCK_S, CC_NO_WAIT, NULL), 0);
	CHECK_EQ(acq(lt, u, "k", LOCK_X, CC_NO_WAIT, NULL), 0);       /* sole reader */
	CHECK(held(lt, u, "k", LOCK_X));
	CHECK_EQ(acq(lt, r, "k", LOCK_S, CC_NO_WAIT, NULL), LOTUS_EABORTED);
	lock_txn_release(lt, u);
	CHECK_EQ(acq(lt, r, "k", LOCK_S, CC_NO_WAIT, NULL), 0);
	lock_txn_release(lt, r);
	teardown(lt);
}

int main(void)
{
	many_readers_many_locks();
	preempted_reader_reaped_on_contact();
	waiter_flag_handoff();
	upgrade_makes_x();
	printf("ok\n");
	return 0;
}
