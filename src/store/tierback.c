/*
 * tierback.c - the backing files of a tiered store: the home of every logical
 * page, the synchronous miss read, and the page writers' eviction glue.
 *
 * where[page] (one byte per logical page, MAP_NORESERVE) says where the
 * latest copy of a non-resident page is:
 *
 *        ZERO ----------------------------+  (never written: read_page says 1,
 *          |  recovery: tierback_set_home |   the store zero-fills)
 *          v                              |
 *     IMAGE_A / IMAGE_B                   |
 *          |  evicted dirty: written to pages.swap by a page writer,
 *          v  then where = SWAP (tb_done, before store_evict_done)
 *        SWAP <---------------------------+
 *
 * Invariants:
 *  1. where[p] changes only while p is LOCKED for eviction (tb_done) or
 *     before the server serves (recovery); read_page reads it while p is
 *     LOCKED for its miss.  So a miss never sees a home that is being
 *     written.
 *  2. A page is non-resident only if where[p] holds its latest bytes: the
 *     store drops only clean pages (equal to their home), and a dirty page
 *     leaves memory only after its swap write succeeded (status 0).
 *  3. Checkpoints never change where[]: an image write is a copy of a
 *     resident page, whose home stays valid (it is not overwritten: a page
 *     whose home is image X is not stale for X, so X's checkpoints skip it).
 *  4. crc[p] is the CRC32C of the bytes at p's home whenever where[p] is
 *     not ZERO: set with where[] (tb_done: of the frame just written, still
 *     LOCKED, so the bytes are the ones on disk; recovery: the image's
 *     pages-X.crc entry, which recovery has just checked).  By 3 an image
 *     page that is some page's home is never rewritten, so its entry stays
 *     true.
 *
 * Checksums.  Every miss read and every prefetch read is checked against
 * crc[p] (tb_check) before the store sees the bytes; a mismatch is an I/O
 * error for that request (-EIO: the page stays non-resident, so the next
 * request reads it again and fails again), counted (swap_crc_errors,
 * image_crc_errors) and logged at a limited rate.  Because the checkpoint
 * reads a non-resident page through the same miss, a page that fails the
 * check fails that checkpoint (ckpt.c keeps the previous image in effect and
 * the log untruncated): rot is never copied into an image.  The table lives
 * in DRAM (4 bytes per logical page, MAP_NORESERVE like where[]) and is not
 * made durable on purpose: pages.swap is truncated at every start and no
 * recovery reads it, so the table is needed exactly as long as the file it
 * describes, and a crash loses both together.  The page layout and the swap
 * file's format stay as they were (a page-sized write straight from the
 * frame, WRITE_FIXED, with no room for a trailer); the images keep their own
 * CRC files (ckpt_files.c).
 *
 * The miss read is the paper's foreground path: one pread (io_read_sync) on
 * the thread that missed, off io_uring by design.  Reader contexts are a
 * small array of sync-backend io_ctx, one per thread slot, each behind its
 * own mutex (uncontended unless more threads than slots miss at once).
 *
 * Scans take the direct path instead: tb_read_batch (the store's read_batch,
 * for store_prefetch) preps one read per page from its home on the calling
 * thread's own io_ctx (io_uring, libaio with LOTUS_IO=aio or when the ring
 * cannot be made; created on that thread when it first prefetches, freed with
 * the tierback), submits once and reaps all.  LOTUS_TIER_PREFETCH=0 leaves
 * read_batch unset: scans then miss page by page.  The miss fault
 * (LOTUS_TIER_FAULT miss:...) applies to prefetch reads too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "io/io.h"
#include "store/pwriter.h"
#include "store/tierback.h"

#define TB_READERS   16u
#define TB_HIST      48u
#define TB_PF_DEPTH  256u          /* a prefetch batch (store_prefetch's maximum) */
#define TB_CKPT_PAGES 4096u       /* the checkpoint's staging (ckpt's default max_inflight) */
#define TB_LOG_FIRST 10u          /* checksum mismatches logged one by one, then ... */
#define TB_LOG_GAP_NS (10ull * 1000000000u)   /* ... at most one line per 10 s */
#define LOAD(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v)    __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

_Static_assert(sizeof(struct pw_page) == sizeof(struct store_victim) &&
	       offsetof(struct pw_page, page) == offsetof(struct store_victim, page) &&
	       offsetof(struct pw_page, frame) == offsetof(struct store_victim, frame) &&
	       offsetof(struct pw_page, buf) == offsetof(struct store_victim, buf),
	       "a page writer's page is a store victim");

struct reader {
	pthread_mutex_t mu;
	io_ctx_t *ctx;
	int file[3];              /* image a, image b, swap: io_ctx file index or -1 */
} __attribute__((aligned(CACHELINE)));

/* LOTUS_TIER_FAULT "what:N[:ERRNO[:COUNT]]" */
struct tb_fault {
	uint64_t nth, count;      /* nth 0: off; count 0: every one from nth on */
	int err;
	uint64_t seen;            /* atomic */
};

