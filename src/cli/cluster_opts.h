/*
 * cluster_opts.h - the cluster options that `lotus bank`, `lotus serve`,
 * `lotus tpcc` and `lotus ycsb` share: where the cluster is (--config, or --local N memory
 * servers started as children, with their --server-* resources, --data-dir
 * and --durability), how to reach it (--transport, --secret-file) and who
 * this client is (--compute-id, --lease-ms).
 *
 * A subcommand keeps its own options in its own table and appends these
 * (cluster_opts_add), so each option is declared once.  Where a subcommand's
 * default differs (serve's one server thread and 1G pool, ycsb's pool that
 * fits the data), it sets the value before parsing and names the default in
 * the help it passes.  Checks that a subcommand words its own way stay in
 * the subcommand; cluster_opts_apply() fills struct lotus_options.
 */
#ifndef LOTUS_CLI_CLUSTER_OPTS_H
#define LOTUS_CLI_CLUSTER_OPTS_H
#include <stdbool.h>
#include <stdint.h>
#include "cli/opts.h"
#include "lotus.h"

/* The transports and durabilities, as the options spell them; and the
 * protocols (index = enum lotus_cc) and commit modes (index + 1 = enum
 * lotus_commit) of --cc and --commit. */
extern const char *const cluster_transports[];
extern const char *const cluster_durabilities[];
extern const char *const cluster_ccs[];
extern const char *const cluster_commits[];

struct cluster_opts {
	/* the values (set the defaults that differ before cluster_opts_add) */
	const char *config, *data_dir, *secret_file;
	uint64_t local, sthreads, smem, scap, spw, compute_id, lease_ms, smd;
	int transport, durability;
	/* the help where subcommands word it differently; NULL leaves the
	 * option out (local, transport, sthreads, smem and compute_id are
	 * always there and must be given) */
	const char *local_help, *transport_help, *sthreads_help, *smem_help;
	const char *compute_id_help, *data_dir_help, *durability_help;
	bool tiering;              /* --server-capacity and --server-page-writers */
};

/* Options cluster_opts_add() may append, at most. */
#define CLUSTER_OPTS_MAX 13

/* Append the options to opts at *n (room for CLUSTER_OPTS_MAX more plus the
 * terminating entry, which is written after them). */
void cluster_opts_add(struct cluster_opts *c, struct cli_opt *opts, unsigned *n);
/* After cli_parse: was option name given? */
bool cluster_opts_seen(struct cli_opt *opts, const char *name);
/* Fill lo's cluster fields: config_path, local_servers (0 with --config),
 * transport (NULL with --config and no --transport: the config's),
 * server_threads/memory/capacity/page_writers, data_dir, durability (NULL
 * unless given), compute_id, lease_ms, secret_file. */
void cluster_opts_apply(const struct cluster_opts *c, struct cli_opt *opts,
			struct lotus_options *lo);
/* After cli_parse: the checks every --local/--config subcommand words the
 * same (--config with --local or a local server's option, --durability or
 * --server-capacity without --data-dir).  0, or cli_fail's 2 (said as cmd). */
int cluster_opts_check(const struct cluster_opts *c, struct cli_opt *opts, const char *cmd);
/* Busy polling pays only when every polling thread has a core; a local
 * cluster's servers poll on this host too.  Sets LOTUS_NET_SPIN_US=0 when
 * client_threads (+1) and the local servers' threads outnumber the cores,
 * unless the environment set it. */
void cluster_opts_spin(const struct cluster_opts *c, unsigned client_threads);

#endif
