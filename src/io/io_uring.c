/*
 * io_uring.c - the io_uring backend (paper §4.1, §4.2).
 *
 * liburing 2.3 maps the rings and provides the SQE/CQE accessors; everything
 * newer than 2.3 (and every enter/register call, so that io_sys.c can count
 * and inject faults) is a raw system call.
 *
 * Setup (uring_init), each step probed at runtime:
 *   1. io_uring_setup with SINGLE_ISSUER + DEFER_TASKRUN + COOP_TASKRUN
 *      (unless IO_F_NO_SINGLE_ISSUER; the last two unless IO_F_SQPOLL or
 *      IO_F_NO_DEFER_TASKRUN), CQSIZE = depth, CLAMP, and SQPOLL / IOPOLL /
 *      R_DISABLED on request.  EINVAL drops one optional flag at a time and
 *      retries (as fio does); any other failure is level 1 (io.c falls back
 *      to libaio).
 *   2. probe READ/WRITE (required) and READ_FIXED/WRITE_FIXED.
 *   3. register the ring fd, a sparse file table (files join it later with
 *      FILES_UPDATE), and cap io-wq at one bounded worker.  Each is level 3:
 *      failure only drops that optimisation.
 *
 * Where the fallback levels start (io.c carries them out):
 *
 *   uring_setup_ring() fails ---------------------------> level 1 (io_ctx_start_backend)
 *   [ring up] -- uring_enter_failed(): systemic errno --+
 *       |     -- io_complete(): CQE -EOPNOTSUPP/ENOSYS --+-> ctx->fallback_err
 *       |                                                     -> io_fallback()
 *       |                                                     -> io_uring_ctx_detach()
 *       +-- uring_register_*() / clone fails ------------> level 3: logged, ring stays
 *
 * Invariants:
 *   - SQE user_data is the slot index; SQ slot i holds SQE i (array[i] = i,
 *     written once at setup).
 *   - DEFER_TASKRUN rings post completions only inside an enter with
 *     GETEVENTS by the owner: every enter of the layer asks for it, and a
 *     non-blocking reap that finds nothing enters once (uring_reap).
 *   - A slot is ISSUED from the moment its SQE is written; the kernel owns it
 *     once *khead has passed it.  io_uring_ctx_detach() relies on this split.
 *   - Buffer cloning passes the donor's real ring fd: a registered ring index
 *     is per task (IORING_REGISTER_SRC_REGISTERED only works for rings the
 *     calling thread registered itself), and real fds are never closed here.
 *   - The registered ring fd is per task: it is registered by the thread that
 *     uses the ring (at create, or in io_ctx_enable() for R_DISABLED rings).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "io/io_int.h"

#define IORING_REGISTER_CLONE_BUFFERS_OP 30
#define IORING_REGISTER_SRC_REGISTERED   (1U << 0)
#define IORING_REGISTER_DST_REPLACE      (1U << 1)

struct io_clone_arg { /* struct io_uring_clone_buffers, kernel 6.13 layout */
	uint32_t src_fd, flags, src_off, dst_off, nr, pad[3];
};
_Static_assert(sizeof(struct io_clone_arg) == 32, "clone ABI is 32 bytes");

/* ---- setup ----------------------------------------------------------------- */

static int read_int_file(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	int v = dflt;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = dflt;
		fclose(f);
	}
	return v;
}

static int seccomp_mode(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int mode = 0;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %d", &mode) == 1)
			break;
	if (f)
		fclose(f);
	return mode;
}

