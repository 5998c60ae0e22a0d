/*
 * test_txn_owner.c - only a transaction's owner may end it (issue 20, 8c).
 *
 * Two durable memory servers, real processes; server 1 holds every log write
 * back 2 s (LOTUS_REDO_DELAY_MS), so a two-phase commit stays prepared on
 * server 0 while server 1's vote waits.  Client A (compute id 1) writes 16 keys
 * spread over both servers; client B (compute id 2, same secret, its own
 * cluster handle) sends OP_ABORT with A's transaction id to both servers, as
 * any client could on the wire:
 *   round 1: while A's transaction is live (executed, not committing);
 *   round 2: while it is prepared on server 0 (A's commit is under way).
 * Each time B must be refused (-EPERM), A's commit must return 0, and all 16
 * keys must then read back with A's values from both servers: no abort from
 * B may have dropped A's writes anywhere.  (Without the owner check, B's
 * ABORT releases A's live transaction, so A's commit fails; or it drops A's
 * prepared writes on server 0 while A, which already had that vote, commits:
 * A is told 0 and half of its writes are gone.)
 */
#include "common/clock.h"
#include "compute/session.h"
#include "test_durable_util.h"

#define NKEYS 16

static lotus_cluster_t *connect_as(unsigned compute_id)
{
	char path[600];
	lotus_cluster_t *c;
	struct lotus_options o;
	snprintf(path, sizeof(path), "%s/cluster.ini", dt_base);
	lotus_options_init(&o);
	o.config_path = path;
	o.transport = "tcp";
	o.compute_id = compute_id;
	CHECK_RC(lotus_connect(&o, &c));
	return c;
}

static void write_config(struct dsrv *sv)
{
	char path[600], tmp[610];
	snprintf(path, sizeof(path), "%s/cluster.ini", dt_base);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	CHECK(f);
	fprintf(f, "[cluster]\ntransport = tcp\n");
	for (int i = 0; i < 2; i++)
		fprintf(f, "\n[memserver %u]\nlisten = 127.0.0.1:%u\n", sv[i].id, sv[i].port);
	fclose(f);
	CHECK(rename(tmp, path) == 0);
}

/* B's ABORT of txn id on server sv: the status it got. */
static int foreign_abort(lotus_session_t *b, unsigned sv, uint64_t id)
{
	struct wire_req r = { .op = OP_ABORT, .txn_id = id, .priority = 1 };
	return session_admin(b, sv, &r, NULL, NULL, 5000);
}

static unsigned prepared_on(lotus_session_t *s, unsigned sv)
{
	const char *st = lotus_server_stats(s, sv);
	const char *p = st ? strstr(st, "\"prepared\":") : NULL;
	return p ? (unsigned)atoi(p + 11) : 0;
}

static int a_result;
static void a_done(lotus_txn_t *t, int result, void *arg)
{
	(void)t;
	*(int *)arg = result;
}

static void check_values(lotus_session_t *s, lotus_table_t tb, unsigned round)
{
	int have = dt_count_round(s, tb, 1000 * round, NKEYS, "A-", round);
	fprintf(stderr, "round %u: %d of %d keys hold A's values\n", round, have, NKEYS);
	CHECK(have == NKEYS);
}

int main(void)
{
	const char *base = dt_setup();
	static struct dsrv sv[2];
	char peers[600];
	snprintf(peers, sizeof(peers), "%s/cluster.ini", base);
	for (unsigned i = 0; i < 2; i++) {
		sv[i].id = i;
		snprintf(sv[i].dir, sizeof(sv[i].dir), "%s/ms%u", base, i);
		dt_servers[i] = &sv[i];
		if (i == 1)
			setenv("LOTUS_REDO_DELAY_MS", "2000", 1);
		const char *args[] = { "--durability", "sync", "--peers", peers, NULL };
		CHECK(dsrv_start(&sv[i], args, NULL) == 0);
		unsetenv("LOTUS_REDO_DELAY_MS");
	}
	write_config(sv);
	lotus_cluster_t *ca = connect_as(1), *cb = connect_as(2);
	lotus_session_t *a, *b;
	lotus_table_t tb, tbb;
	CHECK_RC(lotus_session_open(ca, &a));
	CHECK_RC(lotus_session_open(cb, &b));
	CHECK_RC(lotus_table_create(a, "own", 64, &tb));   /* waits for server 1's log */
	CHECK_RC(lotus_table_create(b, "own", 64, &tbb));  /* B's handle on it */

	for (unsigned round = 1; round <= 2; round++) {
		lotus_txn_t *t;
		CHECK_RC(lotus_txn_begin(a, &t));
		for (unsigned i = 0; i < NKEYS; i++) {
			unsigned char k[8];
			char v[32];
			key_from_u64(1000 * round + i, k);
			snprintf(v, sizeof(v), "A-%u-%u", round, i);
			CHECK_RC(lotus_txn_write(t, tb, k, 8, v, strlen(v)));
		}
		CHECK_RC(lotus_txn_execute(t));
		uint64_t id = lotus_txn_id(t);
		int rb[2], rc;
		if (round == 1) {   /* live: its X locks are held, nothing prepared */
			rb[0] = foreign_abort(b, 0, id);
			rb[1] = foreign_abort(b, 1, id);
			rc = lotus_txn_commit(t);
		} else {            /* prepared on server 0, server 1's vote waits */
			a_result = 1;
			CHECK_RC(lotus_txn_commit_async(t, a_done, &a_result));
			uint64_t t0 = clock_now_ns();
			while (prepared_on(b, 0) == 0 && a_result == 1 &&
			       clock_now_ns() - t0 < 10000000000ULL)
				lotus_session_poll(a, 10);
			CHECK(a_result == 1);   /* still waiting for server 1's vote */
			rb[0] = foreign_abort(b, 0, id);
			rb[1] = foreign_abort(b, 1, id);
			while (a_result == 1 && clock_now_ns() - t0 < 30000000000ULL)
				lotus_session_poll(a, 10);
			rc = a_result;
		}
		fprintf(stderr, "round %u (%s): B's ABORT of A's txn %llx: server 0 %s, server 1 "
			"%s; A's commit: %s\n", round, round == 1 ? "live" : "prepared",
			(unsigned long long)id, lotus_strerror(rb[0]), lotus_strerror(rb[1]),
			lotus_strerror(rc));
		CHECK(rb[0] == -EPERM && rb[1] == -EPERM);
		CHECK_RC(rc);
		lotus_txn_free(t);
		check_values(b, tbb, round);
	}
	lotus_session_close(b);
	lotus_session_close(a);
	lotus_disconnect(cb);
	lotus_disconnect(ca);
	dsrv_stop(&sv[0], SIGTERM);
	dsrv_stop(&sv[1], SIGTERM);
	printf("ok\n");
	return 0;
}
