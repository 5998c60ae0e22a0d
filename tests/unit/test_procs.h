/*
 * test_procs.h - memory servers as processes of the test itself, reached
 * through a cluster config file, so a test can signal a server (SIGSTOP,
 * SIGCONT) or connect several cluster handles to the same servers.  Servers
 * die with the test (PR_SET_PDEATHSIG) and are stopped at exit.
 */
#ifndef LOTUS_TEST_PROCS_H
#define LOTUS_TEST_PROCS_H
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"

#define PROCS_MAX 4
static pid_t procs_pid[PROCS_MAX];
static unsigned procs_n;
static char procs_config[64];

/* lotus memserver --listen 127.0.0.1:0 --ready-json; its port from stdout. */
static inline pid_t procs_start_one(unsigned id, unsigned *port)
{
	int pfd[2];
	char ids[8], line[256] = { 0 };
	CHECK(pipe(pfd) == 0);
	snprintf(ids, sizeof(ids), "%u", id);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		/* PROCS_LEASE_MS: the servers' lease (a test that stops one longer) */
		const char *lease = getenv("PROCS_LEASE_MS");
		execl(getenv("LOTUS_BIN"), "lotus", "memserver", "--listen", "127.0.0.1:0", "--id",
		      ids, "--threads", "1", "--memory", "64M", "--ready-json", "--lease-ms",
		      lease ? lease : "3000", (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	size_t n = 0;
	while (n < sizeof(line) - 1 && !strchr(line, '}')) {
		ssize_t r = read(pfd[0], line + n, sizeof(line) - 1 - n);
		CHECK(r > 0);
		n += (size_t)r;
	}
	close(pfd[0]);
	const char *p = strstr(line, "\"port\":");
	CHECK(p);
	*port = (unsigned)atoi(p + 7);
	return pid;
}

static inline void procs_stop(void)
{
	for (unsigned i = 0; i < procs_n; i++)
		if (procs_pid[i] > 0) {
			kill(procs_pid[i], SIGCONT);
			kill(procs_pid[i], SIGTERM);
			waitpid(procs_pid[i], NULL, 0);
			procs_pid[i] = 0;
		}
	if (procs_config[0])
		unlink(procs_config);
	procs_config[0] = 0;
}

/* Start n servers and write a config naming them ([cluster] lines in extra);
 * returns the config's path.  Skips (77) outside tests/run. */
static inline const char *procs_start(unsigned n, const char *extra)
{
	unsigned ports[PROCS_MAX];
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		exit(77);
	}
	CHECK(n <= PROCS_MAX);
	for (unsigned i = 0; i < n; i++) {
		procs_pid[i] = procs_start_one(i, &ports[i]);
		procs_n = i + 1;
	}
	atexit(procs_stop);
	snprintf(procs_config, sizeof(procs_config), "/tmp/lotus-test-XXXXXX");
	int fd = mkstemp(procs_config);
	CHECK(fd >= 0);
	FILE *f = fdopen(fd, "w");
	CHECK(f);
	fprintf(f, "[cluster]\ntransport = tcp\n%s", extra ? extra : "");
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "[memserver %u]\nlisten = 127.0.0.1:%u\n", i, ports[i]);
	fclose(f);
	return procs_config;
}

/* SIGSTOP server i and wait until every thread of it has stopped. */
static inline void procs_sigstop(unsigned i)
{
	char path[64], buf[512];
	kill(procs_pid[i], SIGSTOP);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)procs_pid[i]);
	for (int tries = 0; tries < 200; tries++) {
		FILE *f = fopen(path, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
		if (f)
			fclose(f);
		buf[n] = 0;
		const char *p = strrchr(buf, ')');
		if (p && p[1] == ' ' && p[2] == 'T')
			return;
		usleep(10 * 1000);
	}
	CHECK(!"the server did not stop");
}

static inline void procs_sigcont(unsigned i)
{
	kill(procs_pid[i], SIGCONT);
}
#endif
