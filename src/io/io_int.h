/*
 * io_int.h - internals of the hybrid I/O layer, shared by the .c files of src/io only.
 *
 * A context (struct io_ctx) owns a fixed table of `depth` slots.  A slot is one
 * I/O the caller prepared; its index is what every backend uses as its own
 * per-request tag (SQE user_data, iocb data), so a backend never sees the
 * caller's user_data and a completion is delivered by slot, exactly once:
 *
 *   FREE --io_prep_*--> PREPARED --io_submit_batch--> ISSUED --backend--> DONE
 *     ^                                                 |  ^                |
 *     |                         io_fallback() (level 2) v  | resubmit       |
 *     |                                              RESUBMIT              |
 *     +------------------------- io_reap() delivers user_data ------------+
 *
 * Every system call of the layer goes through io_sys_*() (io_sys.c): that is
 * where counters are kept and where LOTUS_IO_FAULT injects failures.
 */
#ifndef LOTUS_IO_INT_H
#define LOTUS_IO_INT_H
#include <stdint.h>
#include <sys/uio.h>
#include <libaio.h>
#include <liburing.h>
#include "io/io.h"

#define IO_DEFAULT_DEPTH   128u
#define IO_MAX_DEPTH       32768u
#define IO_MAX_FILES       4096u
#define IO_FILE_TABLE      256u   /* registered (sparse) file table size */
#define IO_MAX_REGIONS     16u    /* buffer regions a context can register */
#define IO_MAX_IOVECS      1024u  /* registered buffers (1 GiB pieces) */
#define IO_MAX_LEN         0x7ffff000ul /* MAX_RW_COUNT */
#define IO_REG_PIECE       (1ul << 30) /* kernel limit per registered buffer */

enum io_op { IO_OP_READ, IO_OP_WRITE, IO_OP_WRITE_DSYNC };
enum io_slot_state { SLOT_FREE, SLOT_PREPARED, SLOT_ISSUED, SLOT_RESUBMIT, SLOT_DONE };

struct io_slot {
	uint64_t user_data;
	void *buf;
	size_t len;
	off_t off;
	int64_t res;       /* valid in SLOT_DONE */
	int file;
	uint8_t op;        /* enum io_op */
	uint8_t state;     /* enum io_slot_state */
	int16_t buf_index; /* registered buffer index, -1 for a plain buffer */
};

struct io_file {
	int fd;
	int fixed;         /* 1 if in the ring's registered file table */
	int direct;        /* opened with O_DIRECT: alignment is checked at prep */
	unsigned mem_align, off_align;
	/* What io_prep tests on every I/O, in one branch: address & mem_mask,
	 * (length | offset) & off_mask (align - 1; 0 for buffered files), and
	 * odd_align when an alignment is not a power of two (checked by modulo). */
	uint64_t mem_mask, off_mask;
	int odd_align;
};

struct io_region {
	char *base;
	size_t len;
	unsigned first_index; /* index of its first 1 GiB piece */
};

/* FIFO of slot indices; its size is a power of two >= depth (mask + 1). */
struct io_fifo {
	uint32_t *v;
	unsigned head, count, mask;
};

enum io_reg_step { IO_REG_RING, IO_REG_FILES, IO_REG_BUFFERS, IO_REG_CLONE, IO_REG_OTHER };

/* Parsed LOTUS_IO_FAULT, per context (N counts from the context's creation). */
struct io_fault {
	int setup_err;          /* errno to fail io_uring setup with, 0 = none */
	int reg_err[IO_REG_OTHER];
	uint64_t enter_nth;     /* 1-based; 0 = never */
	int enter_err;
	uint64_t cqe_nth;
	int cqe_err;
	uint64_t pread_nth, pwrite_nth;
	int pread_err, pwrite_err;
	uint64_t enters, cqes, preads, pwrites;  /* seen so far */
};

struct io_ctx;
/* A backend: a small table of functions chosen at runtime. */
struct io_backend_ops {
	enum io_backend id;
	int (*init)(struct io_ctx *ctx);
	void (*fini)(struct io_ctx *ctx);
	/* Issue ids[0..n) from the front; returns how many were taken or -errno. */
	int (*submit)(struct io_ctx *ctx, const uint32_t *ids, unsigned n, unsigned wait_nr);
	/* Move completions to the done FIFO (io_complete); wait for min.  have:
	 * completions the caller already holds in this call - with min 0 and
	 * have > 0 a backend makes no system call just to look for more. */
	int (*reap)(struct io_ctx *ctx, unsigned min, unsigned have);
};

extern const struct io_backend_ops io_uring_ops, io_aio_ops, io_sync_ops;

struct io_uring_state {
	struct io_uring ring;
	int up;                 /* ring exists */
	int enter_fd;           /* ring fd, or its registered index */
	unsigned enter_flags;   /* IORING_ENTER_REGISTERED_RING when registered */
	unsigned setup_flags;   /* flags that the kernel accepted */
	int poll_on_reap;       /* IOPOLL / DEFER_TASKRUN: completions need enter */
	int getevents_always;   /* DEFER_TASKRUN: every enter also posts completions */
	int enter_next_reap;    /* io_ctx_notify_clear: the next reap enters the kernel
				 * even if the CQ has entries (DEFER_TASKRUN signals the
				 * eventfd only when its task-work list was empty, and the
				 * clear may have eaten the signal of a completion that is
				 * on that list and not in the CQ yet) */
	int has_fixed_ops;      /* READ_FIXED / WRITE_FIXED probed */
	int iowq_capped;
};

