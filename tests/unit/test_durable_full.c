/*
 * test_durable_full.c - a durable memory server (--durability sync) whose
 * pool filled up restarts with the same --memory and has everything that was
 * acknowledged:
 *   1. one server, --memory 4M; transactions of 50 inserts of 4000 B (and a
 *      few 100 B records in a second table) until a commit fails with
 *      LOTUS_ENOSPACE; then deletes, and inserts until full again (the pool
 *      is fragmented by then); updates of existing records;
 *   2. kill -9, restart with the same --memory: it must start, and every
 *      acknowledged record is there, byte-exact, and nothing of a failed
 *      transaction;
 *   3. a restart with too small a --memory refuses to start and says how
 *      much --memory is needed (from the log replay, and after a clean stop
 *      from the checkpoint image); the data stays intact for a restart with
 *      the right --memory;
 *   4. a clean stop (final checkpoint), restart, compare again.
 */
#include "common/ycsb_gen.h"
#include "test_durable_util.h"

#define VLEN 4000
#define SLEN 100
#define PER_TXN 50
#define MAXK 4096

static uint8_t present[MAXK];     /* acknowledged state of key k in "big" */
static uint32_t version[MAXK];
static uint8_t small_present[MAXK];

static void fill(unsigned char *v, uint32_t len, uint64_t key, uint32_t ver)
{
	for (uint32_t i = 0; i < len; i++)
		v[i] = (unsigned char)(key * 31 + ver * 7 + i);
	memcpy(v, &ver, 4);
}

/* Insert (or update, if up) keys [first, first+n) of big, plus one small key. */
static int big_txn(lotus_session_t *s, lotus_table_t big, lotus_table_t small, uint64_t first,
		   unsigned n, uint32_t ver, int up)
{
	static unsigned char v[VLEN];
	lotus_txn_t *t;
	unsigned char k[8];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		key_from_u64(first + i, k);
		fill(v, VLEN, first + i, ver);
		if (up)
			CHECK_RC(lotus_txn_write(t, big, k, 8, v, VLEN));
		else
			CHECK_RC(lotus_txn_insert(t, big, k, 8, v, VLEN));
	}
	if (!up && first / PER_TXN < MAXK) {
		key_from_u64(first / PER_TXN, k);
		fill(v, SLEN, first / PER_TXN, ver);
		CHECK_RC(lotus_txn_insert(t, small, k, 8, v, SLEN));
	}
	int rc = lotus_txn_commit(t);
	if (rc)
		lotus_txn_abort(t);
	lotus_txn_free(t);
	if (rc == 0)
		for (unsigned i = 0; i < n; i++) {
			present[first + i] = 1;
			version[first + i] = ver;
			if (!up)
				small_present[first / PER_TXN] = 1;
		}
	return rc;
}

static void delete_range(lotus_session_t *s, lotus_table_t big, uint64_t first, unsigned n)
{
	lotus_txn_t *t;
	unsigned char k[8];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		key_from_u64(first + i, k);
		CHECK_RC(lotus_txn_delete(t, big, k, 8));
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	for (unsigned i = 0; i < n; i++)
		present[first + i] = 0;
}

