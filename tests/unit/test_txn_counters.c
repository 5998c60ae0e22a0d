/*
 * test_txn_counters.c - the engine's per-attempt counters
 * (lotus_session_txn_counters) account for every byte and request on the
 * wire, batched or not: over a run of transactions, committed + aborted
 * bytes sent / received and ops equal the session's message counters
 * (lotus_session_counters) exactly, under --batch none, intra and inter.
 * Round trips and ops per type match what the protocol needs: a transaction
 * that reads and writes on two servers takes 3 (execute, prepare, commit),
 * a read-only one 2 (execute, commit); an aborted attempt counts apart.
 */
#include "testutil.h"
#include "compute/cluster.h"

#define NTXN 20

static unsigned find_type(const struct lotus_txn_counters *c, const char *name)
{
	for (unsigned i = 0; i < c->ntypes; i++)
		if (!strcmp(c->type_names[i], name))
			return i;
	fprintf(stderr, "no type %s\n", name);
	exit(1);
}

/* Keys 4 on server 0, 4 on server 1. */
static void pick_keys(lotus_cluster_t *c, char keys[8][16])
{
	unsigned have[2] = { 0, 0 };
	for (unsigned i = 0; have[0] + have[1] < 8; i++) {
		char k[16];
		snprintf(k, sizeof(k), "key%u", i);
		unsigned sv = cluster_route(c, 0, k, strlen(k));   /* hashed: no rule */
		if (have[sv] < 4)
			memcpy(keys[sv * 4 + have[sv]++], k, sizeof(k));
	}
}

static void run(enum lotus_batch batch)
{
	lotus_cluster_t *c = test_cluster(2, "tcp", LOTUS_NO_WAIT, batch);
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t, *u;
	char keys[8][16], val[100];
	struct lotus_net_counters n0, n1;
	struct lotus_txn_counters e0, e1;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "t", 128, &tb));
	pick_keys(c, keys);
	memset(val, 'v', sizeof(val));
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_begin(s, &u));
	for (unsigned i = 0; i < 8; i++)
		CHECK_RC(lotus_txn_insert(t, tb, keys[i], strlen(keys[i]), val, sizeof(val)));
	CHECK_RC(lotus_txn_commit(t));

	lotus_session_counters(s, &n0);
	lotus_session_txn_counters(s, &e0);
	CHECK(!strcmp(e0.engine, "twosided"));
	for (unsigned k = 0; k < NTXN; k++) {   /* 2 reads, 2 writes per server */
		CHECK_RC(lotus_txn_recycle(t));
		for (unsigned i = 0; i < 8; i++)
			CHECK_RC(i % 4 < 2 ? lotus_txn_read(t, tb, keys[i], strlen(keys[i]))
			       : lotus_txn_write(t, tb, keys[i], strlen(keys[i]), val, 64));
		CHECK_RC(lotus_txn_execute(t));
		CHECK_RC(lotus_txn_commit(t));
	}
	for (unsigned k = 0; k < NTXN; k++) {   /* read-only, both servers */
		CHECK_RC(lotus_txn_recycle(t));
		for (unsigned i = 0; i < 8; i++)
			CHECK_RC(lotus_txn_read(t, tb, keys[i], strlen(keys[i])));
		CHECK_RC(lotus_txn_commit(t));
	}
	/* a conflict: u's read of a key t holds X is refused (NO_WAIT) */
	CHECK_RC(lotus_txn_recycle(t));
	CHECK_RC(lotus_txn_write(t, tb, keys[0], strlen(keys[0]), val, 10));
	CHECK_RC(lotus_txn_execute(t));
	CHECK_RC(lotus_txn_recycle(u));
	CHECK_RC(lotus_txn_read(u, tb, keys[0], strlen(keys[0])));
	CHECK(lotus_txn_execute(u) == LOTUS_EABORTED);
	CHECK_RC(lotus_txn_abort(u));
	CHECK_RC(lotus_txn_commit(t));
	lotus_session_counters(s, &n1);
	lotus_session_txn_counters(s, &e1);

	const struct lotus_attempt_counters *cm = &e1.committed, *ab = &e1.aborted;
	uint64_t sent = cm->bytes_sent + ab->bytes_sent - e0.committed.bytes_sent -
			e0.aborted.bytes_sent;
	uint64_t recv = cm->bytes_recv + ab->bytes_recv - e0.committed.bytes_recv -
			e0.aborted.bytes_recv;
	uint64_t ops = cm->ops + ab->ops - e0.committed.ops - e0.aborted.ops;
	printf("batch %d: %llu B sent (messages: %llu), %llu B received (%llu), %llu ops (%llu requests)\n",
	       (int)batch, (unsigned long long)sent, (unsigned long long)(n1.bytes_sent - n0.bytes_sent),
	       (unsigned long long)recv, (unsigned long long)(n1.bytes_recv - n0.bytes_recv),
	       (unsigned long long)ops, (unsigned long long)(n1.reqs_sent - n0.reqs_sent));
	CHECK(sent == n1.bytes_sent - n0.bytes_sent);
	/* the replies to COMMIT notices come after their attempt ended: the
	 * session counts them, no attempt does */
	CHECK(recv <= n1.bytes_recv - n0.bytes_recv);
	CHECK(ops == n1.reqs_sent - n0.reqs_sent);

	uint64_t commits = cm->attempts - e0.committed.attempts;
	uint64_t rts = cm->round_trips - e0.committed.round_trips;
	printf("  %llu committed, %llu round trips; %llu aborted, %llu round trips\n",
	       (unsigned long long)commits, (unsigned long long)rts,
	       (unsigned long long)(ab->attempts - e0.aborted.attempts),
	       (unsigned long long)(ab->round_trips - e0.aborted.round_trips));
	CHECK(commits == 2 * NTXN + 1);
	/* 2 per read-write txn (execute, PREPARE: the COMMIT notices are not
	 * awaited), 1 per read-only (its release notices are not awaited either),
	 * 2 for the last (one server: execute, COMMIT) */
	CHECK(rts == 2 * NTXN + 1 * NTXN + 2);
	CHECK(ab->attempts - e0.aborted.attempts == 1);
	CHECK(ab->round_trips - e0.aborted.round_trips == 2);  /* execute, abort */
	unsigned rd = find_type(&e1, "read"), wl = find_type(&e1, "write_lock");
	unsigned pr = find_type(&e1, "prepare"), co = find_type(&e1, "commit");
	CHECK(cm->type[rd].ops - e0.committed.type[rd].ops == 4 * NTXN + 8 * NTXN);
	CHECK(cm->type[wl].ops - e0.committed.type[wl].ops == 4 * NTXN + 1);
	CHECK(cm->type[pr].ops - e0.committed.type[pr].ops == 2 * NTXN);
	CHECK(cm->type[co].ops - e0.committed.type[co].ops == 2 * NTXN + 2 * NTXN + 1);
	CHECK(cm->type[rd].bytes_recv > cm->type[rd].ops * 100);   /* the values came back */
	lotus_txn_free(t);
	lotus_txn_free(u);
	lotus_session_close(s);
	lotus_disconnect(c);
}

int main(void)
{
	run(LOTUS_BATCH_NONE);
	run(LOTUS_BATCH_INTRA);
	run(LOTUS_BATCH_INTER);
	printf("ok\n");
	return 0;
}