struct io_aio_state {
	io_context_t actx;
	int up;
	struct iocb *iocbs;     /* one per slot */
	struct iocb **ptrs;
	struct io_event *events;
};

struct io_ctx {
	const struct io_backend_ops *ops;
	enum io_backend backend;
	unsigned depth, flags;
	int forced;             /* backend was forced (opts or LOTUS_IO) */
	int disabled;           /* IO_F_R_DISABLED and io_ctx_enable() not called yet */
	int fallback_err;       /* level-2 trigger pending (set by the uring backend) */
	int in_fallback;
	int kernel_polled;      /* the backend collected completions from the kernel
				 * during the current API call (reset at each call) */
	const char *setup_why;  /* why io_uring setup failed (static string) */

	struct io_slot *slots;
	uint32_t *free_ids;
	unsigned nfree;
	struct io_fifo prepq, doneq, resubq;
	uint32_t *scratch;      /* depth ids: a contiguous batch for a backend */
	unsigned issued;        /* slots the current backend owns */

	struct io_file *files;
	unsigned nfiles, files_cap;
	struct io_region regions[IO_MAX_REGIONS];
	unsigned nregions, npieces;
	int own_buffers;        /* registered by this ring (not cloned) */
	int evfd;               /* io_ctx_notify_fd's eventfd, or -1 */

	struct io_uring_state u;
	struct io_aio_state a;
	struct io_fault fault;
	struct io_stats st;
};

/* io.c */
void io_complete(struct io_ctx *ctx, uint32_t id, int64_t res);
void io_mark_resubmit(struct io_ctx *ctx, uint32_t id);
int io_err_is_systemic(int err);
int io_file_check_direct(const struct io_ctx *ctx, int file, const void *buf, size_t len,
			 off_t off);
const char *io_err_name(int err);
void io_notify_signal(struct io_ctx *ctx);   /* the sync backend's completions */
int io_uring_ctx_set_eventfd(struct io_ctx *ctx);

/* io_fifo helpers: per-I/O hot path, so inline and division-free. */
static inline void fifo_push(struct io_fifo *f, uint32_t id)
{
	f->v[(f->head + f->count++) & f->mask] = id;
}

static inline uint32_t fifo_pop(struct io_fifo *f)
{
	uint32_t id = f->v[f->head];
	f->head = (f->head + 1) & f->mask;
	f->count--;
	return id;
}

/* Drop the first n entries (n <= count). */
static inline void fifo_drop(struct io_fifo *f, unsigned n)
{
	f->head = (f->head + n) & f->mask;
	f->count -= n;
}

/*
 * The common completion - slot in range and ISSUED, res >= 0, no cqe fault
 * armed - inline; everything else (errors that may arm level 2, injected
 * faults, stray ids) goes through io_complete().
 */
static inline void io_complete_fast(struct io_ctx *ctx, uint32_t id, int64_t res)
{
	if (__builtin_expect(id >= ctx->depth || res < 0 || ctx->fault.cqe_nth != 0 ||
				     ctx->slots[id].state != SLOT_ISSUED, 0)) {
		io_complete(ctx, id, res);
		return;
	}
	struct io_slot *s = &ctx->slots[id];
	s->res = res;
	s->state = SLOT_DONE;
	ctx->issued--;
	fifo_push(&ctx->doneq, id);
}

/* io_uring.c */
int io_uring_ctx_add_file(struct io_ctx *ctx, unsigned idx);
int io_uring_ctx_register_regions(struct io_ctx *ctx);
int io_uring_ctx_clone(struct io_ctx *ctx, struct io_ctx *donor, unsigned flags);
int io_uring_ctx_enable(struct io_ctx *ctx);
void io_uring_ctx_detach(struct io_ctx *ctx);

/* io_direct.c */
int io_direct_align(int fd, unsigned *mem_align, unsigned *off_align);

/* io_sys.c: the one wrapper for every system call (counters + faults). */
void io_fault_init(struct io_fault *f, const char *spec);  /* spec NULL: the global one */
int io_fault_cqe(struct io_ctx *ctx, int64_t *res);
int io_sys_uring_setup(struct io_ctx *ctx, unsigned entries, struct io_uring *ring,
		       struct io_uring_params *p);
int io_sys_enter(struct io_ctx *ctx, unsigned to_submit, unsigned min_complete, unsigned flags,
		 void *arg, size_t argsz);
int io_sys_register(struct io_ctx *ctx, enum io_reg_step step, unsigned opcode, void *arg,
		    unsigned nr);
int io_sys_aio_setup(struct io_ctx *ctx, unsigned depth, io_context_t *actx);
int io_sys_aio_submit(struct io_ctx *ctx, long n, struct iocb **ios);
int io_sys_aio_getevents(struct io_ctx *ctx, long min, long max, struct io_event *ev,
			 struct timespec *ts);
ssize_t io_sys_pread(struct io_ctx *ctx, int fd, void *buf, size_t len, off_t off);
ssize_t io_sys_pwrite(struct io_ctx *ctx, int fd, const void *buf, size_t len, off_t off,
		      int dsync);

#endif
