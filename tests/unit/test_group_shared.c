/*
 * test_group_shared.c - sessions that share a sending group (--batch inter,
 * group size 3) run transactions side by side, each thread with two in
 * flight (asynchronous, restarted and recycled from the callbacks, so one
 * member's dispatch serves the others' replies and deadlines while they
 * restart): every counter ends at its count.  Under TSan (make test-tsan)
 * it checks that nothing a member's dispatch reads is written outside the
 * group lock.
 */
#include <pthread.h>
#include "testutil.h"

#define THREADS 3
#define TXNS 150

static lotus_cluster_t *cl;
static lotus_table_t tb;

struct slot {
	lotus_txn_t *t;
	unsigned key, done, left;
	int err;
};

static void start(struct slot *sl);

static void on_commit(lotus_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	if (rc && !lotus_err_retryable(rc)) {
		sl->err = rc;
		return;
	}
	if (rc == 0) {
		sl->done++;
		if (--sl->left == 0)
			return;
		CHECK_RC(lotus_txn_recycle(t));
	} else {
		CHECK_RC(lotus_txn_restart(t));
	}
	start(sl);
}

static void on_exec(lotus_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	const void *v;
	size_t vlen;
	uint64_t n = 0;
	char k[16];
	if (rc) {   /* NO_WAIT has no conflicts here, but a retry is harmless */
		lotus_txn_abort(t);
		on_commit(t, rc, arg);
		return;
	}
	if (lotus_txn_result(t, 0, &v, &vlen) == 0 && vlen == 8)
		memcpy(&n, v, 8);
	n++;
	snprintf(k, sizeof(k), "c%u", sl->key);
	CHECK_RC(lotus_txn_write(t, tb, k, strlen(k), &n, 8));
	CHECK_RC(lotus_txn_commit_async(t, on_commit, sl));
}

static void start(struct slot *sl)
{
	char k[16];
	snprintf(k, sizeof(k), "c%u", sl->key);
	CHECK_RC(lotus_txn_read_for_update(sl->t, tb, k, strlen(k)));
	CHECK_RC(lotus_txn_execute_async(sl->t, on_exec, sl));
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	lotus_session_t *s;
	struct slot sl[2] = { { 0 } };
	CHECK_RC(lotus_session_open(cl, &s));
	for (unsigned i = 0; i < 2; i++) {
		sl[i].key = id * 2 + i;
		sl[i].left = TXNS;
		CHECK_RC(lotus_txn_begin(s, &sl[i].t));
		start(&sl[i]);
	}
	for (int n = 0; n < 200000 && (sl[0].left || sl[1].left) && !sl[0].err && !sl[1].err; n++)
		lotus_session_poll(s, 10);
	for (unsigned i = 0; i < 2; i++) {
		CHECK_RC(sl[i].err);
		CHECK(sl[i].done == TXNS);
		lotus_txn_free(sl[i].t);
	}
	lotus_session_close(s);
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	lotus_session_t *s;
	lotus_txn_t *t;
	struct lotus_options o;
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		return 77;
	}
	lotus_options_init(&o);
	o.local_servers = 2;
	o.batch = LOTUS_BATCH_INTER;
	o.group_size = THREADS;
	o.server_threads = 1;
	o.server_memory = 64ULL << 20;
	CHECK_RC(lotus_connect(&o, &cl));
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "counters", 8, &tb));
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < 2 * THREADS; i++) {
		char k[16];
		snprintf(k, sizeof(k), "c%u", i);
		CHECK_RC(lotus_txn_read(t, tb, k, strlen(k)));
	}
	CHECK_RC(lotus_txn_execute(t));
	for (unsigned i = 0; i < 2 * THREADS; i++) {
		const void *v;
		size_t vlen;
		uint64_t n;
		CHECK(lotus_txn_result(t, (int)i, &v, &vlen) == 0 && vlen == 8);
		memcpy(&n, v, 8);
		CHECK(n == TXNS);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
