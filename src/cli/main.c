/*
 * main.c - the `lotus` command: a table of subcommands.  Each subcommand lives
 * in its own file (cli_<name>.c) and returns the process exit status:
 * 0 success, 1 failure at run time, 2 bad usage (one-line reason on stderr).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "lotus_prefix.h"   /* generated: LOTUS_VERSION */

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "memserver", cmd_memserver, "run a memory server" },
	{ "ycsb", cmd_ycsb, "run YCSB transactions against a cluster (or a --local one)" },
	{ "serve", cmd_serve, "serve the Redis protocol (redis-cli, redis-py) on top of lotus" },
	{ "bank", cmd_bank, "concurrent transfers with a ledger; --verify checks the data" },
	{ "tpcc", cmd_tpcc, "TPC-C: the five transactions, then consistency conditions 1-4" },
	{ "backup", cmd_backup, "copy a running durable cluster's data, consistent across its servers" },
	{ "restore", cmd_restore, "write a backup into the data directories of stopped servers" },
	{ "status", cmd_status, "one row per memory server: up or down, pool, log, clients (--json, --prometheus)" },
	{ "txn-status", cmd_txn_status, "ask a memory server what it knows about a transaction" },
	{ "netbench", cmd_netbench, "measure the raw transport's round-trip rate" },
	{ "iobench", cmd_iobench, "the hybrid I/O layer's microbenchmarks (paper §3)" },
	{ "durbench", cmd_durbench, "redo log, checkpoint and recovery throughput per I/O backend" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: lotus <command> [options]   (lotus <command> --help)\n"
		   "       lotus --version\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("lotus %s\n", LOTUS_VERSION);
		return 0;
	}
	/* Local memory servers (--local) run this very binary, unless the user
	 * named another one.  (A process of ours, so setting its environment is
	 * fine; the library itself never does.) */
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0 && !getenv("LOTUS_BIN")) {
		self[n] = 0;
		setenv("LOTUS_BIN", self, 1);
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "lotus: unknown command '%s' (see lotus --help)\n", argv[1]);
	return 2;
}
