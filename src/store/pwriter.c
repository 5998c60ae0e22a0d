/*
 * pwriter.c - the page writers (DBWR): N threads, each with a private I/O
 * context, writing pool pages to one file in large coalesced batches.
 *
 * Registration (paper §4.2, "cloned registration"):
 *
 *   pwriter_start (caller's thread)          writer i (its own thread)
 *   -----------------------------            --------------------------
 *   donor = io_ctx_create(NO_SINGLE_ISSUER)
 *   io_ctx_register_buffer(donor, region)    ctx = io_ctx_create(own fault spec)
 *     (registrations = 1, or 0: level 3)     io_ctx_clone_buffers_from(ctx, donor)
 *   start writer i, wait until ready  <----    (clones += 1, or plain buffers)
 *                                            io_ctx_add_file(ctx, fd); ready
 *
 * The donor is only ever read by the clones (the io.h rule: safe while the
 * donor is idle); it is destroyed at stop.  Each writer's ring is used by its
 * thread alone, so a ring that fails (setup, enter, a CQE that says the ring
 * cannot do I/O) falls back to libaio for that writer only - io.c's levels 1
 * and 2, which resubmit what was in flight: no page is lost or written twice
 * in a way that matters (a rewrite of the same bytes).
 *
 * A writer's loop:
 *
 *      +--> wait (cv, interval_ms) <-- pwriter_kick / pwriter_write / stop
 *      |      |
 *      |      +-- jobs queued?      write_pages(job), wake the caller
 *      |      +-- kicked or need()? evict_round() while it makes progress
 *      |             (and no job is queued: a checkpoint never waits long):
 *      |             ops.pick(part i of N) -> victims (locked, dirty)
 *      |             sort by page, write_pages, ops.done(victim, status)
 *      +------+
 *
 * write_pages: runs of pages adjacent in the file AND in memory become one
 * write (at most PW_MAX_RUN bytes); up to depth writes in flight; a run's
 * result applies to all its pages (a short write counts as -EIO).  A round
 * with errors is followed by a pause of interval_ms, so a full disk makes
 * the writers retry slowly instead of spinning.
 *
 * Invariants:
 *  1. Every page handed to write_pages gets exactly one status.
 *  2. ops.done is called exactly once per victim that ops.pick returned.
 *  3. Only writer i touches writers[i].ctx; others read its stats snapshot
 *     under stats_mu.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "store/pwriter.h"

#define PW_DEF_WRITERS   2u
#define PW_DEF_BATCH     256u
#define PW_DEF_DEPTH     256u
#define PW_DEF_INTERVAL  20u
#define PW_MAX_RUN       (1u << 20)   /* bytes per coalesced write */
#define PW_MAX_WRITERS   64u

#define PW_MAX_FILES     8u           /* the main file + pwriter_add_file ones */

/* A job for one writer: write pages to file (or, add_fd >= 0: add that fd to
 * the writer's ring as file `file`).  Synchronous jobs (pwriter_write) live
 * on the caller's stack and are waited for; asynchronous ones
 * (pwriter_submit) are malloc'ed and freed by the writer after cb. */
struct pw_job {
	const struct pw_page *pages;
	size_t n;
	int *status;
	int file, add_fd;
	int rc, done;
	void (*cb)(void *arg, int rc);
	void *cb_arg;
	struct pw_job *next;
};

struct pw_writer {
	struct pwriter *pw;
	unsigned idx;
	pthread_t thread;
	int started, ready, start_rc, inited;
	uint64_t failed_rounds;              /* under stats_mu */
	io_ctx_t *ctx;
	int file;                 /* the main file's index in ctx */
	int files[PW_MAX_FILES];  /* file id -> index in ctx (files[0] = file) */
	char fault[256];
	struct pw_job *jobs, **jobs_tail;   /* under pw->mu */
	unsigned njobs;                      /* atomic: jobs queued (read without mu) */
	uint64_t kick_seen;
	/* scratch, writer thread only */
	struct pw_page *victims;
	int *vstatus;
	uint32_t *order;
	size_t scratch_n;
	/* figures: written by the writer under stats_mu, read by anyone */
	pthread_mutex_t stats_mu;
	struct pwriter_stats st;
};