/* Why io_uring_setup failed and what would fix it (io.c logs it, one line). */
static const char *uring_setup_why(int err)
{
	int sysctl = read_int_file("/proc/sys/kernel/io_uring_disabled", 0);
	int sec = seccomp_mode();
	const char *why;
	if (err == -EPERM && sysctl == 2)
		why = "io_uring is disabled by sysctl kernel.io_uring_disabled=2";
	else if (err == -EPERM && sysctl == 1)
		why = "io_uring is limited to group kernel.io_uring_group "
		      "(kernel.io_uring_disabled=1) and this process is not in it";
	else if ((err == -EPERM || err == -ENOSYS) && sec)
		why = "io_uring_setup is blocked by a seccomp filter (container policy)";
	else if (err == -EPERM)
		why = "io_uring_setup is refused by a security module (EPERM)";
	else if (err == -ENOSYS)
		why = "the kernel has no io_uring (ENOSYS)";
	else if (err == -ENOMEM)
		why = "not enough memory for the ring (raise RLIMIT_MEMLOCK on kernels < 5.12)";
	else
		why = strerror(-err);
	return why;
}

/* DEFER_TASKRUN + COOP_TASKRUN by default on rings this thread owns alone:
 * task work then runs when the owner reaps, not through an interrupt per
 * completion.  The kernel refuses them on SQPOLL rings and DEFER_TASKRUN on
 * rings without SINGLE_ISSUER (donors). */
static unsigned uring_wanted_flags(const struct io_ctx *ctx)
{
	unsigned f = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
	if (!(ctx->flags & IO_F_NO_SINGLE_ISSUER)) {
		f |= IORING_SETUP_SINGLE_ISSUER;
		if (!(ctx->flags & (IO_F_NO_DEFER_TASKRUN | IO_F_SQPOLL)))
			f |= IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN;
	}
	if (ctx->flags & IO_F_SQPOLL)
		f |= IORING_SETUP_SQPOLL;
	if (ctx->flags & IO_F_IOPOLL)
		f |= IORING_SETUP_IOPOLL;
	if (ctx->flags & IO_F_R_DISABLED)
		f |= IORING_SETUP_R_DISABLED;
	return f;
}

/* The flag to drop after setup refused `want` with err, 0 if none may go.
 * The order keeps what is most useful on older kernels: 6.0 lacks only
 * DEFER_TASKRUN, 5.19 also SINGLE_ISSUER, and COOP_TASKRUN goes last of the
 * three (5.19).  EPERM can only be SQPOLL (it needed privilege before 5.11). */
static unsigned uring_flag_to_drop(unsigned want, int err)
{
	static const unsigned droppable[] = {
		IORING_SETUP_DEFER_TASKRUN, IORING_SETUP_SQPOLL, IORING_SETUP_IOPOLL,
		IORING_SETUP_SINGLE_ISSUER, IORING_SETUP_COOP_TASKRUN, IORING_SETUP_CLAMP,
		IORING_SETUP_CQSIZE,
	};
	if (err == -EPERM)
		return want & IORING_SETUP_SQPOLL;
	if (err != -EINVAL)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(droppable); i++)
		if (want & droppable[i])
			return droppable[i];
	return 0;
}

static int uring_setup_ring(struct io_ctx *ctx)
{
	unsigned want = uring_wanted_flags(ctx);
	for (;;) {
		struct io_uring_params p = { .flags = want, .cq_entries = ctx->depth,
					     .sq_thread_idle = 50 };
		int ret = io_sys_uring_setup(ctx, ctx->depth, &ctx->u.ring, &p);
		if (ret == 0) {
			ctx->u.setup_flags = want;
			return 0;
		}
		unsigned drop = uring_flag_to_drop(want, ret);
		if (!drop) {
			ctx->setup_why = uring_setup_why(ret);
			return ret;
		}
		log_info("io: io_uring setup refused flag 0x%x (%s); retrying without it", drop,
			 io_err_name(ret));
		want &= ~drop;
	}
}

