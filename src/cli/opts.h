/*
 * opts.h - declarative command-line options for every `lotus` subcommand.
 *
 * A subcommand lists its options in a table (name, kind, destination, help);
 * cli_parse() fills the destinations, prints `--help` from the same table, and
 * on bad input prints ONE line "lotus <cmd>: <reason>" to stderr and returns 2,
 * the exit status the caller should use.  Nothing is changed on disk before the
 * arguments are valid, so a bad argument loses nothing.
 *
 * Kinds: OPT_FLAG (bool), OPT_INT (int), OPT_U64, OPT_SIZE (u64 bytes, "64M"),
 * OPT_DOUBLE, OPT_STR (const char *), OPT_CHOICE (int index into choices),
 * OPT_RANGE (two u64 "MIN-MAX", dst points to u64[2]).
 */
#ifndef LOTUS_CLI_OPTS_H
#define LOTUS_CLI_OPTS_H
#include <stdbool.h>
#include <stdint.h>

enum opt_kind { OPT_FLAG, OPT_INT, OPT_U64, OPT_SIZE, OPT_DOUBLE, OPT_STR, OPT_CHOICE, OPT_RANGE };

struct cli_opt {
	const char *name;            /* long name without "--" */
	enum opt_kind kind;
	void *dst;
	const char *metavar;         /* shown in help, e.g. "N" */
	const char *help;
	const char *const *choices;  /* OPT_CHOICE: NULL-terminated */
	double min, max;             /* numeric bounds when max > min */
	bool seen;                   /* set by cli_parse */
};

/* Parse argv[1..argc) (argv[0] is the subcommand).  Returns 0, 1 if --help was
 * printed (exit 0), or 2 after printing the one-line reason (exit 2).
 * Positional arguments are refused unless rest/nrest are given: then they are
 * collected there. */
int cli_parse(const char *cmd, const char *usage, struct cli_opt *opts, int argc,
	      char **argv, char **rest, int *nrest);
/* Find an option by name (to test .seen). */
struct cli_opt *cli_find(struct cli_opt *opts, const char *name);
/* Print a one-line usage error and return 2. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* SIGINT/SIGTERM for a client subcommand: the first signal calls stop()
 * (finish what is in flight, report) and arms a CLI_STOP_GRACE_S watchdog; a
 * client still running then (a wait for a stopped server, a lock that is not
 * freed) prints one line and exits 128+signal at once, as does a second
 * signal 0.5 s or more after the first.  Local memory servers die with their
 * parent. */
#define CLI_STOP_GRACE_S 2
void cli_stop_signals(const char *cmd, void (*stop)(void));

#endif