struct tierback {
	struct tierback_opts o;
	uint64_t npages;
	uint8_t *where;
	size_t where_bytes;
	uint32_t *crc;            /* per logical page: CRC32C of its home's copy (invariant 4) */
	size_t crc_bytes;
	store_t *st;
	pwriter_t *pw;
	int swap_fd, img_fd[2];
	void *staging;            /* the checkpoint's copies, registered with the pool */
	size_t staging_bytes;
	uint64_t target;          /* the writers evict while free frames < target */
	struct reader r[TB_READERS];
	struct tb_fault fmiss, fevict;
	/* figures (atomic) */
	uint64_t reads, read_errors, read_ns_sum, hist[TB_HIST];
	/* scan prefetch: one io_ctx per thread that prefetches (tb_pf_ctx) */
	unsigned id;
	pthread_mutex_t pf_mu;
	struct pf_ctx *pf_list;
	uint64_t pf_reads, pf_errors, pf_ns_sum;
	/* checksum mismatches (atomic): [0] pages.swap, [1] an image; and the
	 * log's rate limit: the last line's time, mismatches not logged since */
	uint64_t crc_bad[2], crc_log_ns, crc_quiet;
	/* misses that do not block (tb_ring): reads, failures, latency; the
	 * reads in flight after each submit (sum, samples, max); parked
	 * requests (the memory server's count); clones of the pool's
	 * registration are made one at a time (ring_mu) */
	uint64_t as_reads, as_errors, as_ns_sum, as_hist[TB_HIST];
	uint64_t as_depth_sum, as_depth_n, as_depth_max, as_parked;
	pthread_mutex_t ring_mu;
};

struct tb_slot {
	uint64_t page, tag, t0;
	void *buf;
	unsigned home;
};

struct tb_ring {
	struct tierback *tb;
	io_ctx_t *ctx;
	int file[3];
	unsigned depth, inflight, nfree, nprep;
	struct tb_slot *slot;
	unsigned *free;           /* free slot indexes */
	struct io_cqe *cqe;
};

/* A thread's prefetch ring (or libaio), made on the thread on first use. */
struct pf_ctx {
	struct pf_ctx *next;
	io_ctx_t *ctx;
	int file[3];
};
static __thread struct pf_ctx *tb_pf;
static __thread unsigned tb_pf_id;
static unsigned tb_ids;

static __thread unsigned tb_slot = UINT32_MAX;
static unsigned tb_next_slot;

/* ---- faults ---- */

