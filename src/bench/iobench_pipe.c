/*
 * iobench_pipe.c - the workload engine of `lotus iobench` on the hybrid I/O
 * layer (src/io/io.h).
 *
 * pipe_run() starts sp->threads workers.  Each owns one io_ctx (the layer's
 * thread rule), adds the shared O_DIRECT data files to it, and, when asked,
 * clones the buffer registration that the main thread made once on a donor
 * context (IO_F_NO_SINGLE_ISSUER), falling back to registering its own slice.
 * A worker then runs the paper's batched pipeline:
 *
 *     draw batch b in [batch_lo, batch_hi]
 *     prep min(b, depth - inflight) I/Os            io_prep_read/_write
 *     submit + wait for just enough completions     io_submit_and_reap
 *       that the next batch fits in depth              (or submit_batch + reap)
 *     account completions (latency = reap - submit) [per-I/O busy work]
 *     think: busy-work in [think_lo, think_hi]
 *
 * depth 1 / batch 1 is the paper's "depth-1" configuration; sync_read runs
 * io_read_sync() (pread) per I/O instead.  Reads go to uniformly random
 * block-aligned offsets of the data files; writes go sequentially through a
 * per-thread scratch file (redo-like).
 *
 * Measurement window: the main thread waits on a start barrier after every
 * worker finished its setup (ring, files, registration), then samples wall
 * time, process CPU (getrusage RUSAGE_SELF: all threads, io-wq and SQPOLL
 * included) and the workers' I/O counters; after `seconds` it raises stop and
 * samples again at once.  Draining and teardown happen outside the window.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "bench/iobench.h"
#include "common/clock.h"
#include "common/common.h"

struct pipe_shared {
	const struct pipe_spec *sp;
	pthread_barrier_t start;
	volatile int stop;
	int fds[IOB_MAX_FILES];
	uint64_t fsize[IOB_MAX_FILES];
	uint64_t blocks[IOB_MAX_FILES]; /* fsize / bs, computed once */
	io_ctx_t *donor;          /* owns the one registration; idle during the run */
	char *buf;                /* threads * depth * bs */
	size_t buflen;
};

struct pipe_worker {
	pthread_t tid;
	struct pipe_shared *sh;
	unsigned idx;
	uint64_t ios;             /* completed in the window; read by main (relaxed) */
	uint64_t total_ios;       /* including the drain */
	struct iob_hist lat;
	struct io_stats st;
	enum io_backend backend;
	int err;
	char errmsg[160];
};

static void worker_fail(struct pipe_worker *w, int err, const char *what)
{
	if (w->err)
		return;
	w->err = err;
	snprintf(w->errmsg, sizeof(w->errmsg), "thread %u: %s: %s", w->idx, what,
		 strerror(err < 0 ? -err : err));
}

/* Setup of one worker: ctx, files, registration.  Returns 0 or -errno. */
static int worker_setup(struct pipe_worker *w, io_ctx_t **ctxp, int *fidx)
{
	const struct pipe_spec *sp = w->sh->sp;
	struct io_opts o = { .backend = sp->backend, .depth = sp->depth,
			     .flags = sp->flags | (sp->layer_cpu_stats ? 0 : IO_F_NO_CPU_STATS) |
				      (sp->no_defer_taskrun ? IO_F_NO_DEFER_TASKRUN : 0) };
	int rc = io_ctx_create(&o, ctxp);
	if (rc) {
		worker_fail(w, rc, "io_ctx_create");
		return rc;
	}
	io_ctx_t *ctx = *ctxp;
	w->backend = io_ctx_backend(ctx);
	for (unsigned f = 0; f < sp->nfiles; f++) {
		unsigned fd_i = sp->write ? w->idx : f;
		fidx[f] = io_ctx_add_file(ctx, w->sh->fds[fd_i]);
		if (fidx[f] < 0) {
			worker_fail(w, fidx[f], "io_ctx_add_file");
			return fidx[f];
		}
		if (sp->write)
			break;
	}
	if (sp->registered) {
		size_t slice = (size_t)sp->depth * sp->bs;
		rc = w->sh->donor ? io_ctx_clone_buffers_from(ctx, w->sh->donor) : -ENOENT;
		if (rc)
			rc = io_ctx_register_buffer(ctx, w->sh->buf + w->idx * slice, slice);
		(void)rc; /* level-3 fallback: carries on unregistered; visible in stats */
	}
	return 0;
}

