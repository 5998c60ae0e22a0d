/*
 * test_durable_util.h - helpers for the durable memory server tests
 * (tests/unit/test_durable_*.c; header-only, every test is one program):
 *
 *  - a data directory under $TMPDIR, /tmp, /var/tmp or . that supports
 *    O_DIRECT, removed at exit (LOTUS_TEST_KEEP=1 keeps it);
 *  - standalone `lotus memserver` processes with any flags and environment
 *    (dsrv_start), killed at every exit: normal, CHECK failure, or the
 *    runner's timeout signal, and by PR_SET_PDEATHSIG if the test dies;
 *  - a config file naming them, and a model of what was acknowledged, with
 *    a byte-exact comparison against the servers.
 *
 * Exit codes: 0 pass, 1 fail, 77 skip.
 */
#ifndef TEST_DURABLE_UTIL_H
#define TEST_DURABLE_UTIL_H
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "common/common.h"
#include "testutil.h"

#define DSRV_MAX 4

struct dsrv {
	pid_t pid;
	unsigned id;
	uint16_t port;
	char dir[640];
	char errlog[700];          /* the server's stderr (appended over restarts) */
	char ready[2048];          /* its ready JSON line */
};

static char dt_base[512];
static struct dsrv *dt_servers[DSRV_MAX];

static void dsrv_kill_all(void)
{
	for (int i = 0; i < DSRV_MAX; i++)
		if (dt_servers[i] && dt_servers[i]->pid > 0) {
			kill(dt_servers[i]->pid, SIGKILL);
			waitpid(dt_servers[i]->pid, NULL, 0);
			dt_servers[i]->pid = 0;
		}
}

static int dt_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb; (void)flag; (void)f;
	return remove(p);
}

static void dt_cleanup(void)
{
	dsrv_kill_all();
	if (dt_base[0] && getenv("LOTUS_TEST_KEEP"))
		fprintf(stderr, "test data kept in %s\n", dt_base);
	else if (dt_base[0])
		nftw(dt_base, dt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	dt_base[0] = 0;
}

static void dt_on_signal(int sig)
{
	signal(sig, SIG_DFL);
	dt_cleanup();
	raise(sig);
}

static int dt_try_base(const char *where)
{
	char probe[600];
	snprintf(dt_base, sizeof(dt_base), "%s/lotus-durable.XXXXXX", where);
	if (!mkdtemp(dt_base)) {
		dt_base[0] = 0;
		return 0;
	}
	snprintf(probe, sizeof(probe), "%s/probe", dt_base);
	int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd >= 0) {
		close(fd);
		unlink(probe);
		return 1;
	}
	rmdir(dt_base);
	dt_base[0] = 0;
	return 0;
}

/* The test's base directory; skips without LOTUS_BIN or O_DIRECT. */
static const char *dt_setup(void)
{
	const char *t = getenv("TMPDIR");
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		exit(77);
	}
	atexit(dt_cleanup);
	signal(SIGINT, dt_on_signal);
	signal(SIGTERM, dt_on_signal);
	signal(SIGHUP, dt_on_signal);
	signal(SIGPIPE, SIG_IGN);
	if ((t && *t && dt_try_base(t)) || dt_try_base("/tmp") || dt_try_base("/var/tmp") ||
	    dt_try_base("."))
		return dt_base;
	printf("skip: no directory with O_DIRECT support ($TMPDIR, /tmp, /var/tmp, .)\n");
	exit(77);
}

/* Start `lotus memserver` on a free loopback port with its data in s->dir.
 * args: extra flags (NULL-terminated); fault: LOTUS_IO_FAULT or NULL.
 * Returns 0 once it printed its ready line, or -1 (it exited). */
static inline int dsrv_start(struct dsrv *s, const char *const *args, const char *fault)
{
	int pfd[2];
	char ids[16];
	CHECK(pipe(pfd) == 0);
	snprintf(ids, sizeof(ids), "%u", s->id);
	if (!s->errlog[0])
		snprintf(s->errlog, sizeof(s->errlog), "%s.log", s->dir);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		/* --init: a new database the first time, a no-op on its own later.
		 * The new servers of one test are one cluster; a directory that
		 * exists keeps its cluster (a local cluster's, say). */
		char cid[32];
		struct stat st;
		snprintf(cid, sizeof(cid), "dsrv-%ld", (long)getppid());
		const char *argv[32] = { "lotus", "memserver", "--listen", "127.0.0.1:0", "--id", ids,
					 "--threads", "1", "--memory", "64M", "--data-dir", s->dir,
					 "--ready-json", "--init", "--cluster-id", cid };
		int n = stat(s->dir, &st) == 0 ? 14 : 16;
		for (int i = 0; args && args[i] && n < 31; i++)
			argv[n++] = args[i];
		argv[n] = NULL;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fault)
			setenv("LOTUS_IO_FAULT", fault, 1);
		else
			unsetenv("LOTUS_IO_FAULT");
		int fd = open(s->errlog, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0)
			dup2(fd, STDERR_FILENO);
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		execv(getenv("LOTUS_BIN"), (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	s->pid = pid;
	for (int i = 0; i < DSRV_MAX; i++)
		if (!dt_servers[i] || dt_servers[i] == s) {
			dt_servers[i] = s;
			break;
		}
	size_t n = 0;
	s->ready[0] = 0;
	for (int waited = 0; waited < 30000 && !strchr(s->ready, '\n');) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		if (poll(&p, 1, 100) <= 0) {
			waited += 100;
			continue;
		}
		ssize_t r = read(pfd[0], s->ready + n, sizeof(s->ready) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		s->ready[n] = 0;
	}
	close(pfd[0]);
	const char *p = strstr(s->ready, "\"port\":");
	if (!p || !strchr(s->ready, '\n')) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		s->pid = 0;
		return -1;
	}
	s->port = (uint16_t)atoi(p + 7);
	return 0;
}