struct pwriter {
	struct pwriter_opts o;
	io_ctx_t *donor;
	int registered;
	pthread_mutex_t mu;
	pthread_cond_t cv;        /* writers wait here */
	pthread_cond_t done_cv;   /* job callers and pwriter_start wait here */
	int stop;
	uint64_t kick_gen;        /* atomic */
	unsigned sleepers;        /* atomic: writers inside the wait */
	struct pw_writer *w;
	unsigned nfiles;          /* file ids handed out (under mu) */
};

/* ---- writing a set of pages ---- */

static int cmp_by_page(const void *a, const void *b, void *arg)
{
	const struct pw_page *p = arg;
	uint64_t x = p[*(const uint32_t *)a].page, y = p[*(const uint32_t *)b].page;
	return x < y ? -1 : x > y;
}

static int scratch_reserve(struct pw_writer *w, size_t n)
{
	if (n <= w->scratch_n)
		return 0;
	uint32_t *ord = realloc(w->order, n * sizeof(*ord));
	if (!ord)
		return -ENOMEM;
	w->order = ord;
	w->scratch_n = n;
	return 0;
}

static void stats_snapshot(struct pw_writer *w, uint64_t cpu0)
{
	struct io_stats io;
	io_ctx_stats(w->ctx, &io);
	pthread_mutex_lock(&w->stats_mu);
	w->st.backend = io_backend_name(io_ctx_backend(w->ctx));
	w->st.ios = io.ios;
	w->st.bytes = io.bytes;
	w->st.fixed_ios = io.fixed_ios;
	w->st.io_cpu_ns = io.cpu_ns;
	w->st.syscalls = io.sys_enter + io.sys_submit + io.sys_getevents + io.sys_pwrite;
	w->st.fallbacks = io.fallbacks;
	w->st.setup_fallback = io.setup_fallback;
	w->st.cloned |= io.cloned_buffers;   /* sticky: a fallback drops the clone */
	if (cpu0)
		w->st.cpu_ns += clock_thread_cpu_ns() - cpu0;
	pthread_mutex_unlock(&w->stats_mu);
}

/* Reap at least min completions and apply them to status[]. */
static int reap_runs(struct pw_writer *w, const struct pw_page *pages, const uint32_t *order,
		     int *status, unsigned *inflight, unsigned min)
{
	struct io_cqe cqes[64];
	uint32_t ps = w->pw->o.page_size;
	while (*inflight && min) {
		int n = io_reap(w->ctx, cqes, ARRAY_SIZE(cqes), MIN(min, *inflight));
		if (n < 0)
			return n;
		if (n == 0)
			return -EIO;   /* nothing can complete: should not happen */
		for (int i = 0; i < n; i++) {
			unsigned first = (unsigned)cqes[i].user_data;
			unsigned k = (unsigned)(cqes[i].user_data >> 32);
			int st = cqes[i].res == (int64_t)k * ps ? 0
				 : cqes[i].res < 0 ? (int)cqes[i].res : -EIO;
			for (unsigned j = 0; j < k; j++)
				status[order[first + j]] = st;
		}
		*inflight -= (unsigned)n;
		min = (unsigned)n >= min ? 0 : min - (unsigned)n;
	}
	return 0;
}

