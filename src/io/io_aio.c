/*
 * io_aio.c - the libaio backend: io_submit + io_getevents, two syscalls per
 * batch (paper §3.1).  It is the level-1 and level-2 fallback for io_uring.
 *
 * Invariants:
 *   - iocb i belongs to slot i; iocb.data carries the slot index back.
 *   - io_submit may take a prefix of the batch.  A per-iocb error on the first
 *     iocb of what is left (a bad fd, EINVAL) completes that one slot with the
 *     error, so one bad request never blocks the ones behind it; EAGAIN stops
 *     the batch and the rest stays queued.
 *   - io_getevents never waits for more I/Os than this context has issued,
 *     and a non-blocking reap that already holds completions does not call it.
 *   - The kernel aio context is created in the process that uses it (an aio
 *     context does not survive fork), so init is lazy for R_DISABLED contexts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "common/log.h"
#include "io/io_int.h"

static void aio_free(struct io_ctx *ctx)
{
	free(ctx->a.iocbs);
	free(ctx->a.ptrs);
	free(ctx->a.events);
	memset(&ctx->a, 0, sizeof(ctx->a));
}

static int aio_start(struct io_ctx *ctx)
{
	int ret = io_sys_aio_setup(ctx, ctx->depth, &ctx->a.actx);
	if (ret < 0) {
		log_warn("io: libaio io_setup(%u) failed (%s)%s", ctx->depth, io_err_name(ret),
			 ret == -EAGAIN ? ": raise sysctl fs.aio-max-nr" : "");
		return ret;
	}
	ctx->a.up = 1;
	return 0;
}

static int aio_init(struct io_ctx *ctx)
{
	memset(&ctx->a, 0, sizeof(ctx->a));
	ctx->a.iocbs = calloc(ctx->depth, sizeof(struct iocb));
	ctx->a.ptrs = calloc(ctx->depth, sizeof(struct iocb *));
	ctx->a.events = calloc(ctx->depth, sizeof(struct io_event));
	if (!ctx->a.iocbs || !ctx->a.ptrs || !ctx->a.events) {
		aio_free(ctx);
		return -ENOMEM;
	}
	if (ctx->disabled)
		return 0; /* io_setup happens in the process that enables the context */
	int ret = aio_start(ctx);
	if (ret < 0)
		aio_free(ctx);
	return ret;
}

static void aio_fini(struct io_ctx *ctx)
{
	if (ctx->a.up)
		io_destroy(ctx->a.actx); /* waits for what is still in flight */
	aio_free(ctx);
}

static struct iocb *aio_fill(struct io_ctx *ctx, uint32_t id)
{
	const struct io_slot *s = &ctx->slots[id];
	struct iocb *cb = &ctx->a.iocbs[id];
	int fd = ctx->files[s->file].fd;
	if (s->op == IO_OP_READ)
		io_prep_pread(cb, fd, s->buf, s->len, s->off);
	else
		io_prep_pwrite(cb, fd, s->buf, s->len, s->off);
	if (s->op == IO_OP_WRITE_DSYNC)
		cb->aio_rw_flags = RWF_DSYNC;
	if (ctx->evfd >= 0)
		io_set_eventfd(cb, ctx->evfd);
	cb->data = (void *)(uintptr_t)id;
	return cb;
}

static int aio_submit(struct io_ctx *ctx, const uint32_t *ids, unsigned n, unsigned wait_nr)
{
	(void)wait_nr;
	unsigned done = 0;
	if (!ctx->a.up) {
		int ret = aio_start(ctx);
		if (ret < 0)
			return ret;
	}
	for (unsigned i = 0; i < n; i++)
		ctx->a.ptrs[i] = aio_fill(ctx, ids[i]);
	while (done < n) {
		int ret = io_sys_aio_submit(ctx, (long)(n - done), ctx->a.ptrs + done);
		if (ret > 0) {
			done += (unsigned)ret;
			continue;
		}
		if (ret == -EINTR)
			continue;
		if (ret == -EAGAIN || ret == 0)
			break;
		/* The first iocb of the rest is bad: fail it alone, go on. */
		io_complete(ctx, ids[done], ret);
		done++;
	}
	return done ? (int)done : -EAGAIN;
}

static int aio_reap(struct io_ctx *ctx, unsigned min, unsigned have)
{
	struct timespec zero = { 0, 0 };
	unsigned max = ctx->issued;
	if (!ctx->a.up || !max || (!min && have))
		return 0;
	if (min > max)
		min = max;
	int ret;
	do {
		ret = io_sys_aio_getevents(ctx, (long)min, (long)max, ctx->a.events,
					   min ? NULL : &zero);
	} while (ret == -EINTR);
	if (ret < 0) {
		log_error("io: io_getevents failed (%s)", io_err_name(ret));
		return ret;
	}
	for (int i = 0; i < ret; i++) {
		const struct io_event *ev = &ctx->a.events[i];
		io_complete_fast(ctx, (uint32_t)(uintptr_t)ev->data, (int64_t)(long)ev->res);
	}
	return ret;
}

const struct io_backend_ops io_aio_ops = {
	.id = IO_BACKEND_AIO,
	.init = aio_init,
	.fini = aio_fini,
	.submit = aio_submit,
	.reap = aio_reap,
};