static int uring_probe(struct io_ctx *ctx)
{
	size_t sz = sizeof(struct io_uring_probe) + 256 * sizeof(struct io_uring_probe_op);
	struct io_uring_probe *p = calloc(1, sz);
	int ret = -ENOMEM;
	if (!p)
		goto out;
	ret = io_sys_register(ctx, IO_REG_OTHER, IORING_REGISTER_PROBE, p, 256);
	if (ret < 0)
		goto out;
#define OP_OK(op) ((op) <= p->last_op && (p->ops[op].flags & IO_URING_OP_SUPPORTED))
	ret = OP_OK(IORING_OP_READ) && OP_OK(IORING_OP_WRITE) ? 0 : -EOPNOTSUPP;
	ctx->u.has_fixed_ops = OP_OK(IORING_OP_READ_FIXED) && OP_OK(IORING_OP_WRITE_FIXED);
#undef OP_OK
out:
	if (ret < 0)
		log_warn("io: io_uring probe: READ/WRITE not supported (%s)", io_err_name(ret));
	free(p);
	return ret;
}

static void uring_register_ring_fd(struct io_ctx *ctx)
{
	struct io_uring_rsrc_update up = { .offset = -1U, .data = (uint64_t)ctx->u.ring.ring_fd };
	int ret = io_sys_register(ctx, IO_REG_RING, IORING_REGISTER_RING_FDS, &up, 1);
	if (ret == 1) {
		ctx->u.enter_fd = (int)up.offset;
		ctx->u.enter_flags = IORING_ENTER_REGISTERED_RING;
		ctx->st.reg_ring = 1;
		return;
	}
	log_info("io: registering the ring fd failed (%s); carrying on without it",
		 io_err_name(ret));
}

static void uring_register_file_table(struct io_ctx *ctx)
{
	struct io_uring_rsrc_register rr = { .nr = IO_FILE_TABLE,
					     .flags = IORING_RSRC_REGISTER_SPARSE };
	int ret = io_sys_register(ctx, IO_REG_FILES, IORING_REGISTER_FILES2, &rr, sizeof(rr));
	if (ret == -EINVAL) { /* pre-5.19: a table of -1 entries */
		int fds[IO_FILE_TABLE];
		memset(fds, 0xff, sizeof(fds));
		ret = io_sys_register(ctx, IO_REG_FILES, IORING_REGISTER_FILES, fds,
				      IO_FILE_TABLE);
	}
	if (ret >= 0) {
		ctx->st.reg_files = 1;
		return;
	}
	log_info("io: registering the file table failed (%s); carrying on with plain fds",
		 io_err_name(ret));
}

static void uring_cap_iowq(struct io_ctx *ctx)
{
	unsigned v[2] = { 1, 1 }; /* bounded, unbounded */
	if (ctx->flags & IO_F_IOWQ_DEPTH)
		v[0] = MAX(ctx->depth, 1u);
	int ret = io_sys_register(ctx, IO_REG_OTHER, IORING_REGISTER_IOWQ_MAX_WORKERS, v, 2);
	ctx->u.iowq_capped = ret >= 0;
	if (ret < 0)
		log_debug("io: capping io-wq workers failed (%s)", io_err_name(ret));
}

static void uring_fini(struct io_ctx *ctx)
{
	if (!ctx->u.up)
		return;
	if (ctx->u.enter_flags & IORING_ENTER_REGISTERED_RING) {
		struct io_uring_rsrc_update up = { .offset = (uint32_t)ctx->u.enter_fd };
		io_sys_register(ctx, IO_REG_OTHER, IORING_UNREGISTER_RING_FDS, &up, 1);
	}
	io_uring_queue_exit(&ctx->u.ring);
	memset(&ctx->u, 0, sizeof(ctx->u));
}

