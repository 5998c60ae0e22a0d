/*
 * test_txn_timeout.c - every wait has a deadline (lotus_options.timeout_ms).
 * Two memory servers run as processes of this test (test_procs.h); the
 * client connects through a config file, which sets the deadline ([cluster]
 * timeout_ms).  One server is stopped with SIGSTOP:
 *   - a synchronous execute that needs it returns LOTUS_ETIMEOUT within the
 *     deadline plus slack, and lotus_txn_abort() then returns promptly;
 *   - a commit that needs it returns LOTUS_ETIMEOUT (outcome unknown);
 *   - asynchronous steps in flight get their callback with LOTUS_ETIMEOUT
 *     from lotus_session_poll().
 * After SIGCONT the cluster serves again, and the timed-out transactions
 * left no lock behind.
 */
#include <time.h>
#include "test_procs.h"

#define TIMEOUT_MS 1500
#define SLACK_MS   1500

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void on_alarm(int sig)
{
	procs_stop();
	_exit(1);
}

/* A key that lives on server sv. */
static void key_on(lotus_cluster_t *cl, lotus_session_t *s, lotus_table_t tb, unsigned sv,
		   char *k)
{
	/* routing is internal: find a key whose write makes server sv a participant by
	 * stopping nothing, just by elimination with the stats of each server */
	for (unsigned i = 0; i < 1000; i++) {
		lotus_txn_t *t;
		snprintf(k, 16, "k%u", i);
		const char *before = lotus_server_stats(s, sv);
		CHECK(before);
		char *b = strdup(before);
		CHECK_RC(lotus_txn_begin(s, &t));
		CHECK_RC(lotus_txn_read(t, tb, k, strlen(k)));
		CHECK_RC(lotus_txn_execute(t));
		CHECK_RC(lotus_txn_commit(t));
		lotus_txn_free(t);
		const char *after = lotus_server_stats(s, sv);
		CHECK(after);
		/* requests counted: read + commit, plus the stats call itself */
		long rb = atol(strstr(b, "\"requests\":") + 11);
		long ra = atol(strstr(after, "\"requests\":") + 11);
		free(b);
		if (ra - rb > 1)
			return;
	}
	CHECK(!"no key found on the server");
}

static int cb_result = 1, cb_calls;
static void on_done(lotus_txn_t *t, int result, void *arg)
{
	cb_result = result;
	cb_calls++;
}

int main(void)
{
	char extra[128];
	/* deadlines, not leases: the stop below (about 5 s) stays within the lease */
	snprintf(extra, sizeof(extra), "timeout_ms = %d\nlease_ms = 30000\n", TIMEOUT_MS);
	setenv("PROCS_LEASE_MS", "30000", 1);
	/* the deadline comes from the file here (lotus_options.timeout_ms = 0) */
	const char *config = procs_start(2, extra);
	signal(SIGALRM, on_alarm);
	alarm(60);

	struct lotus_options o;
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_table_t tb;
	lotus_txn_t *t, *t2;
	char k0[16], k1[16];
	lotus_options_init(&o);
	o.config_path = config;
	CHECK_RC(lotus_connect(&o, &cl));
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "t", 16, &tb));
	key_on(cl, s, tb, 0, k0);
	key_on(cl, s, tb, 1, k1);

	/* 1. execute against a stopped server */
	procs_sigstop(1);
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_write(t, tb, k0, strlen(k0), "a", 1));
	CHECK_RC(lotus_txn_read_for_update(t, tb, k1, strlen(k1)));
	uint64_t t0 = now_ms();
	int rc = lotus_txn_execute(t);
	uint64_t took = now_ms() - t0;
	printf("execute: %s after %llu ms\n", lotus_strerror(rc), (unsigned long long)took);
	CHECK(rc == LOTUS_ETIMEOUT);
	CHECK(took >= TIMEOUT_MS - 100 && took <= TIMEOUT_MS + SLACK_MS);
	CHECK(lotus_txn_commit(t) < 0);   /* sticky */
	t0 = now_ms();
	lotus_txn_abort(t);
	CHECK(now_ms() - t0 < 500);        /* does not wait for the stopped server again */

	/* 2. commit against a stopped server: the outcome is unknown */
	procs_sigcont(1);
	CHECK_RC(lotus_txn_restart(t));
	CHECK_RC(lotus_txn_write(t, tb, k0, strlen(k0), "b", 1));
	CHECK_RC(lotus_txn_write(t, tb, k1, strlen(k1), "b", 1));
	CHECK_RC(lotus_txn_execute(t));
	procs_sigstop(1);
	t0 = now_ms();
	rc = lotus_txn_commit(t);
	took = now_ms() - t0;
	printf("commit: %s after %llu ms\n", lotus_strerror(rc), (unsigned long long)took);
	CHECK(rc == LOTUS_ETIMEOUT && took <= TIMEOUT_MS + SLACK_MS);

	/* 3. asynchronous: the callback runs from the poll with LOTUS_ETIMEOUT */
	CHECK_RC(lotus_txn_begin(s, &t2));
	CHECK_RC(lotus_txn_read(t2, tb, k1, strlen(k1)));
	CHECK_RC(lotus_txn_execute_async(t2, on_done, NULL));
	t0 = now_ms();
	while (!cb_calls && now_ms() - t0 < TIMEOUT_MS + SLACK_MS)
		lotus_session_poll(s, 50);
	printf("async execute: %d callback(s), %s after %llu ms\n", cb_calls,
	       lotus_strerror(cb_result), (unsigned long long)(now_ms() - t0));
	CHECK(cb_calls == 1 && cb_result == LOTUS_ETIMEOUT);
	cb_calls = 0;
	CHECK_RC(lotus_txn_abort_async(t2, on_done, NULL));
	t0 = now_ms();
	while (!cb_calls && now_ms() - t0 < TIMEOUT_MS + SLACK_MS)
		lotus_session_poll(s, 50);
	CHECK(cb_calls == 1);

	/* 4. the server resumes: both keys are writable again (no lock left) */
	procs_sigcont(1);
	usleep(200 * 1000);
	for (int attempt = 0;; attempt++) {
		CHECK(attempt < 50);
		CHECK_RC(lotus_txn_recycle(t2));
		CHECK_RC(lotus_txn_write(t2, tb, k0, strlen(k0), "c", 1));
		CHECK_RC(lotus_txn_write(t2, tb, k1, strlen(k1), "c", 1));
		rc = lotus_txn_commit(t2);
		if (rc == 0)
			break;
		CHECK(lotus_err_retryable(rc));
		usleep(100 * 1000);
	}
	lotus_txn_free(t);
	lotus_txn_free(t2);
	lotus_session_close(s);
	lotus_disconnect(cl);
	procs_stop();
	printf("ok\n");
	return 0;
}
