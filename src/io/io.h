/*
 * io.h - the hybrid storage I/O layer (§4.1 of "io_uring in Oracle Database: A
 * Hybrid Storage I/O Architecture at Production Scale").
 *
 * Shape: setup, prepare, submit, reap, plus synchronous single-block read and
 * write.  One io_ctx per thread; nothing on the I/O path is shared, so no
 * function here takes a lock.  Thread rule: an io_ctx is used only by the thread
 * that created it (io_ctx_create), except io_ctx_clone_buffers_from(), which
 * reads the donor's registration and is safe while the donor is idle.
 *
 * Backends, chosen at runtime (never at build time):
 *   IO_BACKEND_URING  io_uring via liburing (default where it works)
 *   IO_BACKEND_AIO    libaio (default where io_uring does not work)
 *   IO_BACKEND_SYNC   pread/pwrite executed at submit time
 * LOTUS_IO=uring|aio|sync overrides IO_BACKEND_AUTO.  Synchronous single-block
 * reads (io_read_sync) always use pread, whatever the backend.
 *
 * Fallback levels (all per context; one context falling back affects no other):
 *   1. setup fails                         -> libaio for the context's lifetime
 *   2. enter fails systemically, or a CQE  -> libaio for the rest of the lifetime;
 *      reports a non-I/O error (-EOPNOTSUPP)  every in-flight I/O is resubmitted,
 *                                             each completes exactly once
 *   3. a registration step fails           -> carry on without that optimisation
 *
 * Returns: 0 or a count on success, -errno on failure (never sets errno).
 */
#ifndef LOTUS_IO_H
#define LOTUS_IO_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum io_backend { IO_BACKEND_AUTO = 0, IO_BACKEND_URING, IO_BACKEND_AIO, IO_BACKEND_SYNC };

struct io_opts {
	enum io_backend backend;  /* AUTO: LOTUS_IO env, else uring, else aio */
	unsigned depth;           /* SQ/CQ entries and max in flight (default 128) */
	unsigned flags;           /* IO_F_* */
	/* This context's fault spec (the LOTUS_IO_FAULT grammar below),
	 * instead of the process-wide one; NULL: LOTUS_IO_FAULT / io_fault_set(). */
	const char *fault;
};
#define IO_F_NO_SINGLE_ISSUER 0x1 /* donor rings: others may clone from them */
#define IO_F_SQPOLL           0x2 /* try SQPOLL (falls back if refused) */
#define IO_F_IOPOLL           0x4 /* try IOPOLL (needs O_DIRECT on a polled device) */
#define IO_F_NO_REG_RING      0x8 /* skip registering the ring fd (for Table 7) */
#define IO_F_NO_REG_FILES     0x10 /* skip registering files (for Table 7) */
/* DEFER_TASKRUN + COOP_TASKRUN are the default for SINGLE_ISSUER rings without
 * SQPOLL (the kernel refuses them with SQPOLL; donor rings are not single
 * issuer).  Completions are then posted when the owner enters the kernel to
 * reap, with one wakeup per wait instead of one per completion: they appear
 * only through io_reap / io_submit_and_reap (a non-blocking reap enters the
 * kernel itself when the CQ is empty and I/O is in flight). */
/* Create the ring disabled (IORING_SETUP_R_DISABLED); the thread that
 * will own the context - possibly in a child process after fork() - calls
 * io_ctx_enable() before any I/O.  Registration and cloning work before. */
#define IO_F_R_DISABLED       0x40
#define IO_F_NO_CPU_STATS     0x80 /* skip the per-call thread-CPU clock reads */
#define IO_F_NO_DEFER_TASKRUN 0x100 /* opt out of DEFER_TASKRUN and COOP_TASKRUN */
/* Every ring caps its io-wq at one bounded worker (writers and the log want
 * no thread per I/O).  Random reads that the device cannot take without
 * blocking are punted there, one at a time; this flag caps it at the ring's
 * depth instead, so such reads overlap (the tier's miss rings). */
#define IO_F_IOWQ_DEPTH       0x200

typedef struct io_ctx io_ctx_t;

/* One completed I/O.  res is bytes transferred or -errno. */
struct io_cqe {
	uint64_t user_data;
	int64_t res;
};

struct io_stats {
	uint64_t ios, bytes;
	uint64_t sys_enter, sys_submit, sys_getevents, sys_pread, sys_pwrite;
	uint64_t fallbacks;           /* level-2 switches to libaio (0 or 1) */
	uint64_t resubmitted;         /* I/Os replayed on fallback */
	int setup_fallback;           /* 1 if level 1 happened */
	int reg_ring, reg_files, reg_buffers, cloned_buffers; /* registration state */
	uint64_t cpu_ns;              /* thread CPU spent inside this layer */
	/* Added fields (append only). */
	uint64_t fixed_ios;           /* I/Os issued with READ_FIXED/WRITE_FIXED */
	unsigned setup_flags;         /* IORING_SETUP_* the kernel accepted (uring only) */
	int iowq_capped;              /* io-wq limited to one bounded worker */
	unsigned fixed_files;         /* files in the registered file table */
};

/* Create a context for the calling thread.  -ENOMEM, -EINVAL; io_uring failures
 * do not fail this call (they fall back), unless backend==URING was forced. */
int io_ctx_create(const struct io_opts *opts, io_ctx_t **out);
void io_ctx_destroy(io_ctx_t *ctx);
enum io_backend io_ctx_backend(const io_ctx_t *ctx);
const char *io_backend_name(enum io_backend b);

/* Files: add an open fd to the context; returns a file index >= 0 used by the
 * prepare calls.  With io_uring the fd joins the registered set (a file added
 * later is added to the set with the update call). */
