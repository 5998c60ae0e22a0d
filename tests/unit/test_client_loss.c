/*
 * test_client_loss.c - a compute process killed (-9) while it owns a lock,
 * or while its request waits for one, does not leave the lock held forever:
 * the memory server notices the lost endpoint (tcp: peer error handling;
 * shared memory: the liveness lease) and releases the dead client's locks,
 * and its parked request is dropped.  Other clients then make progress.
 *
 * The victim is this same program re-executed as "child CONFIG MODE".
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "compute/cluster.h"
#include "testutil.h"

static int child(const char *config, const char *transport, const char *mode)
{
	struct lotus_options o;
	lotus_cluster_t *cl;
	lotus_session_t *s;
	lotus_txn_t *t;
	lotus_table_t tb;
	unsigned char k[8];
	lotus_options_init(&o);
	o.config_path = config;
	o.transport = transport;
	o.compute_id = 9;
	o.cc = LOTUS_WOUND_WAIT;
	key_from_u64(1, k);
	CHECK_RC(lotus_connect(&o, &cl));
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "t", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	lotus_txn_read_for_update(t, tb, k, 8);
	if (!strcmp(mode, "own")) {
		CHECK_RC(lotus_txn_execute(t));
	} else {
		CHECK_RC(lotus_txn_execute_async(t, NULL, NULL));
		for (int i = 0; i < 20; i++)
			lotus_session_poll(s, 10);     /* the request is parked now */
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		lotus_session_poll(s, 100);
}

static pid_t spawn_child(const char *config, const char *transport, const char *mode)
{
	int pfd[2];
	char buf[16] = { 0 };
	CHECK(pipe(pfd) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		execl("/proc/self/exe", "test_client_loss", "child", config, transport, mode, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], buf, sizeof(buf) - 1) > 0 && !strncmp(buf, "ready", 5));
	close(pfd[0]);
	return pid;
}

struct step { int done, rc; };

static void step_done(lotus_txn_t *t, int rc, void *arg)
{
	struct step *st = arg;
	st->rc = rc;
	st->done = 1;
}

/* Take X on key 1 with a fresh NO_WAIT-free (wound_wait) txn, retrying. */
static double time_to_lock(lotus_session_t *s, lotus_table_t tb, lotus_txn_t *t)
{
	unsigned char k[8];
	uint64_t t0 = clock_now_ns();
	key_from_u64(1, k);
	for (;;) {
		CHECK(clock_now_ns() - t0 < 20000000000ULL);
		lotus_txn_recycle(t);
		lotus_txn_read_for_update(t, tb, k, 8);
		struct step st = { 0 };
		int rc = lotus_txn_execute_async(t, step_done, &st);
		CHECK_RC(rc);
		while (clock_now_ns() - t0 < 20000000000ULL && !st.done)
			lotus_session_poll(s, 10);
		CHECK(st.done);
		rc = st.rc;
		if (rc == 0) {
			CHECK_RC(lotus_txn_commit(t));
			return (double)(clock_now_ns() - t0) / 1e9;
		}
		lotus_txn_abort(t);
		usleep(20000);
	}
}

static void run(const char *transport, const char *mode)
{
	char config[] = "/tmp/lotus-loss-XXXXXX";
	lotus_cluster_t *cl = test_cluster(1, transport, LOTUS_NO_WAIT, LOTUS_BATCH_INTRA);
	lotus_session_t *s;
	lotus_txn_t *t, *holder = NULL;
	lotus_table_t tb;
	unsigned char k[8];
	uint64_t v = 0;
	int fd = mkstemp(config);
	CHECK(fd >= 0);
	dprintf(fd, "[cluster]\ntransport = %s\n%s\n[memserver 0]\nlisten = %s:%u\n", transport,
		test_secret_line(cl), cl->servers[0].host, cl->servers[0].port);
	close(fd);
	key_from_u64(1, k);
	CHECK_RC(lotus_session_open(cl, &s));
	CHECK_RC(lotus_table_create(s, "t", 8, &tb));
	CHECK_RC(lotus_txn_begin(s, &t));
	CHECK_RC(lotus_txn_insert(t, tb, k, 8, &v, 8));
	CHECK_RC(lotus_txn_commit(t));
	if (!strcmp(mode, "wait")) {  /* we hold the lock; the child will wait for it */
		CHECK_RC(lotus_txn_begin(s, &holder));
		lotus_txn_read_for_update(holder, tb, k, 8);
		CHECK_RC(lotus_txn_execute(holder));
	}
	pid_t pid = spawn_child(config, transport, mode);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	if (holder) {
		CHECK_RC(lotus_txn_commit(holder));  /* the grant goes to a dead client */
		lotus_txn_free(holder);
	}
	double secs = time_to_lock(s, tb, t);
	fprintf(stderr, "%s, child killed while it %s the lock: lock free again after %.2f s\n",
		transport, !strcmp(mode, "own") ? "owned" : "waited for", secs);
	const char *st = lotus_server_stats(s, 0);
	fprintf(stderr, "server: %s\n", st ? st : "?");
	lotus_txn_free(t);
	lotus_session_close(s);
	lotus_disconnect(cl);
	unlink(config);
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "child"))
		return child(argv[2], argv[3], argv[4]);
	for (int i = 0; test_transport(i); i++) {
		run(test_transport(i), "own");
		run(test_transport(i), "wait");
	}
	printf("ok\n");
	return 0;
}
