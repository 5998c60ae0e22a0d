/*
 * test_cc_hot.c - concurrent increments of a few hot counters under each
 * protocol, over tcp and shared memory: no deadlock, no lost update (the
 * final sum is exact), and starvation freedom.
 *
 * Starvation freedom, precisely: a retry keeps its first priority, so a
 * transaction eventually is the oldest in the system, and under WAIT_DIE and
 * WOUND_WAIT an attempt that starts while its transaction is the oldest
 * never fails (the oldest never dies and is never wounded).  So once oldest,
 * a transaction commits with no further retry.  The threads publish the
 * priorities of their live transactions to check this.  Under NO_WAIT the
 * oldest still fails; the test prints how often, and the worst attempt count.
 * (Raw attempt counts are not a good bound on their own: a young
 * transaction that dies retries at full speed while the older ones finish at
 * message latency, so the count grows with CPU oversubscription.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "testutil.h"

#define COUNTERS 3
#define THREADS 4
#define TXNS 120

static lotus_cluster_t *cl;
static lotus_table_t tb;
static _Atomic unsigned max_attempts, oldest_failures, oldest_attempts;
/* priority of each thread's live transaction: 0 none, 1 being chosen */
static _Atomic uint64_t live_prio[THREADS];

static int is_oldest(unsigned id, uint64_t prio)
{
	for (unsigned i = 0; i < THREADS; i++) {
		uint64_t p = atomic_load(&live_prio[i]);
		if (i != id && p != 0 && p <= prio)
			return 0;
	}
	return 1;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	lotus_session_t *s;
	lotus_txn_t *t;
	struct rng r;
	rng_seed(&r, 100 + id);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned n = 0; n < TXNS; n++) {
		uint64_t a = rng_below(&r, COUNTERS), b = (a + 1 + rng_below(&r, COUNTERS - 1)) % COUNTERS;
		unsigned char ka[8], kb[8];
		key_from_u64(a, ka);
		key_from_u64(b, kb);
		atomic_store(&live_prio[id], 1);
		CHECK_RC(lotus_txn_recycle(t));
		atomic_store(&live_prio[id], lotus_txn_priority(t));
		unsigned attempt = 1;
		for (;; attempt++) {
			CHECK(attempt < 1000000);
			int oldest = is_oldest(id, lotus_txn_priority(t));
			atomic_fetch_add(&oldest_attempts, (unsigned)oldest);
			int oa = lotus_txn_read_for_update(t, tb, ka, 8);
			int ob = lotus_txn_read_for_update(t, tb, kb, 8);
			int rc = lotus_txn_execute(t);
			if (rc == 0) {
				const void *va, *vb;
				uint64_t x, y;
				CHECK_RC(lotus_txn_result(t, oa, &va, NULL));
				CHECK_RC(lotus_txn_result(t, ob, &vb, NULL));
				memcpy(&x, va, 8);
				memcpy(&y, vb, 8);
				x++;
				y++;
				lotus_txn_write(t, tb, ka, 8, &x, 8);
				lotus_txn_write(t, tb, kb, 8, &y, 8);
				rc = lotus_txn_commit(t);
				if (rc == 0)
					break;
			} else {
				lotus_txn_abort(t);
			}
			if (oldest)
				atomic_fetch_add(&oldest_failures, 1);
			CHECK(lotus_err_retryable(rc));
			CHECK_RC(lotus_txn_restart(t));
		}
		atomic_store(&live_prio[id], 0);
		unsigned m = atomic_load(&max_attempts);
		while (attempt > m && !atomic_compare_exchange_weak(&max_attempts, &m, attempt))
			;
	}
	lotus_txn_free(t);
	lotus_session_close(s);
	return NULL;
}

static void run(const char *transport, enum lotus_cc cc)
{
	static const char *names[] = { "no_wait", "wait_die", "wound_wait" };
	lotus_session_t *s;
	lotus_txn_t *t;
	pthread_t th[THREADS];
	uint64_t zero = 0, sum = 0;
	cl = test_cluster(2, transport, cc, LOTUS_BATCH_INTRA);
	atomic_store(&max_attempts, 0);
	atomic_store(&oldest_failures, 0);
	atomic_store(&oldest_attempts, 0);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "hot", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < COUNTERS; i++) {
		unsigned char k[8];
		key_from_u64(i, k);
		lotus_txn_insert(t, tb, k, 8, &zero, 8);
	}
	CHECK_RC(lotus_txn_commit(t));
	/* Nobody polls this session while the threads run; over sm a session
	 * silent for longer than the lease (3 s) is declared lost (by either
	 * side), and on a loaded machine the threads take longer than that.  So
	 * it is closed here and the sums are read in a new one. */
	lotus_txn_free(t);
	lotus_session_close(s);
	uint64_t t0 = clock_now_ns();
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < COUNTERS; i++) {
		unsigned char k[8];
		key_from_u64(i, k);
		lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (int i = 0; i < COUNTERS; i++) {
		const void *v;
		uint64_t x;
		CHECK_RC(lotus_txn_result(t, i, &v, NULL));
		memcpy(&x, v, 8);
		sum += x;
	}
	CHECK_RC(lotus_txn_commit(t));
	fprintf(stderr, "%s %-10s: sum %llu (want %u), worst attempts %u, attempts started "
		"as the oldest %u of which failed %u, %.2f s\n", transport, names[cc],
		(unsigned long long)sum, THREADS * TXNS * 2, atomic_load(&max_attempts),
		atomic_load(&oldest_attempts), atomic_load(&oldest_failures),
		(double)(clock_now_ns() - t0) / 1e9);
	CHECK(sum == THREADS * TXNS * 2);
	if (cc != LOTUS_NO_WAIT)
		CHECK(atomic_load(&oldest_failures) == 0);
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

int main(void)
{
	for (int i = 0; test_transport(i); i++)
		for (int cc = 0; cc < 3; cc++)
			run(test_transport(i), (enum lotus_cc)cc);
	printf("ok\n");
	return 0;
}