/* kill -9, or SIGTERM and wait for the clean exit (final checkpoint). */
static inline void dsrv_stop(struct dsrv *s, int sig)
{
	int st;
	if (s->pid <= 0)
		return;
	kill(s->pid, sig);
	for (int i = 0; i < 300 && waitpid(s->pid, &st, WNOHANG) == 0; i++)
		usleep(50000);
	if (kill(s->pid, 0) == 0) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, 0);
	}
	s->pid = 0;
}

/* A number from the server's ready line ("recovered":{..."name":N...}). */
static inline uint64_t dsrv_ready_u64(const struct dsrv *s, const char *name)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", name);
	const char *p = strstr(s->ready, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : UINT64_MAX;
}

/* 1 if the server's stderr log contains text. */
static inline int dsrv_log_has(const struct dsrv *s, const char *text)
{
	char buf[65536];
	int fd = open(s->errlog, O_RDONLY);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return strstr(buf, text) != NULL;
}

/* Write a config naming the servers and connect to it. */
static inline lotus_cluster_t *dt_connect(struct dsrv *sv, int n)
{
	char path[600];
	lotus_cluster_t *c;
	struct lotus_options o;
	snprintf(path, sizeof(path), "%s/cluster.ini", dt_base);
	FILE *f = fopen(path, "w");
	CHECK(f);
	fprintf(f, "[cluster]\ntransport = tcp\n");
	for (int i = 0; i < n; i++)
		fprintf(f, "\n[memserver %u]\nlisten = 127.0.0.1:%u\n", sv[i].id, sv[i].port);
	fclose(f);
	lotus_options_init(&o);
	o.config_path = path;
	o.transport = "tcp";
	CHECK_RC(lotus_connect(&o, &c));
	return c;
}

/* ---- the model: keys 0..DT_KEYS-1, value = f(key, version), 0 = absent ---- */

#define DT_KEYS 4000
#define DT_VMAX 300

static uint32_t dt_value(uint64_t key, uint32_t ver, unsigned char *buf)
{
	uint64_t h = (key * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)ver * 0xc2b2ae3d27d4eb4fULL);
	uint32_t len = 8 + (uint32_t)(h % (DT_VMAX - 8));
	memcpy(buf, &ver, 4);          /* the version is readable from the value */
	memcpy(buf + 4, &key, 4);
	for (uint32_t i = 8; i < len; i++) {
		h ^= h >> 29;
		h *= 0xbf58476d1ce4e5b9ULL;
		buf[i] = (unsigned char)(h >> 56);
	}
	return len;
}

/* The version a value encodes if it is exactly dt_value(key, v), else 0. */
static uint32_t dt_value_version(uint64_t key, const void *val, size_t len)
{
	unsigned char want[DT_VMAX];
	uint32_t ver;
	if (len < 8)
		return 0;
	memcpy(&ver, val, 4);
	uint32_t wl = dt_value(key, ver, want);
	return wl == len && !memcmp(want, val, len) ? ver : 0;
}

/* After a restart, recovery takes the X locks of every PREPARE it finds
 * undecided (also one whose transaction was acknowledged, when the lazily
 * logged decision missed the crash) until the server's resolver has asked the
 * other participants.  Until then a NO_WAIT read of such a key gets
 * LOTUS_EABORTED: the protocol's answer to a conflict, which a client retries.
 * A verification must read the settled state, so it waits (at most 20 s) until
 * every server that answers reports "prepared":0.  Each server counts only
 * what it still holds, so nothing in the check can hide a lock that stays. */
static inline void dt_wait_settled(lotus_session_t *s)
{
	for (unsigned sv = 0; sv < DSRV_MAX; sv++) {
		const char *st;
		int polls = 0;
		while ((st = lotus_server_stats(s, sv)) && !strstr(st, "\"prepared\":0,")) {
			CHECK(++polls < 2000);
			usleep(10000);
		}
		if (polls)
			fprintf(stderr, "server %u: in-doubt PREPAREs settled after %d ms\n", sv,
				polls * 10);
	}
}

