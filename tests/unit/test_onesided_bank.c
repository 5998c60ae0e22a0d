/*
 * test_onesided_bank.c - money is conserved under the one-sided engine:
 * THREADS threads, each its own session, move random amounts between
 * ACCOUNTS accounts on two memory servers (read-for-update both, write both,
 * retry on a conflict) under NO_WAIT and WAIT_DIE, on tcp and sm.  At the
 * end, read every account: the sum is what was loaded and no balance is
 * negative.  Then the same with one thread keeping INFLIGHT transfers going
 * at once through asynchronous steps (os_txn_step: their RMA operations
 * overlap).  Bounded: TXNS transfers per thread, and a time limit.
 */
#include <pthread.h>
#include "common/clock.h"
#include "os_testutil.h"

#define ACCOUNTS 40
#define THREADS  4
#define TXNS     400
#define START    1000

struct worker {
	os_engine_t *e;
	os_session_t *s;
	unsigned tid;
	uint64_t seed, commits, aborts;
	pthread_t th;
};

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	os_txn_t *t;
	unsigned char ka[8], kb[8];
	uint64_t deadline = clock_now_ns() + 20ULL * 1000000000;
	CHECK_RC(os_txn_begin(w->s, &t));
	for (unsigned n = 0; n < TXNS && clock_now_ns() < deadline; n++) {
		uint64_t a = rnd(&w->seed) % ACCOUNTS, b = rnd(&w->seed) % (ACCOUNTS - 1);
		if (b >= a)
			b++;
		int64_t amount = (int64_t)(rnd(&w->seed) % 50);
		key_from_u64(a, ka);
		key_from_u64(b, kb);
		CHECK_RC(os_txn_recycle(t));
		for (int attempt = 0;; attempt++) {
			CHECK(os_txn_read_for_update(t, w->tid, ka, 8) == 0);
			CHECK(os_txn_read_for_update(t, w->tid, kb, 8) == 1);
			int rc = os_txn_execute(t);
			if (rc == 0) {
				const void *v;
				size_t len;
				int64_t ba, bb;
				CHECK_RC(os_txn_result(t, 0, &v, &len));
				memcpy(&ba, v, 8);
				CHECK_RC(os_txn_result(t, 1, &v, &len));
				memcpy(&bb, v, 8);
				if (ba >= amount) {
					ba -= amount;
					bb += amount;
				}
				CHECK_RC(os_txn_write(t, w->tid, ka, 8, &ba, 8));
				CHECK_RC(os_txn_write(t, w->tid, kb, 8, &bb, 8));
				rc = os_txn_commit(t);
			}
			if (rc == 0) {
				w->commits++;
				break;
			}
			CHECK(rc == LOTUS_EABORTED);
			os_txn_abort(t);
			w->aborts++;
			CHECK(attempt < 100000);
			CHECK_RC(os_txn_restart(t));
		}
	}
	os_txn_free(t);
	return NULL;
}

/* ---- INFLIGHT transfers on one session, as step state machines ---- */
#define INFLIGHT 8
struct slot {
	struct worker *w;
	os_txn_t *t;
	unsigned char ka[8], kb[8];
	int64_t amount;
	int busy;
	uint64_t left;
};

static void slot_next(struct slot *sl);

static void on_commit(os_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	if (rc == 0) {
		sl->w->commits++;
		slot_next(sl);
		return;
	}
	CHECK(rc == LOTUS_EABORTED);
	sl->w->aborts++;
	CHECK_RC(os_txn_restart(t));   /* releases what the failed step held */
	CHECK(os_txn_read_for_update(t, sl->w->tid, sl->ka, 8) == 0);
	CHECK(os_txn_read_for_update(t, sl->w->tid, sl->kb, 8) == 1);
	extern void on_exec(os_txn_t *, int, void *);
	CHECK_RC(os_txn_step(t, OS_STEP_EXECUTE, on_exec, sl));
}

void on_exec(os_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	if (rc) {
		on_commit(t, rc, arg);
		return;
	}
	const void *v;
	size_t len;
	int64_t ba, bb;
	CHECK_RC(os_txn_result(t, 0, &v, &len));
	memcpy(&ba, v, 8);
	CHECK_RC(os_txn_result(t, 1, &v, &len));
	memcpy(&bb, v, 8);
	if (ba >= sl->amount) {
		ba -= sl->amount;
		bb += sl->amount;
	}
	CHECK_RC(os_txn_write(t, sl->w->tid, sl->ka, 8, &ba, 8));
	CHECK_RC(os_txn_write(t, sl->w->tid, sl->kb, 8, &bb, 8));
	CHECK_RC(os_txn_step(t, OS_STEP_COMMIT, on_commit, sl));
}

