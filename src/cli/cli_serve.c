/*
 * cli_serve.c - `lotus serve`: the Redis-protocol front end (src/serve/).
 * Parses the options, applies Redis's protected-mode rule (no listening
 * beyond loopback without --requirepass) and runs the server until SIGINT or
 * SIGTERM.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "cli/cluster_opts.h"
#include "cli/opts.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "serve/serve.h"

static const char *const ccs[] = { "no_wait", "wait_die", "wound_wait", NULL };

/* serve's own messages, as lotus's log lines (timestamp, tag, level) */
static void serve_log(int level, const char *msg)
{
	log_msg((enum log_level)level, "%s", msg);
}

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o;
	struct cluster_opts co = {
		.local = 2, .sthreads = 1, .smem = 1ULL << 30,
		.local_help = "start N memory servers on loopback as children (default 2)",
		.transport_help = "transport to the memory servers (default tcp, or the config's)",
		.sthreads_help = "threads per local memory server (default 1)",
		.smem_help = "buffer pool per local memory server (default 1G, mapped lazily)",
		.compute_id_help = "this compute server's id, unique in the cluster (default 0)",
	};
	uint64_t threads, maxv, pmax, retries, cache = 0, max_clients = 0, timeout_s = 0;
	int cc = LOTUS_WOUND_WAIT;
	const char *log_file = NULL;
	serve_opts_init(&o);
	threads = o.threads;
	maxv = o.max_value;
	pmax = o.pipeline_max;
	retries = o.retries;
	/* serve's own options; the cluster's are appended (cluster_opts.h) */
	struct cli_opt own[] = {
		{ "listen", OPT_STR, &o.listen, "HOST:PORT", "address for Redis clients (default 127.0.0.1:6379; port 0 picks one)" },
		{ "requirepass", OPT_STR, &o.requirepass, "PW", "clients must AUTH with PW (required to listen beyond loopback)" },
		{ "threads", OPT_U64, &threads, "T", "event-loop threads, each a lotus session (default 1)", .min = 1, .max = 256 },
		{ "cc", OPT_CHOICE, &cc, "P", "concurrency control protocol (default wound_wait, or the config's)", ccs },
		{ "max-value", OPT_U64, &maxv, "BYTES", "largest value the table holds (default 4096; a slot is this big)", .min = 1, .max = 65536 },
		{ "table", OPT_STR, &o.table, "NAME", "lotus table that holds the keys (default serve)" },
		{ "pipeline-max", OPT_U64, &pmax, "N", "commands of one client that arrived together run as one transaction, up to N (default 64; 1: one per command)", .min = 1, .max = 100000 },
		{ "retries", OPT_U64, &retries, "N", "attempts of a transaction aborted by conflicts before the client gets an error (default 100)", .min = 1, .max = 1000000 },
		{ "cache", OPT_SIZE, &cache, "SIZE", "lotus record cache (locations sent as hints), e.g. 64M (default 0: off)" },
		{ "max-clients", OPT_U64, &max_clients, "N", "most clients connected at once; one more gets '-ERR max number of clients reached' (default 0: no limit but the descriptor limit)", .min = 0, .max = 10000000 },
		{ "timeout", OPT_U64, &timeout_s, "S", "close a client idle for S seconds (default 0: never)", .min = 0, .max = 100000000 },
		{ "log-file", OPT_STR, &log_file, "FILE", "append the log lines (and all else on stderr) to FILE once the arguments are checked; SIGHUP reopens it (logrotate: rename, then SIGHUP)" },
	};
	struct cli_opt opts[ARRAY_SIZE(own) + CLUSTER_OPTS_MAX + 1];
	unsigned nopts = ARRAY_SIZE(own);
	memcpy(opts, own, sizeof(own));
	cluster_opts_add(&co, opts, &nopts);
	int rc = cli_parse("serve", "Serve the Redis protocol (RESP2) on --listen, so redis-cli, redis-benchmark\n"
			   "and Redis client libraries use lotus as a database.  Each command is atomic;\n"
			   "MULTI ... EXEC is one lotus transaction; conflicts are retried inside.\n"
			   "Runs until SIGINT or SIGTERM.  Commands: docs/serve.md.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	const char *config = co.config;
	if (config && cli_find(opts, "local")->seen)
		return cli_fail("serve", "--config and --local exclude each other");
	if (config && (cli_find(opts, "server-threads")->seen || cli_find(opts, "server-memory")->seen))
		return cli_fail("serve", "--server-threads and --server-memory apply to --local only");
	char why[128];
	if (serve_listen_check(o.listen, why, sizeof(why)))
		return cli_fail("serve", "--listen %s: %s", o.listen, why);
	if (!serve_host_is_loopback(o.listen) && !o.requirepass)
		return cli_fail("serve", "refusing to listen on %s, beyond loopback, without "
				"--requirepass (as Redis's protected mode)", o.listen);
	o.threads = (unsigned)threads;
	o.max_value = (uint32_t)maxv;
	o.pipeline_max = (unsigned)pmax;
	o.retries = (unsigned)retries;
	o.max_clients = (unsigned)max_clients;
	o.timeout_s = (unsigned)timeout_s;
	o.lo.cc = (enum lotus_cc)cc;
	o.lo.batch = LOTUS_BATCH_INTER;   /* requests of every job of a thread share messages */
	o.lo.group_size = 1;              /* ... of that thread only: no cross-thread lock */
	cluster_opts_apply(&co, opts, &o.lo);
	o.lo.cache_bytes = cache;
	if (config) {
		struct lotus_config cfg;
		if (config_load(config, &cfg))
			return 2;
		if (!cli_find(opts, "cc")->seen)
			o.lo.cc = (enum lotus_cc)cfg.cc;
	}
	/* Busy polling only pays when every polling thread has a core; a local
	 * cluster's servers poll on this host too. */
	unsigned cores = (unsigned)cpu_count();
	unsigned pollers = o.threads + (config ? 0 : (unsigned)(co.local * co.sthreads));
	if (!getenv("LOTUS_NET_SPIN_US") && pollers >= cores)
		setenv("LOTUS_NET_SPIN_US", "0", 1);
	if (log_file && (rc = log_file_open(log_file)) != 0)
		return cli_fail("serve", "--log-file %s: %s", log_file, strerror(-rc));
	log_set_tag("serve");
	o.log = serve_log;
	return serve_run(&o);
}
