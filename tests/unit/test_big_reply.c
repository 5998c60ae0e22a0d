/*
 * test_big_reply.c - a transaction whose replies add up to more than one
 * message may hold (64 MiB) gets every reply:
 *   - 1,030 records of 64 KiB on one server, read in one transaction and one
 *     execute (about 67.5 MB of replies), followed by 200 reads of absent
 *     keys (status-only replies that come after the message is full):
 *     execute returns, every value is there and right, every absent key
 *     says LOTUS_ENOTFOUND;
 *   - the same with read_for_update, then the transaction commits;
 *   - the server still serves a small transaction afterwards.
 * A hang is a failure: an alarm ends the test after 30 s.
 */
#include <signal.h>
#include <unistd.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "testutil.h"

#define VMAX (64u * 1024)
#define NREC 1030
#define NABSENT 200

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "FAIL: a transaction got no answer within 30 s (hang)\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void fill(unsigned char *v, uint64_t key)
{
	for (unsigned i = 0; i < VMAX; i += 8) {
		uint64_t x = key * 0x9e3779b97f4a7c15ULL + i;
		memcpy(v + i, &x, 8);
	}
}

static void read_all(lotus_session_t *s, lotus_table_t tb, int for_update)
{
	static unsigned char want[VMAX];
	lotus_txn_t *t;
	int ops[NREC], absent[NABSENT];
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < NREC; i++) {
		unsigned char k[8];
		key_from_u64(i, k);
		ops[i] = for_update ? lotus_txn_read_for_update(t, tb, k, 8)
				    : lotus_txn_read(t, tb, k, 8);
		CHECK(ops[i] >= 0);
	}
	for (uint64_t i = 0; i < NABSENT; i++) {
		unsigned char k[8];
		key_from_u64(1000000 + i, k);
		absent[i] = lotus_txn_read(t, tb, k, 8);
		CHECK(absent[i] >= 0);
	}
	int rc = lotus_txn_execute(t);
	fprintf(stderr, "%s of %u x 64 KiB in one execute: %s\n",
		for_update ? "read_for_update" : "read", NREC, rc ? lotus_strerror(rc) : "ok");
	CHECK_RC(rc);
	for (uint64_t i = 0; i < NREC; i++) {
		const void *v;
		size_t len;
		CHECK_RC(lotus_txn_result(t, ops[i], &v, &len));
		fill(want, i);
		CHECK(len == VMAX && !memcmp(v, want, VMAX));
	}
	for (unsigned i = 0; i < NABSENT; i++)
		CHECK(lotus_txn_result(t, absent[i], NULL, NULL) == LOTUS_ENOTFOUND);
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

int main(void)
{
	static unsigned char v[VMAX];
	struct lotus_options o;
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		return 77;
	}
	signal(SIGALRM, on_alarm);
	alarm(30);
	lotus_options_init(&o);
	o.local_servers = 1;
	o.transport = "tcp";
	o.server_threads = 1;
	o.server_memory = 256ull << 20;
	CHECK_RC(lotus_connect(&o, &cl));
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "big", VMAX, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < NREC; i += 100) {
		CHECK_RC(lotus_txn_recycle(t));
		for (uint64_t j = i; j < i + 100 && j < NREC; j++) {
			unsigned char k[8];
			key_from_u64(j, k);
			fill(v, j);
			CHECK_RC(lotus_txn_insert(t, tb, k, 8, v, VMAX));
		}
		CHECK_RC(lotus_txn_commit(t));
	}
	lotus_txn_free(t);
	read_all(s, tb, 0);
	read_all(s, tb, 1);
	/* still serving */
	CHECK_RC(lotus_txn_begin(s, &t));
	unsigned char k[8];
	key_from_u64(7, k);
	int op = lotus_txn_read(t, tb, k, 8);
	CHECK_RC(lotus_txn_execute(t));
	CHECK_RC(lotus_txn_result(t, op, NULL, NULL));
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
	printf("ok\n");
	return 0;
}
