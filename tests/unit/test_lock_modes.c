/*
 * test_lock_modes - single-threaded behaviour of the lock table:
 *   readers granted together, and not past an older waiting writer;
 *   S->X upgrades under each protocol; a COMMITTING owner is never wounded,
 *   and under NO_WAIT and WAIT_DIE a conflict only with COMMITTING owners
 *   waits (the prepared-owner rule);
 *   a wounded txn that is parked elsewhere gets notify(LOTUS_EPREEMPTED);
 *   WAIT_DIE waiters die when an older conflicting txn gets ahead of them;
 *   covering requests, lock_held, and requests on a released txn.
 * Priorities: smaller is older.  Exit 0 pass, 1 fail.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "lock/lock.h"
#include "check.h"


static struct { struct lock_waiter *w; int result; } notes[64];
static int nnotes;
static int conn;

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

static bool fast = true;   /* the table's fast reads (lock.c): every case runs both ways */

static lock_table_t *setup(void)
{
	lock_table_t *lt;
	CHECK(lock_table_create(6, on_notify, NULL, &lt) == 0);
	lock_table_set_fast_reads(lt, fast);
	nnotes = 0;
	return lt;
}

static void teardown(lock_table_t *lt)
{
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.txns_active == 0);
	CHECK(lock_table_nlocks(lt) == 0);
	lock_table_destroy(lt);
}

/* X owner O; readers 20, 30, 40 wait; O's release grants all three together. */
static void test_readers_together(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *o = lock_txn_get(lt, 1, 10, &conn);
	lock_txn_t *r[3];
	struct lock_waiter w[3] = { { 0 } };
	CHECK(acq(lt, o, "A", LOCK_X, CC_WOUND_WAIT, NULL) == 0);
	for (int i = 0; i < 3; i++) {
		r[i] = lock_txn_get(lt, 100 + (uint64_t)i, 40 - 10 * (uint64_t)i, &conn);
		CHECK(acq(lt, r[i], "A", LOCK_S, CC_WOUND_WAIT, &w[i]) == 1);
	}
	lock_txn_release(lt, o);
	CHECK(nnotes == 3);
	for (int i = 0; i < 3; i++) {      /* priority order: 20, 30, 40 */
		CHECK(notes[i].w == &w[2 - i] && notes[i].result == 0);
		CHECK(held(lt, r[i], "A", LOCK_S));
	}
	for (int i = 0; i < 3; i++)
		lock_txn_release(lt, r[i]);
	teardown(lt);
	printf("readers together ok\n");
}

/* Grant rule: readers behind an older waiting writer are not granted. */
static void test_no_reader_barging(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *o = lock_txn_get(lt, 1, 10, &conn);      /* X owner */
	lock_txn_t *r1 = lock_txn_get(lt, 2, 20, &conn);
	lock_txn_t *wx = lock_txn_get(lt, 3, 25, &conn);
	lock_txn_t *r2 = lock_txn_get(lt, 4, 30, &conn);
	lock_txn_t *r3 = lock_txn_get(lt, 5, 35, &conn);
	struct lock_waiter w1 = { 0 }, w2 = { 0 }, w3 = { 0 }, w4 = { 0 };
	CHECK(acq(lt, o, "A", LOCK_X, CC_WOUND_WAIT, NULL) == 0);
	CHECK(acq(lt, r1, "A", LOCK_S, CC_WOUND_WAIT, &w1) == 1);
	CHECK(acq(lt, wx, "A", LOCK_X, CC_WOUND_WAIT, &w2) == 1);
	CHECK(acq(lt, r2, "A", LOCK_S, CC_WOUND_WAIT, &w3) == 1);
	lock_txn_release(lt, o);                  /* r1 granted; wx blocks r2 */
	CHECK(nnotes == 1 && notes[0].w == &w1);
	CHECK(held(lt, r1, "A", LOCK_S) && !held(lt, r2, "A", LOCK_S));
	/* a new younger reader is compatible with r1 but must queue behind wx */
	CHECK(acq(lt, r3, "A", LOCK_S, CC_WOUND_WAIT, &w4) == 1);
	lock_txn_release(lt, r1);                 /* wx alone */
	CHECK(nnotes == 2 && notes[1].w == &w2 && held(lt, wx, "A", LOCK_X));
	lock_txn_release(lt, wx);                 /* r2 and r3 together */
	CHECK(nnotes == 4 && notes[2].w == &w3 && notes[3].w == &w4);
	lock_txn_release(lt, r2);
	lock_txn_release(lt, r3);
	teardown(lt);
	printf("no reader barging ok\n");
}

