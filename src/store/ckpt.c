/*
 * ckpt.c - fuzzy checkpoints: the change gate, one checkpoint (ckpt_run), the
 * page writer thread, open / close.
 *
 * The module is three files and a private header (ckpt_int.h):
 *   ckpt.c          this file: taking checkpoints
 *   ckpt_files.c    the files in DIR: names, atomic replacement, the
 *                   per-page CRC files, MANIFEST
 *   ckpt_recover.c  recovery: loading an image back (eager for an untiered
 *                   store, lazy for a tiered one), with the fallback to the
 *                   previous image
 *
 * Two images alternate: checkpoint seq writes image seq & 1, so the image of
 * the previous checkpoint is never touched while a new one is written.  A
 * crash in the middle of a checkpoint leaves the manifest's image intact, and
 * a damaged page in the newest image is recovered from the previous image
 * plus a longer log replay (the log is kept back to the previous checkpoint's
 * begin LSN).  Each image is written only with the pages that differ from
 * what it holds: stale[p] has one bit per image, set when the store reports
 * the page dirty (or the page is new), cleared when that image gets it.
 *
 * One checkpoint (ckpt_run):
 *   1. gate closed: begin = redo_next_lsn(), P = pages used, tables; open
 *   2. collect dirty pages -> stale bits of both images
 *   3. per batch of pages of image seq&1 with a stale bit, p <= P:
 *        (tiered store: pin the batch first, reading in pages that are not
 *        resident, so no miss read happens with the gate closed)
 *        gate closed: copy the pages to the staging buffer, hi = redo_next_lsn()
 *        gate open; CRC the copies; redo_wait(hi)       (write-ahead rule)
 *        write the copies (runs of adjacent pages coalesced, <= 1 MiB each),
 *        up to max_inflight pages in flight
 *   4. fdatasync the image; write pages-X.crc (temp, fsync, rename, fsync dir)
 *   5. write MANIFEST the same way
 *   6. redo_truncate(min(previous need, this need, keep_lsn)); need = min(begin,
 *      keep_lsn when begin was taken): the PREPAREs open at an image's begin
 *
 * The change gate.  A worker brackets "append the redo record, apply it to
 * the store" with ckpt_change_begin/end.  The checkpointer closes the gate
 * (new changes wait) and waits until no change is in flight, so (a) begin is
 * an LSN below which every change is applied, and (b) a page copy never holds
 * half a change.  Without (a) a change logged before begin but applied after
 * its page was copied would be lost; without (b) store_rebuild could meet a
 * half-written slot.  The gate makes each page consistent, not the image:
 * pages are copied at different moments (a page clean at step 2 keeps the
 * copy the image already has), so a record that moved during the checkpoint
 * (deleted, re-inserted into a slot on another page) can be in the image
 * twice.  store_rebuild keeps one copy and replay from begin settles the key.
 * The gate is a sharded counter: a change costs two
 * atomic adds on a per-thread cache line; the gate is closed for one copy
 * batch at a time (a few hundred microseconds).
 *
 * Threads: ckpt_run is serialised by run_mu (the page writer thread and an
 * explicit call may race); each run creates its own io_ctx, so the thread
 * rule of io.h holds whichever thread runs it.  ckpt_set_keep_lsn and the
 * gate from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common/crash.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "store/ckpt.h"
#include "store/ckpt_int.h"
#include "store/pwriter.h"

#define CK_COPY_BATCH    256u           /* pages copied per gate closure */
#define CK_MAX_RUN       (1u << 20)     /* bytes per coalesced write */
#define CK_DEF_INFLIGHT  4096u
#define CK_DEF_TRIGGER   (256ull << 20)

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static __thread unsigned gate_slot = UINT32_MAX;
static unsigned gate_next;

/* ---- the change gate ---- */

static void gate_pause(unsigned *spins)
{
	if (++*spins < 64) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

unsigned ckpt_change_begin(ckpt_t *c)
{
	if (!c)
		return 0;
	if (gate_slot == UINT32_MAX)
		gate_slot = __atomic_fetch_add(&gate_next, 1, __ATOMIC_RELAXED) % CK_GATE_SHARDS;
	struct gate_shard *g = &c->gate[gate_slot];
	unsigned spins = 0;
	for (;;) {
		while (__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST))
			gate_pause(&spins);
		__atomic_fetch_add(&g->active, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST))
			return gate_slot;
		__atomic_fetch_sub(&g->active, 1, __ATOMIC_SEQ_CST);
	}
}

