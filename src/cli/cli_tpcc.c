/*
 * cli_tpcc.c - `lotus tpcc`: load a TPC-C database, run the five
 * transactions for --seconds, check consistency conditions 1-10 and 12 (always
 * after a run; --check alone only checks).  On a cluster from --config, or
 * on an embedded --local cluster (default 2 servers), which lives as long as
 * this process unless it has a --data-dir.
 *
 * Exit status: 0 success, 1 failure or a violated condition, 2 bad usage,
 * 3 a memory server was lost during the run (no check was made).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/tpcc.h"
#include "cli/cli.h"
#include "cli/cluster_opts.h"
#include "cli/opts.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"

int cmd_tpcc(int argc, char **argv)
{
	struct tpcc_opts o;
	struct cluster_opts co = {
		.local = 2, .tiering = true,
		.local_help = "start N memory servers on loopback (default 2)",
		.transport_help = "transport (default tcp, or the config's)",
		.sthreads_help = "threads per local memory server (default: cores)",
		.smem_help = "buffer pool per local memory server (default: 384M per warehouse, "
			     "spread over the servers, at least 512M)",
		.data_dir_help = "local servers keep their data durable in DIR/ms<i> and recover it at start",
		.durability_help = "local servers' durability (default: sync with --data-dir, else none)",
		.compute_id_help = "this process's compute id; unique among concurrent clients (default 0)",
	};
	uint64_t warehouses = 1, threads = 2;
	int cc = 0, commit = 0, placement = 0;
	bool json = false, load_only = false, no_load = false, check_only = false;
	tpcc_opts_init(&o);
	struct cli_opt own[] = {
		{ "warehouses", OPT_U64, &warehouses, "W", "warehouses to load (default 1; with --no-load or --check: the database's)", .min = 1, .max = 1000 },
		{ "seconds", OPT_DOUBLE, &o.seconds, "S", "how long to run transactions (default 10)", .min = 0.1, .max = 864000 },
		{ "threads", OPT_U64, &threads, "T", "terminal threads, one transaction at a time each; also the loader threads (default 2)", .min = 1, .max = 64 },
		{ "load-only", OPT_FLAG, &load_only, NULL, "load the database, then stop" },
		{ "no-load", OPT_FLAG, &no_load, NULL, "run on the database the cluster holds (loaded before)" },
		{ "check", OPT_FLAG, &check_only, NULL, "only check consistency conditions 1-10 and 12 of the database the cluster holds; exit 1 if one fails" },
		{ "cc", OPT_CHOICE, &cc, "P", "concurrency control protocol (default no_wait, or the config's)", cluster_ccs },
		{ "commit", OPT_CHOICE, &commit, "C", "multi-server commits: two_phase (default, or the config's) or one_phase", cluster_commits },
		{ "placement", OPT_CHOICE, &placement, "P", "where rows live: hash (default: every key hashed over the servers) or warehouse (a warehouse's rows on one server, so only remote lines and payments cross servers); --no-load and --check need the load's", tpcc_placement_names },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON document (new_order_per_s, mix, types, checks)" },
		{ "quiet", OPT_FLAG, &o.quiet, NULL, "no progress lines on stderr" },
	};
	struct cli_opt opts[ARRAY_SIZE(own) + CLUSTER_OPTS_MAX + 1];
	unsigned nopts = ARRAY_SIZE(own);
	memcpy(opts, own, sizeof(own));
	cluster_opts_add(&co, opts, &nopts);
	int rc = cli_parse("tpcc", "Run TPC-C: load W warehouses (the spec's cardinalities), run New-Order,\n"
			   "Payment, Order-Status, Delivery and Stock-Level at the spec's minimum mix\n"
			   "without think time, then check consistency conditions 1-10, 12.  See docs/tpcc.md.\n"
			   "Exit status 1: a condition failed; 3: a memory server was lost mid-run.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	const char *config = co.config, *data_dir = co.data_dir;
	if ((rc = cluster_opts_check(&co, opts, "tpcc")))
		return rc;
	if ((load_only + no_load + check_only) > 1)
		return cli_fail("tpcc", "--load-only, --no-load and --check exclude each other");
	if (check_only && cli_find(opts, "seconds")->seen)
		return cli_fail("tpcc", "--check only checks; drop --seconds (a run is always checked)");
	if ((no_load || check_only) && !config && !data_dir)
		return cli_fail("tpcc", "--%s needs a cluster that holds a database: --config FILE or "
				"--data-dir DIR", no_load ? "no-load" : "check");
	o.warehouses = (no_load || check_only) && !cli_find(opts, "warehouses")->seen ? 0
		     : (unsigned)warehouses;
	o.threads = (unsigned)threads;
	o.load = !no_load && !check_only;
	o.run = !load_only && !check_only;
	o.check = !load_only;
	o.lo.cc = (enum lotus_cc)cc;
	o.placement = (enum tpcc_placement)placement;
	if (cli_find(opts, "commit")->seen)
		o.lo.commit = (enum lotus_commit)(commit + 1);
	cluster_opts_apply(&co, opts, &o.lo);
	if (!config && !co.smem) {
		/* ~100 MB of rows per warehouse at load, growing with the run */
		uint64_t per = (384ULL << 20) * warehouses / co.local;
		o.lo.server_memory = MAX(512ULL << 20, per);
	}
	if (config) {
		struct lotus_config cfg;
		if (config_load(config, &cfg))
			return 2;
		if (!cli_find(opts, "cc")->seen)
			o.lo.cc = (enum lotus_cc)cfg.cc;
	}
	cluster_opts_spin(&co, o.threads);
	log_set_tag("tpcc");
	cli_stop_signals("tpcc", tpcc_stop);
	struct tpcc_result *r = calloc(1, sizeof(*r));
	if (!r)
		return 1;
	unsigned logged = log_error_count();
	rc = tpcc_main(&o, r);
	int status = 0;
	if (rc) {
		if (r->message[0] || log_error_count() == logged)
			fprintf(stderr, "lotus tpcc: %s\n", r->message[0] ? r->message : lotus_strerror(rc));
		status = 1;
	} else if (r->error) {
		fprintf(stderr, "lotus tpcc: %s\n", r->message);
		status = r->error == LOTUS_EUNAVAIL ? 3 : 1;
	} else {
		tpcc_print(stdout, &o, r, json);
		if (o.check && !tpcc_checks_ok(&r->check)) {
			fflush(stdout);
			fprintf(stderr, "lotus tpcc: consistency check failed\n");
			status = 1;
		}
	}
	free(r);
	return status;
}
