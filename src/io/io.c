/*
 * io.c - the hybrid I/O layer's context: backend choice, the slot table, the
 * prepare / submit / reap API, and the fallback levels (paper §4.1, §4.3).
 *
 * A context belongs to the thread that created it (or enabled it, for
 * IO_F_R_DISABLED contexts); nothing here takes a lock.  The backend is a
 * table of function pointers (io_uring_ops, io_aio_ops, io_sync_ops) chosen at
 * runtime and switched at most along the arrows below, never back:
 *
 *          io_ctx_create()
 *               |
 *     uring setup ok? ---- no (level 1: io_ctx_start_backend) ----+
 *               | yes                                             |
 *               v                                                 v
 *          [ URING ] -- enter fails systemically, or a CQE  --> [ AIO ] -- io_setup
 *            |   ^      says -EOPNOTSUPP (level 2: io_fallback)    |      fails -->
 *            |   |                                                 |     [ SYNC ]
 *            +---+ a registration step fails (level 3: the step    |
 *                  is skipped inside io_uring.c; ring stays)       +-- never back
 *
 * Invariants:
 *   1. Every prepared I/O occupies one slot from io_prep_* until io_reap hands
 *      back its user_data; a slot is delivered once (SLOT_DONE -> SLOT_FREE).
 *   2. nfree + prepq.count + issued + resubq.count + doneq.count == depth.
 *   3. On a level-2 switch each ISSUED slot either completes on the old ring
 *      (drained) or is resubmitted to libaio - never both, never neither.
 *   4. No function sets errno for its caller; errors are returned as -errno.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "common/clock.h"
#include "common/log.h"
#include "io/io_int.h"

#define CPU_BEGIN(ctx) uint64_t cpu0_ = (ctx)->flags & IO_F_NO_CPU_STATS ? 0 : clock_thread_cpu_ns()
#define CPU_END(ctx) do { if (!((ctx)->flags & IO_F_NO_CPU_STATS)) \
	(ctx)->st.cpu_ns += clock_thread_cpu_ns() - cpu0_; } while (0)

/* ---- backend names and choice -------------------------------------------- */

const char *io_backend_name(enum io_backend b)
{
	switch (b) {
	case IO_BACKEND_URING: return "uring";
	case IO_BACKEND_AIO: return "aio";
	case IO_BACKEND_SYNC: return "sync";
	default: return "auto";
	}
}

static const struct io_backend_ops *ops_for(enum io_backend b)
{
	return b == IO_BACKEND_URING ? &io_uring_ops : b == IO_BACKEND_AIO ? &io_aio_ops
									  : &io_sync_ops;
}

/* AUTO: LOTUS_IO, else io_uring.  Sets *forced when the choice is explicit. */
static int backend_choose(enum io_backend req, enum io_backend *out, int *forced)
{
	const char *e = getenv("LOTUS_IO");
	*forced = req != IO_BACKEND_AUTO;
	*out = req == IO_BACKEND_AUTO ? IO_BACKEND_URING : req;
	if (req != IO_BACKEND_AUTO || !e || !*e || !strcasecmp(e, "auto"))
		return 0;
	*forced = 1;
	if (!strcasecmp(e, "uring") || !strcasecmp(e, "io_uring"))
		*out = IO_BACKEND_URING;
	else if (!strcasecmp(e, "aio") || !strcasecmp(e, "libaio"))
		*out = IO_BACKEND_AIO;
	else if (!strcasecmp(e, "sync"))
		*out = IO_BACKEND_SYNC;
	else {
		log_error("io: LOTUS_IO=%s is not one of uring, aio, sync", e);
		return -EINVAL;
	}
	return 0;
}

/* Level 1 (and libaio's own failure): walk uring -> aio -> sync. */
static int io_ctx_start_backend(struct io_ctx *ctx, enum io_backend b)
{
	for (;;) {
		ctx->backend = b;
		ctx->ops = ops_for(b);
		int ret = ctx->ops->init(ctx);
		if (ret == 0)
			return 0;
		if (ctx->forced || b == IO_BACKEND_SYNC) {
			log_error("io: %s backend unavailable: %s", io_backend_name(b),
				  b == IO_BACKEND_URING && ctx->setup_why ? ctx->setup_why
									  : strerror(-ret));
			return ret;
		}
		if (b == IO_BACKEND_URING) {
			ctx->st.setup_fallback = 1;
			log_warn("io: io_uring setup failed: %s; this context uses libaio",
				 ctx->setup_why ? ctx->setup_why : strerror(-ret));
			b = IO_BACKEND_AIO;
		} else {
			log_warn("io: libaio unavailable (%s); this context uses pread/pwrite",
				 strerror(-ret));
			b = IO_BACKEND_SYNC;
		}
	}
}

