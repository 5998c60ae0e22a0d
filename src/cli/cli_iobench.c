/*
 * cli_iobench.c - `lotus iobench <experiment> [options]`: the hybrid I/O
 * layer's microbenchmarks (§3 of "io_uring in Oracle Database: A Hybrid
 * Storage I/O Architecture at Production Scale").  This file only
 * parses and validates; src/bench/iobench*.c runs the experiments.  Nothing
 * is created on disk before every argument is valid.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "bench/iobench.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "common/common.h"

static const char usage[] =
	"Experiments (one per paper table/figure; `all` runs table3..poll in order):\n"
	"  table3    synchronous single-block read: pread vs io_uring submit-and-wait\n"
	"  fig2      depth-1 vs batched, libaio vs io_uring (plain/registered/IOPOLL), 1..64 threads\n"
	"  table4    one ring shared behind a mutex vs per-thread rings: p99 and IOPS\n"
	"  table5    buffer registration time against buffer size\n"
	"  table6    N separate registrations vs one registration cloned into N rings\n"
	"            (threads, and processes with the clone-then-fork pattern)\n"
	"  table7    registration breakdown: none, +ring fd, +files, +buffers\n"
	"  table8    redo-like DSYNC writes, 512B-4k, batch 1-8, immediate reap\n"
	"  fig3      block size x files: CPU/IO of batched io_uring vs batched libaio\n"
	"  poll      SQPOLL and IOPOLL where the kernel and device allow them\n"
	"  randread  one random-read cell with every knob (used by scripts/compare-fio)\n"
	"  all       every experiment above except randread\n"
	"Lists are comma-separated (\"1,4,16\", \"4k,64k,1M\").  Unset options take each\n"
	"experiment's default (the paper's setting scaled to this machine; docs/iobench.md).\n"
	"With --json/--csv the rows go to stdout and the human tables to stderr.";

static const char *const backends[] = { "uring", "aio", "sync", "pread", NULL };

/* "1,2,4" or "4k,1M" into l; bounds checked.  0 or 2 (after the message). */
static int parse_list(const char *name, const char *s, struct iob_list *l, uint64_t lo,
		      uint64_t hi)
{
	char buf[512];
	if (!s)
		return 0;
	if (strlen(s) >= sizeof(buf))
		return cli_fail("iobench", "--%s: list too long", name);
	strcpy(buf, s);
	l->n = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (l->n >= IOB_MAX_LIST)
			return cli_fail("iobench", "--%s: at most %d values", name, IOB_MAX_LIST);
		if (parse_size(tok, &v))
			return cli_fail("iobench", "--%s: '%s' is not a number or size", name, tok);
		if (v < lo || v > hi)
			return cli_fail("iobench", "--%s: %s is out of range [%llu, %llu]", name, tok,
					(unsigned long long)lo, (unsigned long long)hi);
		l->v[l->n++] = v;
	}
	if (!l->n)
		return cli_fail("iobench", "--%s: empty list", name);
	return 0;
}

static int validate(struct iob_cfg *c, struct cli_opt *opts, const char *lists[5])
{
	int rc;
	if ((rc = parse_list("threads", lists[0], &c->threads, 1, 256)) ||
	    (rc = parse_list("block-size", lists[1], &c->block_sizes, 512, 64ULL << 20)) ||
	    (rc = parse_list("files", lists[2], &c->files, 1, IOB_MAX_FILES)) ||
	    (rc = parse_list("rings", lists[3], &c->rings, 1, 1024)))
		return rc;
	for (int i = 0; i < c->block_sizes.n; i++)
		if (c->block_sizes.v[i] % 512)
			return cli_fail("iobench", "--block-size: %llu is not a multiple of 512",
					(unsigned long long)c->block_sizes.v[i]);
	if (c->think_us[0] > c->think_us[1])
		return cli_fail("iobench", "--think-us: MIN is above MAX");
	if (c->io_think_ns[0] > c->io_think_ns[1])
		return cli_fail("iobench", "--io-think-ns: MIN is above MAX");
	if (cli_find(opts, "batch")->seen &&
	    (c->batch[0] < 1 || c->batch[0] > c->batch[1] || c->batch[1] > 4096))
		return cli_fail("iobench", "--batch: need 1 <= MIN <= MAX <= 4096");
	if (c->depth && c->batch[1] > c->depth)
		return cli_fail("iobench", "--batch: MAX %llu is above --depth %u",
				(unsigned long long)c->batch[1], c->depth);
	if (c->data_file) {
		struct stat st;
		if (stat(c->data_file, &st) || !S_ISREG(st.st_mode))
			return cli_fail("iobench", "--data-file: %s is not a regular file", c->data_file);
		if (!cli_find(opts, "file-size")->seen)
			c->file_size = (uint64_t)st.st_size / 4096 * 4096;
		if ((uint64_t)st.st_size < c->file_size || c->file_size < (1ULL << 20))
			return cli_fail("iobench", "--data-file: %s is smaller than --file-size (or 1M)",
					c->data_file);
	}
	uint64_t max_bs = 0;
	for (int i = 0; i < c->block_sizes.n; i++)
		max_bs = MAX(max_bs, c->block_sizes.v[i]);
	if (c->file_size % 4096 || c->file_size < MAX(max_bs, 1ULL << 20))
		return cli_fail("iobench", "--file-size: need a multiple of 4k, at least 1M and "
				"at least the largest block size");
	if (c->json && c->csv)
		return cli_fail("iobench", "--json and --csv exclude each other");
	return 0;
}

