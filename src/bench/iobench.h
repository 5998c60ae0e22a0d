/*
 * iobench.h - private interface of `lotus iobench`, the paper's §3
 * microbenchmarks ("io_uring in Oracle Database: A Hybrid Storage I/O
 * Architecture at Production Scale", Tables 3-8, Figures 2-3, §3.4).
 *
 * Files:
 *   iobench.c       harness: configuration, data files (created, removed, also
 *                   on Ctrl-C), output (human table / JSON lines / CSV), think
 *                   time, progress, the experiment table and `all`
 *   iobench_pipe.c  the workload engine on the hybrid I/O layer (src/io/io.h):
 *                   N threads, one io_ctx each, a depth/batch pipeline
 *   iobench_exp.c   experiments that run on the engine: table3, fig2, table7,
 *                   table8, fig3, randread
 *   iobench_raw.c   experiments on raw io_uring (liburing + raw syscalls) for
 *                   kernel mechanisms the layer does not expose: table4 (shared
 *                   ring behind a mutex), table5, table6 (clone, fork pattern),
 *                   poll (SQPOLL / IOPOLL probing)
 *
 * Threading: one benchmark runs at a time (the CLI thread); the engines start
 * and join their own worker threads.  Nothing here is a library API.
 */
#ifndef LOTUS_BENCH_IOBENCH_H
#define LOTUS_BENCH_IOBENCH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "io/io.h"

#define IOB_MAX_LIST 32
#define IOB_MAX_FILES 16

struct iob_list {
	uint64_t v[IOB_MAX_LIST];
	int n;                    /* 0: use the experiment's default */
};

/* Everything the command line can set.  Zero / empty means "experiment default". */
struct iob_cfg {
	const char *dir;          /* data directory (NULL: $TMPDIR, /tmp, then .) */
	const char *data_file;    /* randread: an existing file instead of data file 0 */
	uint64_t file_size;       /* bytes per data file */
	double seconds;           /* per measured cell */
	uint64_t think_us[2];     /* busy-work per batch, uniform in [lo, hi] */
	uint64_t io_think_ns[2];  /* busy-work per completed I/O (fig3) */
	bool io_think_set;
	struct iob_list threads, block_sizes, files, rings;
	unsigned depth;
	uint64_t batch[2];        /* batch size, uniform in [lo, hi] per round */
	int backend;              /* randread: IO_BACKEND_* */
	bool registered;          /* randread: register (clone) the buffers */
	bool no_reg_ring, no_reg_files; /* randread: skip these registrations */
	bool sqpoll, iopoll;      /* randread: ask the layer for them */
	bool no_defer_taskrun;    /* every layer experiment: IO_F_NO_DEFER_TASKRUN */
	bool sync_read;           /* randread: io_read_sync (pread) per I/O */
	bool layer_cpu_stats;     /* keep the layer's per-call CPU clock reads (off) */
	uint64_t reg_max;         /* table5: largest buffer */
	uint64_t reg_size;        /* table6: buffer size */
	bool json, csv, quiet;
};

/* ---- output (iobench.c) ------------------------------------------------ */
#define IOB_MAX_KV 14
struct iob_kv {
	const char *key;
	char sval[48];
	double num;
	bool is_num;
};
struct iob_row {
	const char *experiment;
	struct iob_kv cfg[IOB_MAX_KV], met[IOB_MAX_KV];
	int ncfg, nmet;
	const char *status;       /* NULL: ok; "unsupported" / "error" */
	char note[200];
};
void row_init(struct iob_row *r, const char *experiment);
void row_cfg_s(struct iob_row *r, const char *key, const char *val);
void row_cfg_n(struct iob_row *r, const char *key, double val);
void row_met(struct iob_row *r, const char *key, double val);
/* Print one row: human table (stdout, or stderr when JSON/CSV go to stdout)
 * and, if asked, the JSON line / CSV line on stdout. */
