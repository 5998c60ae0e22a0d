/*
 * test_durable_eio.c - a log write fails with EIO in a --durability sync
 * memory server (LOTUS_IO_FAULT="cqe:N:EIO" in its environment):
 *   - the commit caught by it gets LOTUS_EDURABLE or LOTUS_EREADONLY, never 0;
 *   - every later write is refused with LOTUS_EREADONLY (commits, inserts,
 *     deletes, table creation), and the server says why in its log;
 *   - reads still work and return the acknowledged data;
 *   - after a restart without the fault every acknowledged write is there.
 */
#include "test_durable_util.h"

static uint32_t model[DT_KEYS];

/* One single-key update; the model follows only an acknowledgement. */
static int put(lotus_session_t *s, lotus_table_t tb, uint64_t key, uint32_t ver)
{
	lotus_txn_t *t;
	unsigned char k[8], v[DT_VMAX];
	key_from_u64(key, k);
	CHECK_RC(lotus_txn_begin(s, &t));
	lotus_txn_write(t, tb, k, 8, v, dt_value(key, ver, v));
	int rc = lotus_txn_commit(t);
	if (rc == 0)
		model[key] = ver;
	else
		lotus_txn_abort(t);
	lotus_txn_free(t);
	return rc;
}

int main(void)
{
	const char *base = dt_setup();
	static struct dsrv sv;
	const char *args[] = { "--durability", "sync", NULL };
	lotus_session_t *s;
	lotus_table_t tb, tb2;
	unsigned char k[8];
	int rc = 0;
	unsigned i, failed_at = 0;
	snprintf(sv.dir, sizeof(sv.dir), "%s/ms0", base);
	/* log writes are one I/O each here (one sync commit at a time): the
	 * 40th fails, some 38 commits after the table's */
	CHECK(dsrv_start(&sv, args, "cqe:40:EIO") == 0);
	lotus_cluster_t *c = dt_connect(&sv, 1);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	for (i = 1; i <= 200; i++) {
		rc = put(s, tb, i % 50, i);
		if (rc) {
			failed_at = i;
			break;
		}
	}
	fprintf(stderr, "commit %u failed: %s\n", failed_at, lotus_strerror(rc));
	CHECK(failed_at > 0);
	CHECK(rc == LOTUS_EDURABLE || rc == LOTUS_EREADONLY);

	/* the server refuses writes from now on */
	CHECK(put(s, tb, 7, 1000) == LOTUS_EREADONLY);
	CHECK(put(s, tb, 999, 1001) == LOTUS_EREADONLY);   /* an insert */
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	key_from_u64(3, k);
	lotus_txn_delete(t, tb, k, 8);
	CHECK(lotus_txn_commit(t) == LOTUS_EREADONLY);
	lotus_txn_abort(t);
	lotus_txn_free(t);
	CHECK(lotus_table_create(s, "another", 64, &tb2) == LOTUS_EREADONLY);

	/* reads work: every acknowledged value is there (the failed commit
	 * was applied in memory before its log write failed, so skip its key) */
	uint32_t saved = model[failed_at % 50];
	model[failed_at % 50] = 0;
	static uint32_t seen[DT_KEYS];
	for (uint64_t key = 0; key < 50; key++) {
		const void *v;
		size_t vl;
		CHECK_RC(lotus_txn_begin(s, &t));
		key_from_u64(key, k);
		int op = lotus_txn_read(t, tb, k, 8);
		CHECK_RC(lotus_txn_execute(t));
		rc = lotus_txn_result(t, op, &v, &vl);
		seen[key] = rc == 0 ? dt_value_version(key, v, vl) : 0;
		CHECK_RC(lotus_txn_commit(t));
		lotus_txn_free(t);
		CHECK(key == failed_at % 50 || seen[key] == model[key]);
	}
	model[failed_at % 50] = saved;
	CHECK(dsrv_log_has(&sv, "refusing every write"));
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGTERM);        /* no final checkpoint: the log is broken */
	CHECK(dsrv_log_has(&sv, "no final checkpoint"));

	/* restart without the fault: everything acknowledged is there; the
	 * failed commit may or may not be (it never was acknowledged) */
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	fprintf(stderr, "restart: %s", sv.ready);
	c = dt_connect(&sv, 1);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	for (uint64_t key = 0; key < 50; key++) {
		const void *v;
		size_t vl;
		CHECK_RC(lotus_txn_begin(s, &t));
		key_from_u64(key, k);
		int op = lotus_txn_read(t, tb, k, 8);
		CHECK_RC(lotus_txn_execute(t));
		rc = lotus_txn_result(t, op, &v, &vl);
		uint32_t ver = rc == 0 ? dt_value_version(key, v, vl) : 0;
		CHECK_RC(lotus_txn_commit(t));
		lotus_txn_free(t);
		if (ver != model[key] && !(key == failed_at % 50 && ver == failed_at)) {
			fprintf(stderr, "key %llu: version %u after restart, %u acknowledged\n",
				(unsigned long long)key, ver, model[key]);
			return 1;
		}
	}
	/* and it takes writes again */
	CHECK(put(s, tb, 1, 5000) == 0);
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGTERM);
	printf("ok\n");
	return 0;
}