void ckpt_change_end(ckpt_t *c, unsigned token)
{
	if (c)
		__atomic_fetch_sub(&c->gate[token % CK_GATE_SHARDS].active, 1, __ATOMIC_SEQ_CST);
}

static void gate_close(struct ckpt *c)
{
	__atomic_store_n(&c->closed, 1, __ATOMIC_SEQ_CST);
	unsigned spins = 0;
	for (;;) {
		int64_t n = 0;
		for (unsigned i = 0; i < CK_GATE_SHARDS; i++)
			n += __atomic_load_n(&c->gate[i].active, __ATOMIC_SEQ_CST);
		if (n == 0)
			return;
		gate_pause(&spins);
	}
}

static void gate_open(struct ckpt *c)
{
	__atomic_store_n(&c->closed, 0, __ATOMIC_SEQ_CST);
}

/* ---- one checkpoint ---- */

struct run {
	struct ckpt *c;
	io_ctx_t *ctx;
	int file;
	unsigned image;
	uint64_t *slot_page;        /* staging slot -> page */
	uint32_t *slot_crc;
	unsigned staged, inflight;  /* slots used; pages in flight */
	uint64_t ios, pages;
	int err;
	/* page-writer mode: batches handed to the writers, completed in order */
	struct pw_page *slot_pp;
	int *slot_status;
	struct ck_batch *batches;
	unsigned bhead, btail;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pw_inited;              /* mu, cv initialised */
};

/* One batch of copies handed to a page writer (pwriter_submit). */
struct ck_batch {
	struct run *r;
	unsigned first, n;
	int done;                   /* under r->mu */
};

static void batch_written(void *arg, int rc)
{
	struct ck_batch *b = arg;
	(void)rc;                   /* per page in slot_status */
	pthread_mutex_lock(&b->r->mu);
	b->done = 1;
	pthread_cond_broadcast(&b->r->cv);
	pthread_mutex_unlock(&b->r->mu);
}

/* Page-writer mode: take back the oldest batch (waiting for it). */
static void batch_reap_one(struct run *r)
{
	struct ck_batch *b = &r->batches[r->bhead % r->c->max_inflight];
	pthread_mutex_lock(&r->mu);
	while (!b->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	for (unsigned j = 0; j < b->n; j++) {
		unsigned slot = b->first + j;
		if (r->slot_status[slot]) {
			if (!r->err)
				r->err = r->slot_status[slot];
			continue;
		}
		uint64_t p = r->slot_page[slot];
		r->c->stale[p] &= (uint8_t)~(1u << r->image);
		r->c->crc[r->image][p] = r->slot_crc[slot];
		r->pages++;
	}
	r->inflight -= b->n;
	r->bhead++;
}

static void run_complete(struct run *r, const struct io_cqe *e)
{
	unsigned slot = (unsigned)e->user_data, k = (unsigned)(e->user_data >> 32);
	r->inflight -= k;
	if (e->res != (int64_t)k * r->c->page_size) {
		if (!r->err)
			r->err = e->res < 0 ? (int)e->res : -EIO;
		return;
	}
	for (unsigned j = 0; j < k; j++) {
		uint64_t p = r->slot_page[slot + j];
		r->c->stale[p] &= (uint8_t)~(1u << r->image);
		r->c->crc[r->image][p] = r->slot_crc[slot + j];
	}
	r->pages += k;
}

static int run_reap(struct run *r, unsigned until_inflight)
{
	struct io_cqe cqes[64];
	while (r->c->pw && r->inflight > until_inflight)
		batch_reap_one(r);
	while (r->inflight > until_inflight) {
		int n = io_reap(r->ctx, cqes, ARRAY_SIZE(cqes), 1);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++)
			run_complete(r, &cqes[i]);
	}
	return 0;
}