static void verify(lotus_cluster_t *c, const char *when)
{
	lotus_session_t *s;
	lotus_table_t big, small;
	lotus_txn_t *t;
	unsigned char k[8], want[VLEN];
	unsigned have = 0;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "big", VLEN, &big));
	CHECK_RC(lotus_table_create(s, "small", SLEN, &small));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t base = 0; base < MAXK; base += 64) {
		int ops[64], sops[64];
		lotus_txn_recycle(t);
		for (unsigned i = 0; i < 64; i++) {
			key_from_u64(base + i, k);
			ops[i] = lotus_txn_read(t, big, k, 8);
			sops[i] = lotus_txn_read(t, small, k, 8);
		}
		CHECK_RC(lotus_txn_execute(t));
		for (unsigned i = 0; i < 64; i++) {
			uint64_t key = base + i;
			const void *v;
			size_t len;
			int rc = lotus_txn_result(t, ops[i], &v, &len);
			if (rc != (present[key] ? 0 : LOTUS_ENOTFOUND)) {
				fprintf(stderr, "%s: big key %llu: %s, acknowledged %s\n", when,
					(unsigned long long)key, rc ? lotus_strerror(rc) : "present",
					present[key] ? "present" : "absent");
				exit(1);
			}
			if (rc == 0) {
				fill(want, VLEN, key, version[key]);
				CHECK(len == VLEN && !memcmp(v, want, VLEN));
				have++;
			}
			rc = lotus_txn_result(t, sops[i], &v, &len);
			CHECK(rc == (small_present[key] ? 0 : LOTUS_ENOTFOUND));
		}
		CHECK_RC(lotus_txn_commit(t));
	}
	lotus_txn_free(t);
	lotus_session_close(s);
	fprintf(stderr, "%s: all %u acknowledged records of 4000 B present, nothing else\n", when,
		have);
}

int main(void)
{
	const char *base = dt_setup();
	static struct dsrv sv;
	const char *args[] = { "--memory", "4M", "--durability", "sync", NULL };
	lotus_session_t *s;
	lotus_table_t big, small;
	unsigned txn = 0, fails = 0;
	uint32_t ver = 1;
	snprintf(sv.dir, sizeof(sv.dir), "%s/ms0", base);
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	lotus_cluster_t *c = dt_connect(&sv, 1);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "big", VLEN, &big));
	CHECK_RC(lotus_table_create(s, "small", SLEN, &small));
	/* fill */
	for (; (txn + 1) * PER_TXN <= MAXK; txn++) {
		int rc = big_txn(s, big, small, (uint64_t)txn * PER_TXN, PER_TXN, ver++, 0);
		if (rc) {
			CHECK(rc == LOTUS_ENOSPACE);
			fails++;
			break;
		}
	}
	CHECK(fails == 1 && txn >= 4);
	unsigned full_at = txn;
	/* free two transactions' worth in the middle, update others, fill again */
	delete_range(s, big, PER_TXN, PER_TXN);
	delete_range(s, big, 3 * PER_TXN + 10, PER_TXN / 2);
	CHECK_RC(big_txn(s, big, small, 0, PER_TXN, ver++, 1));
	for (txn++; (txn + 1) * PER_TXN <= MAXK; txn++) {
		int rc = big_txn(s, big, small, (uint64_t)txn * PER_TXN, PER_TXN / 2, ver++, 0);
		if (rc) {
			CHECK(rc == LOTUS_ENOSPACE);
			fails++;
			break;
		}
	}
	CHECK(fails == 2);
	fprintf(stderr, "full after %u transactions, again after deletes at %u; 2 commits refused\n",
		full_at, txn);
	lotus_session_close(s);
	lotus_disconnect(c);

	/* kill -9, restart with the same --memory */
	dsrv_stop(&sv, SIGKILL);
	if (dsrv_start(&sv, args, NULL) != 0) {
		fprintf(stderr, "the server did not restart with the same --memory\n");
		exit(1);
	}
	fprintf(stderr, "restart after kill -9: %s", sv.ready);
	c = dt_connect(&sv, 1);
	verify(c, "after kill -9");
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGKILL);

	/* too small for the log: refuses, and says how much is needed */
	const char *small_args[] = { "--memory", "2M", "--durability", "sync", NULL };
	CHECK(dsrv_start(&sv, small_args, NULL) != 0);
	CHECK(dsrv_log_has(&sv, "Restart with --memory"));
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	c = dt_connect(&sv, 1);
	verify(c, "after a refused start with 2M");
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGTERM);

	/* a clean stop (final checkpoint) */
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	c = dt_connect(&sv, 1);
	verify(c, "after a clean stop");
	lotus_disconnect(c);
	dsrv_stop(&sv, SIGKILL);
	/* too small for the checkpoint image */
	CHECK(dsrv_start(&sv, small_args, NULL) != 0);
	CHECK(dsrv_log_has(&sv, "it needs --memory"));
	printf("ok\n");
	return 0;
}
