/*
 * io_sync.c - the pread/pwrite backend (LOTUS_IO=sync, and the last resort
 * when libaio cannot be set up), plus io_read_sync()/io_write_sync(), the
 * synchronous single-block path that stays on pread whatever the backend
 * (paper §3.2: io_uring gives a synchronous read nothing).
 *
 * Invariants: the sync backend completes every I/O inside submit, so it never
 * has anything to reap; each pread/pwrite call is counted by io_sys.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include "common/clock.h"
#include "common/log.h"
#include "io/io_int.h"

static int sync_init(struct io_ctx *ctx)
{
	(void)ctx;
	return 0;
}

static void sync_fini(struct io_ctx *ctx)
{
	(void)ctx;
}

static int sync_submit(struct io_ctx *ctx, const uint32_t *ids, unsigned n, unsigned wait_nr)
{
	(void)wait_nr;
	for (unsigned i = 0; i < n; i++) {
		const struct io_slot *s = &ctx->slots[ids[i]];
		int fd = ctx->files[s->file].fd;
		ssize_t r;
		do {
			if (s->op == IO_OP_READ)
				r = io_sys_pread(ctx, fd, s->buf, s->len, s->off);
			else
				r = io_sys_pwrite(ctx, fd, s->buf, s->len, s->off,
						  s->op == IO_OP_WRITE_DSYNC);
		} while (r == -EINTR);
		io_complete(ctx, ids[i], r);
	}
	if (n)
		io_notify_signal(ctx);
	return (int)n;
}

static int sync_reap(struct io_ctx *ctx, unsigned min, unsigned have)
{
	(void)ctx;
	(void)min;
	return 0;
}

const struct io_backend_ops io_sync_ops = {
	.id = IO_BACKEND_SYNC,
	.init = sync_init,
	.fini = sync_fini,
	.submit = sync_submit,
	.reap = sync_reap,
};

/* Full transfer or -errno; a short read at EOF returns the bytes read. */
static ssize_t sync_rw(io_ctx_t *ctx, int file, void *buf, size_t len, off_t off, int write)
{
	if (file < 0 || (unsigned)file >= ctx->nfiles)
		return -EBADF;
	if (!buf || off < 0)
		return -EINVAL;
	int ret = io_file_check_direct(ctx, file, buf, len, off);
	if (ret < 0)
		return ret;
	int fd = ctx->files[file].fd;
	size_t done = 0;
	while (done < len) {
		ssize_t r = write ? io_sys_pwrite(ctx, fd, (char *)buf + done, len - done,
						  off + (off_t)done, 0)
				  : io_sys_pread(ctx, fd, (char *)buf + done, len - done,
						 off + (off_t)done);
		if (r == -EINTR)
			continue;
		if (r < 0)
			return r;
		if (r == 0)
			break; /* EOF */
		done += (size_t)r;
	}
	ctx->st.ios++;
	ctx->st.bytes += done;
	return (ssize_t)done;
}

ssize_t io_read_sync(io_ctx_t *ctx, int file, void *buf, size_t len, off_t off)
{
	uint64_t t0 = ctx->flags & IO_F_NO_CPU_STATS ? 0 : clock_thread_cpu_ns();
	ssize_t r = sync_rw(ctx, file, buf, len, off, 0);
	if (!(ctx->flags & IO_F_NO_CPU_STATS))
		ctx->st.cpu_ns += clock_thread_cpu_ns() - t0;
	return r;
}

ssize_t io_write_sync(io_ctx_t *ctx, int file, const void *buf, size_t len, off_t off)
{
	uint64_t t0 = ctx->flags & IO_F_NO_CPU_STATS ? 0 : clock_thread_cpu_ns();
	ssize_t r = sync_rw(ctx, file, (void *)buf, len, off, 1);
	if (!(ctx->flags & IO_F_NO_CPU_STATS))
		ctx->st.cpu_ns += clock_thread_cpu_ns() - t0;
	return r;
}