/* ---- create / destroy ------------------------------------------------------ */

static int io_ctx_alloc_tables(struct io_ctx *ctx)
{
	unsigned d = ctx->depth, q = 1;
	while (q < d)
		q <<= 1; /* FIFOs index with a mask */
	ctx->slots = calloc(d, sizeof(*ctx->slots));
	ctx->free_ids = calloc(d, sizeof(uint32_t));
	ctx->scratch = calloc(d, sizeof(uint32_t));
	ctx->prepq.v = calloc(q, sizeof(uint32_t));
	ctx->doneq.v = calloc(q, sizeof(uint32_t));
	ctx->resubq.v = calloc(q, sizeof(uint32_t));
	if (!ctx->slots || !ctx->free_ids || !ctx->scratch || !ctx->prepq.v || !ctx->doneq.v ||
	    !ctx->resubq.v)
		return -ENOMEM;
	ctx->prepq.mask = ctx->doneq.mask = ctx->resubq.mask = q - 1;
	for (unsigned i = 0; i < d; i++)
		ctx->free_ids[i] = d - 1 - i;
	ctx->nfree = d;
	return 0;
}

static void io_ctx_free(struct io_ctx *ctx)
{
	if (ctx->evfd >= 0)
		close(ctx->evfd);
	free(ctx->slots);
	free(ctx->free_ids);
	free(ctx->scratch);
	free(ctx->prepq.v);
	free(ctx->doneq.v);
	free(ctx->resubq.v);
	free(ctx->files);
	free(ctx);
}

int io_ctx_create(const struct io_opts *opts, io_ctx_t **out)
{
	struct io_opts o = opts ? *opts : (struct io_opts){ 0 };
	struct io_ctx *ctx = NULL;
	enum io_backend b;
	int ret = -EINVAL;
	if (!out || o.depth > IO_MAX_DEPTH || o.backend > IO_BACKEND_SYNC)
		goto out;
	ctx = calloc(1, sizeof(*ctx));
	ret = -ENOMEM;
	if (!ctx)
		goto out;
	ctx->evfd = -1;
	ctx->depth = o.depth ? o.depth : IO_DEFAULT_DEPTH;
	ctx->flags = o.flags;
	ctx->disabled = !!(o.flags & IO_F_R_DISABLED);
	io_fault_init(&ctx->fault, o.fault);
	ret = backend_choose(o.backend, &b, &ctx->forced);
	if (ret == 0)
		ret = io_ctx_alloc_tables(ctx);
	if (ret == 0)
		ret = io_ctx_start_backend(ctx, b);
out:
	if (ret < 0 && ctx) {
		io_ctx_free(ctx);
		ctx = NULL;
	}
	if (out)
		*out = ctx;
	return ret;
}

void io_ctx_destroy(io_ctx_t *ctx)
{
	if (!ctx)
		return;
	if (ctx->issued)
		log_debug("io: destroying a context with %u I/Os in flight", ctx->issued);
	ctx->ops->fini(ctx);
	io_ctx_free(ctx);
}

enum io_backend io_ctx_backend(const io_ctx_t *ctx)
{
	return ctx->backend;
}

static void io_reset_reg_state(struct io_ctx *ctx)
{
	ctx->nregions = ctx->npieces = 0;
	ctx->own_buffers = 0;
	ctx->st.reg_ring = ctx->st.reg_files = ctx->st.reg_buffers = ctx->st.cloned_buffers = 0;
	for (unsigned i = 0; i < ctx->nfiles; i++)
		ctx->files[i].fixed = 0;
}

