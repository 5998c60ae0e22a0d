/*
 * iobench_exp.c - the experiments of `lotus iobench` that run on the hybrid
 * I/O layer through the pipeline engine (iobench_pipe.c):
 *
 *   table3    synchronous single-block read: pread vs io_uring submit-and-wait
 *   fig2      depth-1 vs batched, libaio vs io_uring (plain / registered /
 *             IOPOLL), 1..64 threads, one ring per thread
 *   table7    registration breakdown: none, +ring fd, +files, +buffers
 *   table8    redo-like O_DIRECT+RWF_DSYNC writes, batch 1-8, immediate reap
 *   fig3      block size x number of files: CPU per I/O of batched io_uring
 *             relative to batched libaio
 *   randread  one cell with every knob exposed (scripts/compare-fio)
 *
 * Every cell is one pipe_run(); every row carries the standard metrics
 * (iops, cpu_us_per_io, lat_mean_us, lat_p99_us, syscalls_per_io).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "bench/iobench.h"
#include "common/common.h"

static const char *bname(enum io_backend b)
{
	switch (b) {
	case IO_BACKEND_URING: return "uring";
	case IO_BACKEND_AIO: return "aio";
	case IO_BACKEND_SYNC: return "sync";
	default: return "auto";
	}
}

static void row_size(struct iob_row *r, const char *key, uint64_t v)
{
	char b[16];
	row_cfg_s(r, key, iob_fmt_size(v, b, sizeof(b)));
}

/* Registration state as the layer reports it ("ring+files+bufs"). */
static void row_regs(struct iob_row *r, const struct pipe_result *res)
{
	char b[48] = "";
	const struct io_stats *st = &res->st;
	if (res->backend != IO_BACKEND_URING) {
		snprintf(b, sizeof(b), "-");
	} else {
		snprintf(b, sizeof(b), "%s%s%s%s", st->reg_ring ? "ring+" : "",
			 st->reg_files ? "files+" : "",
			 st->cloned_buffers ? "bufs(clone)+" : st->reg_buffers ? "bufs+" : "",
			 "");
		size_t n = strlen(b);
		if (n)
			b[n - 1] = 0;
		else
			snprintf(b, sizeof(b), "none");
	}
	row_cfg_s(r, "reg", b);
}

static void row_batch(struct iob_row *r, const struct pipe_spec *sp)
{
	char b[24];
	if (sp->batch_lo == sp->batch_hi)
		snprintf(b, sizeof(b), "%u", sp->batch_lo);
	else
		snprintf(b, sizeof(b), "%u-%u", sp->batch_lo, sp->batch_hi);
	row_cfg_s(r, "batch", b);
}

/* Run one cell; a failed cell is printed as a row with status "error". */
static int run_cell(const struct pipe_spec *sp, struct pipe_result *res)
{
	int rc = pipe_run(sp, res);
	if (rc && !res->errmsg[0])
		snprintf(res->errmsg, sizeof(res->errmsg), "%s", strerror(-rc));
	return rc;
}

/* ---- Table 3 -------------------------------------------------------------- */

int exp_table3(void)
{
	static const uint64_t def[] = { 4096, 8192, 16384, 65536, 131072, 262144, 524288, 1048576 };
	uint64_t bs[IOB_MAX_LIST];
	int nbs = iob_list_or(&iob_cfg->block_sizes, def, ARRAY_SIZE(def), bs);
	int failed = 0;
	iob_title("Table 3: synchronous single-block read, pread vs io_uring submit-and-wait "
		  "(1 thread, depth 1, O_DIRECT random reads)");
	for (int i = 0; i < nbs; i++) {
		for (int k = 0; k < 2; k++) {
			struct pipe_spec sp;
			struct pipe_result res;
			struct iob_row r;
			pipe_spec_defaults(&sp);
			sp.bs = bs[i];
			sp.threads = 1;
			sp.depth = sp.batch_lo = sp.batch_hi = 1;
			sp.sync_read = k == 0;
			sp.backend = k == 0 ? IO_BACKEND_SYNC : IO_BACKEND_URING;
			char b[16];
			iob_progress("[table3 %d/%d] %s bs=%s", i * 2 + k + 1, nbs * 2,
				     k ? "io_uring" : "pread", iob_fmt_size(bs[i], b, sizeof(b)));
			failed |= run_cell(&sp, &res) != 0;
			row_init(&r, "table3");
			row_size(&r, "block_size", bs[i]);
			row_cfg_s(&r, "interface", k ? "io_uring" : "pread");
			pipe_row_metrics(&r, &res);
			iob_emit(&r);
		}
	}
	iob_note("io_uring here is one SQE + io_uring_enter(GETEVENTS) per read through the "
		 "layer; at >=512k reads may be punted to io-wq, whose CPU counts (RUSAGE_SELF)");
	return failed;
}