static inline unsigned draw_batch(const struct pipe_spec *sp, uint64_t *rng)
{
	unsigned b = (unsigned)iob_uniform(rng, sp->batch_lo, sp->batch_hi);
	return b > sp->depth ? sp->depth : b;
}

/* The sync_read variant: one pread per I/O through io_read_sync(). */
static void run_sync_reads(struct pipe_worker *w, io_ctx_t *ctx, const int *fidx, char *buf)
{
	const struct pipe_spec *sp = w->sh->sp;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (w->idx + 1), n = 0;
	while (!w->sh->stop) {
		unsigned f = sp->nfiles > 1 ? (unsigned)(iob_rand(&rng) % sp->nfiles) : 0;
		off_t off = (off_t)(iob_below(&rng, w->sh->blocks[f]) * sp->bs);
		uint64_t t = clock_now_ns();
		ssize_t r = io_read_sync(ctx, fidx[f], buf, sp->bs, off);
		if (r != (ssize_t)sp->bs) {
			worker_fail(w, r < 0 ? (int)r : -EIO, "io_read_sync");
			break;
		}
		iob_hist_add(&w->lat, clock_now_ns() - t, 1);
		__atomic_store_n(&w->ios, ++n, __ATOMIC_RELAXED);
		iob_spin_ns(iob_uniform(&rng, sp->think_ns[0], sp->think_ns[1]));
	}
	w->total_ios = n;
}

struct pipe_loop {
	unsigned *free_slots, nfree;
	uint64_t *ts;
	struct io_cqe *cqes;
	uint64_t wpos;            /* next sequential write offset */
};

/* Prepare n I/Os stamped with time t.  Returns 0 or -errno. */
static int prep_batch(struct pipe_worker *w, io_ctx_t *ctx, struct pipe_loop *L,
		      const int *fidx, char *buf, unsigned n, uint64_t t, uint64_t *rng)
{
	const struct pipe_spec *sp = w->sh->sp;
	for (unsigned i = 0; i < n; i++) {
		unsigned slot = L->free_slots[--L->nfree];
		char *b = buf + (size_t)slot * sp->bs;
		int rc;
		if (sp->write) {
			uint64_t size = w->sh->fsize[w->idx];
			if (L->wpos + sp->bs > size)
				L->wpos = 0;
			rc = sp->dsync ? io_prep_write_dsync(ctx, fidx[0], b, sp->bs, (off_t)L->wpos, slot)
				       : io_prep_write(ctx, fidx[0], b, sp->bs, (off_t)L->wpos, slot);
			L->wpos += sp->bs;
		} else {
			unsigned f = sp->nfiles > 1 ? (unsigned)(iob_rand(rng) % sp->nfiles) : 0;
			rc = io_prep_read(ctx, fidx[f], b, sp->bs,
					  (off_t)(iob_below(rng, w->sh->blocks[f]) * sp->bs), slot);
		}
		if (rc < 0) {
			L->nfree++;
			return rc;
		}
		L->ts[slot] = t;
	}
	return 0;
}

/* Account reaped completions; returns 0 or the first failed result. */
static int account(struct pipe_worker *w, struct pipe_loop *L, int got, uint64_t *rng)
{
	const struct pipe_spec *sp = w->sh->sp;
	uint64_t now = clock_now_ns();
	int bad = 0;
	for (int i = 0; i < got; i++) {
		unsigned slot = (unsigned)L->cqes[i].user_data;
		if (L->cqes[i].res != (int64_t)sp->bs && !bad)
			bad = L->cqes[i].res < 0 ? (int)L->cqes[i].res : -EIO;
		if (!w->sh->stop)
			iob_hist_add(&w->lat, now - L->ts[slot], 1);
		L->free_slots[L->nfree++] = slot;
		if (sp->io_think_ns[1])
			iob_spin_ns(iob_uniform(rng, sp->io_think_ns[0], sp->io_think_ns[1]));
	}
	return bad;
}