static void fault_parse(struct tierback *tb)
{
	const char *e = getenv("LOTUS_TIER_FAULT");
	char spec[256];
	if (!e || !*e)
		return;
	snprintf(spec, sizeof(spec), "%s", e);
	char *save = NULL;
	for (char *t = strtok_r(spec, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char what[16] = "", err[24] = "";
		unsigned long long n = 0, count = 1;
		if (sscanf(t, "%15[a-z]:%llu:%23[A-Z0-9]:%llu", what, &n, err, &count) < 2 || !n) {
			log_warn("LOTUS_TIER_FAULT: '%s' is not what:N[:ERRNO[:COUNT]]; ignored", t);
			continue;
		}
		struct tb_fault *f = !strcmp(what, "miss") ? &tb->fmiss
				     : !strcmp(what, "evict") ? &tb->fevict : NULL;
		if (!f) {
			log_warn("LOTUS_TIER_FAULT: unknown fault '%s' (miss, evict); ignored", what);
			continue;
		}
		f->nth = n;
		f->count = count;
		f->err = !err[0] ? EIO : !strcmp(err, "EIO") ? EIO : !strcmp(err, "ENOSPC") ? ENOSPC
			 : atoi(err) > 0 ? atoi(err) : EIO;
	}
}

/* 0, or the errno this event is to fail with. */
static int fault_hit(struct tb_fault *f)
{
	if (!f->nth)
		return 0;
	uint64_t k = ADD(&f->seen, 1) + 1;
	if (k < f->nth || (f->count && k >= f->nth + f->count))
		return 0;
	return f->err;
}

/* ---- the store's hooks ---- */

static const char *home_name(unsigned home)
{
	return home == TIER_HOME_SWAP ? "pages.swap" : home == TIER_HOME_IMAGE_A ? "pages-a.dat"
	       : home == TIER_HOME_IMAGE_B ? "pages-b.dat" : "no file";
}

/* Log this checksum mismatch?  The first TB_LOG_FIRST, then one per
 * TB_LOG_GAP_NS; *quiet gets the number not logged since the last line. */
static int crc_log_due(struct tierback *tb, uint64_t seen, uint64_t *quiet)
{
	*quiet = 0;
	if (seen <= TB_LOG_FIRST)
		return 1;
	uint64_t now = clock_now_ns(), last = LOAD(&tb->crc_log_ns);
	if (now - last < TB_LOG_GAP_NS ||
	    !__atomic_compare_exchange_n(&tb->crc_log_ns, &last, now, false, __ATOMIC_RELAXED,
					 __ATOMIC_RELAXED)) {
		ADD(&tb->crc_quiet, 1);
		return 0;
	}
	*quiet = __atomic_exchange_n(&tb->crc_quiet, 0, __ATOMIC_RELAXED);
	return 1;
}

/* Page `page` was just read from `home` into buf: 0 if it is the copy that
 * was put there (crc[page]), else -EIO, counted and logged (rate-limited).
 * Any thread; the page is LOCKED by the caller. */
static int tb_check(struct tierback *tb, uint64_t page, unsigned home, const void *buf,
		    const char *what)
{
	uint32_t want = LOAD(&tb->crc[page]), got = crc32c(0, buf, tb->o.page_size);
	if (got == want)
		return 0;
	ADD(&tb->crc_bad[home == TIER_HOME_SWAP ? 0 : 1], 1);
	uint64_t seen = LOAD(&tb->crc_bad[0]) + LOAD(&tb->crc_bad[1]), quiet;
	if (crc_log_due(tb, seen, &quiet))
		log_error("tier: page %" PRIu64 " read from %s (%s) fails its checksum (CRC32C "
			  "%08x, expected %08x): the file is damaged; the request gets an I/O "
			  "error and checkpoints fail while the page is needed (the previous "
			  "one stays in effect); restart the server to rebuild the page from "
			  "its checkpoint and the log (mismatch %" PRIu64 "; %" PRIu64 " not "
			  "logged since the last line)", page, home_name(home), what, got, want,
			  seen, quiet);
	return -EIO;
}

static unsigned hist_bucket(uint64_t ns)
{
	unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
	return b < TB_HIST ? b : TB_HIST - 1;
}

static int tb_read_page(void *arg, uint64_t page, void *buf)
{
	struct tierback *tb = arg;
	if (page >= tb->npages)
		return -EINVAL;
	unsigned home = LOAD(&tb->where[page]);
	if (home == TIER_HOME_ZERO)
		return 1;
	int err = fault_hit(&tb->fmiss);
	if (err) {
		ADD(&tb->read_errors, 1);
		log_info("tier: fault injection: the miss read of page %" PRIu64 " fails with %s",
			 page, strerror(err));
		return -err;
	}
	if (tb_slot == UINT32_MAX)
		tb_slot = ADD(&tb_next_slot, 1) % TB_READERS;
	struct reader *r = &tb->r[tb_slot];
	uint32_t ps = tb->o.page_size;
	uint64_t t0 = clock_now_ns();
	ssize_t n = -EBADF;
	pthread_mutex_lock(&r->mu);
	if (r->ctx && r->file[home - 1] >= 0)
		n = io_read_sync(r->ctx, r->file[home - 1], buf, ps, (off_t)(page * ps));
	pthread_mutex_unlock(&r->mu);
	uint64_t ns = clock_now_ns() - t0;
	if (n != (ssize_t)ps) {
		if (ADD(&tb->read_errors, 1) < 10)
			log_error("tier: reading page %" PRIu64 " from %s failed: %s", page,
				  home_name(home), n < 0 ? strerror((int)-n) : "short read");
		return n < 0 ? (int)n : -EIO;
	}
	if (tb_check(tb, page, home, buf, "a miss") < 0) {
		ADD(&tb->read_errors, 1);
		return -EIO;
	}
	ADD(&tb->reads, 1);
	ADD(&tb->read_ns_sum, ns);
	ADD(&tb->hist[hist_bucket(ns)], 1);
	return 0;
}

static struct pf_ctx *pf_ctx_get(struct tierback *tb)
{
	if (tb_pf && tb_pf_id == tb->id)
		return tb_pf;
	struct pf_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	struct io_opts io = { .backend = IO_BACKEND_AUTO, .depth = TB_PF_DEPTH };
	int rc = io_ctx_create(&io, &c->ctx);
	if (rc < 0) {
		free(c);
		return NULL;
	}
	int fds[3] = { tb->img_fd[0], tb->img_fd[1], tb->swap_fd };
	for (unsigned f = 0; f < 3; f++)
		c->file[f] = fds[f] >= 0 ? io_ctx_add_file(c->ctx, fds[f]) : -1;
	pthread_mutex_lock(&tb->pf_mu);
	c->next = tb->pf_list;
	tb->pf_list = c;
	pthread_mutex_unlock(&tb->pf_mu);
	tb_pf = c;
	tb_pf_id = tb->id;
	return c;
}

/* store_tier_opts.read_batch: prep a read per page from its home, submit
 * once, reap all.  res[i] 0 read, 1 no copy, <0 failed. */
static int tb_read_batch(void *arg, const uint64_t *pages, void *const *bufs, unsigned n,
			 int *res)
{
	struct tierback *tb = arg;
	struct pf_ctx *c = pf_ctx_get(tb);
	if (!c)
		return -ENOMEM;
	uint32_t ps = tb->o.page_size;
	uint64_t t0 = clock_now_ns();
	unsigned nprep = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned home = pages[i] < tb->npages ? LOAD(&tb->where[pages[i]]) : 0;
		int err;
		if (pages[i] >= tb->npages) {
			res[i] = -EINVAL;
		} else if (home == TIER_HOME_ZERO) {
			res[i] = 1;
		} else if ((err = fault_hit(&tb->fmiss)) != 0) {
			log_info("tier: fault injection: the prefetch read of page %" PRIu64
				 " fails with %s", pages[i], strerror(err));
			res[i] = -err;
		} else if (c->file[home - 1] < 0 ||
			   io_prep_read(c->ctx, c->file[home - 1], bufs[i], ps,
					(off_t)(pages[i] * ps), i) < 0) {
			res[i] = -EIO;
		} else {
			res[i] = -EINPROGRESS;
			nprep++;
		}
	}
	if (nprep) {
		struct io_cqe cqe[TB_PF_DEPTH];
		unsigned got = 0;
		int rc = io_submit_and_reap(c->ctx, cqe, TB_PF_DEPTH, nprep);
		while (rc >= 0) {
			for (int j = 0; j < rc; j++) {
				unsigned i = (unsigned)cqe[j].user_data;
				res[i] = cqe[j].res == (int64_t)ps ? 0 : cqe[j].res < 0 ? (int)cqe[j].res : -EIO;
				if (res[i] == 0)
					res[i] = tb_check(tb, pages[i], LOAD(&tb->where[pages[i]]),
							  bufs[i], "a scan prefetch");
			}
			got += (unsigned)rc;
			if (got >= nprep)
				break;
			rc = io_reap(c->ctx, cqe, TB_PF_DEPTH, 1);
		}
		if (rc < 0) {   /* the ring failed: drain what is in flight, fail the rest */
			while (io_inflight(c->ctx) && io_reap(c->ctx, cqe, TB_PF_DEPTH, 1) >= 0)
				;
			for (unsigned i = 0; i < n; i++)
				if (res[i] == -EINPROGRESS || res[i] == 0)
					res[i] = -EIO;
		}
	}
	unsigned ok = 0, bad = 0;
	for (unsigned i = 0; i < n; i++) {
		ok += res[i] == 0;
		bad += res[i] < 0;
		if (res[i] == -EINPROGRESS)
			res[i] = -EIO;
	}
	ADD(&tb->pf_reads, ok);
	ADD(&tb->pf_errors, bad);
	ADD(&tb->pf_ns_sum, clock_now_ns() - t0);
	if (bad && LOAD(&tb->pf_errors) <= 10)
		log_warn("tier: %u of %u prefetch reads failed (they will miss)", bad, n);
	return 0;
}