/* Untiered: copy up to CK_COPY_BATCH stale pages from *next on out of the
 * pool, gate closed.  Returns the count; *hi = the log tail at the copy. */
static unsigned copy_pool_pages(struct run *r, uint64_t *next, uint64_t last, uint64_t *hi)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	uint8_t bit = (uint8_t)(1u << r->image);
	size_t pool_bytes;
	unsigned char *pool = store_pool(c->st, &pool_bytes);
	unsigned first = r->staged, n = 0;
	uint64_t p = *next;
	gate_close(c);
	for (; p <= last && n < CK_COPY_BATCH; p++) {
		if (!(c->stale[p] & bit))
			continue;
		memcpy(c->staging + (size_t)(first + n) * ps, pool + p * ps, ps);
		r->slot_page[first + n++] = p;
	}
	*hi = c->log ? redo_next_lsn(c->log) : 0;
	gate_open(c);
	*next = p;
	return n;
}

/* Tiered: pin the next stale pages first (a page that is not resident is
 * faulted in here, outside the gate: a miss read must not stall the
 * writers), then copy them with the gate closed, then unpin.  At most
 * pin_max pins at once, so the checkpoint never holds a large share of the
 * frames.  Returns the count, or a pin error (-EIO, LOTUS_ENOSPACE). */
static int copy_pinned_pages(struct run *r, uint64_t *next, uint64_t last, uint64_t *hi)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	uint8_t bit = (uint8_t)(1u << r->image);
	unsigned first = r->staged, n = 0, max = MIN(CK_COPY_BATCH, c->pin_max);
	unsigned char *bufs[CK_COPY_BATCH];
	uint64_t p = *next;
	int rc = 0;
	for (; p <= last && n < max; p++) {
		if (!(c->stale[p] & bit))
			continue;
		bufs[n] = store_page_get(c->st, p, &rc);
		if (!bufs[n]) {
			log_error("ckpt: page %" PRIu64 " cannot be read in for the checkpoint: %s",
				  p, lotus_strerror(rc));
			break;
		}
		r->slot_page[first + n++] = p;
	}
	if (!rc) {
		gate_close(c);
		for (unsigned i = 0; i < n; i++)
			memcpy(c->staging + (size_t)(first + i) * ps, bufs[i], ps);
		*hi = c->log ? redo_next_lsn(c->log) : 0;
		gate_open(c);
	}
	for (unsigned i = 0; i < n; i++)
		store_page_put(c->st, r->slot_page[first + i]);
	*next = p;
	return rc ? rc : (int)n;
}

/* Page-writer mode: the copies in slots first..first+n go to the next page
 * writer as one job (it coalesces adjacent pages: adjacent slots hold
 * ascending pages, and the staging buffer is registered with the pool). */
static int submit_to_writers(struct run *r, unsigned first, unsigned n)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	for (unsigned i = 0; i < n; i++) {
		unsigned slot = first + i;
		r->slot_pp[slot] = (struct pw_page){ .page = r->slot_page[slot],
						     .buf = c->staging + (size_t)slot * ps };
		r->slot_status[slot] = 1;
		if (i == 0 || r->slot_page[slot] != r->slot_page[slot - 1] + 1)
			r->ios++;   /* runs of adjacent pages, as the writer merges them */
	}
	struct ck_batch *b = &r->batches[r->btail % c->max_inflight];
	*b = (struct ck_batch){ .r = r, .first = first, .n = n };
	int rc = pwriter_submit(c->pw, c->pw_next++, c->pw_file[r->image], &r->slot_pp[first], n,
				&r->slot_status[first], batch_written, b);
	if (rc)
		return rc;
	r->btail++;
	r->inflight += n;
	r->staged += n;
	return 0;
}

/* Copy a batch of stale pages (gate closed), make the log durable past
 * every change in them, and write them. */