/* Upgrades: sole owner at once; with a second S owner per protocol. */
static void test_upgrade(enum cc_proto cc)
{
	lock_table_t *lt = setup();
	lock_txn_t *a = lock_txn_get(lt, 1, 10, &conn), *b = lock_txn_get(lt, 2, 20, &conn);
	struct lock_waiter wa = { 0 }, wb = { 0 };
	CHECK(acq(lt, a, "U", LOCK_S, cc, &wa) == 0);
	CHECK(acq(lt, a, "U", LOCK_X, cc, &wa) == 0);          /* sole owner */
	CHECK(held(lt, a, "U", LOCK_X));
	CHECK(acq(lt, a, "U", LOCK_S, cc, &wa) == 0);          /* covered */
	CHECK(acq(lt, a, "V", LOCK_S, cc, &wa) == 0);
	CHECK(acq(lt, b, "V", LOCK_S, cc, &wb) == 0);
	int rb = acq(lt, b, "V", LOCK_X, cc, &wb);             /* younger upgrades */
	int ra = acq(lt, a, "V", LOCK_X, cc, &wa);             /* older upgrades */
	switch (cc) {
	case CC_NO_WAIT:
		CHECK(rb == LOTUS_EABORTED && ra == LOTUS_EABORTED);
		break;
	case CC_WAIT_DIE:
		CHECK(rb == LOTUS_EABORTED && ra == 1);         /* a waits for younger b */
		lock_txn_release(lt, b);
		b = NULL;
		CHECK(nnotes == 1 && notes[0].w == &wa && notes[0].result == 0);
		CHECK(held(lt, a, "V", LOCK_X));
		break;
	case CC_WOUND_WAIT:
		CHECK(rb == 1);                                 /* b waits for older a */
		CHECK(ra == 0 && held(lt, a, "V", LOCK_X));     /* a wounds b */
		CHECK(lock_txn_status(b) == TXN_PREEMPTED);
		/* b was parked: its request is answered with EPREEMPTED */
		CHECK(nnotes == 1 && notes[0].w == &wb && notes[0].result == LOTUS_EPREEMPTED);
		break;
	}
	struct lock_stats s;
	lock_table_stats(lt, &s);
	/* a NO_WAIT read of U was fast: its X is a new entry, not an upgrade */
	CHECK(s.upgrades == (cc == CC_NO_WAIT ? (fast ? 0u : 1u) : 2u));
	if (b)
		lock_txn_release(lt, b);
	lock_txn_release(lt, a);
	teardown(lt);
	printf("upgrade %d ok\n", cc);
}

/* A COMMITTING owner is never wounded: the older request waits. */
static void test_committing(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *young = lock_txn_get(lt, 5, 50, &conn), *old = lock_txn_get(lt, 1, 10, &conn);
	struct lock_waiter w = { 0 };
	CHECK(acq(lt, young, "A", LOCK_X, CC_WOUND_WAIT, NULL) == 0);
	CHECK(lock_txn_begin_commit(lt, young) == 0);
	CHECK(lock_txn_status(young) == TXN_COMMITTING);
	CHECK(acq(lt, old, "A", LOCK_X, CC_WOUND_WAIT, &w) == 1);
	CHECK(lock_txn_status(young) == TXN_COMMITTING && held(lt, young, "A", LOCK_X));
	CHECK(lock_txn_begin_commit(lt, old) == LOTUS_ESTATE);  /* still waiting */
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.preemptions == 0);
	lock_txn_release(lt, young);
	CHECK(nnotes == 1 && notes[0].w == &w && notes[0].result == 0);
	CHECK(lock_txn_begin_commit(lt, old) == 0);
	lock_txn_release(lt, old);
	teardown(lt);
	printf("committing not wounded ok\n");
}

/* The prepared-owner rule: a conflict only with COMMITTING owners waits
 * under NO_WAIT and WAIT_DIE too (an older COMMITTING owner kills nobody);
 * a conflict with an owner that is not COMMITTING is decided as ever, and a
 * NO_WAIT waiter that meets one after its COMMITTING owner left is culled. */
