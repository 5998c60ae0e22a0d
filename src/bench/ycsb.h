/*
 * ycsb.h - the YCSB driver: load a table, run workload A-F as multi-operation
 * transactions on T threads (each with `inflight` transactions at once), and
 * report throughput, latency, aborts and network traffic.
 */
#ifndef LOTUS_YCSB_H
#define LOTUS_YCSB_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "lotus.h"
#include "common/hist.h"
#include "common/ycsb_gen.h"

#define YCSB_MAX_SERVERS 64       /* LOTUS_MAX_SERVERS */
#define YCSB_SRV_KEYS    28       /* the memory server counters ycsb reads */
#define YCSB_SRV_CC_KEYS 12       /* the first ones: the cc_stats and the table */
#define YCSB_SRV_REQS    12       /* index of "requests" (all ops served) */
#define YCSB_SRV_CPU     13       /* index of "cpu_ns" (worker threads' CPU) */
#define YCSB_SRV_TIER    14       /* the tiered store's counters follow (14) */
#define YCSB_SRV_TIER_N  14
#define YCSB_SRV_DEPTH   27       /* "miss_depth_max": a level (since the server
				     started), not a count: kept, not subtracted */
extern const char *const ycsb_srv_keys[YCSB_SRV_KEYS];

struct ycsb_opts {
	struct lotus_options lo;
	char workload;            /* 'A'..'F' */
	uint64_t records;
	uint32_t record_size;
	double zipf;              /* theta */
	int dist;                 /* enum key_dist, or -1: the workload's default */
	unsigned ops_per_txn, threads, inflight, max_scan;
	double seconds, warmup;
	uint64_t seed;
	const char *trace_keys;   /* file for generated key ids, or NULL */
	uint64_t txns;            /* per thread: run exactly this many, not for a time */
	bool no_load, no_run, quiet, digest;
	bool owned_keys;          /* draw keys from this compute server's DEX ranges
				     (always under LOTUS_ENGINE_DEX) */
};

struct ycsb_result {
	uint64_t committed, aborted, ops, loaded;
	uint64_t aborts_conflict, aborts_preempted, aborts_other;
	double seconds;
	struct hist lat;          /* committed transactions, first attempt to commit */
	struct lotus_net_counters net;
	/* The engine's work per attempt over the run (warm-up excluded; attempts
	 * that end while the run drains are in) */
	struct lotus_txn_counters eng;
	uint64_t retries_max;     /* most attempts one transaction needed */
	/* The memory servers' counters over this run (from the end of the warm-up
	 * to the end: after-minus-before, so the load and earlier runs are not in
	 * them; other clients running at the same time are).  srv[i][k] is
	 * counter ycsb_srv_keys[k] of server i. */
	uint64_t srv[YCSB_MAX_SERVERS][YCSB_SRV_KEYS];
	bool srv_ok[YCSB_MAX_SERVERS];   /* both snapshots of server i were taken */
	char cc_stats[512];       /* JSON object: srv summed over memory servers */
	/* CPU per request over the run: the memory servers' worker threads (from
	 * their STATS: cpu_ns over requests served; srv_cpu_ok: every server
	 * reported it) and this process's compute threads (their thread CPU time
	 * over the requests they sent). */
	uint64_t srv_reqs, srv_cpu_ns, client_reqs, client_cpu_ns;
	bool srv_cpu_ok;
	struct lotus_cache_counters cache;
	uint64_t digest, digest_rows;  /* FNV-1a over every (key, value) in key order */
	unsigned servers;
	double load_seconds;
	int error;
	char message[256];        /* why ycsb_run() failed, when it says more than the code */
};



void ycsb_opts_init(struct ycsb_opts *o);
/* Run the whole benchmark (connect, load, run, disconnect). 0 or an error. */
int ycsb_run(const struct ycsb_opts *o, struct ycsb_result *res);
void ycsb_print(FILE *f, const struct ycsb_opts *o, const struct ycsb_result *r, bool json,
		const char *transport, unsigned servers);
/* Async-signal-safe: stop the run early (Ctrl-C). */
void ycsb_stop(void);

#endif
