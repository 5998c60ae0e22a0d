/*
 * netbench.h - raw transport round-trip benchmark (`lotus netbench`).
 *
 * A client keeps `outstanding` request messages of `size` bytes in flight on
 * one connection; the server echoes each one back.  No lotus logic runs on
 * either side: this is the floor under every memory-server round trip.
 * Single-threaded on both sides.
 */
#ifndef LOTUS_NETBENCH_H
#define LOTUS_NETBENCH_H
#include <stdint.h>
#include <stddef.h>

struct netbench_opts {
	const char *transport;   /* "tcp", "sm", ... */
	const char *host;        /* server to use */
	uint16_t port;
	unsigned outstanding;    /* requests in flight */
	size_t size;             /* message bytes, header included (>= 32) */
	double seconds, warmup;
	unsigned spin_us;        /* busy-poll budget before sleeping (net_opts) */
	volatile int *stop;      /* optional: nonzero ends the run early */
	const char *secret_file; /* the server's secret (NULL: none) */
};

struct netbench_result {
	const char *transport;
	unsigned outstanding;
	size_t size;
	double seconds;          /* measured */
	uint64_t round_trips;
	double rtt_per_s;
	double lat_mean_us, lat_p50_us, lat_p99_us;
};

/* Run the client.  0, or -errno / LOTUS_E* (connection failed or lost). */
int netbench_run(const struct netbench_opts *o, struct netbench_result *r);
/* Echo server on host:port until *stop becomes nonzero (e.g. from a signal
 * handler).  Calls ready(port) once listening.  0 or an error. */
int netbench_serve(const char *transport, const char *host, uint16_t port, unsigned spin_us,
		   const char *secret_file, int insecure, volatile int *stop,
		   void (*ready)(uint16_t port));
#endif
