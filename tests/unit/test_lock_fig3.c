/*
 * test_lock_fig3 - the paper's Figure 3 scenario (§4) at the lock-table level,
 * once per protocol.  T3 (reader, lowest priority) locks A, then T1 (writer,
 * highest priority) asks, then T2 (writer, middle).
 *   NO_WAIT     T1 and T2 rejected; T3 unaffected.
 *   WAIT_DIE    T1 waits, T2 rejected (younger than the waiting T1); T3's
 *               release grants T1; T2's retry dies while T1 owns, then succeeds.
 *   WOUND_WAIT  T1 wounds T3 and is granted; T2 waits; T3 learns of the wound
 *               only at its next request (and at begin_commit); T1's release
 *               grants T2; T3's retry (same priority) waits behind T2.
 * Exit 0 pass, 1 fail.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "lock/lock.h"
#include "check.h"


static struct { struct lock_waiter *w; int result; } notes[32];
static int nnotes;
static pthread_mutex_t notes_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_notify(void *arg, struct lock_waiter *w, int result)
{
	(void)arg;
	pthread_mutex_lock(&notes_mu);
	if (nnotes < (int)ARRAY_SIZE(notes)) {
		notes[nnotes].w = w;
		notes[nnotes].result = result;
	}
	nnotes++;
	pthread_mutex_unlock(&notes_mu);
}

static int acq(lock_table_t *lt, lock_txn_t *t, const char *key, enum lock_mode m,
	       enum cc_proto cc, struct lock_waiter *w)
{
	return lock_acquire(lt, t, 7, key, (uint16_t)strlen(key), m, cc, w);
}

static bool held(lock_table_t *lt, lock_txn_t *t, const char *key, enum lock_mode m)
{
	return lock_held(lt, t, 7, key, (uint16_t)strlen(key), m);
}

static int conn;   /* owner cookie */

static void fig3_no_wait(lock_table_t *lt, lock_txn_t *t1, lock_txn_t *t2, lock_txn_t *t3)
{
	struct lock_waiter w1 = { 0 }, w2 = { 0 }, w3 = { 0 };
	CHECK(acq(lt, t3, "A", LOCK_S, CC_NO_WAIT, &w3) == 0);
	CHECK(acq(lt, t1, "A", LOCK_X, CC_NO_WAIT, &w1) == LOTUS_EABORTED);
	CHECK(acq(lt, t2, "A", LOCK_X, CC_NO_WAIT, &w2) == LOTUS_EABORTED);
	CHECK(held(lt, t3, "A", LOCK_S) && lock_txn_status(t3) == TXN_RUNNING);
	CHECK(acq(lt, t3, "B", LOCK_S, CC_NO_WAIT, &w3) == 0);
	CHECK(lock_txn_begin_commit(lt, t3) == 0);
	lock_txn_release(lt, t1);
	lock_txn_release(lt, t2);
	lock_txn_release(lt, t3);
	CHECK(nnotes == 0);
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.rejects == 2 && s.waits == 0 && s.preemptions == 0 && s.grants_immediate == 2);
}

static void fig3_wait_die(lock_table_t *lt, lock_txn_t *t1, lock_txn_t *t2, lock_txn_t *t3)
{
	struct lock_waiter w1 = { 0 }, w2 = { 0 }, w3 = { 0 };
	CHECK(acq(lt, t3, "A", LOCK_S, CC_WAIT_DIE, &w3) == 0);
	CHECK(acq(lt, t1, "A", LOCK_X, CC_WAIT_DIE, &w1) == 1);          /* waits */
	CHECK(lock_txn_status(t1) == TXN_WAITING);
	CHECK(acq(lt, t2, "A", LOCK_X, CC_WAIT_DIE, &w2) == LOTUS_EABORTED); /* dies */
	CHECK(!held(lt, t1, "A", LOCK_X) && nnotes == 0);
	/* T3 is not preempted under WAIT_DIE: its next request and commit go on */
	CHECK(acq(lt, t3, "B", LOCK_S, CC_WAIT_DIE, &w3) == 0);
	CHECK(lock_txn_begin_commit(lt, t3) == 0);
	lock_txn_release(lt, t3);                                  /* hands A to T1 */
	CHECK(nnotes == 1 && notes[0].w == &w1 && notes[0].result == 0);
	CHECK(held(lt, t1, "A", LOCK_X) && lock_txn_status(t1) == TXN_RUNNING);
	lock_txn_release(lt, t2);                                  /* T2 aborted */
	t2 = lock_txn_get(lt, 2, 200, &conn);                      /* T2 retries */
	CHECK(acq(lt, t2, "A", LOCK_X, CC_WAIT_DIE, &w2) == LOTUS_EABORTED); /* T1 owns */
	lock_txn_release(lt, t2);
	CHECK(lock_txn_begin_commit(lt, t1) == 0);
	lock_txn_release(lt, t1);
	t2 = lock_txn_get(lt, 2, 200, &conn);                      /* after T1 completes */
	CHECK(acq(lt, t2, "A", LOCK_X, CC_WAIT_DIE, &w2) == 0);
	lock_txn_release(lt, t2);
	CHECK(nnotes == 1);
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.waits == 1 && s.grants_after_wait == 1 && s.rejects == 2 && s.preemptions == 0);
}