static void test_committing_waits(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *c = lock_txn_get(lt, 1, 10, &conn), *r = lock_txn_get(lt, 2, 50, &conn);
	lock_txn_t *r2 = lock_txn_get(lt, 3, 60, &conn), *y = lock_txn_get(lt, 4, 70, &conn);
	lock_txn_t *o = lock_txn_get(lt, 5, 5, &conn), *s2 = lock_txn_get(lt, 6, 80, &conn);
	struct lock_waiter wr = { 0 }, wr2 = { 0 }, wy = { 0 }, wy2 = { 0 }, ws = { 0 };
	CHECK(acq(lt, c, "A", LOCK_X, CC_NO_WAIT, NULL) == 0);
	CHECK(acq(lt, c, "C", LOCK_S, CC_NO_WAIT, NULL) == 0);
	CHECK(acq(lt, o, "B", LOCK_X, CC_WAIT_DIE, NULL) == 0);    /* older, RUNNING */
	CHECK(acq(lt, s2, "C", LOCK_S, CC_NO_WAIT, NULL) == 0);    /* RUNNING reader */
	/* not yet COMMITTING: NO_WAIT rejects, WAIT_DIE's younger dies */
	CHECK(acq(lt, r, "A", LOCK_X, CC_NO_WAIT, &wr) == LOTUS_EABORTED);
	CHECK(acq(lt, y, "A", LOCK_X, CC_WAIT_DIE, &wy) == LOTUS_EABORTED);
	CHECK(lock_txn_begin_commit(lt, c) == 0);
	CHECK(acq(lt, r, "A", LOCK_X, CC_NO_WAIT, NULL) == LOTUS_EABORTED);  /* no waiter */
	CHECK(acq(lt, r, "A", LOCK_X, CC_NO_WAIT, &wr) == 1);      /* waits for c */
	CHECK(acq(lt, r2, "A", LOCK_S, CC_NO_WAIT, &wr2) == 1);    /* behind r */
	CHECK(acq(lt, y, "A", LOCK_X, CC_WAIT_DIE, &wy) == LOTUS_EABORTED); /* older r waits */
	lock_txn_release(lt, y);
	y = lock_txn_get(lt, 7, 70, &conn);
	CHECK(acq(lt, y, "D", LOCK_X, CC_WAIT_DIE, NULL) == 0);
	CHECK(acq(lt, y, "B", LOCK_X, CC_WAIT_DIE, &wy2) == LOTUS_EABORTED); /* o RUNNING */
	/* C: S held by c (COMMITTING) and s2 (RUNNING): an X of NO_WAIT is refused */
	CHECK(acq(lt, r2, "C", LOCK_X, CC_NO_WAIT, &ws) == LOTUS_EABORTED);
	CHECK(nnotes == 0);
	struct lock_stats st;
	lock_table_stats(lt, &st);
	CHECK(st.waits == 2 && st.preemptions == 0);
	lock_txn_release(lt, c);   /* A to r; r2 now conflicts with RUNNING r: culled */
	CHECK(nnotes == 2 && notes[0].w == &wr && notes[0].result == 0);
	CHECK(notes[1].w == &wr2 && notes[1].result == LOTUS_EABORTED);
	CHECK(held(lt, r, "A", LOCK_X) && lock_txn_status(r) == TXN_RUNNING);
	lock_txn_release(lt, r2);
	/* WAIT_DIE: a younger request waits for an older COMMITTING owner */
	CHECK(lock_txn_begin_commit(lt, o) == 0);
	CHECK(acq(lt, y, "B", LOCK_X, CC_WAIT_DIE, &wy2) == 1);
	lock_txn_release(lt, o);
	CHECK(nnotes == 3 && notes[2].w == &wy2 && notes[2].result == 0);
	CHECK(held(lt, y, "B", LOCK_X));
	lock_txn_release(lt, r);
	lock_txn_release(lt, y);
	lock_txn_release(lt, s2);
	teardown(lt);
	printf("committing waited for ok\n");
}

