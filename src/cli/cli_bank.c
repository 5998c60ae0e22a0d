/*
 * cli_bank.c - `lotus bank`: concurrent transfers with a ledger of the
 * acknowledged ones, and --verify, which checks the database against the
 * ledger.  On a cluster from --config, or on an embedded --local cluster (the
 * default: 2 servers), which lives only as long as this process unless it has
 * a --data-dir; so with a plain --local, --verify checks the run of the same
 * invocation.
 *
 * Exit status: 0 success, 1 failure or discrepancy, 2 bad usage, 3 a memory
 * server was lost during the run (the ledger is flushed, in-flight transfers
 * whose commit was sent are recorded as "maybe").
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench/bank.h"
#include "cli/cli.h"
#include "cli/cluster_opts.h"
#include "cli/opts.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"

static int report(const struct bank_opts *o, int rc, unsigned logged, const struct bank_run_result *run,
		  const struct bank_verify_result *ver, bool json)
{
	if (rc) {
		/* One line per error: a line the library logged already names it. */
		if (log_error_count() == logged)
			fprintf(stderr, "lotus bank: %s\n", run->message[0] ? run->message
				: lotus_strerror(rc));
		return run->refused ? 2 : 1;
	}
	/* --json prints one document: the run, the verify, or {"run":..,"verify":..}. */
	bool both = json && o->run && o->verify && !run->error;
	if (o->run) {
		if (both)
			fputs("{\"run\":", stdout);
		bank_print_run(stdout, o, run, json);
		if (json && !both)
			fputc('\n', stdout);
	}
	if (run->error == LOTUS_EUNAVAIL) {
		fflush(stdout);
		fprintf(stderr, "lotus bank: %s: %llu committed, %llu recorded as "
			"maybe, ledger %s flushed\n", run->message, (unsigned long long)run->committed,
			(unsigned long long)run->maybe, o->ledger);
		return 3;
	}
	if (run->error) {
		fflush(stdout);
		fprintf(stderr, "lotus bank: %s\n", run->message);
		return 1;
	}
	if (!o->verify)
		return 0;
	if (both)
		fputs(",\"verify\":", stdout);
	bank_print_verify(stdout, ver, json);
	if (json)
		fputs(both ? "}\n" : "\n", stdout);
	if (!ver->ok) {
		fflush(stdout);
		fprintf(stderr, "lotus bank: verify: %s\n", ver->error);
		return 1;
	}
	return 0;
}

