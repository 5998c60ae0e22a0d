/*
 * test_lock_fast - fast reads (lock.c, "Fast reads"): a NO_WAIT S request on
 * a key without a lock entry is counted in its bucket's fast word, and every
 * other request must still see it.
 *   a fast read is held (lock_held), counted (fast_reads), leaves no entry;
 *   an X by another txn meets it under each protocol: NO_WAIT refused,
 *   WAIT_DIE dies (the reader's age is unknown), WOUND_WAIT waits and is
 *   granted by the reader's release;
 *   the reader upgrades its own fast read to X;
 *   while a key has an entry (an X owner) reads of it take the entry path,
 *   a committing X owner is waited for (the prepared-owner rule), and once
 *   the entry is gone reads are fast again;
 *   a txn with more reads than its fast slots holds them all;
 *   two keys that share a word: a needless conflict, never a missed one;
 *   a PREPARE's release of S locks drops fast reads too;
 *   a read made NO_WAIT with no waiter (another protocol's, under the
 *   memory server's parked limit) is not fast: its txn can be wounded.
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

/* The waiter a NO_WAIT read gives (lock_acquire reads fast only with one);
 * these reads never park on it: where one may, the case has its own. */
static struct lock_waiter rw;

static uint64_t fast_reads(lock_table_t *lt)
{
	struct lock_stats s;
	lock_table_stats(lt, &s);
	return s.fast_reads;
}

static lock_table_t *setup(void)
{
	lock_table_t *lt;
	CHECK(lock_table_create(6, on_notify, NULL, &lt) == 0);
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

/* A fast read, and an X of another txn under each protocol. */
static void read_then_write(enum cc_proto cc)
{
	lock_table_t *lt = setup();
	lock_txn_t *r = lock_txn_get(lt, 2, 20, NULL);           /* the younger reader */
	lock_txn_t *w = lock_txn_get(lt, 1, 10, NULL);           /* an older writer */
	struct lock_waiter ww = { 0 };
	CHECK_EQ(acq(lt, r, "k", LOCK_S, CC_NO_WAIT, &rw), 0);
	CHECK_EQ(fast_reads(lt), 1);
	CHECK(held(lt, r, "k", LOCK_S) && !held(lt, r, "k", LOCK_X) && !held(lt, w, "k", LOCK_S));
	CHECK_EQ(lock_table_nlocks(lt), 1);                       /* the word, no entry */
	int rc = acq(lt, w, "k", LOCK_X, cc, &ww);
	switch (cc) {
	case CC_NO_WAIT:
	case CC_WAIT_DIE:   /* older, but the reader's age is not known: dies */
		CHECK_EQ(rc, LOTUS_EABORTED);
		lock_txn_release(lt, r);
		CHECK_EQ(acq(lt, w, "k", LOCK_X, cc, &ww), 0);   /* the reader is gone */
		break;
	case CC_WOUND_WAIT:   /* cannot wound it: waits for it */
		CHECK_EQ(rc, 1);
		CHECK_EQ(lock_txn_status(r), TXN_RUNNING);
		/* another fast read of k now takes the entry, and queues behind */
		lock_txn_t *r2 = lock_txn_get(lt, 3, 30, NULL);
		CHECK_EQ(acq(lt, r2, "k", LOCK_S, CC_NO_WAIT, &rw), LOTUS_EABORTED);
		CHECK_EQ(fast_reads(lt), 1);
		lock_txn_release(lt, r2);
		CHECK_EQ(nnotes, 0);
		lock_txn_release(lt, r);                            /* its release grants */
		CHECK(nnotes == 1 && notes[0].w == &ww && notes[0].result == 0);
		break;
	}
	CHECK(held(lt, w, "k", LOCK_X));
	lock_txn_release(lt, w);
	teardown(lt);
	printf("read then write, cc %d ok\n", cc);
}

/* Upgrades, entries on the word, the prepared-owner rule, fast again. */
static void entries(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *a = lock_txn_get(lt, 1, 10, NULL), *b = lock_txn_get(lt, 2, 20, NULL);
	struct lock_waiter wb = { 0 };
	CHECK_EQ(acq(lt, a, "u", LOCK_S, CC_NO_WAIT, &rw), 0);
	CHECK_EQ(acq(lt, a, "u", LOCK_X, CC_NO_WAIT, NULL), 0);   /* its own read */
	CHECK(held(lt, a, "u", LOCK_X));
	uint64_t f = fast_reads(lt);
	CHECK_EQ(acq(lt, b, "u", LOCK_S, CC_NO_WAIT, &wb), LOTUS_EABORTED);   /* X owner */
	CHECK_EQ(fast_reads(lt), f);
	CHECK_EQ(lock_txn_begin_commit(lt, a), 0);
	CHECK_EQ(acq(lt, b, "u", LOCK_S, CC_NO_WAIT, &wb), 1);   /* waits for committing a */
	lock_txn_release(lt, a);
	CHECK(nnotes == 1 && notes[0].w == &wb && notes[0].result == 0);
	CHECK(held(lt, b, "u", LOCK_S));
	lock_txn_release(lt, b);
	CHECK_EQ(lock_table_nlocks(lt), 0);
	lock_txn_t *c = lock_txn_get(lt, 3, 30, NULL);
	CHECK_EQ(acq(lt, c, "u", LOCK_S, CC_NO_WAIT, &rw), 0);   /* no entry: fast again */
	CHECK_EQ(fast_reads(lt), f + 1);
	lock_txn_release(lt, c);
	teardown(lt);
	printf("entries ok\n");
}

/* More reads than fast slots; a PREPARE's S release drops fast reads. */
static void many_reads(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *t = lock_txn_get(lt, 1, 10, NULL), *w = lock_txn_get(lt, 2, 5, NULL);
	char key[16];
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		CHECK_EQ(acq(lt, t, key, LOCK_S, CC_NO_WAIT, &rw), 0);
	}
	CHECK(fast_reads(lt) > 0 && fast_reads(lt) < 100);   /* the rest took entries */
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		CHECK(held(lt, t, key, LOCK_S));
		CHECK_EQ(acq(lt, w, key, LOCK_X, CC_NO_WAIT, NULL), LOTUS_EABORTED);
	}
	CHECK_EQ(acq(lt, t, "x", LOCK_X, CC_NO_WAIT, NULL), 0);
	CHECK_EQ(lock_txn_begin_commit(lt, t), 0);
	lock_txn_release_shared(lt, t);                           /* a PREPARE */
	for (int i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "r%d", i);
		CHECK(!held(lt, t, key, LOCK_S));
		CHECK_EQ(acq(lt, w, key, LOCK_X, CC_NO_WAIT, NULL), 0);
	}
	CHECK(held(lt, t, "x", LOCK_X));
	lock_txn_release(lt, t);
	lock_txn_release(lt, w);
	teardown(lt);
	printf("many reads ok\n");
}