static void slot_next(struct slot *sl)
{
	struct worker *w = sl->w;
	if (sl->left == 0) {
		sl->busy = 0;
		return;
	}
	sl->left--;
	uint64_t a = rnd(&w->seed) % ACCOUNTS, b = rnd(&w->seed) % (ACCOUNTS - 1);
	if (b >= a)
		b++;
	sl->amount = (int64_t)(rnd(&w->seed) % 50);
	key_from_u64(a, sl->ka);
	key_from_u64(b, sl->kb);
	CHECK_RC(os_txn_recycle(sl->t));
	CHECK(os_txn_read_for_update(sl->t, w->tid, sl->ka, 8) == 0);
	CHECK(os_txn_read_for_update(sl->t, w->tid, sl->kb, 8) == 1);
	CHECK_RC(os_txn_step(sl->t, OS_STEP_EXECUTE, on_exec, sl));
}

static void run_inflight(struct worker *w)
{
	struct slot sl[INFLIGHT];
	uint64_t deadline = clock_now_ns() + 20ULL * 1000000000;
	for (int i = 0; i < INFLIGHT; i++) {
		sl[i] = (struct slot){ .w = w, .busy = 1, .left = TXNS / INFLIGHT };
		CHECK_RC(os_txn_begin(w->s, &sl[i].t));
	}
	for (int i = 0; i < INFLIGHT; i++)
		slot_next(&sl[i]);
	for (;;) {
		int busy = 0;
		for (int i = 0; i < INFLIGHT; i++)
			busy += sl[i].busy;
		if (!busy)
			break;
		CHECK(clock_now_ns() < deadline);
		os_session_run(w->s);
	}
	for (int i = 0; i < INFLIGHT; i++)
		os_txn_free(sl[i].t);
}

static void scenario(const char *transport, int cc)
{
	lotus_cluster_t *cl = test_cluster(2, transport, cc, LOTUS_BATCH_INTRA);
	lotus_session_t *ls;
	lotus_table_t tb;
	lotus_txn_t *lt;
	unsigned char k[8];
	int64_t start = START;
	CHECK_RC(lotus_session_open(cl, &ls));
	CHECK_RC(lotus_table_create(ls, "bank", 8, &tb));
	CHECK_RC(lotus_txn_begin(ls, &lt));
	for (uint64_t i = 0; i < ACCOUNTS; i++) {
		key_from_u64(i, k);
		CHECK_RC(lotus_txn_insert(lt, tb, k, 8, &start, 8));
	}
	CHECK_RC(lotus_txn_commit(lt));
	lotus_txn_free(lt);
	lotus_session_close(ls);

	os_engine_t *e = os_test_engine(cl, cc);
	struct worker w[THREADS];
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .e = e, .seed = 0x9e3779b97f4a7c15ULL * (i + 1) };
		CHECK_RC(os_session_open(e, &w[i].s));
		CHECK_RC(os_session_attach(w[i].s, "bank", &w[i].tid));
	}
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&w[i].th, NULL, worker_main, &w[i]) == 0);
	uint64_t commits = 0, aborts = 0;
	for (int i = 0; i < THREADS; i++)
		pthread_join(w[i].th, NULL);
	uint64_t t0 = clock_now_ns();
	run_inflight(&w[0]);
	uint64_t infl_ns = clock_now_ns() - t0;
	for (int i = 0; i < THREADS; i++) {
		commits += w[i].commits;
		aborts += w[i].aborts;
	}
	os_txn_t *t;
	int64_t sum = 0;
	CHECK_RC(os_txn_begin(w[0].s, &t));
	for (uint64_t i = 0; i < ACCOUNTS; i++) {
		key_from_u64(i, k);
		CHECK(os_txn_read(t, w[0].tid, k, 8) == (int)i);
	}
	CHECK_RC(os_txn_execute(t));
	for (uint64_t i = 0; i < ACCOUNTS; i++) {
		const void *v;
		size_t len;
		int64_t bal;
		CHECK_RC(os_txn_result(t, (int)i, &v, &len));
		memcpy(&bal, v, 8);
		CHECK(bal >= 0);
		sum += bal;
	}
	CHECK_RC(os_txn_commit(t));
	os_txn_free(t);
	printf("%s %s: %llu transfers committed, %llu aborts, sum %lld (%d in flight: %.1f ms)\n",
	       transport, cc == LOTUS_NO_WAIT ? "no_wait" : "wait_die",
	       (unsigned long long)commits, (unsigned long long)aborts, (long long)sum, INFLIGHT,
	       infl_ns / 1e6);
	CHECK(commits == THREADS * TXNS + TXNS / INFLIGHT * INFLIGHT);
	CHECK(sum == (int64_t)ACCOUNTS * START);
	CHECK(commits > 0);
	for (int i = 0; i < THREADS; i++)
		os_session_close(w[i].s);
	os_engine_destroy(e);
	lotus_disconnect(cl);
}

int main(void)
{
	for (int i = 0; test_transport(i); i++) {
		scenario(test_transport(i), LOTUS_NO_WAIT);
		scenario(test_transport(i), LOTUS_WAIT_DIE);
	}
	printf("ok\n");
	return 0;
}