/* y owns A and is parked on B (owned by the older o); t wounds y via A. */
static void test_wounded_while_waiting(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *o = lock_txn_get(lt, 1, 5, &conn), *t = lock_txn_get(lt, 2, 10, &conn);
	lock_txn_t *y = lock_txn_get(lt, 3, 30, &conn);
	struct lock_waiter wy = { 0 }, wt = { 0 };
	CHECK(acq(lt, o, "B", LOCK_X, CC_WOUND_WAIT, NULL) == 0);
	CHECK(acq(lt, y, "A", LOCK_X, CC_WOUND_WAIT, NULL) == 0);
	CHECK(acq(lt, y, "B", LOCK_X, CC_WOUND_WAIT, &wy) == 1);
	CHECK(lock_txn_status(y) == TXN_WAITING);
	CHECK(acq(lt, t, "A", LOCK_X, CC_WOUND_WAIT, &wt) == 0);
	CHECK(lock_txn_status(y) == TXN_PREEMPTED);
	CHECK(nnotes == 1 && notes[0].w == &wy && notes[0].result == LOTUS_EPREEMPTED);
	lock_txn_release(lt, o);                   /* B's queue no longer holds y */
	CHECK(nnotes == 1);
	lock_txn_release(lt, y);
	lock_txn_release(lt, t);
	struct lock_stats s;
	lock_table_stats(lt, &s);
	CHECK(s.preemptions == 1 && s.preempted_aborts == 1);
	teardown(lt);
	printf("wounded while waiting ok\n");
}

/* WAIT_DIE waiters die when an older conflicting txn gets ahead of them. */
static void test_wait_die_cull(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *o = lock_txn_get(lt, 1, 50, &conn), *w30 = lock_txn_get(lt, 2, 30, &conn);
	lock_txn_t *r20 = lock_txn_get(lt, 3, 20, &conn), *x10 = lock_txn_get(lt, 4, 10, &conn);
	struct lock_waiter a = { 0 }, b = { 0 };
	CHECK(acq(lt, o, "A", LOCK_X, CC_WAIT_DIE, NULL) == 0);
	CHECK(acq(lt, w30, "A", LOCK_X, CC_WAIT_DIE, &a) == 1);
	CHECK(acq(lt, r20, "A", LOCK_X, CC_WAIT_DIE, &b) == 1);     /* gets ahead */
	CHECK(nnotes == 1 && notes[0].w == &a && notes[0].result == LOTUS_EABORTED);
	CHECK(lock_txn_status(w30) == TXN_RUNNING);
	/* an older WOUND_WAIT txn wounds o and takes A: r20 now waits for an
	 * older owner, so it dies too */
	CHECK(acq(lt, x10, "A", LOCK_X, CC_WOUND_WAIT, NULL) == 0);
	CHECK(lock_txn_status(o) == TXN_PREEMPTED);
	CHECK(nnotes == 2 && notes[1].w == &b && notes[1].result == LOTUS_EABORTED);
	lock_txn_release(lt, o);
	lock_txn_release(lt, w30);
	lock_txn_release(lt, r20);
	lock_txn_release(lt, x10);
	CHECK(nnotes == 2);
	teardown(lt);
	printf("wait_die cull ok\n");
}

/* Released txn: further requests are refused; double release is harmless. */
static void test_released(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *t = lock_txn_get(lt, 9, 9, &conn);
	lock_txn_t *again = lock_txn_find(lt, 9);
	CHECK(again == t);
	CHECK(acq(lt, t, "A", LOCK_X, CC_NO_WAIT, NULL) == 0);
	lock_txn_release(lt, t);
	CHECK(lock_txn_find(lt, 9) == NULL);
	CHECK(acq(lt, again, "B", LOCK_X, CC_NO_WAIT, NULL) == LOTUS_EABORTED);
	CHECK(!held(lt, again, "A", LOCK_X));
	lock_txn_release(lt, again);
	teardown(lt);
	printf("released ok\n");
}

static void run_all(void)
{
	printf("fast reads %s\n", fast ? "on" : "off");
	test_readers_together();
	test_no_reader_barging();
	test_upgrade(CC_NO_WAIT);
	test_upgrade(CC_WAIT_DIE);
	test_upgrade(CC_WOUND_WAIT);
	test_committing();
	test_committing_waits();
	test_wounded_while_waiting();
	test_wait_die_cull();
	test_released();
}

int main(void)
{
	run_all();
	fast = false;
	run_all();
	return 0;
}