/* Keys that share a fast word conflict needlessly, and only while read. */
static void shared_word(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *r = lock_txn_get(lt, 1, 10, NULL);
	CHECK_EQ(acq(lt, r, "a", LOCK_S, CC_NO_WAIT, &rw), 0);
	char key[16];
	int shared = -1;
	for (int i = 0; i < 20000 && shared < 0; i++) {
		snprintf(key, sizeof(key), "s%d", i);
		lock_txn_t *w = lock_txn_get(lt, 100 + (uint64_t)i, 100, NULL);
		int rc = acq(lt, w, key, LOCK_X, CC_NO_WAIT, NULL);
		CHECK(rc == 0 || rc == LOTUS_EABORTED);
		if (rc == LOTUS_EABORTED)
			shared = i;   /* nobody holds it: its word is "a"'s */
		lock_txn_release(lt, w);
	}
	CHECK(shared >= 0, "no key of 20000 shares a word with \"a\" (384 words)");
	lock_txn_release(lt, r);
	snprintf(key, sizeof(key), "s%d", shared);
	lock_txn_t *w = lock_txn_get(lt, 2, 20, NULL);
	CHECK_EQ(acq(lt, w, key, LOCK_X, CC_NO_WAIT, NULL), 0);   /* gone with the read */
	lock_txn_release(lt, w);
	teardown(lt);
	printf("shared word (key s%d) ok\n", shared);
}

/* A read made NO_WAIT without a waiter (the memory server does that to a
 * WOUND_WAIT or WAIT_DIE request when its connection has too many parked)
 * takes the entry: its txn can still be wounded, so two such readers that
 * both upgrade cannot wait for each other forever. */
static void no_waiter(void)
{
	lock_table_t *lt = setup();
	lock_txn_t *young = lock_txn_get(lt, 2, 20, NULL), *old = lock_txn_get(lt, 1, 10, NULL);
	struct lock_waiter wy = { 0 };
	CHECK_EQ(acq(lt, young, "k", LOCK_S, CC_NO_WAIT, NULL), 0);
	CHECK_EQ(acq(lt, old, "k", LOCK_S, CC_NO_WAIT, NULL), 0);
	CHECK_EQ(fast_reads(lt), 0);
	CHECK_EQ(acq(lt, young, "k", LOCK_X, CC_WOUND_WAIT, &wy), 1);   /* waits for old */
	CHECK_EQ(acq(lt, old, "k", LOCK_X, CC_WOUND_WAIT, NULL), 0);    /* wounds young */
	CHECK_EQ(lock_txn_status(young), TXN_PREEMPTED);
	CHECK(nnotes == 1 && notes[0].w == &wy && notes[0].result == LOTUS_EPREEMPTED);
	lock_txn_release(lt, young);
	lock_txn_release(lt, old);
	teardown(lt);
	printf("no waiter ok\n");
}

int main(void)
{
	read_then_write(CC_NO_WAIT);
	read_then_write(CC_WAIT_DIE);
	read_then_write(CC_WOUND_WAIT);
	entries();
	many_reads();
	shared_word();
	no_waiter();
	return 0;
}