static int uring_init(struct io_ctx *ctx)
{
	memset(&ctx->u, 0, sizeof(ctx->u));
	int ret = uring_setup_ring(ctx);
	if (ret < 0)
		return ret;
	ctx->u.up = 1;
	ctx->u.enter_fd = ctx->u.ring.ring_fd;
	ret = uring_probe(ctx);
	if (ret < 0) {
		uring_fini(ctx);
		return ret;
	}
	if (!(ctx->flags & IO_F_NO_REG_RING) && !ctx->disabled)
		uring_register_ring_fd(ctx);
	if (!(ctx->flags & IO_F_NO_REG_FILES))
		uring_register_file_table(ctx);
	uring_cap_iowq(ctx);
	ctx->u.poll_on_reap =
		!!(ctx->u.setup_flags & (IORING_SETUP_IOPOLL | IORING_SETUP_DEFER_TASKRUN));
	ctx->u.getevents_always = !!(ctx->u.setup_flags & IORING_SETUP_DEFER_TASKRUN);
	/* SQ slot i always holds SQE i: set the indirection array once. */
	for (unsigned i = 0; i < ctx->u.ring.sq.ring_entries; i++)
		ctx->u.ring.sq.array[i] = i;
	log_debug("io: io_uring ring fd %d, %u entries, flags 0x%x", ctx->u.ring.ring_fd,
		  ctx->u.ring.sq.ring_entries, ctx->u.setup_flags);
	return 0;
}

/* io_ctx_notify_fd: completions signal ctx->evfd. */
int io_uring_ctx_set_eventfd(struct io_ctx *ctx)
{
	int fd = ctx->evfd;
	int ret = io_sys_register(ctx, IO_REG_OTHER, IORING_REGISTER_EVENTFD, &fd, 1);
	if (ret < 0)
		log_info("io: registering a completion eventfd failed (%s)", io_err_name(ret));
	return ret < 0 ? ret : 0;
}

