/*
 * memserver.h - a lotus memory server: W worker threads serving transactions
 * over the transport, sharing one record store and one lock manager.
 *
 * Threads: memserver_run() is called by the process's main thread and returns
 * after memserver_stop() (async-signal-safe) or a fatal start-up error.
 */
#ifndef LOTUS_MEMSERVER_H
#define LOTUS_MEMSERVER_H
#include <stdint.h>

struct memserver_opts {
	unsigned id;
	const char *host;        /* listen address */
	uint16_t port;
	unsigned threads;        /* 0: the core count */
	uint64_t memory;         /* buffer pool bytes */
	const char *transport;   /* tcp, sm, ... (NULL: $UCX_TLS or tcp) */
	int json_ready;          /* print one JSON line on stdout when listening */
};

/* Runs until stopped.  0 on a clean stop, or an error (message logged). */
int memserver_run(const struct memserver_opts *o);
/* Ask the running server to stop; safe from a signal handler. */
void memserver_stop(void);

#endif