static void run_pipeline(struct pipe_worker *w, io_ctx_t *ctx, const int *fidx, char *buf)
{
	const struct pipe_spec *sp = w->sh->sp;
	uint64_t rng = 0x9e3779b97f4a7c15ULL * (w->idx + 1), n = 0;
	struct pipe_loop L = { 0 };
	L.free_slots = calloc(sp->depth, sizeof(*L.free_slots));
	L.ts = calloc(sp->depth, sizeof(*L.ts));
	L.cqes = calloc(sp->depth, sizeof(*L.cqes));
	if (!L.free_slots || !L.ts || !L.cqes) {
		worker_fail(w, -ENOMEM, "calloc");
		goto out;
	}
	for (unsigned i = 0; i < sp->depth; i++)
		L.free_slots[L.nfree++] = sp->depth - 1 - i;
	unsigned next = draw_batch(sp, &rng);
	while (!w->sh->stop) {
		unsigned cnt = MIN(next, L.nfree);
		int rc = prep_batch(w, ctx, &L, fidx, buf, cnt, clock_now_ns(), &rng);
		if (rc) {
			worker_fail(w, rc, "io_prep");
			break;
		}
		unsigned inflight = sp->depth - L.nfree;
		next = draw_batch(sp, &rng);
		unsigned room = sp->depth - next;
		unsigned need = sp->reap_all ? inflight : inflight > room ? inflight - room : 0;
		int got;
		if (sp->separate_reap) {
			got = io_submit_batch(ctx);
			if (got >= 0)
				got = io_reap(ctx, L.cqes, sp->depth, need);
		} else {
			got = io_submit_and_reap(ctx, L.cqes, sp->depth, need);
		}
		if (got < 0) {
			worker_fail(w, got, "submit/reap");
			break;
		}
		rc = account(w, &L, got, &rng);
		if (rc) {
			worker_fail(w, rc, sp->write ? "write completion" : "read completion");
			break;
		}
		n += (uint64_t)got;
		__atomic_store_n(&w->ios, n, __ATOMIC_RELAXED);
		iob_spin_ns(iob_uniform(&rng, sp->think_ns[0], sp->think_ns[1]));
	}
	/* Drain outside the window so that teardown never races an I/O. */
	while (L.free_slots && L.nfree < sp->depth) {
		int got = io_submit_and_reap(ctx, L.cqes, sp->depth, sp->depth - L.nfree);
		if (got <= 0)
			break;
		for (int i = 0; i < got; i++)
			L.free_slots[L.nfree++] = (unsigned)L.cqes[i].user_data;
		n += (uint64_t)got;
	}
out:
	w->total_ios = n;
	free(L.free_slots);
	free(L.ts);
	free(L.cqes);
}

static void *worker_main(void *arg)
{
	struct pipe_worker *w = arg;
	const struct pipe_spec *sp = w->sh->sp;
	io_ctx_t *ctx = NULL;
	int fidx[IOB_MAX_FILES];
	int rc = worker_setup(w, &ctx, fidx);
	pthread_barrier_wait(&w->sh->start);
	if (rc == 0) {
		char *buf = w->sh->buf + (size_t)w->idx * sp->depth * sp->bs;
		if (sp->sync_read)
			run_sync_reads(w, ctx, fidx, buf);
		else
			run_pipeline(w, ctx, fidx, buf);
	}
	if (ctx) {
		io_ctx_stats(ctx, &w->st);
		io_ctx_destroy(ctx);
	}
	return NULL;
}

