/*
 * test_bank.c - concurrent transfers between accounts on a 2-server local
 * cluster preserve the total, and every committed transfer is visible.
 * Each transfer also inserts a record of itself in the same transaction.
 * Runs over tcp and over shared memory, under NO_WAIT.
 */
#include <pthread.h>
#include <stdatomic.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "testutil.h"

#define ACCOUNTS 40
#define THREADS 3
#define TRANSFERS_PER_THREAD 300
#define OPENING 1000

static lotus_cluster_t *cl;
static lotus_table_t accounts, transfers;
static _Atomic uint64_t committed_ids[THREADS * TRANSFERS_PER_THREAD];
static _Atomic unsigned ncommitted;

static int64_t get_balance(const void *v, size_t len)
{
	int64_t b;
	CHECK(len == sizeof(b));
	memcpy(&b, v, sizeof(b));
	return b;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	lotus_session_t *s;
	lotus_txn_t *t;
	struct rng r;
	rng_seed(&r, 42 + id);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned n = 0; n < TRANSFERS_PER_THREAD; n++) {
		uint64_t a = rng_below(&r, ACCOUNTS), b = rng_below(&r, ACCOUNTS - 1);
		int64_t amount = (int64_t)rng_below(&r, 50) + 1;
		uint64_t xid = (uint64_t)id << 32 | n;
		unsigned char ka[8], kb[8], kx[8];
		b = b >= a ? b + 1 : b;
		key_from_u64(a, ka);
		key_from_u64(b, kb);
		key_from_u64(xid, kx);
		CHECK_RC(lotus_txn_recycle(t));
		for (unsigned attempt = 0;; attempt++) {
			CHECK(attempt < 100000);
			int oa = lotus_txn_read_for_update(t, accounts, ka, 8);
			int ob = lotus_txn_read_for_update(t, accounts, kb, 8);
			int rc = lotus_txn_execute(t);
			if (rc == 0) {
				const void *va, *vb;
				size_t la, lb;
				CHECK_RC(lotus_txn_result(t, oa, &va, &la));
				CHECK_RC(lotus_txn_result(t, ob, &vb, &lb));
				int64_t ba = get_balance(va, la) - amount;
				int64_t bb = get_balance(vb, lb) + amount;
				int64_t rec[3] = { (int64_t)a, (int64_t)b, amount };
				CHECK_RC(lotus_txn_write(t, accounts, ka, 8, &ba, 8));
				CHECK_RC(lotus_txn_write(t, accounts, kb, 8, &bb, 8));
				CHECK_RC(lotus_txn_insert(t, transfers, kx, 8, rec, sizeof(rec)));
				rc = lotus_txn_commit(t);
				if (rc == 0) {
					committed_ids[atomic_fetch_add(&ncommitted, 1)] = xid;
					break;
				}
			} else {
				lotus_txn_abort(t);
			}
			CHECK(lotus_err_retryable(rc));
			CHECK_RC(lotus_txn_restart(t));
		}
	}
	lotus_txn_free(t);
	lotus_session_close(s);
	return NULL;
}

static void run(const char *transport)
{
	lotus_session_t *s;
	lotus_txn_t *t;
	pthread_t th[THREADS];
	fprintf(stderr, "bank over %s\n", transport);
	atomic_store(&ncommitted, 0);
	cl = test_cluster(2, transport, LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "accounts", 8, &accounts));
	CHECK_RC(lotus_table_create(s, "transfers", 24, &transfers));
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t a = 0; a < ACCOUNTS; a++) {
		unsigned char k[8];
		int64_t bal = OPENING;
		key_from_u64(a, k);
		CHECK_RC(lotus_txn_insert(t, accounts, k, 8, &bal, 8));
	}
	CHECK_RC(lotus_txn_commit(t));
	for (unsigned i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	CHECK(atomic_load(&ncommitted) == THREADS * TRANSFERS_PER_THREAD);

	/* the total is unchanged */
	CHECK_RC(lotus_txn_recycle(t));
	int ops[ACCOUNTS];
	for (uint64_t a = 0; a < ACCOUNTS; a++) {
		unsigned char k[8];
		key_from_u64(a, k);
		ops[a] = lotus_txn_read(t, accounts, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	int64_t total = 0;
	for (uint64_t a = 0; a < ACCOUNTS; a++) {
		const void *v;
		size_t len;
		CHECK_RC(lotus_txn_result(t, ops[a], &v, &len));
		total += get_balance(v, len);
	}
	CHECK(total == (int64_t)ACCOUNTS * OPENING);
	CHECK_RC(lotus_txn_commit(t));

	/* every committed transfer is visible */
	for (unsigned i = 0; i < atomic_load(&ncommitted); i += 64) {
		CHECK_RC(lotus_txn_recycle(t));
		unsigned end = MIN(i + 64, atomic_load(&ncommitted));
		for (unsigned j = i; j < end; j++) {
			unsigned char k[8];
			key_from_u64(committed_ids[j], k);
			lotus_txn_read(t, transfers, k, 8);
		}
		CHECK_RC(lotus_txn_execute(t));
		for (unsigned j = 0; j < end - i; j++)
			CHECK(lotus_txn_result(t, (int)j, NULL, NULL) == 0);
		CHECK_RC(lotus_txn_commit(t));
	}
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
}

int main(void)
{
	for (int i = 0; test_transport(i); i++)
		run(test_transport(i));
	printf("ok\n");
	return 0;
}
