/*
 * cluster_opts.c - the cluster options shared by bank, serve, tpcc and ycsb
 * (cluster_opts.h): one declaration of each, appended to a subcommand's
 * table, their translation into struct lotus_options, and the checks and
 * polling choice they share.
 */
#include <stddef.h>
#include <stdlib.h>
#include "cli/cluster_opts.h"
#include "common/common.h"

const char *const cluster_transports[] = { "tcp", "sm", "rc", "ud", "dc", NULL };
const char *const cluster_durabilities[] = { "none", "async", "sync", NULL };
const char *const cluster_ccs[] = { "no_wait", "wait_die", "wound_wait", NULL };
const char *const cluster_commits[] = { "two_phase", "one_phase", NULL };

void cluster_opts_add(struct cluster_opts *c, struct cli_opt *opts, unsigned *n)
{
	unsigned i = *n;
	opts[i++] = (struct cli_opt){ "config", OPT_STR, &c->config, "FILE",
		"cluster config file (instead of --local)" };
	opts[i++] = (struct cli_opt){ "local", OPT_U64, &c->local, "N", c->local_help,
				      .min = 1, .max = 64 };
	opts[i++] = (struct cli_opt){ "transport", OPT_CHOICE, &c->transport, "T",
				      c->transport_help, cluster_transports };
	opts[i++] = (struct cli_opt){ "server-threads", OPT_U64, &c->sthreads, "W",
				      c->sthreads_help, .min = 1, .max = 1024 };
	opts[i++] = (struct cli_opt){ "server-memory", OPT_SIZE, &c->smem, "SIZE",
				      c->smem_help };
	if (c->tiering) {
		opts[i++] = (struct cli_opt){ "server-capacity", OPT_SIZE, &c->scap, "SIZE",
			"data per local memory server, above --server-memory: cold pages are evicted "
			"to its data directory (needs --data-dir; default: all in memory)" };
		opts[i++] = (struct cli_opt){ "server-page-writers", OPT_U64, &c->spw, "N",
			"page-writer threads per local memory server (with --server-capacity; "
			"default min(2, cores))", .min = 1, .max = 64 };
		opts[i++] = (struct cli_opt){ "server-miss-depth", OPT_U64, &c->smd, "N",
			"reads in flight per worker of each local memory server for requests "
			"parked on a page miss (with --server-capacity; default 32; 0: every miss "
			"is a blocking pread)", .min = 0, .max = 1024 };
	}
	if (c->data_dir_help)
		opts[i++] = (struct cli_opt){ "data-dir", OPT_STR, &c->data_dir, "DIR",
					      c->data_dir_help };
	if (c->durability_help)
		opts[i++] = (struct cli_opt){ "durability", OPT_CHOICE, &c->durability, "D",
			c->durability_help, cluster_durabilities };
	opts[i++] = (struct cli_opt){ "compute-id", OPT_U64, &c->compute_id, "N",
				      c->compute_id_help, .min = 0, .max = 4095 };
	opts[i++] = (struct cli_opt){ "lease-ms", OPT_U64, &c->lease_ms, "MS",
		"this client's lease with each memory server: a server that hears nothing from it "
		"this long frees its locks (default 3000, or the config's lease_ms; --local servers "
		"get it too)", .min = 100, .max = 3600000 };
	opts[i++] = (struct cli_opt){ "secret-file", OPT_STR, &c->secret_file, "FILE",
		"the cluster secret file (default: the config's secret_file; --local: a random one)" };
	opts[i] = (struct cli_opt){ 0 };
	*n = i;
}

bool cluster_opts_seen(struct cli_opt *opts, const char *name)
{
	struct cli_opt *o = cli_find(opts, name);
	return o && o->seen;
}

void cluster_opts_apply(const struct cluster_opts *c, struct cli_opt *opts,
			struct lotus_options *lo)
{
	lo->config_path = c->config;
	lo->local_servers = c->config ? 0 : (int)c->local;
	lo->transport = c->config && !cluster_opts_seen(opts, "transport") ? NULL
		      : cluster_transports[c->transport];
	lo->server_threads = (unsigned)c->sthreads;
	lo->server_memory = c->smem;
	lo->server_capacity = c->scap;
	lo->server_page_writers = (unsigned)c->spw;
	lo->server_miss_depth = !cluster_opts_seen(opts, "server-miss-depth") ? 0
			      : c->smd ? (unsigned)c->smd : UINT32_MAX;
	lo->data_dir = c->data_dir;
	lo->durability = cluster_opts_seen(opts, "durability")
		       ? cluster_durabilities[c->durability] : NULL;
	lo->compute_id = (unsigned)c->compute_id;
	lo->lease_ms = (unsigned)c->lease_ms;
	lo->secret_file = c->secret_file;
}

int cluster_opts_check(const struct cluster_opts *c, struct cli_opt *opts, const char *cmd)
{
	if (c->config && cluster_opts_seen(opts, "local"))
		return cli_fail(cmd, "--config and --local exclude each other");
	if (c->config && (cluster_opts_seen(opts, "server-threads") ||
			  cluster_opts_seen(opts, "server-memory") || c->data_dir ||
			  cluster_opts_seen(opts, "durability") || c->scap || c->spw))
		return cli_fail(cmd, "--server-* options, --data-dir and --durability apply to "
				"--local only");
	if (c->durability != 0 && !c->data_dir)
		return cli_fail(cmd, "--durability %s needs --data-dir DIR",
				cluster_durabilities[c->durability]);
	if (c->scap && !c->data_dir)
		return cli_fail(cmd, "--server-capacity needs --data-dir DIR (evicted pages go there)");
	return 0;
}

void cluster_opts_spin(const struct cluster_opts *c, unsigned client_threads)
{
	unsigned cores = (unsigned)cpu_count();
	unsigned local = c->config ? 0 : (unsigned)c->local;
	unsigned pollers = client_threads + 1 + local * (c->sthreads ? (unsigned)c->sthreads : cores);
	if (!getenv("LOTUS_NET_SPIN_US") && pollers > cores)
		setenv("LOTUS_NET_SPIN_US", "0", 1);
}