static int open_files(struct pipe_shared *sh, char *msg, size_t len)
{
	const struct pipe_spec *sp = sh->sp;
	unsigned n = sp->write ? sp->threads : sp->nfiles;
	uint64_t wsize = MIN(iob_cfg->file_size, 64ULL << 20);
	for (unsigned i = 0; i < n; i++) {
		const char *p = sp->write ? iob_scratch_file((int)i, wsize) : iob_data_file((int)i);
		if (!p) {
			snprintf(msg, len, "cannot create data file %u", i);
			return -EIO;
		}
		sh->fds[i] = open(p, (sp->write ? O_RDWR : O_RDONLY) | O_DIRECT);
		if (sh->fds[i] < 0) {
			snprintf(msg, len, "open %s: %s", p, strerror(errno));
			return -errno;
		}
		sh->fsize[i] = sp->write ? wsize : iob_cfg->file_size;
		sh->blocks[i] = sh->fsize[i] / sp->bs;
	}
	return 0;
}

static int pipe_prepare(struct pipe_shared *sh, struct pipe_result *res)
{
	const struct pipe_spec *sp = sh->sp;
	for (int i = 0; i < IOB_MAX_FILES; i++)
		sh->fds[i] = -1;
	if (!sp->threads || !sp->depth || !sp->bs || sp->nfiles > IOB_MAX_FILES ||
	    (sp->write && sp->threads > IOB_MAX_FILES)) {
		snprintf(res->errmsg, sizeof(res->errmsg), "bad spec");
		return -EINVAL;
	}
	int rc = open_files(sh, res->errmsg, sizeof(res->errmsg));
	if (rc)
		return rc;
	sh->buflen = (size_t)sp->threads * sp->depth * sp->bs;
	sh->buf = iob_alloc(sh->buflen);
	if (!sh->buf) {
		snprintf(res->errmsg, sizeof(res->errmsg), "cannot allocate %zu bytes", sh->buflen);
		return -ENOMEM;
	}
	if (sp->registered && sp->backend != IO_BACKEND_AIO && sp->backend != IO_BACKEND_SYNC) {
		struct io_opts o = { .backend = sp->backend, .depth = 1,
				     .flags = IO_F_NO_SINGLE_ISSUER };
		if (io_ctx_create(&o, &sh->donor) == 0 &&
		    io_ctx_register_buffer(sh->donor, sh->buf, sh->buflen) != 0) {
			io_ctx_destroy(sh->donor);
			sh->donor = NULL;
		}
	}
	return 0;
}

static void pipe_release(struct pipe_shared *sh)
{
	if (sh->donor)
		io_ctx_destroy(sh->donor);
	iob_free(sh->buf, sh->buflen);
	for (int i = 0; i < IOB_MAX_FILES; i++)
		if (sh->fds[i] >= 0)
			close(sh->fds[i]);
}

static void sleep_seconds(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Context switches of the whole process (every thread, io-wq included). */
static uint64_t process_csw(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static uint64_t sum_ios(struct pipe_worker *w, unsigned n)
{
	uint64_t s = 0;
	for (unsigned i = 0; i < n; i++)
		s += __atomic_load_n(&w[i].ios, __ATOMIC_RELAXED);
	return s;
}

/* Collect the workers' results after join. */
static void pipe_collect(struct pipe_worker *w, unsigned n, struct pipe_result *res)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < n; i++) {
		iob_hist_merge(&res->lat, &w[i].lat);
		const struct io_stats *st = &w[i].st;
		res->sys_calls += st->sys_enter + st->sys_submit + st->sys_getevents +
				  st->sys_pread + st->sys_pwrite;
		res->fallbacks += st->fallbacks + (st->setup_fallback ? 1 : 0);
		total += w[i].total_ios;
		if (w[i].err && !res->err) {
			res->err = w[i].err;
			snprintf(res->errmsg, sizeof(res->errmsg), "%s", w[i].errmsg);
		}
	}
	res->backend = w[0].backend;
	res->st = w[0].st;
	/* syscalls per I/O over the whole run (drain included) */
	res->st.ios = total;
}