int io_uring_ctx_enable(struct io_ctx *ctx)
{
	int ret = io_sys_register(ctx, IO_REG_OTHER, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
	if (ret < 0) {
		log_error("io: enabling the io_uring ring failed (%s)", io_err_name(ret));
		return ret;
	}
	if (!(ctx->flags & IO_F_NO_REG_RING))
		uring_register_ring_fd(ctx);
	return 0;
}

/* ---- files and buffers --------------------------------------------------------- */

int io_uring_ctx_add_file(struct io_ctx *ctx, unsigned idx)
{
	if (!ctx->st.reg_files || idx >= IO_FILE_TABLE)
		return 0;
	int fd = ctx->files[idx].fd;
	struct io_uring_files_update up = { .offset = idx, .fds = (uint64_t)(uintptr_t)&fd };
	int ret = io_sys_register(ctx, IO_REG_OTHER, IORING_REGISTER_FILES_UPDATE, &up, 1);
	if (ret == 1) {
		ctx->files[idx].fixed = 1;
		return 0;
	}
	log_info("io: adding fd %d to the registered files failed (%s); using it unregistered",
		 fd, io_err_name(ret));
	return ret < 0 ? ret : -EIO;
}

static void explain_buffer_error(int err, size_t total)
{
	struct rlimit rl;
	char now[32] = "unlimited";
	size_t need_kib = (total + 1023) / 1024;
	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(now, sizeof(now), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
	if (err == -ENOMEM || err == -EPERM)
		log_warn("io: registering %zu KiB of buffers failed (%s): raise RLIMIT_MEMLOCK "
			 "(ulimit -l, now %s) to at least %zu KiB; using plain buffers",
			 need_kib, io_err_name(err), now, need_kib);
	else if (err == -EFAULT || err == -EOPNOTSUPP)
		log_warn("io: registering buffers failed (%s): the memory must be anonymous or "
			 "shared-memory pages the kernel can pin; using plain buffers",
			 io_err_name(err));
	else
		log_warn("io: registering buffers failed (%s, %s); using plain buffers",
			 io_err_name(err), strerror(-err));
}

/* (Re)register every region as 1 GiB pieces (the kernel's per-buffer limit). */
int io_uring_ctx_register_regions(struct io_ctx *ctx)
{
	struct iovec *iov = NULL;
	size_t total = 0;
	int ret = 0;
	if (ctx->own_buffers) {
		io_sys_register(ctx, IO_REG_OTHER, IORING_UNREGISTER_BUFFERS, NULL, 0);
		ctx->own_buffers = ctx->st.reg_buffers = 0;
	}
	if (!ctx->nregions)
		goto out;
	ret = -ENOMEM;
	iov = calloc(ctx->npieces, sizeof(*iov));
	if (!iov)
		goto out;
	for (unsigned r = 0; r < ctx->nregions; r++) {
		const struct io_region *rg = &ctx->regions[r];
		for (size_t off = 0; off < rg->len; off += IO_REG_PIECE) {
			size_t n = rg->len - off < IO_REG_PIECE ? rg->len - off : IO_REG_PIECE;
			iov[rg->first_index + off / IO_REG_PIECE] =
				(struct iovec){ rg->base + off, n };
		}
		total += rg->len;
	}
	uint64_t t0 = clock_now_ns();
	ret = io_sys_register(ctx, IO_REG_BUFFERS, IORING_REGISTER_BUFFERS, iov, ctx->npieces);
	if (ret < 0) {
		explain_buffer_error(ret, total);
		goto out;
	}
	ctx->own_buffers = ctx->st.reg_buffers = 1;
	log_debug("io: registered %zu KiB in %u buffers in %llu us", total / 1024, ctx->npieces,
		  (unsigned long long)(clock_now_ns() - t0) / 1000);
out:
	free(iov);
	return ret;
}

static void explain_clone_error(int err)
{
	const char *why;
	switch (-err) {
	case EEXIST: why = "the donor ring is SINGLE_ISSUER and owned by another thread; "
			   "create donors with IO_F_NO_SINGLE_ISSUER"; break;
	case EINVAL: why = "the rings belong to different processes, or the kernel predates "
			   "IORING_REGISTER_CLONE_BUFFERS (6.12)"; break;
	case EBUSY: why = "this context already has registered buffers "
			  "(use io_ctx_clone_buffers_ex with IO_CLONE_REPLACE)"; break;
	case ENXIO: why = "the donor has no registered buffers"; break;
	default: why = strerror(-err); break;
	}
	log_warn("io: cloning registered buffers failed (%s): %s; %s", io_err_name(err), why,
		 err == -EBUSY ? "keeping the current buffers" : "using plain buffers");
}

int io_uring_ctx_clone(struct io_ctx *ctx, struct io_ctx *donor, unsigned flags)
{
	struct io_clone_arg arg = { .src_fd = (uint32_t)donor->u.ring.ring_fd };
	if (flags & IO_CLONE_REPLACE)
		arg.flags |= IORING_REGISTER_DST_REPLACE;
	int ret = io_sys_register(ctx, IO_REG_CLONE, IORING_REGISTER_CLONE_BUFFERS_OP, &arg, 1);
	if (ret < 0) {
		explain_clone_error(ret);
		return ret;
	}
	/* The donor is idle (API rule), so its region list is stable to copy. */
	memcpy(ctx->regions, donor->regions, sizeof(ctx->regions));
	ctx->nregions = donor->nregions;
	ctx->npieces = donor->npieces;
	ctx->own_buffers = ctx->st.reg_buffers = 0;
	ctx->st.cloned_buffers = 1;
	return 0;
}

/* ---- submit and reap -------------------------------------------------------------- */

/* Publish the written SQEs (the array is the identity, set at init). */
static unsigned uring_flush_sq(struct io_uring *r)
{
	unsigned tail = r->sq.sqe_tail;
	if (r->sq.sqe_head != tail) {
		r->sq.sqe_head = tail;
		io_uring_smp_store_release(r->sq.ktail, tail);
	}
	return tail - io_uring_smp_load_acquire(r->sq.khead);
}

/* Classify a failed enter: transient errors are returned, systemic ones arm level 2. */
static int uring_enter_failed(struct io_ctx *ctx, int err)
{
	if (err == -EAGAIN || err == -EBUSY || err == -EINTR || err == -ETIME)
		return err;
	if (err == -EEXIST) {
		log_error("io: io_uring_enter: -EEXIST: context used by a thread that does not "
			  "own its SINGLE_ISSUER ring");
		return err;
	}
	if (!ctx->fallback_err)
		ctx->fallback_err = err;
	return err;
}

/* Submit whatever sits in the SQ; wait for wait_nr completions.  On a
 * DEFER_TASKRUN ring every enter asks for GETEVENTS: with wait_nr 0 that only
 * runs the pending completion work (the CQ is filled now, so the next reap
 * needs no system call of its own) and never blocks. */
static int uring_enter(struct io_ctx *ctx, unsigned wait_nr, unsigned extra_flags)
{
	struct io_uring *r = &ctx->u.ring;
	for (;;) {
		unsigned to_submit = uring_flush_sq(r), flags = extra_flags;
		if (wait_nr || ctx->u.getevents_always)
			flags |= IORING_ENTER_GETEVENTS;
		if (r->flags & IORING_SETUP_SQPOLL) {
			if (IO_URING_READ_ONCE(*r->sq.kflags) & IORING_SQ_NEED_WAKEUP)
				flags |= IORING_ENTER_SQ_WAKEUP;
			else if (!(flags & IORING_ENTER_GETEVENTS))
				return 0;
		}
		if (!to_submit && !(flags & (IORING_ENTER_GETEVENTS | IORING_ENTER_SQ_WAKEUP)))
			return 0;
		int ret = io_sys_enter(ctx, to_submit, wait_nr, flags, NULL, 0);
		if (ret == -EINTR)
			continue;
		if (ret >= 0 && (flags & IORING_ENTER_GETEVENTS))
			ctx->kernel_polled = 1;
		return ret < 0 ? uring_enter_failed(ctx, ret) : ret;
	}
}

/* Write slot id's SQE in full (every field io_uring_prep_rw sets); returns 1
 * if it uses a registered buffer. */
static inline unsigned uring_fill_sqe(const struct io_ctx *ctx, struct io_uring_sqe *sqe,
				      uint32_t id)
{
	static const uint8_t opcode[2][2] = {
		{ IORING_OP_READ, IORING_OP_WRITE },
		{ IORING_OP_READ_FIXED, IORING_OP_WRITE_FIXED },
	};
	const struct io_slot *s = &ctx->slots[id];
	const struct io_file *f = &ctx->files[s->file];
	unsigned fixed_buf = s->buf_index >= 0 && ctx->u.has_fixed_ops;
	sqe->opcode = opcode[fixed_buf][s->op != IO_OP_READ];
	sqe->flags = f->fixed ? IOSQE_FIXED_FILE : 0;
	sqe->ioprio = 0;
	sqe->fd = f->fixed ? s->file : f->fd;
	sqe->off = (uint64_t)s->off;
	sqe->addr = (uint64_t)(uintptr_t)s->buf;
	sqe->len = (uint32_t)s->len;
	sqe->rw_flags = s->op == IO_OP_WRITE_DSYNC ? RWF_DSYNC : 0;
	sqe->user_data = id;
	sqe->buf_index = fixed_buf ? (uint16_t)s->buf_index : 0;
	sqe->personality = 0;
	sqe->file_index = 0;
	sqe->addr3 = 0;
	sqe->__pad2[0] = 0;
	return fixed_buf;
}

static int uring_submit(struct io_ctx *ctx, const uint32_t *ids, unsigned n, unsigned wait_nr)
{
	struct io_uring_sq *sq = &ctx->u.ring.sq;
	unsigned tail = sq->sqe_tail, fixed = 0;
	unsigned room = sq->ring_entries - (tail - io_uring_smp_load_acquire(sq->khead));
	if (n > room)
		n = room;
	for (unsigned i = 0; i < n; i++)
		fixed += uring_fill_sqe(ctx, &sq->sqes[(tail + i) & sq->ring_mask], ids[i]);
	sq->sqe_tail = tail + n;
	ctx->st.fixed_ios += fixed;
	if (wait_nr > ctx->issued)
		wait_nr = ctx->issued;
	int ret = uring_enter(ctx, wait_nr, 0);
	/* Written SQEs stay taken even if enter failed: they sit in the SQ and are
	 * either submitted by the next enter or resubmitted by io_fallback(). */
	return ret < 0 && !n ? ret : (int)n;
}

static unsigned uring_drain_cq(struct io_ctx *ctx)
{
	struct io_uring *r = &ctx->u.ring;
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	io_uring_for_each_cqe(r, head, cqe) {
		io_complete_fast(ctx, (uint32_t)cqe->user_data, cqe->res);
		n++;
	}
	io_uring_cq_advance(r, n);
	return n;
}

/*
 * With DEFER_TASKRUN (and IOPOLL) completions reach the CQ only inside an
 * enter with GETEVENTS, so a reap that finds the CQ empty enters once with
 * min_complete 0 - unless I/O is not in flight, the caller already holds
 * completions (have), or this API call already entered with GETEVENTS.
 */
static int uring_reap(struct io_ctx *ctx, unsigned min, unsigned have)
{
	unsigned got = uring_drain_cq(ctx);
	int poll = (ctx->u.enter_next_reap || (!got && !have)) && ctx->u.poll_on_reap &&
		   ctx->issued && !ctx->kernel_polled;
	ctx->u.enter_next_reap = 0;
	for (;;) {
		unsigned need = min > got ? min - got : 0;
		if (need > ctx->issued)
			need = ctx->issued;
		if ((!need && !poll) || ctx->fallback_err)
			return (int)got;
		int ret = uring_enter(ctx, need, IORING_ENTER_GETEVENTS);
		poll = 0;
		if (ret < 0 && ret != -ETIME && ret != -EAGAIN && ret != -EBUSY)
			return got ? (int)got : ret;
		got += uring_drain_cq(ctx);
	}
}

/*
 * Level 2, ring side: slots whose SQE the kernel never consumed are queued
 * for resubmission; slots it owns are drained (bounded wait) so that none
 * completes twice.  Then the ring is torn down.
 */
void io_uring_ctx_detach(struct io_ctx *ctx)
{
	struct io_uring *r = &ctx->u.ring;
	if (!ctx->u.up)
		return;
	unsigned head = io_uring_smp_load_acquire(r->sq.khead);
	for (unsigned i = head; i != r->sq.sqe_tail; i++)
		io_mark_resubmit(ctx, (uint32_t)r->sq.sqes[i & r->sq.ring_mask].user_data);
	uint64_t deadline = clock_now_ns() + 5000000000ull;
	int ext = !!(r->features & IORING_FEAT_EXT_ARG);
	while (ctx->issued && clock_now_ns() < deadline) {
		if (uring_drain_cq(ctx))
			continue;
		struct __kernel_timespec ts = { .tv_nsec = 100000000 };
		struct io_uring_getevents_arg arg = { .ts = (uint64_t)(uintptr_t)&ts };
		int ret = io_sys_enter(ctx, 0, 1, IORING_ENTER_GETEVENTS |
					   (ext ? IORING_ENTER_EXT_ARG : 0),
				       ext ? &arg : NULL, ext ? sizeof(arg) : 0);
		if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY)
			break;
	}
	uring_drain_cq(ctx);
	if (ctx->issued) {
		log_warn("io: %u I/Os never completed on the failed ring; resubmitting them "
			 "(they may execute twice)", ctx->issued);
		for (uint32_t id = 0; id < ctx->depth; id++)
			io_mark_resubmit(ctx, id);
	}
	uring_fini(ctx);
}

const struct io_backend_ops io_uring_ops = {
	.id = IO_BACKEND_URING,
	.init = uring_init,
	.fini = uring_fini,
	.submit = uring_submit,
	.reap = uring_reap,
};