int cmd_bank(int argc, char **argv)
{
	struct bank_opts o;
	struct cluster_opts co = {
		.local = 2, .smem = 256ULL << 20, .tiering = true,
		.local_help = "start N memory servers on loopback (default 2)",
		.transport_help = "transport (default tcp, or the config's)",
		.sthreads_help = "threads per local memory server (default: cores)",
		.smem_help = "buffer pool per local memory server (default 256M)",
		.data_dir_help = "local servers keep their data durable in DIR/ms<i> and recover it at start (a new cluster when no DIR/ms<i> exists yet; one missing beside the others is refused)",
		.durability_help = "local servers' durability (default: sync with --data-dir, else none)",
		.compute_id_help = "this process's compute id; unique among concurrent clients (default 0)",
	};
	uint64_t accounts, opening, threads, inflight;
	int commit = 0, cc = 0;
	bool json = false;
	bank_opts_init(&o);
	accounts = o.accounts;
	opening = (uint64_t)o.opening;
	threads = o.threads;
	inflight = o.inflight;
	struct cli_opt own[] = {
		{ "ledger", OPT_STR, &o.ledger, "FILE", "ledger of acknowledged transfer ids (appended to; required)" },
		{ "verify", OPT_FLAG, &o.verify, NULL, "check the database against the ledger (after the run, if any)" },
		{ "no-ledger", OPT_FLAG, &o.no_ledger, NULL, "with --verify alone: check the bank's own invariants without a ledger (total conserved, every balance = opening + its transfers; not that acknowledged transfers are there)" },
		{ "seconds", OPT_DOUBLE, &o.seconds, "S", "how long to run transfers (default 10)", .min = 0.1, .max = 864000 },
		{ "accounts", OPT_U64, &accounts, "N", "accounts of a new bank (default 1000; an existing bank keeps its own)", .min = 2, .max = 1e8 },
		{ "opening", OPT_U64, &opening, "X", "opening balance of every account (default 1000)", .min = 0, .max = 1e12 },
		{ "threads", OPT_U64, &threads, "T", "transfer threads (default 4)", .min = 1, .max = 1024 },
		{ "inflight", OPT_U64, &inflight, "K", "transfers in flight per thread (default 1)", .min = 1, .max = 1024 },
		{ "cc", OPT_CHOICE, &cc, "P", "concurrency control protocol (default no_wait, or the config's)", cluster_ccs },
		{ "commit", OPT_CHOICE, &commit, "C", "multi-server commits: two_phase (default, or the config's; atomic on failures) or one_phase (one round less; atomic only if no client or server fails)", cluster_commits },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON document: the run or the verify object, or {\"run\":{..},\"verify\":{..}} for both" },
		{ "quiet", OPT_FLAG, &o.quiet, NULL, "no progress lines on stderr" },
	};
	struct cli_opt opts[ARRAY_SIZE(own) + CLUSTER_OPTS_MAX + 1];
	unsigned nopts = ARRAY_SIZE(own);
	memcpy(opts, own, sizeof(own));
	cluster_opts_add(&co, opts, &nopts);
	int rc = cli_parse("bank", "Run concurrent transfers between accounts, appending every acknowledged\n"
			   "transfer to a ledger; --verify checks the database against the ledger.\n"
			   "With --config or --data-dir, --verify alone only verifies; add --seconds to\n"
			   "run transfers first.  Exit status 3: a memory server was lost mid-run.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	const char *config = co.config, *data_dir = co.data_dir;
	if (o.no_ledger && (o.ledger || !o.verify || cli_find(opts, "seconds")->seen ||
			    (!config && !data_dir)))
		return cli_fail("bank", "--no-ledger goes with --verify alone, on --config or "
				"--data-dir, and without --ledger or --seconds");
	if (!o.ledger && !o.no_ledger)
		return cli_fail("bank", "--ledger FILE is required (or --verify --no-ledger)");
	if (config && cli_find(opts, "local")->seen)
		return cli_fail("bank", "--config and --local exclude each other");
	if (config && (cli_find(opts, "server-threads")->seen || cli_find(opts, "server-memory")->seen ||
		       data_dir || cli_find(opts, "durability")->seen))
		return cli_fail("bank", "--server-threads, --server-memory, --data-dir and --durability "
				"apply to --local only");
	if (co.durability != 0 && !data_dir)
		return cli_fail("bank", "--durability %s needs --data-dir DIR",
				cluster_durabilities[co.durability]);
	if (config && (co.scap || co.spw))
		return cli_fail("bank", "--server-capacity and --server-page-writers apply to --local only");
	if (co.scap && !data_dir)
		return cli_fail("bank", "--server-capacity needs --data-dir DIR (evicted pages go there)");
	o.accounts = accounts;
	o.accounts_given = cli_find(opts, "accounts")->seen;
	o.opening = (int64_t)opening;
	o.opening_given = cli_find(opts, "opening")->seen;
	o.threads = (unsigned)threads;
	o.inflight = (unsigned)inflight;
	/* Data that outlives this process can be verified without a run. */
	o.run = !(o.verify && (config || data_dir) && !cli_find(opts, "seconds")->seen);
	o.lo.cc = (enum lotus_cc)cc;
	if (cli_find(opts, "commit")->seen)
		o.lo.commit = (enum lotus_commit)(commit + 1);
	cluster_opts_apply(&co, opts, &o.lo);
	if (config) {
		struct lotus_config cfg;
		if (config_load(config, &cfg))
			return 2;
		if (!cli_find(opts, "cc")->seen)
			o.lo.cc = (enum lotus_cc)cfg.cc;
	}
	cluster_opts_spin(&co, o.threads);
	log_set_tag("bank");
	cli_stop_signals("bank", bank_stop);
	struct bank_run_result run;
	struct bank_verify_result ver;
	unsigned logged = log_error_count();
	rc = bank_main(&o, &run, &ver);
	return report(&o, rc, logged, &run, &ver, json);
}
