/*
 * test_lock_stress - concurrency stress of the lock table, once per protocol
 * (and once mixing NO_WAIT with WOUND_WAIT, which stays deadlock-free).
 *
 * NTHREADS workers run transactions that lock 2-4 random keys of a hot set of
 * NKEYS (mostly X, some S, some S upgraded to X) in random order, retrying on abort with the same
 * priority, and increment plain counters protected by the X locks.  A "ghost"
 * client meanwhile grabs and parks on hot keys and is dropped with
 * lock_release_owner(), as when a compute server is lost.  Checks:
 *   - the final counter sum equals the committed X writes (exact);
 *   - no deadlock: every parked request is answered within WAIT_LIMIT_S;
 *   - WAIT_DIE / WOUND_WAIT: a transaction with the oldest priority commits at
 *     its first attempt, and no transaction needs more than MAX_ATTEMPTS;
 *   - afterwards no lock entry and no transaction is left.
 * LOTUS_LOCK_STRESS_TXNS overrides transactions per thread.  Exit 0/1.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdatomic.h>
#include "common/common.h"
#include "lock/lock.h"
#include "check.h"


#define NTHREADS 4
#define NKEYS 8
#define WAIT_LIMIT_S 10
#define MAX_ATTEMPTS 5000
#define CC_MIXED 3

static lock_table_t *lt;
static int g_cc;
static long counter[NKEYS];             /* protected by the X locks */
static atomic_ullong next_prio = 1, next_id = 1;
static atomic_int stop_ghost;
static int txns_per_thread = 3000;

struct worker {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done, result;
	struct lock_waiter w;
	unsigned seed;
	int id;
	long commits, aborts, xwrites;
	unsigned max_attempts, oldest_attempts;
};

static void on_notify(void *arg, struct lock_waiter *w, int result)
{
	struct worker *me = w->owner;
	(void)arg;
	if (!me)                          /* the ghost's waiters: nobody listens */
		return;
	pthread_mutex_lock(&me->mu);
	me->result = result;
	me->done = 1;
	pthread_cond_signal(&me->cv);
	pthread_mutex_unlock(&me->mu);
}

static int wait_notify(struct worker *me)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_LIMIT_S;
	pthread_mutex_lock(&me->mu);
	int rc = 0;
	while (!me->done && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&me->cv, &me->mu, &dl);
	int result = me->done ? me->result : LOTUS_ETIMEOUT;
	pthread_mutex_unlock(&me->mu);
	return result;
}

static enum cc_proto pick_cc(unsigned *seed)
{
	if (g_cc != CC_MIXED)
		return (enum cc_proto)g_cc;
	return rand_r(seed) % 2 ? CC_NO_WAIT : CC_WOUND_WAIT;
}

static int lock_one(struct worker *me, lock_txn_t *t, unsigned k, enum lock_mode m,
		    enum cc_proto cc)
{
	unsigned char key[8];
	key_from_u64(k, key);
	pthread_mutex_lock(&me->mu);
	me->done = 0;
	pthread_mutex_unlock(&me->mu);
	me->w.owner = me;
	int rc = lock_acquire(lt, t, 1, key, 8, m, cc, &me->w);
	if (rc == 1)
		rc = wait_notify(me);
	if (rc == LOTUS_ETIMEOUT) {
		fprintf(stderr, "worker %d: no answer in %d s (deadlock?)\n", me->id, WAIT_LIMIT_S);
		exit(1);
	}
	return rc;
}

/* One attempt; 0 = committed. */
static int attempt(struct worker *me, uint64_t prio, const unsigned *keys,
		   const enum lock_mode *modes, const bool *upgrade, int n, enum cc_proto cc)
{
	lock_txn_t *t = lock_txn_get(lt, atomic_fetch_add(&next_id, 1), prio, me);
	CHECK(t);
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		/* read-modify-write: S first, upgraded below */
		rc = lock_one(me, t, keys[i], upgrade[i] ? LOCK_S : modes[i], cc);
		if (rc == 0 && rand_r(&me->seed) % 4 == 0)
			sched_yield();                /* hold locks a little longer */
	}
	for (int i = 0; i < n && rc == 0; i++)
		if (upgrade[i])
			rc = lock_one(me, t, keys[i], LOCK_X, cc);
	if (rc == 0)
		rc = lock_txn_begin_commit(lt, t);
	if (rc == 0) {
		volatile long sink = 0;
		for (int i = 0; i < n; i++) {
			CHECK(lock_held(lt, t, 1, (unsigned char[8]){ 0, 0, 0, 0, 0, 0, 0,
				(unsigned char)keys[i] }, 8, modes[i]));
			if (modes[i] == LOCK_X) {
				counter[keys[i]]++;
				me->xwrites++;
			} else {
				sink += counter[keys[i]];
			}
		}
		(void)sink;
	} else {
		CHECK(rc == LOTUS_EABORTED || rc == LOTUS_EPREEMPTED);
	}
	lock_txn_release(lt, t);
	return rc;
}