/* How many of the n keys first, first+1, ... hold the values "<prefix><round>-<i>",
 * read once nothing is prepared (the values a round's transaction wrote). */
static inline int dt_count_round(lotus_session_t *s, lotus_table_t tb, uint64_t first, unsigned n,
				 const char *prefix, unsigned round)
{
	lotus_txn_t *t;
	int ops[64], have = 0;
	CHECK(n <= 64);
	dt_wait_settled(s);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (unsigned i = 0; i < n; i++) {
		unsigned char k[8];
		key_from_u64(first + i, k);
		ops[i] = lotus_txn_read(t, tb, k, 8);
	}
	CHECK_RC(lotus_txn_execute(t));
	for (unsigned i = 0; i < n; i++) {
		const void *v;
		size_t vl;
		char want[48];
		snprintf(want, sizeof(want), "%s%u-%u", prefix, round, i);
		have += lotus_txn_result(t, ops[i], &v, &vl) == 0 && vl == strlen(want) &&
			!memcmp(v, want, vl);
	}
	CHECK_RC(lotus_txn_commit(t));
	lotus_txn_free(t);
	return have;
}

/* Read every key; for each call check(key, version found or 0, arg).
 * Waits first until no server holds an undecided PREPARE. */
typedef void (*dt_check_fn)(uint64_t key, uint32_t found, void *arg);
static inline void dt_scan_all(lotus_session_t *s, lotus_table_t tb, dt_check_fn check, void *arg)
{
	lotus_txn_t *t;
	dt_wait_settled(s);
	CHECK_RC(lotus_txn_begin(s, &t));
	for (uint64_t base = 0; base < DT_KEYS; base += 64) {
		unsigned char k[8];
		int ops[64], n = 0;
		lotus_txn_recycle(t);
		for (uint64_t key = base; key < base + 64 && key < DT_KEYS; key++) {
			key_from_u64(key, k);
			ops[n++] = lotus_txn_read(t, tb, k, 8);
		}
		CHECK_RC(lotus_txn_execute(t));
		for (int i = 0; i < n; i++) {
			const void *v;
			size_t vl;
			int rc = lotus_txn_result(t, ops[i], &v, &vl);
			CHECK(rc == 0 || rc == LOTUS_ENOTFOUND);
			uint32_t ver = rc == 0 ? dt_value_version(base + i, v, vl) : 0;
			if (rc == 0 && ver == 0) {
				fprintf(stderr, "key %llu: a value that was never written (%zu bytes)\n",
					(unsigned long long)(base + i), vl);
				exit(1);
			}
			check(base + i, ver, arg);
		}
		CHECK_RC(lotus_txn_commit(t));
	}
	lotus_txn_free(t);
}

/* Exact comparison with the acknowledged state. */
static inline void dt_check_exact(uint64_t key, uint32_t found, void *arg)
{
	const uint32_t *model = arg;
	if (found != model[key]) {
		fprintf(stderr, "key %llu: version %u on the server, %u acknowledged\n",
			(unsigned long long)key, found, model[key]);
		exit(1);
	}
}

/* One transaction of up to nops random changes (insert, update or delete);
 * on success the model follows.  Returns the commit's result. */
static inline int dt_random_txn(lotus_session_t *s, lotus_table_t tb, uint32_t *model, uint32_t *next_ver,
			 unsigned nops, unsigned *seed)
{
	lotus_txn_t *t;
	uint32_t newv[64];
	uint64_t keys[64];
	unsigned char k[8], v[DT_VMAX];
	unsigned n = 0;
	CHECK(nops <= 64);
	CHECK_RC(lotus_txn_begin(s, &t));
	while (n < nops) {
		uint64_t key = (uint64_t)rand_r(seed) % DT_KEYS;
		int dup = 0;
		for (unsigned i = 0; i < n; i++)
			dup |= keys[i] == key;
		if (dup)
			continue;
		key_from_u64(key, k);
		keys[n] = key;
		if (model[key] && rand_r(seed) % 8 == 0) {
			newv[n] = 0;
			lotus_txn_delete(t, tb, k, 8);
		} else {
			newv[n] = ++*next_ver;
			uint32_t len = dt_value(key, newv[n], v);
			if (model[key])
				lotus_txn_write(t, tb, k, 8, v, len);
			else
				lotus_txn_insert(t, tb, k, 8, v, len);
		}
		n++;
	}
	int rc = lotus_txn_commit(t);
	if (rc == 0)
		for (unsigned i = 0; i < n; i++)
			model[keys[i]] = newv[i];
	else
		lotus_txn_abort(t);
	lotus_txn_free(t);
	return rc;
}
#endif