/* ---- Figure 2 ------------------------------------------------------------- */

struct fig2_cfg {
	const char *name;
	enum io_backend backend;
	bool batched, registered;
	unsigned flags;
};

static const struct fig2_cfg fig2_cfgs[] = {
	{ "aio-depth1", IO_BACKEND_AIO, false, false, 0 },
	{ "uring-depth1", IO_BACKEND_URING, false, false, 0 },
	{ "aio-batch", IO_BACKEND_AIO, true, false, 0 },
	{ "uring-batch", IO_BACKEND_URING, true, false, 0 },
	{ "uring-batch-reg", IO_BACKEND_URING, true, true, 0 },
	{ "uring-batch-reg-iopoll", IO_BACKEND_URING, true, true, IO_F_IOPOLL },
};

int exp_fig2(void)
{
	static const uint64_t def[] = { 1, 2, 4, 8, 16, 32, 64 };
	uint64_t th[IOB_MAX_LIST];
	int nth = iob_list_or(&iob_cfg->threads, def, ARRAY_SIZE(def), th);
	char why[200] = "";
	int poll_ok = raw_iopoll_probe(why, sizeof(why));
	int failed = 0, cell = 0, ncells = nth * (int)ARRAY_SIZE(fig2_cfgs);
	iob_title("Figure 2: depth-1 vs batched, libaio vs io_uring, one ring per thread "
		  "(random O_DIRECT reads)");
	for (size_t c = 0; c < ARRAY_SIZE(fig2_cfgs); c++) {
		const struct fig2_cfg *fc = &fig2_cfgs[c];
		for (int t = 0; t < nth; t++) {
			struct pipe_spec sp;
			struct pipe_result res;
			struct iob_row r;
			pipe_spec_defaults(&sp);
			if (fc->batched) {
				sp.depth = iob_cfg->depth ? iob_cfg->depth : 128;
				sp.batch_lo = iob_cfg->batch[0] ? (unsigned)iob_cfg->batch[0] : 32;
				sp.batch_hi = iob_cfg->batch[1] ? (unsigned)iob_cfg->batch[1] : sp.depth;
			} else {
				sp.depth = sp.batch_lo = sp.batch_hi = 1;
			}
			sp.backend = fc->backend;
			sp.registered = fc->registered;
			sp.flags = fc->flags;
			sp.threads = (unsigned)th[t];
			row_init(&r, "fig2");
			row_cfg_s(&r, "config", fc->name);
			row_cfg_n(&r, "threads", (double)th[t]);
			row_cfg_n(&r, "depth", sp.depth);
			row_batch(&r, &sp);
			row_size(&r, "block_size", sp.bs);
			iob_progress("[fig2 %d/%d] %s threads=%u", ++cell, ncells, fc->name, sp.threads);
			if ((fc->flags & IO_F_IOPOLL) && poll_ok != 1) {
				r.status = "unsupported";
				snprintf(r.note, sizeof(r.note), "unsupported here: %.170s", why);
				iob_emit(&r);
				continue;
			}
			failed |= run_cell(&sp, &res) != 0;
			pipe_row_metrics(&r, &res);
			iob_emit(&r);
		}
	}
	iob_note("on a device-limited disk (virtio here) IOPS saturate early; compare "
		 "cpu_us_per_io between configurations, not IOPS");
	if (poll_ok != 1)
		iob_note("IOPOLL: unsupported here: %s", why);
	return failed;
}

/* ---- Table 7 -------------------------------------------------------------- */

