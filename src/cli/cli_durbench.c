/*
 * cli_durbench.c - `lotus durbench`: its options, then durbench_run()
 * (src/bench/durbench.c).
 */
#include <stddef.h>
#include "bench/durbench.h"
#include "cli/cli.h"
#include "cli/opts.h"

int cmd_durbench(int argc, char **argv)
{
	struct durbench_opts c = { .size = 1ull << 30, .seconds = 2, .threads = 4, .record = 200 };
	struct cli_opt opts[] = {
		{ "dir", OPT_STR, &c.dir, "DIR", "parent of the work directory (default $TMPDIR, else .)" },
		{ "size", OPT_SIZE, &c.size, "SIZE", "data for ckpt/recover (default 1G)" },
		{ "seconds", OPT_DOUBLE, &c.seconds, "S", "log: seconds per backend (default 2)" },
		{ "threads", OPT_INT, &c.threads, "N", "log: appending threads (default 4)", NULL, 1, 64 },
		{ "record", OPT_SIZE, &c.record, "BYTES", "log: payload bytes (default 200)", NULL, 0, 4096 },
		{ "only", OPT_CHOICE, &c.only, "WHAT", "run one part: the redo log writer, checkpoints, or "
		  "recovery (default all)", durbench_parts },
		{ "json", OPT_FLAG, &c.json, NULL, "print one JSON document: an array of one object per result" },
		{ "keep", OPT_FLAG, &c.keep, NULL, "keep the work directory" },
		{ "quiet", OPT_FLAG, &c.quiet, NULL, "no progress lines on stderr" },
		{ NULL, OPT_FLAG, NULL, NULL, NULL },
	};
	int rc = cli_parse("durbench", "Measure the durability engine on each I/O backend: redo log "
			   "commits/s and CPU per write,\ncheckpoint pages/s and CPU per page, recovery "
			   "MB/s.  Progress lines go to stderr.", opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	return durbench_run(&c);
}