/* ---- the rings of misses that do not block ---- */

int tierback_ring_open(tierback_t *tb, unsigned depth, tb_ring_t **out)
{
	struct tb_ring *r = calloc(1, sizeof(*r));
	*out = NULL;
	if (!r)
		return -ENOMEM;
	depth = MAX(depth, 1u);
	r->tb = tb;
	r->depth = depth;
	r->slot = calloc(depth, sizeof(*r->slot));
	r->free = calloc(depth, sizeof(*r->free));
	r->cqe = calloc(depth, sizeof(*r->cqe));
	struct io_opts io = { .backend = IO_BACKEND_AUTO, .depth = depth, .flags = IO_F_IOWQ_DEPTH };
	int rc = !r->slot || !r->free || !r->cqe ? -ENOMEM : io_ctx_create(&io, &r->ctx);
	if (rc < 0) {
		tierback_ring_close(r);
		return rc;
	}
	int fds[3] = { tb->img_fd[0], tb->img_fd[1], tb->swap_fd };
	for (unsigned f = 0; f < 3; f++)
		r->file[f] = fds[f] >= 0 ? io_ctx_add_file(r->ctx, fds[f]) : -1;
	io_ctx_t *donor = pwriter_donor(__atomic_load_n(&tb->pw, __ATOMIC_ACQUIRE));
	if (donor && io_ctx_backend(r->ctx) == IO_BACKEND_URING) {
		pthread_mutex_lock(&tb->ring_mu);    /* clones read the donor: one at a time */
		if (io_ctx_clone_buffers_from(r->ctx, donor) < 0)
			log_info("tier: a miss ring could not clone the pool's registration: "
				 "plain buffers");
		pthread_mutex_unlock(&tb->ring_mu);
	}
	for (unsigned i = 0; i < depth; i++)
		r->free[i] = depth - 1 - i;
	r->nfree = depth;
	*out = r;
	return 0;
}

void tierback_ring_close(tb_ring_t *r)
{
	if (!r)
		return;
	if (r->ctx && r->cqe)       /* nothing may land in a frame after this */
		while (io_inflight(r->ctx) && io_reap(r->ctx, r->cqe, r->depth, 1) >= 0)
			;
	io_ctx_destroy(r->ctx);
	free(r->slot);
	free(r->free);
	free(r->cqe);
	free(r);
}

int tierback_ring_prep(tb_ring_t *r, uint64_t page, void *buf, uint64_t tag)
{
	struct tierback *tb = r->tb;
	if (page >= tb->npages)
		return -EINVAL;
	unsigned home = LOAD(&tb->where[page]);
	if (home == TIER_HOME_ZERO)
		return 1;
	if (!r->nfree)
		return -EAGAIN;
	if (r->file[home - 1] < 0)
		return -EBADF;
	unsigned i = r->free[r->nfree - 1];
	uint32_t ps = tb->o.page_size;
	int rc = io_prep_read(r->ctx, r->file[home - 1], buf, ps, (off_t)(page * ps), i);
	if (rc < 0)
		return rc == -EAGAIN ? -EAGAIN : -EIO;
	r->nfree--;
	r->nprep++;
	r->slot[i] = (struct tb_slot){ .page = page, .tag = tag, .buf = buf, .home = home,
				       .t0 = clock_now_ns() };
	return 0;
}

