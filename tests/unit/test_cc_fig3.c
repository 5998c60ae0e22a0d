/*
 * test_cc_fig3.c - the paper's Figure 3 against a real memory server, for each
 * protocol.  T1 (writer, highest priority), T2 (writer, middle) and T3
 * (reader, lowest) all touch record A; T3's request arrives first, then
 * T1's, then T2's.  All three run on one session, asynchronously, so a
 * waiting request does not block the others.
 *
 *   NO_WAIT     T1 and T2 are rejected.
 *   WAIT_DIE    T1 waits (older than T3); T2 is rejected (younger than the
 *               waiting T1); T3 commits; then T1 is granted.
 *   WOUND_WAIT  T1 wounds T3 and is granted at once; T2 waits; T3 learns of
 *               its preemption only from the reply to its next request;
 *               T1 commits; then T2 is granted.
 */
#include <unistd.h>
#include "common/common.h"
#include "testutil.h"

struct step { int done, rc, order; };
static int order_counter;

static void on_step(lotus_txn_t *t, int rc, void *arg)
{
	struct step *s = arg;
	s->done = 1;
	s->rc = rc;
	s->order = ++order_counter;
}

static void pump(lotus_session_t *s, int ms)
{
	for (int i = 0; i < ms / 10; i++)
		lotus_session_poll(s, 10);
}

static void wait_done(lotus_session_t *s, struct step *st)
{
	for (int i = 0; i < 500 && !st->done; i++)
		lotus_session_poll(s, 10);
	CHECK(st->done);
}

static void scenario(enum lotus_cc cc, const char *transport)
{
	lotus_cluster_t *cl = test_cluster(1, transport, cc, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t1, *t2, *t3, *ld;
	unsigned char A[8], B[8];
	uint64_t v = 1;
	struct step s1 = { 0 }, s2 = { 0 }, s3 = { 0 }, c = { 0 };
	key_from_u64(1, A);
	key_from_u64(2, B);
	order_counter = 0;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "fig3", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &ld));
	CHECK_RC(lotus_txn_insert(ld, tb, A, 8, &v, 8));
	CHECK_RC(lotus_txn_insert(ld, tb, B, 8, &v, 8));
	CHECK_RC(lotus_txn_commit(ld));
	lotus_txn_free(ld);
	/* priorities follow begin order: T1 oldest, then T2, then T3 */
	CHECK_RC(lotus_txn_begin(s, &t1));
	CHECK_RC(lotus_txn_begin(s, &t2));
	CHECK_RC(lotus_txn_begin(s, &t3));
	CHECK(lotus_txn_priority(t1) < lotus_txn_priority(t2));
	CHECK(lotus_txn_priority(t2) < lotus_txn_priority(t3));

	lotus_txn_read(t3, tb, A, 8);
	CHECK_RC(lotus_txn_execute(t3));                 /* T3 holds S(A) */
	v = 11;
	lotus_txn_write(t1, tb, A, 8, &v, 8);
	CHECK_RC(lotus_txn_execute_async(t1, on_step, &s1));
	pump(s, 100);
	v = 22;
	lotus_txn_write(t2, tb, A, 8, &v, 8);
	CHECK_RC(lotus_txn_execute_async(t2, on_step, &s2));
	pump(s, 200);

	if (cc == LOTUS_NO_WAIT) {
		CHECK(s1.done && s1.rc == LOTUS_EABORTED);
		CHECK(s2.done && s2.rc == LOTUS_EABORTED);
		CHECK_RC(lotus_txn_commit(t3));
	} else if (cc == LOTUS_WAIT_DIE) {
		CHECK(!s1.done);                          /* T1 waits, no reply yet */
		CHECK(s2.done && s2.rc == LOTUS_EABORTED); /* T2 dies */
		CHECK_RC(lotus_txn_commit(t3));           /* T3 finishes ... */
		wait_done(s, &s1);                        /* ... then T1 is granted */
		CHECK(s1.rc == 0);
		CHECK_RC(lotus_txn_commit(t1));
	} else {
		CHECK(s1.done && s1.rc == 0);             /* T1 wounded T3, granted */
		CHECK(!s2.done);                          /* T2 waits behind T1 */
		lotus_txn_read(t3, tb, B, 8);             /* T3's next request ... */
		CHECK_RC(lotus_txn_execute_async(t3, on_step, &s3));
		wait_done(s, &s3);
		CHECK(s3.rc == LOTUS_EPREEMPTED);         /* ... tells it */
		CHECK(!s2.done);
		CHECK_RC(lotus_txn_abort(t3));
		CHECK_RC(lotus_txn_commit_async(t1, on_step, &c));
		wait_done(s, &c);
		CHECK(c.rc == 0);
		wait_done(s, &s2);                        /* then T2 is granted */
		CHECK(s2.rc == 0 && c.order < s2.order);
		CHECK_RC(lotus_txn_commit(t2));
	}
	if (s1.rc)
		lotus_txn_abort(t1);
	if (s2.rc)
		lotus_txn_abort(t2);
	const char *st = lotus_server_stats(s, 0);
	fprintf(stderr, "%s server stats: %s\n", cc == LOTUS_NO_WAIT ? "no_wait"
		: cc == LOTUS_WAIT_DIE ? "wait_die" : "wound_wait", st ? st : "?");
	lotus_txn_free(t1);
	lotus_txn_free(t2);
	lotus_txn_free(t3);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

int main(void)
{
	for (int i = 0; test_transport(i); i++) {
		scenario(LOTUS_NO_WAIT, test_transport(i));
		scenario(LOTUS_WAIT_DIE, test_transport(i));
		scenario(LOTUS_WOUND_WAIT, test_transport(i));
	}
	printf("ok\n");
	return 0;
}