int pipe_run(const struct pipe_spec *sp, struct pipe_result *res)
{
	struct pipe_shared sh = { .sp = sp };
	struct pipe_worker *w = NULL;
	unsigned started = 0;
	memset(res, 0, sizeof(*res));
	int rc = pipe_prepare(&sh, res);
	if (rc)
		goto out;
	w = calloc(sp->threads, sizeof(*w));
	if (!w) {
		rc = -ENOMEM;
		goto out;
	}
	pthread_barrier_init(&sh.start, NULL, sp->threads + 1);
	for (; started < sp->threads; started++) {
		w[started].sh = &sh;
		w[started].idx = started;
		if ((rc = pthread_create(&w[started].tid, NULL, worker_main, &w[started]))) {
			/* cannot reach the barrier count: stop here (fatal for the cell) */
			snprintf(res->errmsg, sizeof(res->errmsg), "pthread_create: %s", strerror(rc));
			fprintf(stderr, "lotus iobench: %s\n", res->errmsg);
			exit(1);
		}
	}
	pthread_barrier_wait(&sh.start);
	uint64_t t0 = clock_now_ns(), c0 = clock_process_cpu_ns(), n0 = sum_ios(w, started);
	uint64_t s0 = process_csw();
	sleep_seconds(sp->seconds);
	sh.stop = 1;
	uint64_t t1 = clock_now_ns(), c1 = clock_process_cpu_ns(), n1 = sum_ios(w, started);
	uint64_t s1 = process_csw();
	for (unsigned i = 0; i < started; i++)
		pthread_join(w[i].tid, NULL);
	pthread_barrier_destroy(&sh.start);
	res->ios = n1 - n0;
	res->secs = (double)(t1 - t0) / 1e9;
	res->cpu_ns = c1 - c0;
	res->csw = s1 - s0;
	pipe_collect(w, started, res);
	rc = res->err;
out:
	if (rc && !res->err)
		res->err = rc;
	free(w);
	pipe_release(&sh);
	return rc;
}

void pipe_row_metrics(struct iob_row *r, const struct pipe_result *res)
{
	double ios = (double)res->ios;
	row_met(r, "iops", res->secs > 0 ? ios / res->secs : 0);
	row_met(r, "cpu_us_per_io", ios > 0 ? (double)res->cpu_ns / 1e3 / ios : 0);
	row_met(r, "lat_mean_us",
		res->lat.count ? (double)res->lat.sum / (double)res->lat.count / 1e3 : 0);
	row_met(r, "lat_p99_us", iob_hist_pct(&res->lat, 99) / 1e3);
	row_met(r, "syscalls_per_io",
		res->st.ios ? (double)res->sys_calls / (double)res->st.ios : 0);
	row_met(r, "csw_per_io", ios > 0 ? (double)res->csw / ios : 0);
	if (res->err) {
		r->status = "error";
		snprintf(r->note, sizeof(r->note), "%s", res->errmsg);
	} else if (res->fallbacks) {
		snprintf(r->note, sizeof(r->note), "layer fell back (%llu context(s)); now %s",
			 (unsigned long long)res->fallbacks, io_backend_name(res->backend));
	}
}

void pipe_spec_defaults(struct pipe_spec *sp)
{
	const struct iob_cfg *c = iob_cfg;
	memset(sp, 0, sizeof(*sp));
	sp->backend = IO_BACKEND_URING;
	sp->depth = c->depth ? c->depth : 32;
	sp->batch_lo = c->batch[0] ? (unsigned)c->batch[0] : sp->depth;
	sp->batch_hi = c->batch[1] ? (unsigned)c->batch[1] : sp->batch_lo;
	sp->bs = c->block_sizes.n ? (size_t)c->block_sizes.v[0] : 4096;
	sp->threads = c->threads.n ? (unsigned)c->threads.v[0] : 1;
	sp->nfiles = c->files.n ? (unsigned)c->files.v[0] : 1;
	sp->think_ns[0] = c->think_us[0] * 1000;
	sp->think_ns[1] = c->think_us[1] * 1000;
	sp->io_think_ns[0] = c->io_think_ns[0];
	sp->io_think_ns[1] = c->io_think_ns[1];
	sp->seconds = c->seconds > 0 ? c->seconds : 1.5;
	sp->layer_cpu_stats = c->layer_cpu_stats;
	sp->no_defer_taskrun = c->no_defer_taskrun;
}