static void run_txn(struct worker *me, uint64_t prio, bool oldest)
{
	unsigned keys[4];
	enum lock_mode modes[4];
	bool upgrade[4];
	int n = 2 + (int)(rand_r(&me->seed) % 3);
	for (int i = 0; i < n; i++) {
		unsigned k;
		bool dup;
		do {
			k = rand_r(&me->seed) % NKEYS;
			dup = false;
			for (int j = 0; j < i; j++)
				dup |= keys[j] == k;
		} while (dup);
		keys[i] = k;
		modes[i] = rand_r(&me->seed) % 4 ? LOCK_X : LOCK_S;
		upgrade[i] = modes[i] == LOCK_X && rand_r(&me->seed) % 4 == 0;
	}
	enum cc_proto cc = pick_cc(&me->seed);
	unsigned attempts = 0;
	for (;;) {
		attempts++;
		if (attempt(me, prio, keys, modes, upgrade, n, cc) == 0)
			break;
		me->aborts++;
		/* NO_WAIT has no starvation freedom: back off like a real client */
		sched_yield();
		if (attempts > 8) {
			struct timespec ts = { 0, (long)(rand_r(&me->seed) % 20000) };
			nanosleep(&ts, NULL);
		}
	}
	me->commits++;
	if (attempts > me->max_attempts)
		me->max_attempts = attempts;
	if (oldest)
		me->oldest_attempts = attempts;
}

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	for (int i = 0; i < txns_per_thread; i++) {
		/* worker 0 runs one txn older than everybody, halfway through */
		bool oldest = me->id == 0 && i == txns_per_thread / 2;
		run_txn(me, oldest ? 0 : atomic_fetch_add(&next_prio, 1), oldest);
	}
	return NULL;
}

/* A client that takes and parks on hot keys, then is lost. */
static void *ghost_main(void *arg)
{
	static int ghost_cookie;
	unsigned seed = 99;
	(void)arg;
	while (!atomic_load(&stop_ghost)) {
		struct lock_waiter w[3];
		memset(w, 0, sizeof(w));
		for (int i = 0; i < 3; i++) {
			lock_txn_t *t = lock_txn_get(lt, atomic_fetch_add(&next_id, 1),
						     atomic_fetch_add(&next_prio, 1), &ghost_cookie);
			unsigned char key[8];
			key_from_u64(rand_r(&seed) % NKEYS, key);
			lock_acquire(lt, t, 1, key, 8, rand_r(&seed) % 2 ? LOCK_X : LOCK_S,
				     pick_cc(&seed), &w[i]);
			lock_txn_put(lt, t);
		}
		struct timespec ts = { 0, 200 * 1000 };
		nanosleep(&ts, NULL);
		lock_release_owner(lt, &ghost_cookie);   /* then w[] may go */
	}
	return NULL;
}

static void run(int cc)
{
	static const char *names[] = { "no_wait", "wait_die", "wound_wait", "mixed" };
	struct worker ws[NTHREADS];
	pthread_t th[NTHREADS], ghost;
	struct timespec t0, t1;
	g_cc = cc;
	memset(counter, 0, sizeof(counter));
	atomic_store(&stop_ghost, 0);
	CHECK(lock_table_create(4, on_notify, NULL, &lt) == 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < NTHREADS; i++) {
		memset(&ws[i], 0, sizeof(ws[i]));
		pthread_mutex_init(&ws[i].mu, NULL);
		pthread_cond_init(&ws[i].cv, NULL);
		ws[i].id = i;
		ws[i].seed = 1234u + (unsigned)i * 7919u + (unsigned)cc;
		CHECK(pthread_create(&th[i], NULL, worker_main, &ws[i]) == 0);
	}
	if (!getenv("NOGHOST")) CHECK(pthread_create(&ghost, NULL, ghost_main, NULL) == 0);
	long xw = 0, commits = 0, aborts = 0, sum = 0;
	unsigned max_att = 0;
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		xw += ws[i].xwrites;
		commits += ws[i].commits;
		aborts += ws[i].aborts;
		max_att = MAX(max_att, ws[i].max_attempts);
	}
	atomic_store(&stop_ghost, 1);
	if (!getenv("NOGHOST")) pthread_join(ghost, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (int k = 0; k < NKEYS; k++)
		sum += counter[k];
	struct lock_stats s;
	lock_table_stats(lt, &s);
	printf("%-10s %5.2fs commits %ld aborts %ld max_attempts %u oldest_attempts %u | "
	       "acq %llu imm %llu waits %llu after_wait %llu avg_wait_us %.1f rejects %llu "
	       "preempt %llu preempted_aborts %llu upgrades %llu\n",
	       names[cc], (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	       commits, aborts, max_att, ws[0].oldest_attempts,
	       (unsigned long long)s.acquires, (unsigned long long)s.grants_immediate,
	       (unsigned long long)s.waits, (unsigned long long)s.grants_after_wait,
	       s.grants_after_wait ? s.wait_ns / 1e3 / (double)s.grants_after_wait : 0.0,
	       (unsigned long long)s.rejects, (unsigned long long)s.preemptions,
	       (unsigned long long)s.preempted_aborts, (unsigned long long)s.upgrades);
	CHECK(sum == xw);
	CHECK(commits == (long)NTHREADS * txns_per_thread);
	if (cc == CC_WAIT_DIE || cc == CC_WOUND_WAIT) {
		CHECK(ws[0].oldest_attempts == 1);
		CHECK(max_att <= MAX_ATTEMPTS);
	}
	CHECK(s.txns_active == 0 && lock_table_nlocks(lt) == 0);
	lock_table_destroy(lt);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_mutex_destroy(&ws[i].mu);
		pthread_cond_destroy(&ws[i].cv);
	}
}

int main(void)
{
	const char *e = getenv("LOTUS_LOCK_STRESS_TXNS");
	if (e && atoi(e) > 0)
		txns_per_thread = atoi(e);
	run(CC_NO_WAIT);
	run(CC_WAIT_DIE);
	run(CC_WOUND_WAIT);
	run(CC_MIXED);
	return 0;
}
