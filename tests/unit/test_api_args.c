/*
 * test_api_args.c - bad arguments get a clear error and crash nothing: an
 * empty or NULL table name, an empty key or scan start, and a NULL key or
 * value with a non-zero length are -EINVAL ("Invalid argument", not "key or
 * value too large", not a segfault); too long is still LOTUS_ETOOBIG; an empty
 * value is fine.
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

int main(void)
{
	lotus_cluster_t *cl = test_cluster(2, "tcp", LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "args", 100, &tb));
	bad_arguments(s, tb);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
