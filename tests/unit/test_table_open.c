/*
 * test_table_open.c - lotus_table_open() opens a table another client
 * created, without knowing its max_value (lotus_table_max_value() tells it),
 * and says LOTUS_ENOTABLE for a table nobody created.  Two cluster handles
 * share two memory servers run by the test.
 */
#include <errno.h>
#include "test_procs.h"
#include "check.h"

static lotus_cluster_t *connect_to(const char *config)
{
	struct lotus_options o;
	lotus_cluster_t *c;
	lotus_options_init(&o);
	o.config_path = config;
	CHECK_RC(lotus_connect(&o, &c));
	return c;
}


int main(void)
{
	const char *config = procs_start(2, NULL);
	lotus_cluster_t *a = connect_to(config), *b = connect_to(config);
	lotus_session_t *sa, *sb;
	lotus_table_t ta, tb;
	lotus_txn_t *t;
	char v[300];
	CHECK_RC(lotus_session_open(a, &sa));
	CHECK_RC(lotus_session_open(b, &sb));
	EXPECT(lotus_table_open(sb, "accounts", &tb), LOTUS_ENOTABLE);
	CHECK_RC(lotus_table_create(sa, "accounts", 300, &ta));
	/* b opens what a created, and learns its size */
	CHECK_RC(lotus_table_open(sb, "accounts", &tb));
	CHECK(lotus_table_max_value(sb, tb) == 300);
	CHECK(lotus_table_max_value(sa, ta) == 300);
	CHECK(lotus_table_max_value(sb, tb + 5) == 0);
	memset(v, 'v', sizeof(v));
	CHECK_RC(lotus_txn_begin(sa, &t));
	CHECK_RC(lotus_txn_write(t, ta, "k", 1, v, 300));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	CHECK_RC(lotus_txn_begin(sb, &t));
	int op = lotus_txn_read(t, tb, "k", 1);
	CHECK_RC(op);
	CHECK_RC(lotus_txn_execute(t));
	size_t vlen;
	const void *got;
	CHECK(lotus_txn_result(t, op, &got, &vlen) == 0 && vlen == 300);
	EXPECT(lotus_txn_write(t, tb, "k", 1, v, 301), LOTUS_ETOOBIG);
	lotus_txn_abort(t);
	lotus_txn_free(t);
	/* opening twice gives the same handle */
	lotus_table_t again;
	CHECK_RC(lotus_table_open(sb, "accounts", &again));
	CHECK(again == tb);
	EXPECT(lotus_table_open(sb, "", &again), -EINVAL);
	EXPECT(lotus_table_open(sb, NULL, &again), -EINVAL);
	lotus_session_close(sa);
	lotus_session_close(sb);
	lotus_disconnect(a);
	lotus_disconnect(b);
	procs_stop();
	printf("ok\n");
	return 0;
}