int cmd_iobench(int argc, char **argv)
{
	struct iob_cfg c = { .file_size = 256ULL << 20, .seconds = 1.5 };
	const char *lists[5] = { NULL };
	int depth = 0, backend = 0;
	char *rest[4];
	int nrest = 0;
	struct cli_opt opts[] = {
		{ "seconds", OPT_DOUBLE, &c.seconds, "S", "measured time per cell (default 1.5)",
		  NULL, 0.05, 3600 },
		{ "think-us", OPT_RANGE, c.think_us, "MIN-MAX",
		  "CPU busy-work per batch, uniform (paper: 10-100; default 0)" },
		{ "io-think-ns", OPT_RANGE, c.io_think_ns, "MIN-MAX",
		  "CPU busy-work per completed I/O (fig3 default 500-1500, others 0)" },
		{ "threads", OPT_STR, &lists[0], "LIST", "thread counts (fig2/table4/poll: a list; "
		  "others: the first value)" },
		{ "block-size", OPT_STR, &lists[1], "LIST", "block sizes, e.g. 4k,64k,1M" },
		{ "depth", OPT_INT, &depth, "N", "I/Os in flight per thread (ring size)", NULL, 1,
		  4096 },
		{ "batch", OPT_RANGE, c.batch, "MIN-MAX", "I/Os per submit, uniform per round" },
		{ "files", OPT_STR, &lists[2], "LIST", "number of data files (fig3 grid; randread)" },
		{ "file-size", OPT_SIZE, &c.file_size, "SIZE", "size of each data file (default 256M)" },
		{ "dir", OPT_STR, &c.dir, "DIR", "directory for data files; must take O_DIRECT "
		  "(default $TMPDIR or /tmp, else the current directory)" },
		{ "data-file", OPT_STR, &c.data_file, "PATH", "randread: read this existing file "
		  "(at least --file-size bytes, kept) instead of creating one" },
		{ "rings", OPT_STR, &lists[3], "LIST", "table6: ring counts (default 1,4,16,64,200)" },
		{ "reg-size", OPT_SIZE, &c.reg_size, "SIZE", "table6: buffer size (default 1G)" },
		{ "reg-max", OPT_SIZE, &c.reg_max, "SIZE", "table5: largest buffer (default 4G, "
		  "capped at 70% of MemAvailable)" },
		{ "backend", OPT_CHOICE, &backend, "NAME", "randread: interface", backends },
		{ "registered", OPT_FLAG, &c.registered, NULL, "randread: registered (cloned) buffers" },
		{ "no-reg-ring", OPT_FLAG, &c.no_reg_ring, NULL, "randread: do not register the ring fd" },
		{ "no-reg-files", OPT_FLAG, &c.no_reg_files, NULL, "randread: do not register files" },
		{ "sqpoll", OPT_FLAG, &c.sqpoll, NULL, "randread: ask the layer for SQPOLL" },
		{ "iopoll", OPT_FLAG, &c.iopoll, NULL, "randread: ask the layer for IOPOLL" },
		{ "no-defer-taskrun", OPT_FLAG, &c.no_defer_taskrun, NULL, "every layer experiment: "
		  "io_uring without DEFER_TASKRUN/COOP_TASKRUN (IO_F_NO_DEFER_TASKRUN)" },
		{ "layer-cpu-stats", OPT_FLAG, &c.layer_cpu_stats, NULL, "keep the layer's per-call "
		  "thread-CPU clock reads (off: the bench measures process CPU itself)" },
		{ "json", OPT_FLAG, &c.json, NULL, "one JSON document on stdout: an array of one object per result, "
		  "{\"experiment\",\"config\",\"metrics\"}" },
		{ "csv", OPT_FLAG, &c.csv, NULL, "CSV on stdout" },
		{ "quiet", OPT_FLAG, &c.quiet, NULL, "no progress lines on stderr" },
		{ NULL },
	};
	int rc = cli_parse("iobench", usage, opts, argc, argv, rest, &nrest);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (nrest != 1)
		return cli_fail("iobench", nrest ? "one experiment at a time" : "name an experiment");
	bool known = false;
	for (int i = 0; iobench_experiments[i]; i++)
		known |= !strcmp(rest[0], iobench_experiments[i]);
	if (!known)
		return cli_fail("iobench", "unknown experiment '%s'", rest[0]);
	c.depth = (unsigned)depth;
	c.io_think_set = cli_find(opts, "io-think-ns")->seen;
	c.backend = backend == 1 ? IO_BACKEND_AIO : backend == 2 ? IO_BACKEND_SYNC
						  : IO_BACKEND_URING;
	c.sync_read = backend == 3;
	if ((rc = validate(&c, opts, lists)))
		return rc;
	return iobench_run(&c, rest[0]);
}
