/*
 * test_durable_async.c - --durability async may lose the unsynced tail of the
 * log at a crash, but never corrupts: after kill -9 in the middle of a stream
 * of commits, the recovered table is exactly the state after some prefix of
 * the commits that were sent (every value is one that was committed, and no
 * commit is half there).  The test reports how many acknowledged commits the
 * crash cost.
 */
#include <pthread.h>
#include "test_durable_util.h"

#define MAX_TXNS 200000
#define MAX_OPS  8

struct hop { uint32_t key, ver; };   /* ver 0: deleted */
static struct hop hops[MAX_TXNS * MAX_OPS];
static unsigned txn_first[MAX_TXNS + 1];
static _Atomic unsigned n_sent, n_acked;
static _Atomic int stop_client;
static uint32_t model[DT_KEYS];
static lotus_cluster_t *cl;

static void *client(void *arg)
{
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t;
	unsigned seed = 3, nh = 0;
	uint32_t ver = 0;
	unsigned char k[8], v[DT_VMAX];
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	while (!stop_client && n_sent < MAX_TXNS) {
		unsigned n = 1 + (unsigned)rand_r(&seed) % MAX_OPS, first = nh;
		lotus_txn_recycle(t);
		while (nh - first < n) {
			uint32_t key = (uint32_t)rand_r(&seed) % DT_KEYS;
			int dup = 0;
			for (unsigned i = first; i < nh; i++)
				dup |= hops[i].key == key;
			if (dup)
				continue;
			key_from_u64(key, k);
			if (model[key] && rand_r(&seed) % 6 == 0) {
				hops[nh++] = (struct hop){ key, 0 };
				lotus_txn_delete(t, tb, k, 8);
			} else {
				hops[nh++] = (struct hop){ key, ++ver };
				uint32_t len = dt_value(key, ver, v);
				if (model[key])
					lotus_txn_write(t, tb, k, 8, v, len);
				else
					lotus_txn_insert(t, tb, k, 8, v, len);
			}
		}
		txn_first[n_sent + 1] = nh;
		n_sent++;                 /* from here on it may be in the log */
		int rc = lotus_txn_commit(t);
		if (rc) {
			lotus_txn_abort(t);
			break;                /* the server is gone */
		}
		for (unsigned i = first; i < nh; i++)
			model[hops[i].key] = hops[i].ver;
		n_acked++;
	}
	lotus_txn_free(t);
	lotus_session_close(s);
	return NULL;
}

static uint32_t recovered[DT_KEYS];

static void collect(uint64_t key, uint32_t found, void *arg)
{
	(void)arg;
	recovered[key] = found;
}

int main(void)
{
	const char *base = dt_setup();
	static struct dsrv sv;
	const char *args[] = { "--durability", "async", NULL };
	pthread_t th;
	snprintf(sv.dir, sizeof(sv.dir), "%s/ms0", base);
	CHECK(dsrv_start(&sv, args, NULL) == 0);
	cl = dt_connect(&sv, 1);
	CHECK(pthread_create(&th, NULL, client, NULL) == 0);
	usleep(1500 * 1000);
	dsrv_stop(&sv, SIGKILL);        /* in the middle of the stream */
	stop_client = 1;
	pthread_join(th, NULL);
	lotus_disconnect(cl);
	unsigned sent = n_sent, acked = n_acked;
	fprintf(stderr, "killed after %u commits sent, %u acknowledged\n", sent, acked);
	CHECK(acked > 50);

	CHECK(dsrv_start(&sv, args, NULL) == 0);
	fprintf(stderr, "restart: %s", sv.ready);
	cl = dt_connect(&sv, 1);
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "durable", DT_VMAX, &tb));
	dt_scan_all(s, tb, collect, NULL);   /* fails on a value never written */
	lotus_session_close(s);
	lotus_disconnect(cl);
	dsrv_stop(&sv, SIGTERM);

	/* Find a prefix j of the sent commits whose state is the recovered one:
	 * walk the commits, keeping the number of keys that differ. */
	static uint32_t state[DT_KEYS];
	unsigned diff = 0;
	int found = -1;
	for (unsigned k = 0; k < DT_KEYS; k++)
		diff += recovered[k] != 0;
	for (unsigned j = 0;; j++) {
		if (diff == 0) {
			found = (int)j;      /* the longest matching prefix wins */
		}
		if (j == sent)
			break;
		for (unsigned i = txn_first[j]; i < txn_first[j + 1]; i++) {
			struct hop h = hops[i];
			diff -= state[h.key] != recovered[h.key];
			state[h.key] = h.ver;
			diff += state[h.key] != recovered[h.key];
		}
	}
	if (found < 0) {
		fprintf(stderr, "the recovered table is not the state after any prefix of the "
			"commits: corrupt or a commit applied in part\n");
		return 1;
	}
	fprintf(stderr, "recovered the state after commit %d of %u sent (%u acknowledged): "
		"%d acknowledged commits lost in the unsynced tail\n", found, sent, acked,
		found < (int)acked ? (int)acked - found : 0);
	printf("ok\n");
	return 0;
}