static int run_batch(struct run *r, uint64_t *next, uint64_t last)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	unsigned first = r->staged, n;
	uint64_t hi = 0;
	if (c->tiered) {
		int k = copy_pinned_pages(r, next, last, &hi);
		if (k < 0)
			return k;
		n = (unsigned)k;
	} else {
		n = copy_pool_pages(r, next, last, &hi);
	}
	if (!n)
		return 0;
	for (unsigned i = 0; i < n; i++)
		r->slot_crc[first + i] = crc32c(0, c->staging + (size_t)(first + i) * ps, ps);
	if (c->log) {
		int rc = redo_wait(c->log, hi);  /* the write-ahead rule */
		if (rc)
			return rc;
	}
	if (c->pw)
		return submit_to_writers(r, first, n);
	unsigned max_run = CK_MAX_RUN / ps ? CK_MAX_RUN / ps : 1;
	for (unsigned i = 0; i < n;) {
		unsigned k = 1;
		while (i + k < n && k < max_run &&
		       r->slot_page[first + i + k] == r->slot_page[first + i] + k)
			k++;
		unsigned slot = first + i;
		int rc = io_prep_write(r->ctx, r->file, c->staging + (size_t)slot * ps, (size_t)k * ps,
				       (off_t)(r->slot_page[slot] * ps),
				       (uint64_t)slot | (uint64_t)k << 32);
		if (rc == -EAGAIN) {
			rc = io_submit_batch(r->ctx);
			if (rc >= 0)
				rc = run_reap(r, r->inflight / 2);
			if (rc < 0)
				return rc;
			continue;
		}
		if (rc < 0)
			return rc;
		r->inflight += k;
		r->ios++;
		i += k;
	}
	r->staged += n;
	int rc = io_submit_batch(r->ctx);
	return rc < 0 ? rc : 0;
}

/* Set both stale bits of every dirty page and of pages new since last time. */
static void collect_dirty(struct ckpt *c, uint64_t pages_used)
{
	uint64_t buf[4096], cursor = 0;
	for (uint64_t p = c->marked_upto + 1; p <= pages_used; p++)
		c->stale[p] = 3;
	c->marked_upto = MAX(c->marked_upto, pages_used);
	for (;;) {
		size_t n = store_dirty_collect(c->st, &cursor, buf, ARRAY_SIZE(buf));
		for (size_t i = 0; i < n; i++)
			c->stale[buf[i]] = 3;
		if (n < ARRAY_SIZE(buf))
			break;
	}
}