void iob_emit(const struct iob_row *r);
/* Title line of an experiment's human table (resets the column header). */
void iob_title(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A note under the human table. */
void iob_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Progress on stderr ("[fig2 3/42] uring-batch threads=4"), unless --quiet. */
void iob_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- harness (iobench.c) ----------------------------------------------- */
extern const struct iob_cfg *iob_cfg;   /* the running configuration */
/* Data file i (0-based), created on first use with cfg->file_size bytes of
 * written data (never sparse: O_DIRECT reads of holes skip the device).
 * Returns the path; the files are removed at exit and on SIGINT/SIGTERM. */
const char *iob_data_file(int i);
/* A fresh scratch file for writes (removed at exit). */
const char *iob_scratch_file(int i, uint64_t size);
/* Directory in use (after the O_DIRECT check). */
const char *iob_dir(void);
/* Busy CPU work for about ns nanoseconds. */
void iob_spin_ns(uint64_t ns);
/* Uniform in [lo, hi] from a per-thread xorshift state. */
static inline uint64_t iob_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}
/* Uniform in [0, n) without a division (multiply-high; n > 0). */
static inline uint64_t iob_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)iob_rand(s) * n) >> 64);
}
static inline uint64_t iob_uniform(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return hi > lo ? lo + iob_rand(s) % (hi - lo + 1) : lo;
}
/* Allocate len bytes, page aligned, pre-faulted; free with iob_free. */
void *iob_alloc(size_t len);
void iob_free(void *p, size_t len);
/* The block device behind a path and whether it has poll queues:
 * fills dev (e.g. "vda") and returns 1 (io_poll on), 0 (off), -errno. */
int iob_dev_poll(const char *path, char *dev, size_t devlen);
const char *iob_fmt_size(uint64_t v, char *buf, size_t len);  /* "4k", "1M" */
int iob_list_or(const struct iob_list *l, const uint64_t *def, int ndef, uint64_t *out);

/* Latency histogram: log-linear, about 3% resolution, per thread, merged. */
#define IOB_HIST_BUCKETS (64 * 32)
struct iob_hist {
	uint64_t count, sum;
	uint32_t b[IOB_HIST_BUCKETS];
};
void iob_hist_add(struct iob_hist *h, uint64_t ns, uint64_t n);
void iob_hist_merge(struct iob_hist *d, const struct iob_hist *s);
double iob_hist_pct(const struct iob_hist *h, double p);   /* ns */

/* ---- the engine on the I/O layer (iobench_pipe.c) ---------------------- */
struct pipe_spec {
	enum io_backend backend;
	unsigned depth;           /* max in flight per thread */
	unsigned batch_lo, batch_hi;
	unsigned flags;           /* IO_F_* for io_ctx_create */
	bool registered;          /* register once on a donor, clone per thread */
	bool write, dsync;        /* sequential writes to scratch files */
	bool sync_read;           /* io_read_sync per I/O instead of the queue */
	bool separate_reap;       /* io_submit_batch then io_reap (not combined) */
	bool reap_all;            /* immediate reap: wait for every I/O in flight */
	bool layer_cpu_stats;     /* keep the layer's per-call thread-CPU clock reads */
	bool no_defer_taskrun;    /* add IO_F_NO_DEFER_TASKRUN to every worker context */
	size_t bs;
	unsigned threads, nfiles;
	uint64_t think_ns[2];     /* per batch */
	uint64_t io_think_ns[2];  /* per completion */
	double seconds;
};
struct pipe_result {
	uint64_t ios;
	double secs;
	uint64_t cpu_ns;          /* process user+system over the window */
	uint64_t csw;             /* context switches of the process over the window */
	struct iob_hist lat;      /* submit -> reap, per I/O */
	enum io_backend backend;  /* what thread 0 ended up using */
	struct io_stats st;       /* thread 0's layer counters */
	uint64_t sys_calls;       /* enter+submit+getevents+pread+pwrite, all threads */
	uint64_t fallbacks;
	int err;                  /* 0 or -errno */
	char errmsg[160];
};
int pipe_run(const struct pipe_spec *sp, struct pipe_result *res);
/* Standard metrics of a run into a row: iops, cpu_us_per_io, lat_mean_us,
 * lat_p99_us, syscalls_per_io. */
void pipe_row_metrics(struct iob_row *r, const struct pipe_result *res);
/* Fill a spec from the configuration with experiment defaults. */
void pipe_spec_defaults(struct pipe_spec *sp);

/* ---- raw io_uring helpers (iobench_raw.c) ------------------------------ */
/* 1 if IOPOLL reads work on data file 0, 0 if not (why in reason), -errno. */
int raw_iopoll_probe(char *reason, size_t len);

/* ---- experiments: 0 ok, 1 failed at run time ------------------------------ */
int exp_table3(void);
int exp_fig2(void);
int exp_table4(void);
int exp_table5(void);
int exp_table6(void);
int exp_table7(void);
int exp_table8(void);
int exp_fig3(void);
int exp_poll(void);
int exp_randread(void);

/* Entry point for the CLI: run experiment `name` ("all" runs every one). */
int iobench_run(const struct iob_cfg *cfg, const char *name);
/* Names, for --help. */
extern const char *const iobench_experiments[];
#endif
