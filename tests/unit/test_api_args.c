/*
 * test_api_args.c - bad arguments get a clear error and crash nothing: an
 * empty or NULL table name, an empty key or scan start, and a NULL key or
 * value with a non-zero length are -EINVAL ("Invalid argument", not "key or
 * value too large", not a segfault); too long is still LOTUS_ETOOBIG; an empty
 * value is fine.  A NULL handle or out pointer is -EINVAL (0 / NULL from the
 * getters, a no-op for the calls that return nothing) from every public
 * entry point: lotus_txn_begin/commit/execute/abort/read with NULL once
 * segfaulted.
 */
#include <errno.h>
#include "testutil.h"
#include "check.h"


/* A fresh transaction: each bad call dooms the one it is made on. */
static lotus_txn_t *fresh(lotus_session_t *s, lotus_txn_t *t)
{
	if (t) {
		lotus_txn_abort(t);
		lotus_txn_free(t);
	}
	CHECK_RC(lotus_txn_begin(s, &t));
	return t;
}

static void bad_arguments(lotus_session_t *s, lotus_table_t tb)
{
	static char big[201];   /* 200 bytes and a NUL */
	lotus_txn_t *t = NULL;
	lotus_table_t x;
	memset(big, 'k', 200);
	EXPECT(lotus_table_create(s, "", 100, &x), -EINVAL);
	EXPECT(lotus_table_create(s, NULL, 100, &x), -EINVAL);
	EXPECT(lotus_table_create(s, big, 100, &x), LOTUS_ETOOBIG);
	t = fresh(s, t);
	EXPECT(lotus_txn_read(t, tb, "", 0), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_write(t, tb, "", 0, "v", 1), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_scan(t, tb, "", 0, 10), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_read(t, tb, NULL, 4), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_read_for_update(t, tb, NULL, 4), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_write(t, tb, NULL, 4, "v", 1), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_insert(t, tb, NULL, 4, "v", 1), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_delete(t, tb, NULL, 4), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_scan(t, tb, NULL, 4, 10), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_write(t, tb, "key", 3, NULL, 5), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_insert(t, tb, "key", 3, NULL, 5), -EINVAL);
	t = fresh(s, t);
	EXPECT(lotus_txn_read(t, tb, big, 200), LOTUS_ETOOBIG);
	/* an empty value is fine, with or without a pointer */
	t = fresh(s, t);
	CHECK_RC(lotus_txn_write(t, tb, "e1", 2, NULL, 0));
	CHECK_RC(lotus_txn_write(t, tb, "e2", 2, "", 0));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

static void cb_never(lotus_txn_t *t, int rc, void *arg)
{
	fprintf(stderr, "a callback ran for a NULL transaction\n");
	exit(1);
}

static void null_handles(lotus_cluster_t *cl, lotus_session_t *s, lotus_table_t tb)
{
	lotus_cluster_t *c2 = NULL;
	lotus_session_t *s2 = NULL;
	lotus_txn_t *t = NULL;
	lotus_table_t x;
	struct lotus_options o;
	const void *v;
	size_t n;
	lotus_options_init(&o);
	lotus_options_init(NULL);
	EXPECT(lotus_connect(NULL, &c2), -EINVAL);
	EXPECT(lotus_connect(&o, NULL), -EINVAL);
	EXPECT(lotus_session_open(NULL, &s2), -EINVAL);
	EXPECT(lotus_session_open(cl, NULL), -EINVAL);
	EXPECT(lotus_session_poll(NULL, 0), -EINVAL);
	EXPECT(lotus_table_create(NULL, "args", 100, &x), -EINVAL);
	EXPECT(lotus_table_open(NULL, "args", &x), -EINVAL);
	EXPECT(lotus_table_open(s, "args", NULL), -EINVAL);
	EXPECT((int)lotus_table_max_value(NULL, tb), 0);
	EXPECT((int)lotus_cluster_servers(NULL), 0);
	EXPECT(lotus_cluster_transport(NULL) == NULL, 1);
	EXPECT(lotus_server_stats(NULL, 0) == NULL, 1);
	EXPECT(lotus_txn_begin(NULL, &t), -EINVAL);
	EXPECT(lotus_txn_begin(s, NULL), -EINVAL);
	EXPECT(lotus_txn_restart(NULL), -EINVAL);
	EXPECT(lotus_txn_recycle(NULL), -EINVAL);
	EXPECT(lotus_txn_read(NULL, tb, "k", 1), -EINVAL);
	EXPECT(lotus_txn_read_for_update(NULL, tb, "k", 1), -EINVAL);
	EXPECT(lotus_txn_write(NULL, tb, "k", 1, "v", 1), -EINVAL);
	EXPECT(lotus_txn_insert(NULL, tb, "k", 1, "v", 1), -EINVAL);
	EXPECT(lotus_txn_delete(NULL, tb, "k", 1), -EINVAL);
	EXPECT(lotus_txn_scan(NULL, tb, "k", 1, 10), -EINVAL);
	EXPECT(lotus_txn_execute(NULL), -EINVAL);
	EXPECT(lotus_txn_commit(NULL), -EINVAL);
	EXPECT(lotus_txn_abort(NULL), -EINVAL);
	EXPECT(lotus_txn_execute_async(NULL, cb_never, NULL), -EINVAL);
	EXPECT(lotus_txn_commit_async(NULL, cb_never, NULL), -EINVAL);
	EXPECT(lotus_txn_abort_async(NULL, cb_never, NULL), -EINVAL);
	EXPECT(lotus_txn_result(NULL, 0, &v, &n), -EINVAL);
	EXPECT(lotus_txn_scan_rows(NULL, 0), -EINVAL);
	uint64_t ver;
	EXPECT(lotus_txn_result_version(NULL, 0, &ver), -EINVAL);
	EXPECT(lotus_txn_scan_row(NULL, 0, 0, &v, &n, &v, &n), -EINVAL);
	EXPECT(lotus_txn_id(NULL) == 0 && lotus_txn_priority(NULL) == 0, 1);
	lotus_txn_free(NULL);
	lotus_session_close(NULL);
	lotus_disconnect(NULL);
	struct lotus_net_counters nc;
	struct lotus_txn_counters tc;
	struct lotus_cache_counters cc;
	lotus_session_counters(NULL, &nc);
	lotus_session_counters(s, NULL);
	unsigned lost_sv = 77;
	EXPECT(lotus_session_lost(NULL, &lost_sv), -EINVAL);
	EXPECT(lotus_session_lost(s, &lost_sv), 0);   /* every server reached */
	EXPECT(lost_sv, 77);
	EXPECT(lotus_session_lost(s, NULL), 0);
	lotus_session_txn_counters(NULL, &tc);
	lotus_session_txn_counters(s, NULL);
	lotus_cluster_cache_counters(NULL, &cc);
	lotus_cluster_cache_counters(cl, NULL);
	/* a scan row's out pointers may be NULL, like lotus_txn_result's */
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_scan(t, tb, "e", 1, 1);
	CHECK(op >= 0);
	CHECK_RC(lotus_txn_execute(t));
	EXPECT(lotus_txn_scan_rows(t, op), 1);
	EXPECT(lotus_txn_scan_row(t, op, 0, NULL, NULL, NULL, NULL), 0);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	/* and the session still works */
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK(lotus_txn_write(t, tb, "after", 5, "ok", 2) >= 0);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

int main(void)
{
	lotus_cluster_t *cl = test_cluster(2, "tcp", LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "args", 100, &tb));
	bad_arguments(s, tb);
	null_handles(cl, s, tb);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
