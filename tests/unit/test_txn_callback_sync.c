/*
 * test_txn_callback_sync.c - a callback of an asynchronous call may call any
 * lotus_* function, synchronous ones included (design.md: callbacks run from
 * lotus_session_poll after the session's group lock is released): from the
 * execute callback, a synchronous commit, a server-stats call and a whole
 * synchronous transaction on another txn, under every --batch.
 */
#include "testutil.h"

struct ctx {
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *other;
	int done, rc;
};

static void on_exec(lotus_txn_t *t, int rc, void *arg)
{
	struct ctx *x = arg;
	const void *v;
	size_t vlen;
	if (rc == 0)
		rc = lotus_txn_commit(t);                     /* nested poll */
	if (rc == 0 && !lotus_server_stats(x->s, 0))
		rc = -1;
	if (rc == 0) {
		int op = lotus_txn_read(x->other, x->tb, "k1", 2);
		rc = op < 0 ? op : lotus_txn_execute(x->other);
		if (rc == 0 && (lotus_txn_result(x->other, op, &v, &vlen) != 0 || vlen != 2 ||
				memcmp(v, "v1", 2)))
			rc = -2;
		if (rc == 0)
			rc = lotus_txn_commit(x->other);
	}
	x->rc = rc;
	x->done = 1;
}

static void run(enum lotus_batch b)
{
	lotus_cluster_t *c = test_cluster(2, "tcp", LOTUS_NO_WAIT, b);
	struct ctx x = { 0 };
	lotus_txn_t *t;
	CHECK_RC(lotus_session_open(c, &x.s));
	CHECK_RC(lotus_table_create(x.s, "t", 64, &x.tb));
	CHECK_RC(lotus_txn_begin(x.s, &t));
	CHECK_RC(lotus_txn_begin(x.s, &x.other));
	CHECK_RC(lotus_txn_write(t, x.tb, "k1", 2, "v1", 2));
	CHECK_RC(lotus_txn_write(t, x.tb, "k2", 2, "v2", 2));
	CHECK_RC(lotus_txn_execute_async(t, on_exec, &x));
	for (int i = 0; i < 200 && !x.done; i++)
		lotus_session_poll(x.s, 50);
	CHECK(x.done);
	CHECK_RC(x.rc);
	lotus_txn_free(t);
	lotus_txn_free(x.other);
	lotus_session_close(x.s);
	lotus_disconnect(c);
}

int main(void)
{
	run(LOTUS_BATCH_NONE);
	run(LOTUS_BATCH_INTRA);
	run(LOTUS_BATCH_INTER);
	printf("ok\n");
	return 0;
}
