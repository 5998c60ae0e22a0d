/*
 * test_onesided_basic.c - the one-sided engine against real memory servers,
 * on tcp (emulated RMA) and shared memory (true one-sided):
 *   - reads see the values loaded through lotus's two-sided API;
 *   - one warm transaction of K reads costs exactly 3K READs, K CAS and K FAA
 *     with the bytes the layout implies, 5K round trips; an update exactly
 *     adds 2 WRITEs;
 *   - NO_WAIT: a read of a record another transaction holds exclusively aborts;
 *   - inserts that split leaves and inner pages are all found again.
 */
#include "os_testutil.h"

#define N    3000
#define VLEN 64
#define K    4

static void check_value(os_txn_t *t, int op, uint64_t want)
{
	const void *v;
	size_t vlen;
	CHECK_RC(os_txn_result(t, op, &v, &vlen));
	CHECK(vlen == VLEN);
	uint64_t got;
	memcpy(&got, v, 8);
	if (got != want)
		fprintf(stderr, "value %llu, want %llu\n", (unsigned long long)got,
			(unsigned long long)want);
	CHECK(got == want);
}

static void read_keys(os_txn_t *t, unsigned tid, uint64_t from, unsigned n)
{
	unsigned char k[8];
	CHECK_RC(os_txn_recycle(t));
	for (unsigned i = 0; i < n; i++) {
		key_from_u64(from + i, k);
		CHECK(os_txn_read(t, tid, k, 8) == (int)i);
	}
	CHECK_RC(os_txn_execute(t));
	for (unsigned i = 0; i < n; i++)
		check_value(t, (int)i, from + i);
	CHECK_RC(os_txn_commit(t));
}

