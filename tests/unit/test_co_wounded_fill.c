/*
 * test_co_wounded_fill.c - co-partitioning under WOUND_WAIT: a reader that
 * is wounded after its read reached the memory server must not put the
 * value it read into the owner's cache, where it would hide the value its
 * wounder committed since.
 *
 * One thread, two sessions, a cache that holds one record.  A (younger)
 * reads k, which is not cached, and its session is not polled, so the reply
 * waits.  B (older) takes k for update (wounding A locally and at the
 * server), writes "new" and commits.  Only then does A's session see its
 * reply, with the old value; A cannot commit.  A read of k must give "new".
 */
#include <unistd.h>
#include "testutil.h"

static lotus_table_t tb;

static void put(lotus_session_t *s, const char *k, const char *v)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_write(t, tb, k, strlen(k), v, strlen(v)));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

static void expect(lotus_session_t *s, const char *k, const char *want)
{
	lotus_txn_t *t;
	const void *v;
	size_t n;
	CHECK_RC(lotus_txn_begin(s, &t));
	int op = lotus_txn_read(t, tb, k, strlen(k));
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	int rc = lotus_txn_result(t, op, &v, &n);
	if (rc || n != strlen(want) || memcmp(v, want, n)) {
		fprintf(stderr, "read of %s gave %s \"%.*s\", want \"%s\"\n", k,
			lotus_strerror(rc), rc ? 0 : (int)n, rc ? "" : (const char *)v, want);
		exit(1);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

static int done_a;
static void on_a(lotus_txn_t *t, int result, void *arg)
{
	(void)t;
	*(int *)arg = result;
	done_a = 1;
}

int main(void)
{
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		return 77;
	}
	struct lotus_options o;
	lotus_cluster_t *cl;
	lotus_session_t *sa, *sb;
	lotus_txn_t *a, *b;
	int ra = 0;
	lotus_options_init(&o);
	o.local_servers = 1;
	o.cc = LOTUS_WOUND_WAIT;
	o.batch = LOTUS_BATCH_NONE;
	o.server_threads = 1;
	o.server_memory = 32ULL << 20;
	o.partitioning = LOTUS_PART_CO;
	o.cache_bytes = 200;              /* one small record at a time */
	CHECK_RC(lotus_connect(&o, &cl));
	CHECK_RC(lotus_session_open(cl, &sa));
	CHECK_RC(lotus_session_open(cl, &sb));
	CHECK_RC(lotus_table_create(sb, "wf", 16, &tb));
	for (int round = 0; round < 5; round++) {
		put(sb, "k", "old");
		put(sb, "z", "zz");       /* k leaves the cache */
		CHECK_RC(lotus_txn_begin(sb, &b));
		usleep(1000);
		CHECK_RC(lotus_txn_begin(sa, &a));   /* younger than b */
		CHECK(lotus_txn_priority(b) < lotus_txn_priority(a));
		CHECK_RC(lotus_txn_read(a, tb, "k", 1));
		done_a = 0;
		CHECK_RC(lotus_txn_execute_async(a, on_a, &ra));
		usleep(50 * 1000);                   /* the server answers a */
		int op = lotus_txn_read_for_update(b, tb, "k", 1);
		CHECK_RC(op);
		CHECK_RC(lotus_txn_execute(b));
		CHECK_RC(lotus_txn_write(b, tb, "k", 1, "new", 3));
		CHECK_RC(lotus_txn_commit(b));
		lotus_txn_free(b);
		for (int i = 0; i < 500 && !done_a; i++)
			lotus_session_poll(sa, 10);
		CHECK(done_a);
		if (ra == 0)
			CHECK(lotus_txn_commit(a) != 0);     /* wounded: never commits */
		else
			lotus_txn_abort(a);
		lotus_txn_free(a);
		expect(sb, "k", "new");
	}
	lotus_session_close(sa);
	lotus_session_close(sb);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