int exp_table7(void)
{
	static const struct {
		const char *name;
		unsigned flags;
		bool registered;
	} steps[] = {
		{ "none", IO_F_NO_REG_RING | IO_F_NO_REG_FILES, false },
		{ "+ring_fd", IO_F_NO_REG_FILES, false },
		{ "+files", 0, false },
		{ "+buffers", 0, true },
	};
	double base_cpu = 0;
	int failed = 0;
	iob_title("Table 7: registration breakdown on the batched io_uring pipeline");
	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		struct pipe_spec sp;
		struct pipe_result res;
		struct iob_row r;
		pipe_spec_defaults(&sp);
		sp.threads = iob_cfg->threads.n ? (unsigned)iob_cfg->threads.v[0] : 16;
		sp.bs = iob_cfg->block_sizes.n ? iob_cfg->block_sizes.v[0] : 8192;
		sp.depth = iob_cfg->depth ? iob_cfg->depth : 128;
		sp.batch_lo = iob_cfg->batch[0] ? (unsigned)iob_cfg->batch[0] : 32;
		sp.batch_hi = iob_cfg->batch[1] ? (unsigned)iob_cfg->batch[1] : sp.depth;
		sp.flags = steps[i].flags;
		sp.registered = steps[i].registered;
		iob_progress("[table7 %zu/%zu] %s threads=%u", i + 1, ARRAY_SIZE(steps),
			     steps[i].name, sp.threads);
		failed |= run_cell(&sp, &res) != 0;
		row_init(&r, "table7");
		row_cfg_s(&r, "registration", steps[i].name);
		row_cfg_n(&r, "threads", sp.threads);
		row_size(&r, "block_size", sp.bs);
		row_batch(&r, &sp);
		row_regs(&r, &res);
		pipe_row_metrics(&r, &res);
		double cpu = res.ios ? (double)res.cpu_ns / 1e3 / (double)res.ios : 0;
		if (i == 0)
			base_cpu = cpu;
		row_met(&r, "cpu_delta_pct", base_cpu > 0 ? (cpu / base_cpu - 1) * 100 : 0);
		iob_emit(&r);
	}
	iob_note("IOPS is device-bound on this disk; the signal is cpu_us_per_io and its delta");
	return failed;
}

/* ---- Table 8 -------------------------------------------------------------- */

int exp_table8(void)
{
	static const uint64_t def[] = { 512, 1024, 2048, 4096 };
	uint64_t bs[IOB_MAX_LIST];
	int nbs = iob_list_or(&iob_cfg->block_sizes, def, ARRAY_SIZE(def), bs);
	int failed = 0;
	iob_title("Table 8: redo-like sequential O_DIRECT writes with RWF_DSYNC, batch "
		  "uniform in [lo, hi], immediate reap");
	for (int i = 0; i < nbs; i++) {
		for (int k = 0; k < 2; k++) {
			struct pipe_spec sp;
			struct pipe_result res;
			struct iob_row r;
			pipe_spec_defaults(&sp);
			sp.bs = bs[i];
			sp.threads = iob_cfg->threads.n ? (unsigned)iob_cfg->threads.v[0] : 4;
			sp.batch_lo = iob_cfg->batch[0] ? (unsigned)iob_cfg->batch[0] : 1;
			sp.batch_hi = iob_cfg->batch[1] ? (unsigned)iob_cfg->batch[1] : 8;
			sp.depth = iob_cfg->depth ? iob_cfg->depth : sp.batch_hi;
			sp.write = sp.dsync = sp.reap_all = true;
			sp.backend = k ? IO_BACKEND_URING : IO_BACKEND_AIO;
			sp.registered = k;
			char b[16];
			iob_progress("[table8 %d/%d] %s bs=%s", i * 2 + k + 1, nbs * 2, bname(sp.backend),
				     iob_fmt_size(bs[i], b, sizeof(b)));
			failed |= run_cell(&sp, &res) != 0;
			row_init(&r, "table8");
			row_size(&r, "block_size", bs[i]);
			row_cfg_s(&r, "backend", bname(sp.backend));
			row_cfg_n(&r, "threads", sp.threads);
			row_batch(&r, &sp);
			pipe_row_metrics(&r, &res);
			iob_emit(&r);
		}
	}
	iob_note("each write carries RWF_DSYNC (a device flush/FUA per write on this disk)");
	return failed;
}

/* ---- Figure 3 ------------------------------------------------------------- */

