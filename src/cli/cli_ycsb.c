/*
 * cli_ycsb.c - `lotus ycsb`: YCSB workloads A-F as transactions, on a cluster
 * from --config or on an embedded --local cluster (the default: 2 servers).
 */
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "bench/ycsb.h"
#include "cli/cli.h"
#include "cli/cluster_opts.h"
#include "cli/opts.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"

static const char *const workloads[] = { "A", "B", "C", "D", "E", "F", NULL };
static const char *const ccs[] = { "no_wait", "wait_die", "wound_wait", NULL };
static const char *const batches[] = { "none", "intra", "inter", NULL };
static const char *const dists[] = { "uniform", "zipfian", "scrambled", "latest", NULL };
static const char *const parts[] = { "none", "co", NULL };
/* index == enum lotus_engine */
static const char *const engines[] = { "twosided", "onesided", "dex", NULL };
/* index + 1 == enum lotus_commit */
static const char *const commits[] = { "two_phase", "one_phase", NULL };

int cmd_ycsb(int argc, char **argv)
{
	struct ycsb_opts o;
	struct cluster_opts co = {
		.local = 2, .tiering = true,
		.local_help = "start N memory servers on loopback (default 2)",
		.transport_help = "transport (default tcp)",
		.sthreads_help = "threads per local memory server (default: cores)",
		.smem_help = "buffer pool per local memory server (default: fits the data)",
		.data_dir_help = "local servers keep their data in DIR/ms<i> (a new cluster when no DIR/ms<i> exists yet; one missing beside the others is refused)",
		.durability_help = "local servers' durability (default: sync with --data-dir, else none)",
		.compute_id_help = "this compute server's id, unique in the cluster (default 0)",
	};
	uint64_t records, rsize, ops, threads = 0, inflight = 1, seed;
	uint64_t max_scan, cache = 0, compute_count = 1, txns = 0;
	uint64_t group = 8, spin = 0;
	int commit = 0, wl = 0, cc = 0, batch = 1, dist = 1, part = 0, engine = 0;
	double admit = 1.0;
	bool digest = false, owned = false;
	const char *trace = NULL;
	bool json = false, no_load = false, quiet = false, no_run = false;
	ycsb_opts_init(&o);
	records = o.records; rsize = o.record_size; ops = o.ops_per_txn; seed = o.seed;
	max_scan = o.max_scan;
	struct cli_opt own[] = {
		{ "workload", OPT_CHOICE, &wl, "W", "YCSB workload", workloads },
		{ "records", OPT_U64, &records, "N", "records to load (default 100000)", .min = 1, .max = 1e12 },
		{ "record-size", OPT_U64, &rsize, "BYTES", "record size (default 1024 = 10 fields x 100 B)", .min = 1, .max = 65536 },
		{ "ops-per-txn", OPT_U64, &ops, "K", "operations per transaction, distinct keys (default 16)", .min = 1, .max = 128 },
		{ "zipf", OPT_DOUBLE, &o.zipf, "THETA", "zipfian skew (default 0.99, YCSB's; the paper uses 0.9)", .min = 0.01, .max = 10 },
		{ "dist", OPT_CHOICE, &dist, "D", "key distribution (default scrambled zipfian, as YCSB; D uses latest)", dists },
		{ "threads", OPT_U64, &threads, "T", "compute threads (default: the core count)", .min = 1, .max = 1024 },
		{ "inflight", OPT_U64, &inflight, "K", "transactions in flight per thread (default 1; 2 under --batch inter, "
		  "so that messages carry requests of several transactions)", .min = 1, .max = 1024 },
		{ "seconds", OPT_DOUBLE, &o.seconds, "S", "measured run time (default 10)", .min = 0.1, .max = 86400 },
		{ "warmup", OPT_DOUBLE, &o.warmup, "S", "warm-up before measuring (default 1)", .min = 0, .max = 3600 },
		{ "engine", OPT_CHOICE, &engine, "E", "transaction engine: twosided = lotus (requests to the memory "
		  "servers' lock managers), onesided = the Sherman/Deft-style baseline over RMA (reads, writes, "
		  "CAS, FAA on the servers' memory; no_wait or wait_die; docs/onesided.md), "
		  "dex = DEX: one-sided with compute-side partitioning (each compute server owns ranges of "
		  "1024 keys and draws its keys from them), a coherence-free index cache of --cache bytes, "
		  "local locks, lookups offloaded to the memory server; docs/dex.md "
		  "(default twosided)", engines },
		{ "cc", OPT_CHOICE, &cc, "P", "concurrency control protocol", ccs },
		{ "commit", OPT_CHOICE, &commit, "C", "multi-server commits: two_phase (default, or the config's; atomic on failures) or one_phase (one round less; atomic only if no client or server fails)", commits },
		{ "batch", OPT_CHOICE, &batch, "B", "request batching: none = one request per message, intra = one message "
		  "per server per transaction step, inter = also across the transactions of a thread (--inflight) "
		  "and of a sending group (--group-size) (default intra)", batches },
		{ "max-scan", OPT_U64, &max_scan, "N", "longest scan of workload E (default 100)", .min = 1, .max = 1000 },
		{ "compute-count", OPT_U64, &compute_count, "N", "compute servers in the cluster (co-partitioning; default: "
		  "the config's compute_servers, else 1)", .min = 1, .max = 4096 },
		{ "partitioning", OPT_CHOICE, &part, "P", "compute partitioning (default none)", parts },
		{ "cache", OPT_SIZE, &cache, "SIZE", "record cache capacity, e.g. 64M (default 0: off)" },
		{ "cache-admit", OPT_DOUBLE, &admit, "P", "probability that a cache miss is admitted (default 1)", .min = 0, .max = 1 },
		{ "group-size", OPT_U64, &group, "N", "threads per sending group under --batch inter (default 8)", .min = 1, .max = 64 },
		{ "spin-us", OPT_U64, &spin, "US", "busy-poll before sleeping (default: 100, or 0 when threads outnumber cores)", .max = 1000000 },
		{ "txns", OPT_U64, &txns, "N", "run exactly N transactions per thread instead of --seconds", .min = 1, .max = 1e12 },
		{ "owned-keys", OPT_FLAG, &owned, NULL, "draw keys only from this compute server's DEX ranges "
		  "(--compute-id of --compute-count, ranges of 1024 keys; what --engine dex always does), so "
		  "another engine runs the same transactions" },
		{ "digest", OPT_FLAG, &digest, NULL, "read the whole table at the end and print its digest" },
		{ "no-load", OPT_FLAG, &no_load, NULL, "skip loading: the table is already there (checked: an empty or "
		  "smaller table is an error)" },
		{ "no-run", OPT_FLAG, &no_run, NULL, "skip the transactions (load and/or --digest only; prints what was loaded)" },
		{ "seed", OPT_U64, &seed, "N", "random seed (default 1)" },
		{ "trace-keys", OPT_STR, &trace, "FILE", "write every generated key id, one per line" },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON object instead of the table" },
		{ "quiet", OPT_FLAG, &quiet, NULL, "no progress lines on stderr" },
	};
	struct cli_opt opts[ARRAY_SIZE(own) + CLUSTER_OPTS_MAX + 1];
	unsigned nopts = ARRAY_SIZE(own);
	memcpy(opts, own, sizeof(own));
	cluster_opts_add(&co, opts, &nopts);
	int rc = cli_parse("ycsb", "Run YCSB transactions: load the table, run the workload, report\n"
			   "throughput, latency, aborts and network traffic per transaction.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	const char *config = co.config, *data_dir = co.data_dir;
	uint64_t local = co.local, sthreads = co.sthreads, smem = co.smem;
	if (config && cli_find(opts, "local")->seen)
		return cli_fail("ycsb", "--config and --local exclude each other");
	if (records < ops)
		return cli_fail("ycsb", "--records %llu is fewer than --ops-per-txn %llu: a transaction "
				"needs that many distinct keys", (unsigned long long)records,
				(unsigned long long)ops);
	o.workload = workloads[wl][0];
	o.records = records;
	o.record_size = (uint32_t)rsize;
	o.ops_per_txn = (unsigned)ops;
	o.threads = (unsigned)threads;
	/* Under inter, one transaction per thread in flight leaves nothing to batch
	 * across but the other threads of the group: take two unless told. */
	if (batch == LOTUS_BATCH_INTER && !cli_find(opts, "inflight")->seen)
		inflight = 2;
	o.inflight = (unsigned)inflight;
	o.max_scan = (unsigned)max_scan;
	o.seed = seed;
	o.trace_keys = trace;
	o.no_load = no_load;
	o.quiet = quiet;
	if (cli_find(opts, "dist")->seen)
		o.dist = dist;
	o.lo.cc = (enum lotus_cc)cc;
	o.lo.engine = (enum lotus_engine)engine;
	if (cli_find(opts, "commit")->seen)
		o.lo.commit = (enum lotus_commit)(commit + 1);
	o.lo.batch = (enum lotus_batch)batch;
	if (config && (data_dir || cli_find(opts, "durability")->seen))
		return cli_fail("ycsb", "--durability and --data-dir are for --local clusters");
	if (co.durability && !data_dir)
		return cli_fail("ycsb", "--durability %s needs --data-dir",
				cluster_durabilities[co.durability]);
	if (config && (co.scap || co.spw))
		return cli_fail("ycsb", "--server-capacity and --server-page-writers are for --local clusters");
	if (co.scap && (!data_dir || !smem))
		return cli_fail("ycsb", "--server-capacity needs --data-dir DIR (evicted pages go there) "
				"and --server-memory SIZE (the part held in memory)");
	cluster_opts_apply(&co, opts, &o.lo);
	o.lo.partitioning = (enum lotus_partitioning)part;
	struct lotus_config cfg;
	if (config) {
		if (config_load(config, &cfg))
			return 2;
		if (!cli_find(opts, "cc")->seen)
			o.lo.cc = (enum lotus_cc)cfg.cc;
		/* compute_servers is the cluster's compute count: co-partitioning
		 * needs every compute server to agree on it. */
		if (!cli_find(opts, "compute-count")->seen)
			compute_count = cfg.compute_servers;
		else if (cfg.compute_servers > 1 && compute_count != cfg.compute_servers)
			return cli_fail("ycsb", "--compute-count %llu contradicts compute_servers = %u in %s",
					(unsigned long long)compute_count, cfg.compute_servers, config);
	}
	o.lo.compute_count = (unsigned)compute_count;
	o.lo.cache_bytes = cache;
	o.lo.cache_admit = admit;
	o.lo.group_size = (unsigned)group;
	o.txns = txns;
	o.digest = digest;
	o.owned_keys = owned;
	o.no_run = no_run;
	if (co.compute_id >= compute_count)
		return cli_fail("ycsb", "--compute-id %llu must be below the compute count %llu (%s)",
				(unsigned long long)co.compute_id, (unsigned long long)compute_count,
				cli_find(opts, "compute-count")->seen ? "--compute-count"
				: config ? "compute_servers in the config" : "--compute-count, default 1");
	/* Busy polling only pays when every polling thread has a core.  A local
	 * cluster's servers poll on this host too. */
	unsigned cores = (unsigned)cpu_count();
	unsigned pollers = (threads ? (unsigned)threads : cores) +
			   (config ? 0 : (unsigned)local * (sthreads ? (unsigned)sthreads : cores));
	if (cli_find(opts, "spin-us")->seen || (!getenv("LOTUS_NET_SPIN_US") && pollers > cores)) {
		char buf[24];
		snprintf(buf, sizeof(buf), "%llu", cli_find(opts, "spin-us")->seen
			 ? (unsigned long long)spin : 0ULL);
		setenv("LOTUS_NET_SPIN_US", buf, 1);
	}
	/* default pool: the data set twice over, spread across servers, at least 256 MiB.
	 * The one-sided engine's regions (their chunks together stay within a
	 * server's memory, docs/onesided.md) need a record's 24-byte header
	 * and value rounded to 64 bytes and about 64 bytes of index pages each,
	 * with room for chunks that double (half empty at worst) and inserts. */
	uint64_t pool = MAX(256ULL << 20, 2 * (records * 2) * (rsize + 64) / local);
	if (engine == LOTUS_ENGINE_ONESIDED)
		pool = MAX(pool, 3 * records * (((24 + rsize + 63) & ~63ULL) + 64) / local);
	o.lo.server_memory = smem ? smem : pool;
	log_set_tag("ycsb");
	cli_stop_signals("ycsb", ycsb_stop);
	struct ycsb_result res;
	unsigned logged = log_error_count();
	rc = ycsb_run(&o, &res);
	if (rc) {
		/* One line per error: an error line already says more than the code. */
		if (res.message[0] || log_error_count() == logged)
			fprintf(stderr, "lotus ycsb: %s\n", res.message[0] ? res.message
				: lotus_strerror(rc));
		return 1;
	}
	/* with --config and no --transport the cluster's transport is used */
	ycsb_print(stdout, &o, &res, json, o.lo.transport ? o.lo.transport
		   : config && cfg.transport[0] ? cfg.transport : "tcp",
		   config ? 0 : (unsigned)local);
	return res.error ? 1 : 0;
}