/* Write pages[0..n) (any order); status[i] per page.  0 or the first error. */
static int write_pages(struct pw_writer *w, int file, const struct pw_page *pages, size_t n,
		       int *status)
{
	uint32_t ps = w->pw->o.page_size;
	unsigned max_run = MAX(PW_MAX_RUN / ps, 1u), inflight = 0;
	int rc = scratch_reserve(w, n);
	for (size_t i = 0; i < n; i++)
		status[i] = rc ? rc : 1;   /* 1: not finished yet */
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		w->order[i] = (uint32_t)i;
	qsort_r(w->order, n, sizeof(*w->order), cmp_by_page, (void *)pages);
	for (size_t i = 0; i < n && rc == 0;) {
		const struct pw_page *p0 = &pages[w->order[i]];
		unsigned k = 1;
		while (i + k < n && k < max_run) {
			const struct pw_page *q = &pages[w->order[i + k]];
			if (q->page != p0->page + k || (char *)q->buf != (char *)p0->buf + (size_t)k * ps)
				break;
			k++;
		}
		rc = io_prep_write(w->ctx, file, p0->buf, (size_t)k * ps, (off_t)(p0->page * ps),
				   (uint64_t)i | (uint64_t)k << 32);
		if (rc == -EAGAIN) {   /* the ring is full: issue, take back half */
			rc = io_submit_batch(w->ctx);
			if (rc >= 0)
				rc = reap_runs(w, pages, w->order, status, &inflight,
					       MAX(inflight / 2, 1u));
			continue;
		}
		if (rc < 0)
			break;
		inflight++;
		i += k;
	}
	if (rc < 0)
		log_error("pwriter %u: preparing a write failed: %s", w->idx, strerror(-rc));
	int rc2 = io_submit_batch(w->ctx);
	if (rc2 < 0 && !rc)
		rc = rc2;
	rc2 = reap_runs(w, pages, w->order, status, &inflight, inflight);
	if (rc2 < 0 && !rc)
		rc = rc2;
	int first_err = 0;
	uint64_t written = 0, failed = 0;
	for (size_t i = 0; i < n; i++) {
		if (status[i] == 1)   /* never issued (an error above) */
			status[i] = rc < 0 ? rc : -EIO;
		if (status[i] == 0) {
			written++;
		} else {
			failed++;
			if (!first_err)
				first_err = status[i];
		}
	}
	pthread_mutex_lock(&w->stats_mu);
	w->st.pages += written;
	w->st.write_errors += failed;
	uint64_t rounds_failed = failed ? ++w->failed_rounds : 0;
	pthread_mutex_unlock(&w->stats_mu);
	/* a full disk fails every retry: say so at first, then once in 1000 */
	if (failed && (rounds_failed <= 5 || rounds_failed % 1000 == 0))
		log_warn("pwriter %u: %" PRIu64 " of %zu page writes failed (%s); the pages stay "
			 "in memory and are written again later", w->idx, failed, n,
			 strerror(-first_err));
	return first_err;
}

/* ---- the writer thread ---- */

/* One round of eviction.  Returns 1 if it freed or wrote anything, 0 if
 * there was nothing to take, -1 if writes failed (pause before the next). */
static int evict_round(struct pw_writer *w)
{
	struct pwriter *pw = w->pw;
	size_t dropped = 0, max = pw->o.batch;
	size_t n = pw->o.ops.pick(pw->o.ops.arg, w->idx, pw->o.nwriters, w->victims, max, &dropped);
	int rc = 0;
	if (n)
		rc = write_pages(w, w->file, w->victims, n, w->vstatus);
	for (size_t i = 0; i < n; i++)
		pw->o.ops.done(pw->o.ops.arg, &w->victims[i], w->vstatus[i]);
	pthread_mutex_lock(&w->stats_mu);
	w->st.rounds++;
	w->st.dropped += dropped;
	pthread_mutex_unlock(&w->stats_mu);
	return rc ? -1 : n + dropped > 0;
}

static void run_jobs(struct pw_writer *w)
{
	struct pwriter *pw = w->pw;
	while (w->jobs) {
		struct pw_job *j = w->jobs;
		w->jobs = j->next;
		if (!w->jobs)
			w->jobs_tail = &w->jobs;
		__atomic_fetch_sub(&w->njobs, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&pw->mu);
		uint64_t cpu0 = clock_thread_cpu_ns();
		if (j->add_fd >= 0) {
			int idx = io_ctx_add_file(w->ctx, j->add_fd);
			if (idx >= 0)
				w->files[j->file] = idx;
			j->rc = idx < 0 ? idx : 0;
		} else {
			int idx = j->file >= 0 && j->file < (int)PW_MAX_FILES ? w->files[j->file] : -1;
			j->rc = idx < 0 ? -EBADF : write_pages(w, idx, j->pages, j->n, j->status);
			uint64_t ok = 0;
			for (size_t i = 0; i < j->n; i++) {
				if (idx < 0)
					j->status[i] = -EBADF;
				ok += j->status[i] == 0;
			}
			pthread_mutex_lock(&w->stats_mu);
			w->st.job_pages += ok;
			pthread_mutex_unlock(&w->stats_mu);
		}
		stats_snapshot(w, cpu0);
		if (j->cb) {   /* asynchronous: nobody waits on it */
			j->cb(j->cb_arg, j->rc);
			free(j);
			pthread_mutex_lock(&pw->mu);
			continue;
		}
		pthread_mutex_lock(&pw->mu);
		j->done = 1;
		pthread_cond_broadcast(&pw->done_cv);
	}
}