int exp_fig3(void)
{
	static const uint64_t def_bs[] = { 4096, 8192, 16384, 65536, 262144, 1048576 };
	static const uint64_t def_files[] = { 1, 2, 4, 8 };
	uint64_t bs[IOB_MAX_LIST], nf[IOB_MAX_LIST];
	int nbs = iob_list_or(&iob_cfg->block_sizes, def_bs, ARRAY_SIZE(def_bs), bs);
	int nnf = iob_list_or(&iob_cfg->files, def_files, ARRAY_SIZE(def_files), nf);
	int failed = 0, cell = 0, good = 0;
	double log_sum = 0;
	iob_title("Figure 3: CPU per I/O of batched io_uring (registered) vs batched libaio, "
		  "block size x files");
	for (int f = 0; f < nnf; f++) {
		for (int b = 0; b < nbs; b++) {
			struct pipe_result res[2];
			struct iob_row r;
			struct pipe_spec sp;
			for (int k = 0; k < 2; k++) {
				pipe_spec_defaults(&sp);
				sp.bs = bs[b];
				sp.nfiles = (unsigned)nf[f];
				sp.threads = iob_cfg->threads.n ? (unsigned)iob_cfg->threads.v[0] : 4;
				if (!iob_cfg->io_think_set) {
					sp.io_think_ns[0] = 500;
					sp.io_think_ns[1] = 1500;
				}
				sp.backend = k ? IO_BACKEND_URING : IO_BACKEND_AIO;
				sp.registered = k;
				char s[16];
				iob_progress("[fig3 %d/%d] %s bs=%s files=%u", ++cell, nbs * nnf * 2,
					     bname(sp.backend), iob_fmt_size(bs[b], s, sizeof(s)),
					     sp.nfiles);
				failed |= run_cell(&sp, &res[k]) != 0;
			}
			row_init(&r, "fig3");
			row_size(&r, "block_size", bs[b]);
			row_cfg_n(&r, "files", (double)nf[f]);
			row_cfg_n(&r, "threads", sp.threads);
			row_batch(&r, &sp);
			double cpu[2], iops[2];
			for (int k = 0; k < 2; k++) {
				cpu[k] = res[k].ios ? (double)res[k].cpu_ns / 1e3 / (double)res[k].ios : NAN;
				iops[k] = res[k].secs > 0 ? (double)res[k].ios / res[k].secs : NAN;
			}
			row_met(&r, "aio_cpu_us_per_io", cpu[0]);
			row_met(&r, "uring_cpu_us_per_io", cpu[1]);
			row_met(&r, "cpu_reduction_pct", (cpu[1] / cpu[0] - 1) * 100);
			row_met(&r, "aio_iops", iops[0]);
			row_met(&r, "uring_iops", iops[1]);
			if (res[0].err || res[1].err) {
				r.status = "error";
				snprintf(r.note, sizeof(r.note), "%s",
					 res[0].err ? res[0].errmsg : res[1].errmsg);
			} else if (cpu[0] > 0 && cpu[1] > 0) {
				log_sum += log(cpu[1] / cpu[0]);
				good++;
			}
			iob_emit(&r);
		}
	}
	if (good)
		iob_note("geometric mean of uring/aio CPU per I/O over %d cells: %+.1f%%", good,
			 (exp(log_sum / good) - 1) * 100);
	iob_note("\"files\" are files on one disk standing in for devices; the per-I/O busy "
		 "work (--io-think-ns, default 500-1500) is included in CPU per I/O");
	return failed;
}

/* ---- randread: one cell, every knob ----------------------------------------- */

int exp_randread(void)
{
	struct pipe_spec sp;
	struct pipe_result res;
	struct iob_row r;
	const struct iob_cfg *c = iob_cfg;
	pipe_spec_defaults(&sp);
	sp.backend = c->backend ? (enum io_backend)c->backend : IO_BACKEND_URING;
	sp.registered = c->registered;
	sp.sync_read = c->sync_read;
	sp.flags = (c->no_reg_ring ? IO_F_NO_REG_RING : 0) |
		   (c->no_reg_files ? IO_F_NO_REG_FILES : 0) | (c->sqpoll ? IO_F_SQPOLL : 0) |
		   (c->iopoll ? IO_F_IOPOLL : 0);
	if (sp.batch_hi > sp.depth)
		sp.batch_hi = sp.depth;
	if (sp.batch_lo > sp.batch_hi)
		sp.batch_lo = sp.batch_hi;
	iob_title("randread: one random-read cell");
	iob_progress("[randread] %s depth=%u batch=%u-%u bs=%zu threads=%u%s",
		     sp.sync_read ? "pread" : bname(sp.backend), sp.depth, sp.batch_lo, sp.batch_hi,
		     sp.bs, sp.threads, sp.registered ? " registered" : "");
	int rc = run_cell(&sp, &res);
	row_init(&r, "randread");
	row_cfg_s(&r, "backend", sp.sync_read ? "pread" : bname(sp.backend));
	row_cfg_s(&r, "used", sp.sync_read ? "pread" : bname(res.backend));
	row_cfg_n(&r, "threads", sp.threads);
	row_cfg_n(&r, "depth", sp.depth);
	row_batch(&r, &sp);
	row_size(&r, "block_size", sp.bs);
	row_cfg_n(&r, "files", sp.nfiles);
	row_regs(&r, &res);
	pipe_row_metrics(&r, &res);
	row_met(&r, "ios", (double)res.ios);
	row_met(&r, "time_ms", res.secs * 1e3);
	iob_emit(&r);
	return rc != 0;
}
