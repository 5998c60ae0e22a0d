/*
 * durbench.h - `lotus durbench`, the durability engine's figures per I/O
 * backend (durbench.c tells what it measures).  The options are parsed by
 * src/cli/cli_durbench.c.
 *
 * Threads: durbench_run() runs on the caller's thread; the benchmark itself
 * runs in a child process, which Ctrl-C or SIGTERM stops.
 */
#ifndef LOTUS_DURBENCH_H
#define LOTUS_DURBENCH_H
#include <stdbool.h>
#include <stdint.h>

struct durbench_opts {
	const char *dir;   /* parent of the work directory (NULL: $TMPDIR, else .) */
	uint64_t size;     /* ckpt/recover: bytes of data */
	double seconds;    /* log: seconds per backend */
	int threads;       /* log: appending threads */
	uint64_t record;   /* log: payload bytes */
	bool json, keep, quiet;
	int only;          /* index into durbench_parts: 0 all, 1 log, 2 ckpt, 3 recover */
	char work[1024];   /* the work directory (set by durbench_run) */
};

/* The names of the parts, as --only spells them (NULL-terminated). */
extern const char *const durbench_parts[];

/* Make the work directory, run the parts, remove it (unless keep): the exit
 * status (0, 1 on a failure, 130 after a signal). */
int durbench_run(struct durbench_opts *o);

#endif