int io_ctx_add_file(io_ctx_t *ctx, int fd);

/* Buffers: register [base, base+len) for fixed-buffer I/O (level-3 fallback on
 * failure: the buffer is then used as a plain buffer).  Returns 0 or -errno
 * with a logged hint (RLIMIT_MEMLOCK: which limit to raise). */
int io_ctx_register_buffer(io_ctx_t *ctx, void *base, size_t len);
/* Clone the donor's registered buffers into ctx (IORING_REGISTER_CLONE_BUFFERS,
 * raw syscall opcode 30).  -EEXIST: donor is SINGLE_ISSUER and owned by another
 * thread; -EINVAL: different processes; -EBUSY: ctx already has buffers.  On
 * any error ctx keeps working without registered buffers. */
int io_ctx_clone_buffers_from(io_ctx_t *ctx, io_ctx_t *donor);
/* The same with flags; IO_CLONE_REPLACE replaces ctx's own buffers
 * (IORING_REGISTER_DST_REPLACE) instead of failing with -EBUSY. */
#define IO_CLONE_REPLACE 0x1
int io_ctx_clone_buffers_ex(io_ctx_t *ctx, io_ctx_t *donor, unsigned flags);

/* Make the calling thread the owner of an IO_F_R_DISABLED context
 * (IORING_REGISTER_ENABLE_RINGS, then the per-thread ring-fd registration).
 * The fork pattern: the parent creates, registers or clones, forks; the child
 * calls io_ctx_enable() and uses the context.  A no-op for other contexts.
 * If the ring cannot be enabled the context falls back to libaio (level 1). */
int io_ctx_enable(io_ctx_t *ctx);

/* Prepare one I/O; nothing is issued until io_submit_batch().  buf may lie in the
 * registered buffer (then fixed-buffer opcodes are used) or anywhere else.
 * -EAGAIN when depth I/Os are already prepared or in flight. */
int io_prep_read(io_ctx_t *ctx, int file, void *buf, size_t len, off_t off, uint64_t user_data);
int io_prep_write(io_ctx_t *ctx, int file, const void *buf, size_t len, off_t off,
		  uint64_t user_data);
/* Per-I/O flag for writes: RWF_DSYNC semantics (redo log). */
int io_prep_write_dsync(io_ctx_t *ctx, int file, const void *buf, size_t len, off_t off,
			uint64_t user_data);

/* Issue everything prepared.  Returns the number submitted or -errno. */
int io_submit_batch(io_ctx_t *ctx);
/* Reap completions into cqes[0..max).  Blocks until at least min_complete are
 * available (min_complete 0 = never block).  Returns the number reaped. */
int io_reap(io_ctx_t *ctx, struct io_cqe *cqes, unsigned max, unsigned min_complete);
/* Submit and wait for min_complete in one step where the backend allows it. */
int io_submit_and_reap(io_ctx_t *ctx, struct io_cqe *cqes, unsigned max, unsigned min_complete);
unsigned io_inflight(const io_ctx_t *ctx);

/* A file descriptor (an eventfd) that turns readable when an I/O of this
 * context completes, so a thread that also waits on other fds (a memory
 * server's worker: its network) can sleep while I/O is in flight instead of
 * polling.  io_uring signals it through IORING_REGISTER_EVENTFD, libaio
 * through IOCB_FLAG_RESFD on every iocb, the sync backend by writing it after
 * each batch; a level-2 fallback keeps it working.  Made on the first call,
 * owned by the context.  Readable means "reap now": with DEFER_TASKRUN the
 * completion is posted by that reap, and it may find nothing (a spurious
 * wakeup).  io_ctx_notify_clear() resets the counter and makes the next
 * io_reap enter the kernel to post what is pending (with DEFER_TASKRUN the
 * kernel signals only when its list of pending completions was empty, so a
 * cleared signal would not come again): call it right before reaping, never
 * after, or a completion between the two is missed.  Returns the fd or
 * -errno (then poll as before). */
int io_ctx_notify_fd(io_ctx_t *ctx);
void io_ctx_notify_clear(io_ctx_t *ctx);

/* Synchronous single-block I/O: always pread/pwrite, full length or -errno
 * (-EIO on a short transfer at EOF is reported as the byte count). */
ssize_t io_read_sync(io_ctx_t *ctx, int file, void *buf, size_t len, off_t off);
ssize_t io_write_sync(io_ctx_t *ctx, int file, const void *buf, size_t len, off_t off);

void io_ctx_stats(const io_ctx_t *ctx, struct io_stats *out);

/* Check an O_DIRECT request before issuing it: buffer, length and offset
 * aligned to the logical block size of the file.  -EINVAL with a logged reason. */
int io_check_direct(int fd, const void *buf, size_t len, off_t off);
/* Open a file for O_DIRECT; a file system without O_DIRECT gives -EINVAL with a
 * clear message (never a silent buffered fallback). */
int io_open_direct(const char *path, int flags, mode_t mode);

/* Fault injection (tests): LOTUS_IO_FAULT="setup", "enter:N" (fail the Nth
 * enter), "reg_ring", "reg_files", "reg_buffers", "clone", "cqe:N:ERRNO"
 * (complete the Nth I/O with -ERRNO), "pread:N[:ERRNO]" / "pwrite:N[:ERRNO]" (fail
 * the Nth pread / pwrite of the context, e.g. an io_read_sync), comma-separated.
 * io_fault_set() sets the same string programmatically for contexts created
 * afterwards; io_opts.fault sets it for one context. */
void io_fault_set(const char *spec);

#endif