static int writer_setup(struct pw_writer *w)
{
	struct pwriter *pw = w->pw;
	struct io_opts io = { .backend = pw->o.backend, .depth = pw->o.depth,
			      .fault = w->fault[0] ? w->fault : NULL };
	int rc = io_ctx_create(&io, &w->ctx);
	if (rc < 0) {
		log_error("pwriter %u: no I/O context: %s", w->idx, strerror(-rc));
		return rc;
	}
	if (pw->registered && io_ctx_backend(w->ctx) == IO_BACKEND_URING &&
	    io_ctx_clone_buffers_from(w->ctx, pw->donor) < 0)
		log_warn("pwriter %u: cloning the pool registration failed: this writer writes "
			 "from plain buffers", w->idx);
	w->file = io_ctx_add_file(w->ctx, pw->o.fd);
	if (w->file < 0)
		return w->file;
	for (unsigned i = 0; i < PW_MAX_FILES; i++)
		w->files[i] = -1;
	w->files[0] = w->file;
	w->victims = calloc(pw->o.batch, sizeof(*w->victims));
	w->vstatus = calloc(pw->o.batch, sizeof(*w->vstatus));
	if (!w->victims || !w->vstatus || scratch_reserve(w, pw->o.batch))
		return -ENOMEM;
	stats_snapshot(w, 0);
	return 0;
}

static void *writer_main(void *arg)
{
	struct pw_writer *w = arg;
	struct pwriter *pw = w->pw;
	int rc = writer_setup(w);
	pthread_mutex_lock(&pw->mu);
	w->start_rc = rc;
	w->ready = 1;
	pthread_cond_broadcast(&pw->done_cv);
	unsigned pause_ms = 0;   /* after a round without progress or with errors */
	while (rc == 0 && !pw->stop) {
		run_jobs(w);
		uint64_t gen = __atomic_load_n(&pw->kick_gen, __ATOMIC_ACQUIRE);
		int kicked = gen != w->kick_seen;
		if (!pause_ms && pw->o.ops.pick && (kicked || pw->o.ops.need(pw->o.ops.arg))) {
			w->kick_seen = gen;
			pthread_mutex_unlock(&pw->mu);
			uint64_t cpu0 = clock_thread_cpu_ns();
			int r;
			do
				r = evict_round(w);
			while (r > 0 && !__atomic_load_n(&pw->stop, __ATOMIC_RELAXED) &&
			       !__atomic_load_n(&w->njobs, __ATOMIC_RELAXED) &&   /* checkpoints wait */
			       pw->o.ops.need(pw->o.ops.arg));
			stats_snapshot(w, cpu0);
			/* nothing to take in this part (pinned, or the other writers'
			 * pages): look again in a millisecond, kicks or not; errors:
			 * retry after interval_ms */
			pause_ms = r < 0 ? pw->o.interval_ms : r == 0 ? 1 : 0;
			pthread_mutex_lock(&pw->mu);
			continue;
		}
		struct timespec dl;
		clock_deadline_in(CLOCK_MONOTONIC, &dl, pause_ms ? pause_ms : pw->o.interval_ms);
		__atomic_fetch_add(&pw->sleepers, 1, __ATOMIC_SEQ_CST);
		while (!pw->stop && !w->jobs &&
		       (pause_ms || __atomic_load_n(&pw->kick_gen, __ATOMIC_SEQ_CST) == w->kick_seen))
			if (pthread_cond_timedwait(&pw->cv, &pw->mu, &dl) == ETIMEDOUT)
				break;
		__atomic_fetch_sub(&pw->sleepers, 1, __ATOMIC_SEQ_CST);
		pause_ms = 0;
	}
	run_jobs(w);   /* nobody waits forever on a writer that stops */
	pthread_mutex_unlock(&pw->mu);
	return NULL;
}

