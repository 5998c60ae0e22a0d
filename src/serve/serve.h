/*
 * serve.h - `lotus serve`: a Redis-protocol (RESP2) front end.  It is a
 * compute server built on the public liblotus API only (lotus.h): clients
 * such as redis-cli, redis-benchmark and redis-py talk RESP2 to it, and it
 * runs their commands as lotus transactions on the memory servers.
 */
#ifndef LOTUS_SERVE_H
#define LOTUS_SERVE_H
#include <stddef.h>
#include <stdint.h>
#include "lotus.h"

struct serve_opts {
	struct lotus_options lo;      /* cluster to connect to (config or --local) */
	const char *listen;           /* HOST:PORT; port 0 picks a free one */
	const char *requirepass;      /* NULL: no AUTH */
	unsigned threads;             /* event-loop threads (each a lotus session) */
	uint32_t max_value;           /* the table's largest value */
	unsigned pipeline_max;        /* pipelined commands run as one transaction */
	unsigned retries;             /* conflict aborts retried per transaction */
	const char *table;            /* table name */
	unsigned max_clients;         /* connections served at once; 0: no limit */
	unsigned timeout_s;           /* close a client idle this long; 0: never */
	/* Where serve's own messages go (level: enum lotus_log_level; msg
	 * without newline); NULL: stderr as "lotus serve: msg". */
	void (*log)(int level, const char *msg);
};

void serve_opts_init(struct serve_opts *o);
/* 0 if hostport is HOST:PORT with a port from 0 to 65535, else -EINVAL and
 * why not (one phrase, in why[n]). */
int serve_listen_check(const char *hostport, char *why, size_t n);
/* 1 if host (a name or an address) resolves only to loopback addresses. */
int serve_host_is_loopback(const char *host);
/* Run until SIGINT or SIGTERM.  Returns the exit status (0, 1 runtime error). */
int serve_run(const struct serve_opts *o);

#endif