static void fig3_wound_wait(lock_table_t *lt, lock_txn_t *t1, lock_txn_t *t2, lock_txn_t *t3)
{
	struct lock_waiter w1 = { 0 }, w2 = { 0 }, w3 = { 0 };
	CHECK(acq(lt, t3, "A", LOCK_S, CC_WOUND_WAIT, &w3) == 0);
	CHECK(acq(lt, t1, "A", LOCK_X, CC_WOUND_WAIT, &w1) == 0);    /* wounds T3 */
	CHECK(held(lt, t1, "A", LOCK_X) && !held(lt, t3, "A", LOCK_S));
	CHECK(lock_txn_status(t3) == TXN_PREEMPTED);
	CHECK(acq(lt, t2, "A", LOCK_X, CC_WOUND_WAIT, &w2) == 1);    /* waits */
	CHECK(nnotes == 0);                       /* lazy: nobody told T3 */
	/* T3 learns only at its next request, and again at commit */
	CHECK(acq(lt, t3, "B", LOCK_S, CC_WOUND_WAIT, &w3) == LOTUS_EPREEMPTED);
	CHECK(lock_txn_begin_commit(lt, t3) == LOTUS_EPREEMPTED);
	lock_txn_release(lt, t3);
	CHECK(nnotes == 0);
	CHECK(lock_txn_begin_commit(lt, t1) == 0);
	lock_txn_release(lt, t1);                                  /* hands A to T2 */
	CHECK(nnotes == 1 && notes[0].w == &w2 && notes[0].result == 0);
	CHECK(held(lt, t2, "A", LOCK_X));
	t3 = lock_txn_get(lt, 3, 300, &conn);                      /* T3 retries */
	CHECK(acq(lt, t3, "A", LOCK_S, CC_WOUND_WAIT, &w3) == 1);    /* waits for T2 */
	CHECK(lock_txn_status(t2) == TXN_RUNNING);
	lock_txn_release(lt, t2);
	CHECK(nnotes == 2 && notes[1].w == &w3 && notes[1].result == 0);
	CHECK(held(lt, t3, "A", LOCK_S));
	lock_txn_release(lt, t3);
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.preemptions == 1 && s.preempted_aborts == 2 && s.waits == 2 &&
	      s.grants_after_wait == 2 && s.rejects == 0);
}

static void run(enum cc_proto cc)
{
	lock_table_t *lt;
	CHECK(lock_table_create(4, on_notify, NULL, &lt) == 0);
	nnotes = 0;
	lock_txn_t *t1 = lock_txn_get(lt, 1, 100, &conn);  /* highest priority */
	lock_txn_t *t2 = lock_txn_get(lt, 2, 200, &conn);
	lock_txn_t *t3 = lock_txn_get(lt, 3, 300, &conn);  /* lowest */
	CHECK(t1 && t2 && t3);
	if (cc == CC_NO_WAIT)
		fig3_no_wait(lt, t1, t2, t3);
	else if (cc == CC_WAIT_DIE)
		fig3_wait_die(lt, t1, t2, t3);
	else
		fig3_wound_wait(lt, t1, t2, t3);
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.txns_active == 0 && lock_table_nlocks(lt) == 0);
	CHECK(lock_txn_find(lt, 1) == NULL);
	lock_table_destroy(lt);
	printf("fig3 %s ok\n", cc == CC_NO_WAIT ? "no_wait" : cc == CC_WAIT_DIE ? "wait_die" :
	       "wound_wait");
}

int main(void)
{
	run(CC_NO_WAIT);
	run(CC_WAIT_DIE);
	run(CC_WOUND_WAIT);
	return 0;
}