/* ---- public ---- */

/* "W=SPEC;W=SPEC": writer w's part, or "". */
static void fault_for(const char *all, unsigned w, char *out, size_t len)
{
	out[0] = '\0';
	if (!all)
		return;
	for (const char *p = all; *p;) {
		char *end;
		unsigned long id = strtoul(p, &end, 10);
		size_t n = strcspn(p, ";");
		if (end != p && *end == '=' && id == w && (size_t)(end + 1 - p) <= n)
			snprintf(out, len, "%.*s", (int)(n - (size_t)(end + 1 - p)), end + 1);
		p += n + (p[n] == ';');
	}
}

int pwriter_start(const struct pwriter_opts *o, pwriter_t **out)
{
	*out = NULL;
	if (!o || o->fd < 0 || !o->page_size || o->nwriters > PW_MAX_WRITERS ||
	    (o->ops.pick && (!o->ops.done || !o->ops.need)))
		return -EINVAL;
	struct pwriter *pw = calloc(1, sizeof(*pw));
	if (!pw)
		return -ENOMEM;
	pw->o = *o;
	pw->o.nwriters = o->nwriters ? o->nwriters : PW_DEF_WRITERS;
	pw->o.batch = o->batch ? o->batch : PW_DEF_BATCH;
	pw->o.depth = o->depth ? o->depth : PW_DEF_DEPTH;
	pw->o.interval_ms = o->interval_ms ? o->interval_ms : PW_DEF_INTERVAL;
	pw->nfiles = 1;
	const char *faults = o->fault ? o->fault : getenv("LOTUS_PW_FAULT");
	pthread_mutex_init(&pw->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pw->cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&pw->done_cv, NULL);
	pw->w = calloc(pw->o.nwriters, sizeof(*pw->w));
	if (!pw->w) {
		free(pw);
		return -ENOMEM;
	}
	/* The donor: never used for I/O, only to hold the registration. */
	if (o->region && o->region_len) {
		struct io_opts d = { .backend = o->backend, .depth = 4,
				     .flags = IO_F_NO_SINGLE_ISSUER | IO_F_NO_CPU_STATS };
		if (io_ctx_create(&d, &pw->donor) == 0 && io_ctx_backend(pw->donor) == IO_BACKEND_URING &&
		    io_ctx_register_buffer(pw->donor, o->region, o->region_len) == 0 &&
		    (!o->region2 || io_ctx_register_buffer(pw->donor, o->region2, o->region2_len) == 0)) {
			struct io_stats ds;
			io_ctx_stats(pw->donor, &ds);
			pw->registered = ds.reg_buffers;
		}
		if (!pw->registered && pw->donor && io_ctx_backend(pw->donor) == IO_BACKEND_URING)
			log_warn("pwriter: the buffer pool (%zu bytes) could not be registered: the "
				 "page writers write from plain buffers", o->region_len);
	}
	int rc = 0;
	for (unsigned i = 0; i < pw->o.nwriters && rc == 0; i++) {
		struct pw_writer *w = &pw->w[i];
		w->pw = pw;
		w->idx = i;
		w->file = -1;
		w->jobs_tail = &w->jobs;
		pthread_mutex_init(&w->stats_mu, NULL);
		w->inited = 1;
		fault_for(faults, i, w->fault, sizeof(w->fault));
		rc = -pthread_create(&w->thread, NULL, writer_main, w);
		if (rc)
			break;
		w->started = 1;
		/* one at a time: clones read the donor, which must be idle */
		pthread_mutex_lock(&pw->mu);
		while (!w->ready)
			pthread_cond_wait(&pw->done_cv, &pw->mu);
		rc = w->start_rc;
		pthread_mutex_unlock(&pw->mu);
	}
	if (rc) {
		log_error("pwriter: starting %u page writers failed: %s", pw->o.nwriters,
			  strerror(-rc));
		pwriter_stop(pw);
		return rc;
	}
	*out = pw;
	return 0;
}