static void scenario(const char *transport)
{
	lotus_cluster_t *cl = test_cluster(2, transport, LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	os_test_load(cl, "os", N, VLEN);
	os_engine_t *e = os_test_engine(cl, LOTUS_NO_WAIT);
	os_session_t *s;
	os_txn_t *t, *t2;
	unsigned tid;
	unsigned char k[8], v[VLEN];
	struct os_counters c0, c1;
	CHECK_RC(os_session_open(e, &s));
	CHECK_RC(os_session_attach(s, "os", &tid));
	CHECK(os_session_value_max(s, tid) == VLEN);
	CHECK(os_session_attach(s, "nope", &tid) == LOTUS_ENOTABLE);
	CHECK_RC(os_session_attach(s, "os", &tid));
	CHECK_RC(os_txn_begin(s, &t));
	CHECK_RC(os_txn_begin(s, &t2));

	/* every record, cold then warm */
	for (uint64_t i = 0; i < N; i += 50)
		read_keys(t, tid, i, 50);

	/* exact counts of a warm transaction of K reads */
	os_session_counters(s, &c0);
	read_keys(t, tid, 100, K);
	os_session_counters(s, &c1);
	struct os_tally d = c1.committed;
	for (int i = 0; i < OS_NTYPES; i++) {
		d.ops[i] -= c0.committed.ops[i];
		d.out[i] -= c0.committed.out[i];
		d.in[i] -= c0.committed.in[i];
	}
	d.round_trips -= c0.committed.round_trips;
	printf("%s: %u reads: read %llu (%llu B in), cas %llu, faa %llu, write %llu, rt %llu\n",
	       transport, K, (unsigned long long)d.ops[OS_READ],
	       (unsigned long long)d.in[OS_READ], (unsigned long long)d.ops[OS_CAS],
	       (unsigned long long)d.ops[OS_FAA], (unsigned long long)d.ops[OS_WRITE],
	       (unsigned long long)d.round_trips);
	CHECK(d.ops[OS_READ] == 3 * K);      /* leaf, header, data */
	CHECK(d.in[OS_READ] == K * (OS_PAGE_SIZE + 16 + 8 + VLEN));
	CHECK(d.out[OS_READ] == 0);
	CHECK(d.ops[OS_CAS] == K && d.out[OS_CAS] == 16 * K && d.in[OS_CAS] == 8 * K);
	CHECK(d.ops[OS_FAA] == K && d.out[OS_FAA] == 8 * K && d.in[OS_FAA] == 8 * K);
	CHECK(d.ops[OS_WRITE] == 0);
	CHECK(d.round_trips == 5 * K);
	CHECK(c1.commits == c0.commits + 1 && c1.aborts == c0.aborts);

	/* an update: X lock (leaf, header, CAS), data put, unlock put */
	os_session_counters(s, &c0);
	CHECK_RC(os_txn_recycle(t));
	key_from_u64(7, k);
	uint64_t nv = 7007;
	for (int b = 0; b < VLEN; b += 8)
		memcpy(v + b, &nv, 8);
	CHECK_RC(os_txn_write(t, tid, k, 8, v, VLEN));
	CHECK_RC(os_txn_execute(t));
	CHECK_RC(os_txn_commit(t));
	os_session_counters(s, &c1);
	CHECK(c1.committed.ops[OS_READ] - c0.committed.ops[OS_READ] == 2);
	CHECK(c1.committed.ops[OS_CAS] - c0.committed.ops[OS_CAS] == 1);
	CHECK(c1.committed.ops[OS_WRITE] - c0.committed.ops[OS_WRITE] == 2);
	CHECK(c1.committed.out[OS_WRITE] - c0.committed.out[OS_WRITE] == 8 + VLEN + 8);
	CHECK(c1.committed.ops[OS_FAA] == c0.committed.ops[OS_FAA]);
	CHECK_RC(os_txn_recycle(t));
	CHECK_RC(os_txn_read(t, tid, k, 8));
	CHECK_RC(os_txn_execute(t));
	check_value(t, 0, 7007);
	CHECK_RC(os_txn_commit(t));

	/* NO_WAIT conflict: t holds X(7), t2's read aborts; after t commits it works */
	CHECK_RC(os_txn_recycle(t));
	CHECK_RC(os_txn_read_for_update(t, tid, k, 8));
	CHECK_RC(os_txn_execute(t));
	CHECK_RC(os_txn_recycle(t2));
	CHECK_RC(os_txn_read(t2, tid, k, 8));
	CHECK(os_txn_execute(t2) == LOTUS_EABORTED);
	CHECK_RC(os_txn_abort(t2));
	nv = 8008;
	for (int b = 0; b < VLEN; b += 8)
		memcpy(v + b, &nv, 8);
	CHECK_RC(os_txn_write(t, tid, k, 8, v, VLEN));   /* the RMW's write */
	CHECK_RC(os_txn_commit(t));
	CHECK_RC(os_txn_restart(t2));
	CHECK_RC(os_txn_read(t2, tid, k, 8));
	CHECK_RC(os_txn_execute(t2));
	check_value(t2, 0, 8008);
	CHECK_RC(os_txn_commit(t2));
	/* a missing key: reported per op, as lotus does; a blind write creates it */
	CHECK_RC(os_txn_recycle(t));
	key_from_u64(N + 5000000, k);
	CHECK_RC(os_txn_read(t, tid, k, 8));
	CHECK_RC(os_txn_read(t, tid, "\0\0\0\0\0\0\0\x09", 8));
	CHECK_RC(os_txn_execute(t));
	const void *rv;
	size_t rl;
	CHECK(os_txn_result(t, 0, &rv, &rl) == LOTUS_ENOTFOUND);
	check_value(t, 1, 9);
	CHECK_RC(os_txn_commit(t));
	CHECK_RC(os_txn_recycle(t));
	nv = 4242;
	for (int b = 0; b < VLEN; b += 8)
		memcpy(v + b, &nv, 8);
	CHECK_RC(os_txn_write(t, tid, k, 8, v, VLEN));
	CHECK_RC(os_txn_commit(t));
	CHECK_RC(os_txn_recycle(t));
	CHECK_RC(os_txn_read(t, tid, k, 8));
	CHECK_RC(os_txn_execute(t));
	check_value(t, 0, 4242);
	CHECK_RC(os_txn_commit(t));
	/* read-for-update of a missing key, then a write of it: inserted */
	CHECK_RC(os_txn_recycle(t));
	key_from_u64(N + 6000000, k);
	CHECK_RC(os_txn_read_for_update(t, tid, k, 8));
	CHECK_RC(os_txn_execute(t));
	CHECK(os_txn_result(t, 0, &rv, &rl) == LOTUS_ENOTFOUND);
	CHECK_RC(os_txn_write(t, tid, k, 8, v, VLEN));
	CHECK_RC(os_txn_commit(t));
	CHECK_RC(os_txn_recycle(t));
	CHECK_RC(os_txn_read(t, tid, k, 8));
	CHECK_RC(os_txn_execute(t));
	check_value(t, 0, 4242);
	CHECK_RC(os_txn_commit(t));

	/* inserts: enough to split leaves and the level above */
	for (uint64_t i = N; i < 3 * N;) {
		CHECK_RC(os_txn_recycle(t));
		for (unsigned j = 0; j < 10; j++, i++) {
			key_from_u64(i, k);
			for (int b = 0; b < VLEN; b += 8)
				memcpy(v + b, &i, 8);
			CHECK_RC(os_txn_insert(t, tid, k, 8, v, VLEN));
		}
		CHECK_RC(os_txn_commit(t));
	}
	CHECK_RC(os_txn_recycle(t));
	key_from_u64(N + 1, k);
	CHECK_RC(os_txn_insert(t, tid, k, 8, v, VLEN));
	CHECK(os_txn_commit(t) == LOTUS_EEXISTS);
	os_session_counters(s, &c1);
	printf("%s: %llu splits, %llu cache hits, %llu misses\n", transport,
	       (unsigned long long)c1.splits, (unsigned long long)c1.cache_hits,
	       (unsigned long long)c1.cache_misses);
	CHECK(c1.splits > 2 * N / 60);
	/* every key, old and new, from a fresh session (cold cache) too */
	os_session_t *s2;
	unsigned tid2;
	os_txn_t *t3;
	CHECK_RC(os_session_open(e, &s2));
	CHECK_RC(os_session_attach(s2, "os", &tid2));
	CHECK_RC(os_txn_begin(s2, &t3));
	for (uint64_t i = 0; i < 3 * N; i += 50) {
		if (i == 0) {   /* key 7 was updated */
			read_keys(t, tid, 10, 40);
			continue;
		}
		read_keys(t, tid, i, 50);
		read_keys(t3, tid2, i, 50);
	}
	os_txn_free(t3);
	os_session_close(s2);
	os_txn_free(t);
	os_txn_free(t2);
	os_session_close(s);
	os_engine_destroy(e);
	lotus_disconnect(cl);
}

int main(void)
{
	for (int i = 0; test_transport(i); i++)
		scenario(test_transport(i));
	printf("ok\n");
	return 0;
}
