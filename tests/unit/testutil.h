/*
 * testutil.h - helpers for lotus test programs: the check kit (check.h) and
 * a local cluster of real memory-server processes on loopback.  A test exits 0
 * (pass), 1 (fail) or 77 (skip).
 */
#ifndef LOTUS_TESTUTIL_H
#define LOTUS_TESTUTIL_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"
#include "check.h"

#ifdef LOTUS_CLUSTER_H
#include <unistd.h>
/* A "secret_file = ..." line naming local cluster c's secret, for a config
 * file that other processes (or handles) use to reach c's servers. */
static inline const char *test_secret_line(const lotus_cluster_t *c)
{
	static char buf[sizeof(c->secret_path) + 64];
	const char *p = c->secret_path;
	if (!strncmp(p, "/proc/self/fd/", 14))
		snprintf(buf, sizeof(buf), "secret_file = /proc/%d/fd/%s\n", (int)getpid(), p + 14);
	else if (*p)
		snprintf(buf, sizeof(buf), "secret_file = %s\n", p);
	else
		buf[0] = 0;
	return buf;
}
#endif



/* Start n local memory servers (the lotus binary named by $LOTUS_BIN). */
static inline lotus_cluster_t *test_cluster(int n, const char *transport, enum lotus_cc cc,
					    enum lotus_batch batch)
{
	struct lotus_options o;
	lotus_cluster_t *c = NULL;
	if (!getenv("LOTUS_BIN")) {
		printf("skip: LOTUS_BIN is not set (run through tests/run)\n");
		exit(77);
	}
	lotus_options_init(&o);
	o.local_servers = n;
	o.transport = transport;
	o.cc = cc;
	o.batch = batch;
	o.server_threads = 2;
	o.server_memory = 64ULL << 20;
	int rc = lotus_connect(&o, &c);
	if (rc) {
		fprintf(stderr, "lotus_connect(%s): %s\n", transport, lotus_strerror(rc));
		exit(1);
	}
	return c;
}

/* The transports to test: tcp and shared memory, or $LOTUS_TEST_TRANSPORTS. */
static inline const char *test_transport(int i)
{
	static const char *def[] = { "tcp", "sm", NULL };
	return def[i];
}
#endif