int io_ctx_enable(io_ctx_t *ctx)
{
	if (!ctx->disabled)
		return 0;
	ctx->disabled = 0;
	if (ctx->backend != IO_BACKEND_URING || io_uring_ctx_enable(ctx) == 0)
		return 0;
	/* The ring cannot be enabled: level 1, as if setup had failed. */
	io_uring_ctx_detach(ctx);
	io_reset_reg_state(ctx);
	ctx->st.setup_fallback = 1;
	ctx->forced = 0;
	if (io_ctx_start_backend(ctx, IO_BACKEND_AIO) < 0)
		return io_ctx_start_backend(ctx, IO_BACKEND_SYNC);
	return 0;
}

/* ---- files and buffers ----------------------------------------------------- */

int io_ctx_add_file(io_ctx_t *ctx, int fd)
{
	int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
	if (fl < 0) {
		log_error("io: add_file: %d is not an open file descriptor", fd);
		return -EBADF;
	}
	if (ctx->nfiles == ctx->files_cap) {
		unsigned cap = ctx->files_cap ? ctx->files_cap * 2 : 16;
		if (cap > IO_MAX_FILES)
			return -EMFILE;
		struct io_file *f = realloc(ctx->files, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		ctx->files = f;
		ctx->files_cap = cap;
	}
	unsigned idx = ctx->nfiles;
	struct io_file *f = &ctx->files[idx];
	memset(f, 0, sizeof(*f));
	f->fd = fd;
	f->direct = !!(fl & O_DIRECT);
	if (f->direct && io_direct_align(fd, &f->mem_align, &f->off_align) < 0)
		f->mem_align = f->off_align = 4096;
	if (f->direct) {
		unsigned m = f->mem_align ? f->mem_align : 1, o = f->off_align ? f->off_align : 1;
		f->mem_mask = m - 1;
		f->off_mask = o - 1;
		f->odd_align = (m & (m - 1)) || (o & (o - 1));
	}
	ctx->nfiles++;
	if (ctx->backend == IO_BACKEND_URING)
		io_uring_ctx_add_file(ctx, idx); /* level 3 on failure: plain fd */
	return (int)idx;
}

/* Which registered buffer holds [buf, buf+len)?  -1 if none (plain buffer). */
static int buffer_index(const struct io_ctx *ctx, const void *buf, size_t len)
{
	const char *p = buf;
	for (unsigned i = 0; i < ctx->nregions; i++) {
		const struct io_region *r = &ctx->regions[i];
		if (p < r->base || p + len > r->base + r->len)
			continue;
		size_t off = (size_t)(p - r->base);
		if (off / IO_REG_PIECE != (off + len - 1) / IO_REG_PIECE)
			return -1; /* straddles two 1 GiB pieces */
		return (int)(r->first_index + off / IO_REG_PIECE);
	}
	return -1;
}

int io_ctx_register_buffer(io_ctx_t *ctx, void *base, size_t len)
{
	if (!base || !len)
		return -EINVAL;
	if (ctx->backend != IO_BACKEND_URING)
		return 0; /* nothing to register: every buffer is plain */
	if (!ctx->own_buffers && ctx->nregions) {
		log_error("io: register_buffer: this context already has cloned buffers");
		return -EBUSY;
	}
	size_t pieces = (len + IO_REG_PIECE - 1) / IO_REG_PIECE;
	if (ctx->nregions == IO_MAX_REGIONS || ctx->npieces + pieces > IO_MAX_IOVECS)
		return -ENOSPC;
	ctx->regions[ctx->nregions++] = (struct io_region){ base, len, ctx->npieces };
	ctx->npieces += (unsigned)pieces;
	int ret = io_uring_ctx_register_regions(ctx);
	if (ret < 0) {
		ctx->nregions--;
		ctx->npieces -= (unsigned)pieces;
		io_uring_ctx_register_regions(ctx); /* restore the previous set */
	}
	return ret;
}

int io_ctx_clone_buffers_from(io_ctx_t *ctx, io_ctx_t *donor)
{
	return io_ctx_clone_buffers_ex(ctx, donor, 0);
}

int io_ctx_clone_buffers_ex(io_ctx_t *ctx, io_ctx_t *donor, unsigned flags)
{
	if (!donor || donor == ctx)
		return -EINVAL;
	if (ctx->backend != IO_BACKEND_URING || donor->backend != IO_BACKEND_URING) {
		log_warn("io: clone_buffers: both contexts must use io_uring (%s <- %s)",
			 io_backend_name(ctx->backend), io_backend_name(donor->backend));
		return -EOPNOTSUPP;
	}
	return io_uring_ctx_clone(ctx, donor, flags);
}

/* ---- prepare ------------------------------------------------------------------ */

int io_file_check_direct(const struct io_ctx *ctx, int file, const void *buf, size_t len,
			 off_t off)
{
	const struct io_file *f = &ctx->files[file];
	if (!f->direct)
		return 0;
	const char *what = NULL;
	unsigned a = 0;
	if ((uintptr_t)buf % f->mem_align)
		what = "buffer address", a = f->mem_align;
	else if (len % f->off_align)
		what = "length", a = f->off_align;
	else if ((uint64_t)off % f->off_align)
		what = "offset", a = f->off_align;
	if (!what)
		return 0;
	log_error("io: O_DIRECT I/O on file %d: %s is not a multiple of %u (buf %p len %zu off %lld)",
		  file, what, a, buf, len, (long long)off);
	return -EINVAL;
}

/* Per I/O: one branch for the arguments, one for O_DIRECT alignment (the
 * masks are 0 for buffered files), no division. */
static inline int io_prep(io_ctx_t *ctx, enum io_op op, int file, void *buf, size_t len,
			  off_t off, uint64_t user_data)
{
	if (__builtin_expect((unsigned)file >= ctx->nfiles, 0))
		return -EBADF;
	if (__builtin_expect(!buf || len - 1 >= IO_MAX_LEN || off < 0, 0))
		return -EINVAL; /* len 0 wraps to SIZE_MAX */
	const struct io_file *f = &ctx->files[file];
	if (__builtin_expect((((uintptr_t)buf & f->mem_mask) | ((len | (uint64_t)off) & f->off_mask) |
			      (uint64_t)f->odd_align) != 0, 0)) {
		int ret = io_file_check_direct(ctx, file, buf, len, off);
		if (ret < 0)
			return ret;
	}
	if (__builtin_expect(!ctx->nfree, 0))
		return -EAGAIN;
	uint32_t id = ctx->free_ids[--ctx->nfree];
	struct io_slot *s = &ctx->slots[id];
	s->user_data = user_data;
	s->buf = buf;
	s->len = len;
	s->off = off;
	s->file = file;
	s->op = (uint8_t)op;
	s->state = SLOT_PREPARED;
	s->buf_index = (int16_t)(ctx->nregions ? buffer_index(ctx, buf, len) : -1);
	fifo_push(&ctx->prepq, id);
	return 0;
}

int io_prep_read(io_ctx_t *ctx, int file, void *buf, size_t len, off_t off, uint64_t user_data)
{
	return io_prep(ctx, IO_OP_READ, file, buf, len, off, user_data);
}

int io_prep_write(io_ctx_t *ctx, int file, const void *buf, size_t len, off_t off,
		  uint64_t user_data)
{
	return io_prep(ctx, IO_OP_WRITE, file, (void *)buf, len, off, user_data);
}

int io_prep_write_dsync(io_ctx_t *ctx, int file, const void *buf, size_t len, off_t off,
			uint64_t user_data)
{
	return io_prep(ctx, IO_OP_WRITE_DSYNC, file, (void *)buf, len, off, user_data);
}

/* ---- completion and fallback -------------------------------------------------- */

/* Errors that say "this ring cannot do I/O", not "this I/O failed". */
int io_err_is_systemic(int err)
{
	return err == -EOPNOTSUPP || err == -ENOSYS || err == -EBADFD;
}

void io_mark_resubmit(struct io_ctx *ctx, uint32_t id)
{
	struct io_slot *s = &ctx->slots[id];
	if (s->state != SLOT_ISSUED)
		return;
	s->state = SLOT_RESUBMIT;
	ctx->issued--;
	fifo_push(&ctx->resubq, id);
}

/* A backend finished slot id.  On io_uring a non-I/O error arms level 2. */
void io_complete(struct io_ctx *ctx, uint32_t id, int64_t res)
{
	if (id >= ctx->depth || ctx->slots[id].state != SLOT_ISSUED) {
		log_error("io: completion for slot %u in state %d ignored", id,
			  id < ctx->depth ? ctx->slots[id].state : -1);
		return;
	}
	struct io_slot *s = &ctx->slots[id];
	io_fault_cqe(ctx, &res);
	if (ctx->backend == IO_BACKEND_URING && res < 0 && io_err_is_systemic((int)res)) {
		if (!ctx->fallback_err)
			ctx->fallback_err = (int)res;
		io_mark_resubmit(ctx, id);
		return;
	}
	s->res = res;
	s->state = SLOT_DONE;
	ctx->issued--;
	fifo_push(&ctx->doneq, id);
}

/* Issue the FIFO q's head through the current backend; returns count taken. */
static int issue_fifo(struct io_ctx *ctx, struct io_fifo *q, unsigned wait_nr)
{
	unsigned n = q->count;
	if (!n)
		return 0;
	uint32_t *ids = ctx->scratch;
	for (unsigned i = 0; i < n; i++) {
		uint32_t id = q->v[(q->head + i) & q->mask];
		ids[i] = id;
		ctx->slots[id].state = SLOT_ISSUED;
	}
	ctx->issued += n;
	int ret = ctx->ops->submit(ctx, ids, n, wait_nr);
	unsigned took = ret > 0 ? (unsigned)ret : 0;
	for (unsigned i = took; i < n; i++) /* not taken: back to waiting */
		ctx->slots[ids[i]].state = q == &ctx->prepq ? SLOT_PREPARED : SLOT_RESUBMIT;
	ctx->issued -= n - took;
	fifo_drop(q, took);
	return ret;
}

/*
 * Level 2: the ring failed systemically.  Drain what the kernel already owns
 * (io_uring_ctx_detach), switch this context to libaio for good, and resubmit
 * every I/O that did not complete on the ring.
 */
static void io_fallback(struct io_ctx *ctx)
{
	int why = ctx->fallback_err;
	ctx->in_fallback = 1;
	io_uring_ctx_detach(ctx); /* issued slots -> done or resubq */
	ctx->fallback_err = 0;
	ctx->st.fallbacks++;
	ctx->forced = 0;
	io_reset_reg_state(ctx);
	unsigned n = ctx->resubq.count;
	log_warn("io: io_uring failed (%s, %s); this context switches to libaio and "
		 "resubmits %u I/Os", io_err_name(why), strerror(-why), n);
	if (io_ctx_start_backend(ctx, IO_BACKEND_AIO) < 0)
		io_ctx_start_backend(ctx, IO_BACKEND_SYNC);
	ctx->st.resubmitted += n;
	ctx->in_fallback = 0;
	issue_fifo(ctx, &ctx->resubq, 0);
}

static void fallback_if_armed(struct io_ctx *ctx)
{
	if (ctx->fallback_err && !ctx->in_fallback)
		io_fallback(ctx);
}

/* ---- submit and reap --------------------------------------------------------- */

static int submit_locked(io_ctx_t *ctx, unsigned wait_nr)
{
	if (ctx->disabled) {
		log_error("io: context created with IO_F_R_DISABLED: call io_ctx_enable() first");
		return -EBADFD;
	}
	if (ctx->resubq.count)
		issue_fifo(ctx, &ctx->resubq, 0);
	unsigned before = ctx->prepq.count;
	int ret = issue_fifo(ctx, &ctx->prepq, wait_nr);
	fallback_if_armed(ctx);
	unsigned done = before - ctx->prepq.count;
	if (ret < 0 && ret != -EAGAIN && !done)
		return ret;
	return (int)done;
}

int io_submit_batch(io_ctx_t *ctx)
{
	CPU_BEGIN(ctx);
	ctx->kernel_polled = 0;
	int ret = submit_locked(ctx, 0);
	CPU_END(ctx);
	return ret;
}

static unsigned deliver(struct io_ctx *ctx, struct io_cqe *cqes, unsigned max)
{
	unsigned n = ctx->doneq.count < max ? ctx->doneq.count : max;
	uint64_t bytes = 0;
	for (unsigned i = 0; i < n; i++) {
		uint32_t id = fifo_pop(&ctx->doneq);
		struct io_slot *s = &ctx->slots[id];
		cqes[i].user_data = s->user_data;
		cqes[i].res = s->res;
		bytes += s->res > 0 ? (uint64_t)s->res : 0;
		s->state = SLOT_FREE;
		ctx->free_ids[ctx->nfree++] = id;
	}
	ctx->st.ios += n;
	ctx->st.bytes += bytes;
	return n;
}

static int reap_locked(io_ctx_t *ctx, struct io_cqe *cqes, unsigned max, unsigned min)
{
	unsigned n = 0, outstanding = ctx->doneq.count + ctx->issued + ctx->resubq.count;
	if (min > max)
		min = max;
	if (min > outstanding)
		min = outstanding;
	for (int polled = 0;;) {
		n += deliver(ctx, cqes + n, max - n);
		if (n >= max || (n >= min && polled))
			break;
		if (ctx->resubq.count)
			issue_fifo(ctx, &ctx->resubq, 0);
		int ret = ctx->ops->reap(ctx, min > n ? min - n : 0, n);
		polled = 1;
		if (ctx->fallback_err && !ctx->in_fallback) {
			io_fallback(ctx);
			polled = 0;
			continue;
		}
		if (ret < 0 && ret != -EINTR) {
			n += deliver(ctx, cqes + n, max - n);
			return n ? (int)n : ret;
		}
		if (!ctx->issued && !ctx->doneq.count && n < min)
			break; /* nothing can complete (resubmission refused): don't spin */
	}
	return (int)n;
}

int io_reap(io_ctx_t *ctx, struct io_cqe *cqes, unsigned max, unsigned min_complete)
{
	CPU_BEGIN(ctx);
	ctx->kernel_polled = 0;
	int ret = reap_locked(ctx, cqes, max, min_complete);
	CPU_END(ctx);
	return ret;
}

int io_submit_and_reap(io_ctx_t *ctx, struct io_cqe *cqes, unsigned max, unsigned min_complete)
{
	CPU_BEGIN(ctx);
	/* io_uring: one enter submits and waits for what is not already done;
	 * the reap below then finds the CQEs ready without another syscall. */
	unsigned want = min_complete < max ? min_complete : max;
	unsigned wait = want > ctx->doneq.count ? want - ctx->doneq.count : 0;
	ctx->kernel_polled = 0;
	int ret = submit_locked(ctx, ctx->backend == IO_BACKEND_URING ? wait : 0);
	if (ret >= 0)
		ret = reap_locked(ctx, cqes, max, min_complete);
	CPU_END(ctx);
	return ret;
}

int io_ctx_notify_fd(io_ctx_t *ctx)
{
	if (ctx->evfd >= 0)
		return ctx->evfd;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	ctx->evfd = fd;
	if (ctx->backend == IO_BACKEND_URING) {
		int ret = io_uring_ctx_set_eventfd(ctx);
		if (ret < 0) {
			ctx->evfd = -1;
			close(fd);
			return ret;
		}
	}
	return fd;   /* libaio and sync use ctx->evfd as they issue */
}

void io_ctx_notify_clear(io_ctx_t *ctx)
{
	uint64_t v;
	if (ctx->evfd >= 0 && read(ctx->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug("io: reading the completion eventfd: %s", strerror(errno));
	if (ctx->backend == IO_BACKEND_URING)   /* see enter_next_reap */
		ctx->u.enter_next_reap = 1;
}

void io_notify_signal(struct io_ctx *ctx)
{
	uint64_t one = 1;
	if (ctx->evfd >= 0 && write(ctx->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("io: writing the completion eventfd: %s", strerror(errno));
}

unsigned io_inflight(const io_ctx_t *ctx)
{
	return ctx->issued + ctx->resubq.count + ctx->doneq.count;
}

void io_ctx_stats(const io_ctx_t *ctx, struct io_stats *out)
{
	*out = ctx->st;
	out->setup_flags = ctx->backend == IO_BACKEND_URING ? ctx->u.setup_flags : 0;
	out->iowq_capped = ctx->backend == IO_BACKEND_URING ? ctx->u.iowq_capped : 0;
	out->fixed_files = 0;
	for (unsigned i = 0; i < ctx->nfiles; i++)
		out->fixed_files += (unsigned)ctx->files[i].fixed;
}
