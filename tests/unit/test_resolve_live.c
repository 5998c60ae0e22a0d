/*
 * test_resolve_live.c - the resolver must not settle a prepared transaction on
 * a vote that is not durable yet, nor take a live client's transaction from
 * it (issue 20, "the resolver can settle a live client's long-prepared
 * transaction").
 *
 * Two durable memory servers, real processes, each with --peers (so their
 * resolvers find each other).  Server 1 holds every log write back 4 s
 * (LOTUS_REDO_DELAY_MS): a PREPARE there sits in its log buffer, not durable,
 * while server 0's PREPARE is durable at once.  A client writes 16 keys over
 * both servers and commits (two-phase); server 1's vote waits.
 *   round 1: the client is killed (-9) once server 0 holds the txn prepared;
 *   round 2: the client stays alive, its commit waiting for that vote.
 * 2.5 s later - before server 1's PREPARE can be durable - server 1 is
 * killed (-9) and restarted without the delay: its PREPARE is gone.  Once no
 * server holds anything prepared, the 16 keys must be all there or none (and
 * all there if the client was told 0).  A resolver on server 0 that took
 * server 1's "prepared" before it was durable has committed server 0's half
 * alone.
 *   round 3: a status query about a transaction that is live on a server (its
 * locks held, not prepared) still refuses its PREPARE there for good: its
 * commit then fails and none of its writes are there.
 */
#include "common/clock.h"
#include "compute/session.h"
#include "test_durable_util.h"

#define NKEYS 16

static struct dsrv sv_store[2], *sv = sv_store;
static char peers[600];

static void write_config(void)
{
	char tmp[610];
	snprintf(tmp, sizeof(tmp), "%s.tmp", peers);
	FILE *f = fopen(tmp, "w");
	CHECK(f);
	fprintf(f, "[cluster]\ntransport = tcp\n");
	for (int i = 0; i < 2; i++)
		fprintf(f, "\n[memserver %u]\nlisten = 127.0.0.1:%u\n", sv[i].id, sv[i].port);
	fclose(f);
	CHECK(rename(tmp, peers) == 0);
}

static void start_server(unsigned i, int delayed)
{
	if (delayed)
		setenv("LOTUS_REDO_DELAY_MS", "4000", 1);
	const char *args[] = { "--durability", "sync", "--peers", peers, NULL };
	CHECK(dsrv_start(&sv[i], args, NULL) == 0);
	unsetenv("LOTUS_REDO_DELAY_MS");
}

static lotus_cluster_t *connect_as(unsigned compute_id)
{
	lotus_cluster_t *c;
	struct lotus_options o;
	lotus_options_init(&o);
	o.config_path = peers;
	o.transport = "tcp";
	o.compute_id = compute_id;
	CHECK_RC(lotus_connect(&o, &c));
	return c;
}

static unsigned prepared_on(lotus_session_t *s, unsigned server)
{
	const char *st = lotus_server_stats(s, server);
	const char *p = st ? strstr(st, "\"prepared\":") : NULL;
	return p ? (unsigned)atoi(p + 11) : 0;
}

static int result;
static void done(lotus_txn_t *t, int rc, void *arg)
{
	(void)t;
	*(int *)arg = rc;
}

/* Stage NKEYS writes of round r in t and start its commit. */
static void start_commit(lotus_txn_t *t, lotus_table_t tb, unsigned r)
{
	for (unsigned i = 0; i < NKEYS; i++) {
		unsigned char k[8];
		char v[32];
		key_from_u64(1000 * r + i, k);
		snprintf(v, sizeof(v), "r%u-%u", r, i);
		CHECK_RC(lotus_txn_write(t, tb, k, 8, v, strlen(v)));
	}
	result = 1;
	CHECK_RC(lotus_txn_commit_async(t, done, &result));
}

/* How many of round r's keys hold its values, once nothing is prepared. */
static int count_written(lotus_session_t *s, lotus_table_t tb, unsigned r)
{
	return dt_count_round(s, tb, 1000 * r, NKEYS, "r", r);
}

/* Round 1's client, in a child process: create the table, commit, say when
 * server 0 holds the txn prepared, and wait to be killed. */
static void child_client(int wfd)
{
	lotus_cluster_t *c = connect_as(1);
	lotus_session_t *s, *st;
	lotus_table_t tb;
	lotus_txn_t *t;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_session_open(c, &st));
	CHECK_RC(lotus_table_create(s, "live", 64, &tb));   /* waits for server 1's log */
	CHECK_RC(lotus_txn_begin(s, &t));
	start_commit(t, tb, 1);
	for (int i = 0; i < 1000 && !prepared_on(st, 0); i++)
		lotus_session_poll(s, 10);
	CHECK(write(wfd, "p", 1) == 1);
	for (;;)
		lotus_session_poll(s, 100);
}

/* Server 0 holds round r's txn prepared (at t0): 2.5 s later, kill server
 * 1, whose PREPARE is still in its log buffer, and restart it. */