int tierback_ring_submit(tb_ring_t *r)
{
	struct tierback *tb = r->tb;
	if (!r->nprep)
		return 0;
	int rc = io_submit_batch(r->ctx);
	if (rc < 0)
		return rc;
	r->inflight += r->nprep;
	r->nprep = 0;
	uint64_t d = r->inflight, m = LOAD(&tb->as_depth_max);
	ADD(&tb->as_depth_sum, d);
	ADD(&tb->as_depth_n, 1);
	while (d > m && !__atomic_compare_exchange_n(&tb->as_depth_max, &m, d, true,
						     __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return rc;
}

/* Slot i completed with res (bytes or -errno): its result for the caller. */
static int ring_done(struct tb_ring *r, unsigned i, int64_t res)
{
	struct tierback *tb = r->tb;
	struct tb_slot *sl = &r->slot[i];
	uint32_t ps = tb->o.page_size;
	uint64_t ns = clock_now_ns() - sl->t0;
	int rc = res == (int64_t)ps ? 0 : res < 0 ? (int)res : -EIO;
	int err = rc == 0 ? fault_hit(&tb->fmiss) : 0;
	/* as_errors: every read that fails its requests (fault, I/O, checksum) */
	if (err) {
		log_info("tier: fault injection: the miss read of page %" PRIu64 " fails with %s",
			 sl->page, strerror(err));
		rc = -err;
		ADD(&tb->as_errors, 1);
	} else if (rc < 0) {
		if (ADD(&tb->as_errors, 1) < 10)
			log_error("tier: reading page %" PRIu64 " from %s failed: %s", sl->page,
				  home_name(sl->home), res < 0 ? strerror((int)-res) : "short read");
	} else if (tb_check(tb, sl->page, sl->home, sl->buf, "a miss") < 0) {
		rc = -EIO;    /* counted and logged in crc_bad too */
		ADD(&tb->as_errors, 1);
	} else {
		ADD(&tb->as_reads, 1);
		ADD(&tb->as_ns_sum, ns);
		ADD(&tb->as_hist[hist_bucket(ns)], 1);
	}
	r->free[r->nfree++] = i;
	r->inflight--;
	return rc;
}

int tierback_ring_reap(tb_ring_t *r, uint64_t *tags, int *res, unsigned max, unsigned min)
{
	if (!r->inflight)
		return 0;
	max = MIN(max, r->depth);
	int n = io_reap(r->ctx, r->cqe, max, MIN(min, r->inflight));
	if (n < 0) {   /* the ring failed: every read in flight fails */
		unsigned k = 0;
		while (io_inflight(r->ctx) && io_reap(r->ctx, r->cqe, r->depth, 1) >= 0)
			;
		for (unsigned i = 0; i < r->depth && k < max; i++) {
			int used = 1;
			for (unsigned j = 0; j < r->nfree && used; j++)
				used = r->free[j] != i;
			if (!used)
				continue;
			tags[k] = r->slot[i].tag;
			res[k++] = ring_done(r, i, -EIO);
		}
		return (int)k;
	}
	for (int j = 0; j < n; j++) {
		unsigned i = (unsigned)r->cqe[j].user_data;
		tags[j] = r->slot[i].tag;
		res[j] = ring_done(r, i, r->cqe[j].res);
	}
	return n;
}

unsigned tierback_ring_inflight(const tb_ring_t *r)
{
	return r ? r->depth - r->nfree : 0;   /* prepared or in flight */
}

unsigned tierback_ring_unsubmitted(const tb_ring_t *r)
{
	return r ? r->nprep : 0;
}

int tierback_ring_notify_fd(tb_ring_t *r)
{
	return io_ctx_notify_fd(r->ctx);
}

void tierback_ring_notify_clear(tb_ring_t *r)
{
	io_ctx_notify_clear(r->ctx);
}

void tierback_note_parked(tierback_t *tb, uint64_t n)
{
	ADD(&tb->as_parked, n);
}

static void tb_want_frames(void *arg)
{
	struct tierback *tb = arg;
	pwriter_kick(__atomic_load_n(&tb->pw, __ATOMIC_ACQUIRE));
}

static size_t tb_pick(void *arg, unsigned part, unsigned nparts, struct pw_page *v, size_t max,
		      size_t *dropped)
{
	struct tierback *tb = arg;
	return store_evict_pick(tb->st, part, nparts, (struct store_victim *)v, max, dropped);
}

static void tb_done(void *arg, const struct pw_page *v, int status)
{
	struct tierback *tb = arg;
	if (status == 0) {
		int err = fault_hit(&tb->fevict);
		if (err) {   /* written, but reported failed: the page must stay */
			log_info("tier: fault injection: the eviction write of page %" PRIu64
				 " fails with %s", v->page, strerror(err));
			status = -err;
		}
	}
	if (status == 0) {   /* before it can miss; the frame is still LOCKED (invariant 4) */
		STORE(&tb->crc[v->page], crc32c(0, v->buf, tb->o.page_size));
		STORE(&tb->where[v->page], (uint8_t)TIER_HOME_SWAP);
	}
	store_evict_done(tb->st, (const struct store_victim *)v, status);
}

static int tb_need(void *arg)
{
	struct tierback *tb = arg;
	return store_free_frames(tb->st) < tb->target;
}

/* ---- life cycle ---- */

int tierback_create(const struct tierback_opts *o, tierback_t **out)
{
	*out = NULL;
	struct tierback *tb = calloc(1, sizeof(*tb));
	if (!tb)
		return -ENOMEM;
	tb->o = *o;
	if (!tb->o.page_size)
		tb->o.page_size = STORE_DEFAULT_PAGE;
	if (!tb->o.page_writers)
		tb->o.page_writers = (unsigned)MIN(2, MAX(cpu_count(), 1));
	tb->npages = o->capacity / tb->o.page_size;
	tb->where_bytes = ALIGN_UP(MAX(tb->npages, 1), 4096);
	tb->where = mmap(NULL, tb->where_bytes, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	tb->crc_bytes = ALIGN_UP(MAX(tb->npages, 1) * sizeof(uint32_t), 4096);
	tb->crc = mmap(NULL, tb->crc_bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (tb->crc == MAP_FAILED)
		tb->crc = NULL;
	tb->swap_fd = tb->img_fd[0] = tb->img_fd[1] = -1;
	for (unsigned i = 0; i < TB_READERS; i++)
		pthread_mutex_init(&tb->r[i].mu, NULL);
	pthread_mutex_init(&tb->pf_mu, NULL);
	pthread_mutex_init(&tb->ring_mu, NULL);
	tb->id = ADD(&tb_ids, 1) + 1;
	if (tb->where == MAP_FAILED)
		tb->where = NULL;
	if (!tb->where || !tb->crc) {
		tierback_destroy(tb);
		return -ENOMEM;
	}
	fault_parse(tb);
	*out = tb;
	return 0;
}

void tierback_store_opts(tierback_t *tb, struct store_tier_opts *so)
{
	memset(so, 0, sizeof(*so));
	so->capacity = tb->o.capacity;
	so->read_page = tb_read_page;
	so->want_frames = tb_want_frames;
	const char *pf = getenv("LOTUS_TIER_PREFETCH");   /* "0": scans fault pages one by one */
	so->read_batch = pf && !strcmp(pf, "0") ? NULL : tb_read_batch;
	so->arg = tb;
}

static int open_readers(struct tierback *tb)
{
	int fds[3] = { tb->img_fd[0], tb->img_fd[1], tb->swap_fd };
	for (unsigned i = 0; i < TB_READERS; i++) {
		struct reader *r = &tb->r[i];
		struct io_opts io = { .backend = IO_BACKEND_SYNC, .depth = 1 };
		int rc = io_ctx_create(&io, &r->ctx);
		if (rc < 0)
			return rc;
		for (unsigned f = 0; f < 3; f++)
			r->file[f] = fds[f] >= 0 ? io_ctx_add_file(r->ctx, fds[f]) : -1;
	}
	return 0;
}

int tierback_start(tierback_t *tb, store_t *st, const char *dir)
{
	char path[4200];
	static const char *const images[2] = { "pages-a.dat", "pages-b.dat" };
	tb->st = st;
	snprintf(path, sizeof(path), "%s/pages.swap", dir);
	tb->swap_fd = io_open_direct(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (tb->swap_fd < 0) {
		int rc = tb->swap_fd;
		log_error("tier: cannot create the swap file %s: %s", path, strerror(-rc));
		return rc;
	}
	for (unsigned i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, images[i]);
		if (access(path, F_OK) == 0 && (tb->img_fd[i] = io_open_direct(path, O_RDONLY, 0)) < 0) {
			int rc = tb->img_fd[i];
			log_error("tier: cannot open %s for miss reads: %s", path, strerror(-rc));
			return rc;
		}
	}
	int rc = open_readers(tb);
	if (rc < 0)
		return rc;
	struct store_tier_stats ts;
	store_tier_stats(st, &ts);
	uint64_t low = MAX(MIN(ts.frames / 16, 64), 1);
	tb->target = MAX(2 * low, MIN(ts.frames / 8, 512));
	size_t region_len;
	void *region = store_pool(st, &region_len);
	tb->staging_bytes = (size_t)TB_CKPT_PAGES * tb->o.page_size;
	tb->staging = mmap(NULL, tb->staging_bytes, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tb->staging == MAP_FAILED) {
		tb->staging = NULL;
		return -ENOMEM;
	}
	struct pwriter_opts po = {
		.nwriters = tb->o.page_writers, .fd = tb->swap_fd, .page_size = tb->o.page_size,
		.region = region, .region_len = region_len,
		.region2 = tb->staging, .region2_len = tb->staging_bytes,
		.batch = (unsigned)MIN(256, MAX(ts.frames / 8 / tb->o.page_writers, 1)),
		.ops = { .pick = tb_pick, .done = tb_done, .need = tb_need, .arg = tb },
	};
	pwriter_t *pw;
	rc = pwriter_start(&po, &pw);
	if (rc < 0)
		return rc;
	__atomic_store_n(&tb->pw, pw, __ATOMIC_RELEASE);
	unsigned clones = 0;
	for (unsigned i = 0; i < tb->o.page_writers; i++) {
		struct pwriter_stats w;
		pwriter_stats(pw, i, &w);
		clones += (unsigned)w.cloned;
	}
	if (pwriter_registered(pw))
		log_info("tier: %" PRIu64 " logical pages in %" PRIu64 " frames; %u page writers, "
			 "pool registered once and cloned into %u of their rings", tb->npages,
			 ts.frames, tb->o.page_writers, clones);
	else
		log_info("tier: %" PRIu64 " logical pages in %" PRIu64 " frames; %u page writers, "
			 "pool not registered (plain buffers)", tb->npages, ts.frames,
			 tb->o.page_writers);
	return 0;
}

pwriter_t *tierback_writers(tierback_t *tb, void **staging, size_t *staging_bytes)
{
	*staging = tb->staging;
	*staging_bytes = tb->staging_bytes;
	return tb->pw;
}

void tierback_set_home(void *arg, uint64_t first, uint64_t last, unsigned image,
		       const uint32_t *crc)
{
	struct tierback *tb = arg;
	for (uint64_t p = first; p <= last && p < tb->npages; p++) {
		STORE(&tb->crc[p], crc[p]);
		STORE(&tb->where[p], (uint8_t)(image ? TIER_HOME_IMAGE_B : TIER_HOME_IMAGE_A));
	}
}

void tierback_stop(tierback_t *tb)
{
	if (!tb)
		return;
	pwriter_t *pw = __atomic_exchange_n(&tb->pw, NULL, __ATOMIC_ACQ_REL);
	pwriter_stop(pw);
}

void tierback_destroy(tierback_t *tb)
{
	if (!tb)
		return;
	tierback_stop(tb);
	for (unsigned i = 0; i < TB_READERS; i++) {
		io_ctx_destroy(tb->r[i].ctx);
		pthread_mutex_destroy(&tb->r[i].mu);
	}
	while (tb->pf_list) {   /* the threads that prefetched are gone or idle */
		struct pf_ctx *c = tb->pf_list;
		tb->pf_list = c->next;
		io_ctx_destroy(c->ctx);
		free(c);
	}
	pthread_mutex_destroy(&tb->pf_mu);
	pthread_mutex_destroy(&tb->ring_mu);
	if (tb->swap_fd >= 0)
		close(tb->swap_fd);
	for (unsigned i = 0; i < 2; i++)
		if (tb->img_fd[i] >= 0)
			close(tb->img_fd[i]);
	if (tb->where)
		munmap(tb->where, tb->where_bytes);
	if (tb->crc)
		munmap(tb->crc, tb->crc_bytes);
	if (tb->staging)
		munmap(tb->staging, tb->staging_bytes);
	free(tb);
}

/* ---- figures ---- */

/* The upper edge of the bucket holding the pct-th percentile of hist (ns). */
static uint64_t hist_pct(const uint64_t *hist, unsigned pct)
{
	uint64_t total = 0, h[TB_HIST];
	for (unsigned i = 0; i < TB_HIST; i++)
		total += h[i] = LOAD(&hist[i]);
	if (!total)
		return 0;
	uint64_t want = total - total * (100 - pct) / 100, seen = 0;
	for (unsigned i = 0; i < TB_HIST; i++)
		if ((seen += h[i]) >= want)
			return 2ull << i;
	return 0;
}

/* The 99th percentile of the synchronous miss reads (preads). */
static uint64_t read_p99(struct tierback *tb)
{
	return hist_pct(tb->hist, 99);
}

int tierback_stats_json(tierback_t *tb, char *buf, size_t len)
{
	struct store_tier_stats s;
	store_tier_stats(tb->st, &s);
	pwriter_t *pw = tb->pw;
	unsigned nw = pwriter_count(pw), clones = 0;
	uint64_t fallbacks = 0, sreads = LOAD(&tb->reads), ios = 0, pages = 0, cpu = 0;
	uint64_t areads = LOAD(&tb->as_reads), reads = sreads + areads, dn = LOAD(&tb->as_depth_n);
	size_t n = 0;
#define EMIT(...) do { int k_ = snprintf(buf + MIN(n, len), len > n ? len - n : 0, __VA_ARGS__); \
	n += k_ > 0 ? (size_t)k_ : 0; } while (0)
	EMIT(",\"tier\":{\"pages\":%" PRIu64 ",\"frames\":%" PRIu64 ",\"resident\":%" PRIu64
	     ",\"free_frames\":%" PRIu64 ",\"dirty\":%" PRIu64 ",\"misses\":%" PRIu64
	     ",\"miss_zero\":%" PRIu64 ",\"miss_reads\":%" PRIu64 ",\"miss_read_mean_ns\":%" PRIu64
	     ",\"miss_read_max_ns\":%" PRIu64 ",\"miss_read_p99_ns\":%" PRIu64
	     ",\"miss_errors\":%" PRIu64 ",\"evict_clean\":%" PRIu64 ",\"evict_dirty\":%" PRIu64
	     ",\"evict_errors\":%" PRIu64 ",\"frame_waits\":%" PRIu64 ",\"frame_timeouts\":%" PRIu64,
	     s.pages, s.frames, s.resident, s.free_frames, s.dirty, s.misses, s.miss_zero, reads,
	     sreads ? LOAD(&tb->read_ns_sum) / sreads : 0, s.miss_ns_max, read_p99(tb),
	     s.miss_errors, s.evict_clean, s.evict_dirty, s.evict_errors, s.frame_waits,
	     s.frame_timeouts);
	EMIT(",\"prefetched\":%" PRIu64 ",\"prefetch_batches\":%" PRIu64
	     ",\"prefetch_errors\":%" PRIu64 ",\"prefetch_reads\":%" PRIu64
	     ",\"prefetch_ns\":%" PRIu64,
	     s.prefetched, s.prefetch_batches, s.prefetch_errors, LOAD(&tb->pf_reads),
	     LOAD(&tb->pf_ns_sum));
	EMIT(",\"misses_async\":%" PRIu64 ",\"miss_sync_reads\":%" PRIu64
	     ",\"miss_async_reads\":%" PRIu64 ",\"miss_async_errors\":%" PRIu64
	     ",\"miss_parked\":%" PRIu64 ",\"miss_depth_mean\":%.2f,\"miss_depth_max\":%" PRIu64
	     ",\"miss_async_mean_ns\":%" PRIu64 ",\"miss_async_p50_ns\":%" PRIu64
	     ",\"miss_async_p99_ns\":%" PRIu64,
	     s.misses_async, sreads, areads, LOAD(&tb->as_errors), LOAD(&tb->as_parked),
	     dn ? (double)LOAD(&tb->as_depth_sum) / (double)dn : 0.0, LOAD(&tb->as_depth_max),
	     areads ? LOAD(&tb->as_ns_sum) / areads : 0, hist_pct(tb->as_hist, 50),
	     hist_pct(tb->as_hist, 99));
	EMIT(",\"swap_crc_errors\":%" PRIu64 ",\"image_crc_errors\":%" PRIu64,
	     LOAD(&tb->crc_bad[0]), LOAD(&tb->crc_bad[1]));
	EMIT(",\"page_writers\":[");
	for (unsigned i = 0; i < nw; i++) {
		struct pwriter_stats w;
		pwriter_stats(pw, i, &w);
		clones += (unsigned)w.cloned;
		fallbacks += w.fallbacks + (uint64_t)w.setup_fallback;
		ios += w.ios;
		pages += w.pages;
		cpu += w.cpu_ns;
		EMIT("%s{\"backend\":\"%s\",\"ios\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"pages\":%" PRIu64
		     ",\"ckpt_pages\":%" PRIu64
		     ",\"fixed_ios\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"cpu_ns\":%" PRIu64
		     ",\"cloned\":%d,\"fallbacks\":%" PRIu64 "}", i ? "," : "", w.backend, w.ios,
		     w.bytes, w.pages, w.job_pages, w.fixed_ios, w.write_errors, w.cpu_ns, w.cloned,
		     w.fallbacks + (uint64_t)w.setup_fallback);
	}
	EMIT("],\"pw_ios\":%" PRIu64 ",\"pw_pages\":%" PRIu64 ",\"pw_cpu_ns\":%" PRIu64
	     ",\"miss_read_ns\":%" PRIu64 ",\"registrations\":%d,\"clones\":%u,\"fallbacks\":%"
	     PRIu64 "}", ios, pages, cpu, LOAD(&tb->read_ns_sum), pwriter_registered(pw), clones,
	     fallbacks);
#undef EMIT
	return (int)n;
}

void tierback_log_summary(tierback_t *tb)
{
	struct store_tier_stats s;
	store_tier_stats(tb->st, &s);
	uint64_t reads = LOAD(&tb->reads), ios = 0, pages = 0, cpu = 0, fb = 0, cpages = 0;
	unsigned nw = pwriter_count(tb->pw), clones = 0;
	for (unsigned i = 0; i < nw; i++) {
		struct pwriter_stats w;
		pwriter_stats(tb->pw, i, &w);
		ios += w.ios;
		pages += w.pages;
		cpages += w.job_pages;
		cpu += w.cpu_ns;
		clones += (unsigned)w.cloned;
		fb += w.fallbacks + (uint64_t)w.setup_fallback;
	}
	log_info("tier: %" PRIu64 " of %" PRIu64 " frames resident; %" PRIu64 " misses (%" PRIu64
		 " preads, mean %.1f us, max %.1f us, p99 < %.1f us, %" PRIu64 " errors); evictions %"
		 PRIu64 " clean, %" PRIu64 " dirty, %" PRIu64 " write errors; checksum mismatches %"
		 PRIu64 " in pages.swap, %" PRIu64 " in images; %u page writers: %"
		 PRIu64 " writes, %" PRIu64 " pages (%" PRIu64 " for checkpoints), %.2f us CPU per page, "
		 "registrations %d, clones %u, fallbacks %" PRIu64, s.resident, s.frames, s.misses, reads,
		 reads ? LOAD(&tb->read_ns_sum) / reads / 1e3 : 0.0, s.miss_ns_max / 1e3,
		 read_p99(tb) / 1e3, s.miss_errors, s.evict_clean, s.evict_dirty, s.evict_errors,
		 LOAD(&tb->crc_bad[0]), LOAD(&tb->crc_bad[1]), nw,
		 ios, pages, cpages, pages ? cpu / 1e3 / (double)pages : 0.0, pwriter_registered(tb->pw),
		 clones, fb);
	uint64_t areads = LOAD(&tb->as_reads), dn = LOAD(&tb->as_depth_n);
	if (areads || LOAD(&tb->as_errors))
		log_info("tier: misses that did not block: %" PRIu64 " parked requests, %" PRIu64
			 " reads on the workers' rings (%" PRIu64 " errors; p50 < %.1f us, p99 < %.1f "
			 "us), in flight mean %.2f max %" PRIu64 "; %" PRIu64 " synchronous preads",
			 LOAD(&tb->as_parked), areads, LOAD(&tb->as_errors),
			 hist_pct(tb->as_hist, 50) / 1e3, hist_pct(tb->as_hist, 99) / 1e3,
			 dn ? (double)LOAD(&tb->as_depth_sum) / (double)dn : 0.0,
			 LOAD(&tb->as_depth_max), reads);
}
