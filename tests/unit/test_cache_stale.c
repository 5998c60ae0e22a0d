/*
 * test_cache_stale.c - a cached location hint never returns old data.  Two
 * compute servers (two cluster handles, each with its own record cache) share
 * a 2-server cluster.  Compute server A reads keys and caches their
 * locations; compute server B deletes them and inserts them again with new
 * values (the slot may be reused with a new generation, or another slot may
 * hold the key); B also deletes some and leaves them deleted.  A's next reads
 * carry the stale hints: they must return B's new values, or not-found for
 * the deleted keys, and the memory servers must report the hints as stale.
 */
#include <unistd.h>
#include "common/common.h"
#include "compute/cluster.h"
#include "testutil.h"

#define KEYS 64

static lotus_cluster_t *connect_to(const char *config)
{
	struct lotus_options o;
	lotus_cluster_t *c;
	lotus_options_init(&o);
	o.config_path = config;
	o.cache_bytes = 1 << 20;
	o.compute_id = 2;
	CHECK_RC(lotus_connect(&o, &c));
	return c;
}

static void read_all(lotus_session_t *s, lotus_table_t tb, uint64_t want_base, int deleted_from)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t i = 0; i < KEYS; i++) {
		unsigned char k[8];
		key_from_u64(i, k);
		lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (int i = 0; i < KEYS; i++) {
		const void *v;
		size_t n;
		int rc = lotus_txn_result(t, i, &v, &n);
		if (deleted_from >= 0 && i >= deleted_from) {
			CHECK(rc == LOTUS_ENOTFOUND);
			continue;
		}
		uint64_t x;
		CHECK(rc == 0 && n == 8);
		memcpy(&x, v, 8);
		CHECK(x == want_base + (uint64_t)i);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
}

/* Commit what stage(t) stages, again after a retryable failure: A's
 * read-only transaction is acknowledged on its reads, before its release
 * notices reach the servers, so B's writes right after it may meet A's S
 * locks and abort under NO_WAIT (a bounded number of times). */
static void commit_retrying(lotus_txn_t *t, void (*stage)(lotus_txn_t *, lotus_table_t, uint64_t,
							  int),
			    lotus_table_t tb, uint64_t base, int n)
{
	for (int attempt = 1;; attempt++) {
		stage(t, tb, base, n);
		int rc = lotus_txn_commit(t);
		if (rc == 0)
			return;
		CHECK(lotus_err_retryable(rc) && attempt < 1000);
		CHECK_RC(lotus_txn_restart(t));
		usleep(1000);
	}
}

static void stage_deletes(lotus_txn_t *t, lotus_table_t tb, uint64_t base, int n)
{
	(void)base;
	for (uint64_t i = 0; i < (uint64_t)n; i++) {
		unsigned char k[8];
		key_from_u64(i, k);
		lotus_txn_delete(t, tb, k, 8);
	}
}

static void stage_inserts(lotus_txn_t *t, lotus_table_t tb, uint64_t base, int n)
{
	for (uint64_t i = 0; i < (uint64_t)n; i++) {
		unsigned char k[8];
		uint64_t v = base + i;
		key_from_u64(i, k);
		lotus_txn_insert(t, tb, k, 8, &v, 8);
	}
}

static void rewrite(lotus_session_t *s, lotus_table_t tb, uint64_t base, int drop_from)
{
	lotus_txn_t *t;
	CHECK_RC(lotus_txn_begin(s, &t));
	commit_retrying(t, stage_deletes, tb, base, KEYS);        /* delete everything ... */
	CHECK_RC(lotus_txn_recycle(t));
	commit_retrying(t, stage_inserts, tb, base, drop_from);   /* ... insert most again */
	lotus_txn_free(t);
}

int main(void)
{
	char config[] = "/tmp/lotus-stale-XXXXXX";
	lotus_cluster_t *host = test_cluster(2, "tcp", LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	int fd = mkstemp(config);
	CHECK(fd >= 0);
	dprintf(fd, "[cluster]\ntransport = tcp\n%s[memserver 0]\nlisten = %s:%u\n[memserver 1]\nlisten = %s:%u\n",
		test_secret_line(host), host->servers[0].host, host->servers[0].port, host->servers[1].host,
		host->servers[1].port);
	close(fd);
	lotus_cluster_t *a = connect_to(config), *b = connect_to(config);
	lotus_session_t *sa, *sb;
	lotus_table_t ta, tb;
	CHECK_RC(lotus_session_open(a, &sa));
	CHECK_RC(lotus_session_open(b, &sb));
	CHECK_RC(lotus_table_create(sa, "t", 8, &ta));
	CHECK_RC(lotus_table_create(sb, "t", 8, &tb));
	rewrite(sb, tb, 1000, KEYS);         /* B creates keys 0..63 = 1000+i */
	read_all(sa, ta, 1000, -1);          /* A reads: caches 64 locations */
	read_all(sa, ta, 1000, -1);          /* ... and uses them as hints */
	struct lotus_cache_counters before, after;
	lotus_cluster_cache_counters(a, &before);
	CHECK(before.hits >= KEYS);
	rewrite(sb, tb, 5000, KEYS - 8);     /* B: delete all, re-insert 56 new values */
	read_all(sa, ta, 5000, KEYS - 8);    /* A's stale hints must not leak old data */
	lotus_cluster_cache_counters(a, &after);
	fprintf(stderr, "cache: %llu hits, %llu stale hints after B rewrote the keys\n",
		(unsigned long long)after.hits, (unsigned long long)after.stale_hints);
	CHECK(after.stale_hints > before.stale_hints);
	read_all(sa, ta, 5000, KEYS - 8);    /* refreshed hints keep working */
	lotus_session_close(sa);
	lotus_session_close(sb);
	lotus_disconnect(a);
	lotus_disconnect(b);
	lotus_disconnect(host);
	unlink(config);
	printf("ok\n");
	return 0;
}