static int run_setup(struct run *r, struct ckpt *c, unsigned image)
{
	char path[4200];
	memset(r, 0, sizeof(*r));
	r->c = c;
	r->image = image;
	r->file = -1;
	r->slot_page = malloc(c->max_inflight * sizeof(*r->slot_page));
	r->slot_crc = malloc(c->max_inflight * sizeof(*r->slot_crc));
	if (!r->slot_page || !r->slot_crc)
		return -ENOMEM;
	if (c->pw) {   /* the writers' rings hold the image fds already */
		pthread_mutex_init(&r->mu, NULL);
		pthread_cond_init(&r->cv, NULL);
		r->pw_inited = 1;
		r->slot_pp = malloc(c->max_inflight * sizeof(*r->slot_pp));
		r->slot_status = malloc(c->max_inflight * sizeof(*r->slot_status));
		r->batches = malloc(c->max_inflight * sizeof(*r->batches));
		if (!r->slot_pp || !r->slot_status || !r->batches)
			return -ENOMEM;
		return c->pw_fd[image];
	}
	ck_path(path, sizeof(path), c->dir, ck_image_name(image, 0));
	int fd = io_open_direct(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		return fd;
	struct io_opts o = { .backend = c->backend, .depth = MIN(c->max_inflight, 4096u),
			     .flags = IO_F_NO_CPU_STATS };
	int rc = io_ctx_create(&o, &r->ctx);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	io_ctx_register_buffer(r->ctx, c->staging, c->staging_bytes);
	r->file = io_ctx_add_file(r->ctx, fd);
	if (r->file < 0) {
		close(fd);
		return r->file;
	}
	return fd;
}

static void run_teardown(struct run *r, int fd, struct ckpt_stats *out)
{
	if (r->ctx) {
		struct io_stats io;
		io_ctx_stats(r->ctx, &io);
		out->syscalls = io.sys_enter + io.sys_submit + io.sys_getevents + io.sys_pwrite;
		out->backend = io_backend_name(io_ctx_backend(r->ctx));
		io_ctx_destroy(r->ctx);
	}
	if (r->c->pw) {   /* fd is the ckpt's; every batch was reaped */
		out->backend = "page writers";
		free(r->slot_pp);
		free(r->slot_status);
		free(r->batches);
		if (r->pw_inited) {
			pthread_mutex_destroy(&r->mu);
			pthread_cond_destroy(&r->cv);
		}
	} else if (fd >= 0) {
		close(fd);
	}
	free(r->slot_page);
	free(r->slot_crc);
}

static int ckpt_run_locked(struct ckpt *c, struct ckpt_stats *out)
{
	uint64_t t0 = clock_now_ns(), cpu0 = clock_thread_cpu_ns();
	struct ck_info cur = { .seq = c->last.seq + 1 };
	while (cur.seq <= c->seq_floor)   /* never into the image recovery came from */
		cur.seq += 2;
	cur.image = (unsigned)(cur.seq & 1);
	struct store_stats ss;
	gate_close(c);
	cur.begin_lsn = c->log ? redo_next_lsn(c->log) : 0;
	/* With the gate closed every PREPARE below begin has set the keep LSN (it
	 * is appended inside the gate), so this is the oldest one still open. */
	cur.need_lsn = MIN(cur.begin_lsn, LOAD(&c->keep_lsn));
	store_stats(c->st, &ss);
	gate_open(c);
	if (c->on_begin)
		c->on_begin(c->on_begin_arg);
	cur.pages_used = ss.pages_used;
	collect_dirty(c, cur.pages_used);

	struct run r;
	int fd = run_setup(&r, c, cur.image), rc = fd < 0 ? fd : 0;
	uint64_t next = 1;
	while (!rc && next <= cur.pages_used) {
		if (r.staged + CK_COPY_BATCH > c->max_inflight) {
			rc = run_reap(&r, 0);
			r.staged = 0;
			if (rc || r.err)
				break;
		}
		rc = run_batch(&r, &next, cur.pages_used);
	}
	int rc2 = r.ctx || c->pw ? run_reap(&r, 0) : 0;
	rc = rc ? rc : rc2 ? rc2 : r.err;
	if (!rc && fdatasync(fd))
		rc = -errno;
	run_teardown(&r, fd, out);
	if (!rc)
		crash_point("checkpoint");  /* tests: pages written, manifest not */
	if (!rc)
		rc = ck_crc_write(c, cur.image, cur.seq, cur.pages_used + 1);
	uint64_t keep = LOAD(&c->keep_lsn);
	/* Keep what a recovery from either image needs: the previous image (the
	 * fallback) replays from its begin and needs the PREPAREs that were open
	 * when it began, even if they were decided since. */
	uint64_t log_from = MIN(c->last.seq ? MIN(c->last.need_lsn, cur.need_lsn) : cur.need_lsn,
				keep);
	if (!rc)
		rc = ck_manifest_write(c, &cur, &c->last, log_from);
	if (rc) {
		log_error("ckpt: checkpoint %" PRIu64 " to %s/%s failed: %s; the previous one "
			  "stays in effect", cur.seq, c->dir, ck_image_name(cur.image, 0),
			  lotus_strerror(rc));
		return rc;
	}
	c->prev = c->last;
	c->last = cur;
	STORE(&c->last_begin, cur.begin_lsn);
	STORE(&c->last_seq, cur.seq);
	STORE(&c->last_wall_ns, clock_wall_ns());
	if (c->log)
		redo_truncate(c->log, log_from);
	out->begin_lsn = cur.begin_lsn;
	out->pages = r.pages;
	out->bytes = r.pages * c->page_size;
	out->ios = r.ios;
	out->elapsed_ns = clock_now_ns() - t0;
	out->cpu_ns = clock_thread_cpu_ns() - cpu0;
	log_debug("ckpt: checkpoint %" PRIu64 ": %" PRIu64 " pages to %s in %.1f ms, begin LSN %"
		  PRIu64, cur.seq, r.pages, ck_image_name(cur.image, 0), out->elapsed_ns / 1e6,
		  cur.begin_lsn);
	return 0;
}

void ckpt_last(ckpt_t *c, struct ckpt_last *out)
{
	out->seq = LOAD(&c->last_seq);
	out->begin_lsn = LOAD(&c->last_begin);
	out->wall_ns = LOAD(&c->last_wall_ns);
}

int ckpt_run(ckpt_t *c, struct ckpt_stats *out)
{
	struct ckpt_stats tmp;
	if (!out)
		out = &tmp;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->run_mu);
	/* a backup is copying the images and the log: leave them as they are */
	int rc = -EBUSY;
	if (clock_now_ns() >= LOAD(&c->backup_until)) {
		c->runs++;   /* counted before it touches a file */
		rc = ckpt_run_locked(c, out);
	}
	pthread_mutex_unlock(&c->run_mu);
	return rc;
}