static void crash_server1(lotus_session_t *poll_s, uint64_t t0, const char *who)
{
	int early = 0;
	while (clock_now_ns() - t0 < 2500000000ULL) {
		if (poll_s)
			lotus_session_poll(poll_s, 10);
		else
			usleep(10000);
	}
	early = dsrv_log_has(&sv[0], "resolved with the other participants: commit");
	dsrv_stop(&sv[1], SIGKILL);
	fprintf(stderr, "%s: server 1 killed 2.5 s after server 0 prepared; server 0 had %s\n",
		who, early ? "COMMITTED already (on a vote that was not durable)" : "not decided");
	start_server(1, 0);
	write_config();
}

int main(void)
{
	const char *base = dt_setup();
	snprintf(peers, sizeof(peers), "%s/cluster.ini", base);
	for (unsigned i = 0; i < 2; i++) {
		sv[i].id = i;
		snprintf(sv[i].dir, sizeof(sv[i].dir), "%s/ms%u", base, i);
		dt_servers[i] = &sv[i];
		start_server(i, i == 1);
	}
	write_config();
	int failed = 0;

	/* round 1: the client dies with the txn prepared on server 0 */
	int pfd[2];
	CHECK(pipe(pfd) == 0);
	pid_t kid = fork();
	CHECK(kid >= 0);
	if (kid == 0) {
		close(pfd[0]);
		child_client(pfd[1]);
		_exit(1);
	}
	close(pfd[1]);
	char ch;
	CHECK(read(pfd[0], &ch, 1) == 1);
	uint64_t t0 = clock_now_ns();
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	close(pfd[0]);
	crash_server1(NULL, t0, "round 1 (client killed)");

	lotus_cluster_t *c = connect_as(2);
	lotus_session_t *s;
	lotus_table_t tb;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "live", 64, &tb));
	int have = count_written(s, tb, 1);
	fprintf(stderr, "round 1: %d of %d keys written\n", have, NKEYS);
	if (have != 0 && have != NKEYS) {
		fprintf(stderr, "round 1: FAIL: the commit is torn\n");
		failed = 1;
	}

	/* round 2: the client stays, its commit waits for server 1's vote */
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv[1], SIGTERM);
	start_server(1, 1);
	write_config();
	c = connect_as(3);
	lotus_session_t *st;
	lotus_txn_t *t;
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_session_open(c, &st));
	CHECK_RC(lotus_table_create(s, "live", 64, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	start_commit(t, tb, 2);
	for (int i = 0; i < 1000 && !prepared_on(st, 0); i++)
		lotus_session_poll(s, 10);
	CHECK(result == 1);
	crash_server1(s, clock_now_ns(), "round 2 (live client)");
	for (int i = 0; i < 3000 && result == 1; i++)
		lotus_session_poll(s, 10);
	fprintf(stderr, "round 2: the client's commit: %s\n",
		result == 1 ? "no answer" : lotus_strerror(result));
	lotus_txn_free(t);
	lotus_session_close(st);
	lotus_session_close(s);
	lotus_disconnect(c);
	c = connect_as(4);
	CHECK_RC(lotus_session_open(c, &s));
	CHECK_RC(lotus_table_create(s, "live", 64, &tb));
	have = count_written(s, tb, 2);
	fprintf(stderr, "round 2: %d of %d keys written\n", have, NKEYS);
	if ((have != 0 && have != NKEYS) || (result == 0 && have != NKEYS)) {
		fprintf(stderr, "round 2: FAIL: the commit is torn (or acknowledged and lost)\n");
		failed = 1;
	}

	/* round 3: "unknown" about a live txn stays final */
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < NKEYS; i++) {
		unsigned char k[8];
		key_from_u64(3000 + i, k);
		CHECK_RC(lotus_txn_write(t, tb, k, 8, "r3", 2));
	}
	CHECK_RC(lotus_txn_execute(t));
	lotus_cluster_t *cq = connect_as(5);
	lotus_session_t *q;
	CHECK_RC(lotus_session_open(cq, &q));
	struct wire_req r = { .op = OP_TXN_STATUS, .txn_id = lotus_txn_id(t) };
	CHECK_RC(session_admin(q, 1, &r, NULL, NULL, 10000));
	CHECK(session_admin_arg(q, 1) == WIRE_TXN_UNKNOWN);
	int rc = lotus_txn_commit(t);
	fprintf(stderr, "round 3: a live txn asked about (unknown) on server 1, then committed: "
		"%s\n", lotus_strerror(rc));
	CHECK(rc != 0);
	lotus_txn_free(t);
	dt_wait_settled(q);
	CHECK_RC(lotus_txn_begin(s, &t));
	int ops[NKEYS], seen = 0;
	for (unsigned i = 0; i < NKEYS; i++) {
		unsigned char k[8];
		key_from_u64(3000 + i, k);
		ops[i] = lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (unsigned i = 0; i < NKEYS; i++)
		seen += lotus_txn_result(t, ops[i], NULL, NULL) == 0;
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	CHECK(seen == 0);
	lotus_session_close(q);
	lotus_disconnect(cq);
	lotus_session_close(s);
	lotus_disconnect(c);
	dsrv_stop(&sv[0], SIGTERM);
	dsrv_stop(&sv[1], SIGTERM);
	if (failed)
		return 1;
	printf("ok\n");
	return 0;
}