void pwriter_stop(pwriter_t *pw)
{
	if (!pw)
		return;
	pthread_mutex_lock(&pw->mu);
	__atomic_store_n(&pw->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&pw->cv);
	pthread_mutex_unlock(&pw->mu);
	for (unsigned i = 0; i < pw->o.nwriters; i++) {
		struct pw_writer *w = &pw->w[i];
		if (w->started)
			pthread_join(w->thread, NULL);
		io_ctx_destroy(w->ctx);
		free(w->victims);
		free(w->vstatus);
		free(w->order);
		if (w->inited)
			pthread_mutex_destroy(&w->stats_mu);
	}
	io_ctx_destroy(pw->donor);
	free(pw->w);
	pthread_mutex_destroy(&pw->mu);
	pthread_cond_destroy(&pw->cv);
	pthread_cond_destroy(&pw->done_cv);
	free(pw);
}

void pwriter_kick(pwriter_t *pw)
{
	if (!pw)
		return;
	__atomic_fetch_add(&pw->kick_gen, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pw->sleepers, __ATOMIC_SEQ_CST)) {
		pthread_mutex_lock(&pw->mu);
		pthread_cond_broadcast(&pw->cv);
		pthread_mutex_unlock(&pw->mu);
	}
}

unsigned pwriter_count(const pwriter_t *pw)
{
	return pw ? pw->o.nwriters : 0;
}

int pwriter_registered(const pwriter_t *pw)
{
	return pw ? pw->registered : 0;
}

io_ctx_t *pwriter_donor(const pwriter_t *pw)
{
	return pw && pw->registered ? pw->donor : NULL;
}

/* Queue j on writer w (pw->mu held).  -ESHUTDOWN once stopping. */
static int enqueue(struct pwriter *pw, unsigned w, struct pw_job *j)
{
	struct pw_writer *wr = &pw->w[w % pw->o.nwriters];
	if (pw->stop)
		return -ESHUTDOWN;
	*wr->jobs_tail = j;
	wr->jobs_tail = &j->next;
	__atomic_fetch_add(&wr->njobs, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&pw->cv);
	return 0;
}

static int run_sync(struct pwriter *pw, unsigned w, struct pw_job *j)
{
	pthread_mutex_lock(&pw->mu);
	int rc = enqueue(pw, w, j);
	while (rc == 0 && !j->done)
		pthread_cond_wait(&pw->done_cv, &pw->mu);
	pthread_mutex_unlock(&pw->mu);
	return rc ? rc : j->rc;
}

int pwriter_write(pwriter_t *pw, unsigned w, const struct pw_page *pages, size_t n, int *status)
{
	if (!n)
		return 0;
	struct pw_job j = { .pages = pages, .n = n, .status = status, .add_fd = -1 };
	return run_sync(pw, w, &j);
}

int pwriter_add_file(pwriter_t *pw, int fd)
{
	pthread_mutex_lock(&pw->mu);
	int id = pw->nfiles < PW_MAX_FILES ? (int)pw->nfiles++ : -EMFILE;
	pthread_mutex_unlock(&pw->mu);
	for (unsigned i = 0; id >= 0 && i < pw->o.nwriters; i++) {
		struct pw_job j = { .file = id, .add_fd = fd };
		int rc = run_sync(pw, i, &j);
		if (rc < 0)
			return rc;
	}
	return id;
}

int pwriter_submit(pwriter_t *pw, unsigned w, int file, const struct pw_page *pages, size_t n,
		   int *status, void (*cb)(void *arg, int rc), void *arg)
{
	struct pw_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	*j = (struct pw_job){ .pages = pages, .n = n, .status = status, .file = file, .add_fd = -1,
			      .cb = cb, .cb_arg = arg };
	pthread_mutex_lock(&pw->mu);
	int rc = enqueue(pw, w, j);
	pthread_mutex_unlock(&pw->mu);
	if (rc)
		free(j);
	return rc;
}

void pwriter_stats(pwriter_t *pw, unsigned i, struct pwriter_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!pw || i >= pw->o.nwriters)
		return;
	struct pw_writer *w = &pw->w[i];
	pthread_mutex_lock(&w->stats_mu);
	*out = w->st;
	pthread_mutex_unlock(&w->stats_mu);
}