uint64_t ckpt_backup_pin(ckpt_t *c, uint64_t until_ns)
{
	pthread_mutex_lock(&c->run_mu);   /* waits for a checkpoint under way */
	STORE(&c->backup_until, until_ns);
	uint64_t runs = c->runs;
	pthread_mutex_unlock(&c->run_mu);
	return runs;
}

void ckpt_set_keep_lsn(ckpt_t *c, uint64_t lsn)
{
	STORE(&c->keep_lsn, lsn);
}

/* ---- the page writer thread ---- */

static void trigger_put(struct trigger *t)
{
	pthread_mutex_lock(&t->mu);
	int last = --t->refs == 0;
	pthread_mutex_unlock(&t->mu);
	if (last) {
		pthread_mutex_destroy(&t->mu);
		free(t);
	}
}

static void trigger_fired(void *arg, int status)
{
	struct trigger *t = arg;
	pthread_mutex_lock(&t->mu);
	struct ckpt *c = t->c;
	if (c) {
		pthread_mutex_lock(&c->mu);
		if (status == 0)
			c->kicked = 1;
		c->armed = 0;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_unlock(&t->mu);
	trigger_put(t);
}

static void *page_writer_main(void *arg)
{
	struct ckpt *c = arg;
	struct timespec deadline;
	clock_deadline_in(CLOCK_MONOTONIC, &deadline, c->interval_ms);
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		/* not while kicked: a target durable already fires at once, and
		 * arming again before running the checkpoint would spin */
		if (c->log && c->log_trigger && !c->armed && !c->kicked && redo_status(c->log) == 0) {
			uint64_t target = LOAD(&c->last_begin) + c->log_trigger;
			c->armed = 1;
			/* Lock order is trig->mu, then c->mu (trigger_fired): take the
			 * callback's reference only after letting go of c->mu.  The
			 * ckpt's own reference keeps trig alive meanwhile. */
			pthread_mutex_unlock(&c->mu);
			pthread_mutex_lock(&c->trig->mu);
			c->trig->refs++;
			pthread_mutex_unlock(&c->trig->mu);
			if (redo_notify(c->log, target, trigger_fired, c->trig))
				trigger_put(c->trig);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		int timed_out = 0;
		if (!c->kicked) {
			if (c->interval_ms)
				timed_out = pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == ETIMEDOUT;
			else
				pthread_cond_wait(&c->cv, &c->mu);
		}
		if (c->stop || (!c->kicked && !timed_out))
			continue;
		c->kicked = 0;
		pthread_mutex_unlock(&c->mu);
		int rc = 0;
		if (!c->log || redo_next_lsn(c->log) != LOAD(&c->last_begin) || !timed_out) {
			struct ckpt_stats s;
			rc = ckpt_run(c, &s);
		}
		pthread_mutex_lock(&c->mu);
		if (rc == -EBUSY && !c->stop) {
			/* a backup pins the files: the checkpoint is still due, try
			 * again in a while (the log trigger would fire at once) */
			struct timespec again;
			clock_deadline_in(CLOCK_MONOTONIC, &again, 100);
			pthread_cond_timedwait(&c->cv, &c->mu, &again);
			c->kicked = 1;
		}
		clock_deadline_in(CLOCK_MONOTONIC, &deadline, c->interval_ms);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int ckpt_start(ckpt_t *c)
{
	if (c->thread_started)
		return 0;
	int rc = -pthread_create(&c->thread, NULL, page_writer_main, c);
	if (!rc)
		c->thread_started = 1;
	return rc;
}

/* ---- open / close ---- */

/* After recovery: which pages does each image already hold?  Compare the
 * store's pages with the CRCs of both images; the rest is stale. */
static void ckpt_load_state(struct ckpt *c)
{
	struct manifest *m = malloc(sizeof(*m));
	if (!m || ck_manifest_read(c->dir, m) || m->page_size != c->page_size) {
		free(m);
		return;  /* new database (or unreadable): every page is new */
	}
	c->last = m->cur;
	c->prev = m->prev;
	const struct ck_info *infos[2] = { &m->cur, &m->prev };
	if (c->recovered_seq && c->recovered_seq == m->prev.seq) {
		/* Recovery fell back: the newest image is damaged.  The next
		 * checkpoint rewrites that image (all of it) and keeps the one the
		 * store came from. */
		c->last = m->prev;
		c->prev = (struct ck_info){ 0 };
		c->seq_floor = m->cur.seq;
		infos[0] = &m->prev;
		infos[1] = &c->prev;
	}
	STORE(&c->last_begin, c->last.begin_lsn);
	STORE(&c->last_seq, c->last.seq);
	char mpath[4200];   /* when it was written: the manifest's mtime */
	struct stat mst;
	snprintf(mpath, sizeof(mpath), "%s/MANIFEST", c->dir);
	if (stat(mpath, &mst) == 0)
		STORE(&c->last_wall_ns, (uint64_t)mst.st_mtim.tv_sec * 1000000000ULL +
					(uint64_t)mst.st_mtim.tv_nsec);
	for (int i = 0; i < 2; i++) {
		const struct ck_info *ci = infos[i];
		uint32_t *v;
		uint64_t n;
		if (!ci->seq || ck_crc_read(c->dir, ci->image, ci->seq, c->page_size, &v, &n, 1))
			continue;
		n = MIN(n, c->npages);
		memcpy(c->crc[ci->image], v, n * sizeof(*v));
		c->crc_n[ci->image] = n;
		free(v);
	}
	free(m);
	struct store_stats ss;
	store_stats(c->st, &ss);
	if (c->tiered) {
		/* Pages are not all in memory: what recovery loaded is its image
		 * (every page's CRC was checked), so that image is current for each
		 * of them and the other one where its CRC differs.  Pages changed
		 * since (log replay) are dirty in the store: collect_dirty marks them. */
		unsigned li = c->last.image & 1, oi = li ^ 1;
		for (uint64_t p = 1; p <= ss.pages_used && p < c->npages; p++) {
			uint8_t bits = 0;
			if (p >= c->crc_n[li])
				bits = 3;
			else if (p >= c->crc_n[oi] || c->crc[oi][p] != c->crc[li][p])
				bits = (uint8_t)(1u << oi);
			c->stale[p] |= bits;
		}
		c->marked_upto = ss.pages_used;
		return;
	}
	size_t pool_bytes;
	const unsigned char *pool = store_pool(c->st, &pool_bytes);
	for (uint64_t p = 1; p <= ss.pages_used; p++) {
		uint32_t crc = crc32c(0, pool + p * c->page_size, c->page_size);
		uint8_t bits = 0;
		for (unsigned i = 0; i < 2; i++)
			if (p >= c->crc_n[i] || c->crc[i][p] != crc)
				bits |= (uint8_t)(1u << i);
		c->stale[p] |= bits;
	}
	c->marked_upto = ss.pages_used;
}

/* Checkpoints through the page writers: both images open for the ckpt's
 * life, each added to every writer's ring once. */
static int ckpt_open_writers(struct ckpt *c, pwriter_t *pw)
{
	char path[4200];
	for (unsigned i = 0; i < 2; i++) {
		ck_path(path, sizeof(path), c->dir, ck_image_name(i, 0));
		c->pw_fd[i] = io_open_direct(path, O_RDWR | O_CREAT, 0644);
		if (c->pw_fd[i] < 0)
			return c->pw_fd[i];
		c->pw_file[i] = pwriter_add_file(pw, c->pw_fd[i]);
		if (c->pw_file[i] < 0) {
			log_error("ckpt: the page writers cannot take %s: %s", path,
				  strerror(-c->pw_file[i]));
			return c->pw_file[i];
		}
	}
	c->pw = pw;
	return 0;
}

int ckpt_open(store_t *st, redo_t *log, const struct ckpt_opts *o, ckpt_t **out)
{
	if (!st || !o || !o->dir || !out || strlen(o->dir) >= sizeof(((struct ckpt *)0)->dir))
		return -EINVAL;
	*out = NULL;
	struct ckpt *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int rc = -ENOMEM;
	snprintf(c->dir, sizeof(c->dir), "%s", o->dir);
	c->st = st;
	c->log = log;
	c->max_inflight = o->max_inflight ? o->max_inflight : CK_DEF_INFLIGHT;
	c->max_inflight = MAX(c->max_inflight, CK_COPY_BATCH);
	c->backend = o->backend;
	c->log_trigger = o->log_trigger ? o->log_trigger : CK_DEF_TRIGGER;
	c->interval_ms = o->interval_ms;
	c->checkpoint_on_close = o->checkpoint_on_close;
	c->recovered_seq = o->recovered_seq;
	c->on_begin = o->on_begin;
	c->on_begin_arg = o->on_begin_arg;
	c->page_size = store_page_size(st);
	size_t pool_bytes;
	store_pool(st, &pool_bytes);
	c->tiered = store_tiered(st);
	c->npages = c->tiered ? store_npages(st) : pool_bytes / c->page_size;
	c->pin_max = (unsigned)MAX(MIN((uint64_t)CK_COPY_BATCH, pool_bytes / c->page_size / 8), 1);
	c->keep_lsn = UINT64_MAX;
	pthread_mutex_init(&c->run_mu, NULL);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->stale = calloc(c->npages, 1);
	c->crc[0] = calloc(c->npages, sizeof(uint32_t));
	c->crc[1] = calloc(c->npages, sizeof(uint32_t));
	c->trig = calloc(1, sizeof(*c->trig));
	c->staging_bytes = (size_t)c->max_inflight * c->page_size;
	c->pw_fd[0] = c->pw_fd[1] = -1;
	if (o->staging && o->staging_bytes >= c->staging_bytes) {
		c->staging = o->staging;   /* registered with the page writers' pool */
	} else {
		c->own_staging = 1;
		c->staging = mmap(NULL, c->staging_bytes, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c->staging == MAP_FAILED)
			c->staging = NULL;
	}
	if (!c->stale || !c->crc[0] || !c->crc[1] || !c->trig || !c->staging)
		goto fail;
	pthread_mutex_init(&c->trig->mu, NULL);
	c->trig->refs = 1;
	c->trig->c = c;
	if (mkdir(c->dir, 0755) && errno != EEXIST) {
		rc = -errno;
		log_error("ckpt: mkdir %s: %s", c->dir, strerror(errno));
		goto fail;
	}
	if (o->writers && (rc = ckpt_open_writers(c, o->writers)) != 0)
		goto fail;
	ckpt_load_state(c);
	*out = c;
	return 0;
fail:
	c->checkpoint_on_close = 0;
	ckpt_close(c);
	return rc;
}

void ckpt_close(ckpt_t *c)
{
	if (!c)
		return;
	if (c->checkpoint_on_close) {
		struct ckpt_stats s;
		ckpt_run(c, &s);
	}
	if (c->thread_started) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	if (c->trig && c->trig->refs) {
		pthread_mutex_lock(&c->trig->mu);
		c->trig->c = NULL;
		pthread_mutex_unlock(&c->trig->mu);
		trigger_put(c->trig);
	} else {
		free(c->trig);
	}
	if (c->staging && c->own_staging)
		munmap(c->staging, c->staging_bytes);
	for (unsigned i = 0; i < 2; i++)
		if (c->pw_fd[i] >= 0)
			close(c->pw_fd[i]);
	free(c->stale);
	free(c->crc[0]);
	free(c->crc[1]);
	pthread_mutex_destroy(&c->run_mu);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}
