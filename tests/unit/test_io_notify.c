/* test_io_notify.c - io_ctx_notify_fd: a thread may sleep in poll() on the
 * context's eventfd while reads are in flight and is woken by their
 * completion, on every backend (io_uring with and without DEFER_TASKRUN,
 * libaio, sync) and across a level-2 fallback from io_uring to libaio in the
 * middle of a batch.  The fd is quiet when nothing completed; after
 * io_ctx_notify_clear and a reap that took everything it is quiet again; and
 * a clear that ate the signal of a completion still pending in the kernel
 * (DEFER_TASKRUN) is followed by a reap that collects it.
 * Without the wakeup, the memory server's worker has to poll its miss ring
 * (docs/store.md, "Misses that do not block"). */
#include <poll.h>
#include "test_io_util.h"

#define NIO 8u

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r = poll(&p, 1, ms);
	CHECK(r >= 0);
	return r > 0;
}

/* Submit NIO reads, sleep on the fd until every one is reaped. */
static void sleep_until_done(io_ctx_t *ctx, int file, char *bufs, int nfd)
{
	struct io_cqe cqe[NIO];
	for (unsigned i = 0; i < NIO; i++)
		CHECK_EQ(io_prep_read(ctx, file, bufs + i * TIO_BS, TIO_BS, (off_t)(i * TIO_BS), i),
			 0);
	CHECK_EQ(io_submit_batch(ctx), NIO);
	unsigned got = 0, sleeps = 0;
	while (got < NIO) {
		/* 5 s: a missing wakeup fails here instead of hanging */
		CHECK(readable(nfd, 5000));
		sleeps++;
		io_ctx_notify_clear(ctx);
		int r = io_reap(ctx, cqe, NIO, 0);
		CHECK(r >= 0);
		for (int j = 0; j < r; j++) {
			CHECK_EQ(cqe[j].res, TIO_BS);
			CHECK(tio_verify(bufs + cqe[j].user_data * TIO_BS, 5, cqe[j].user_data));
		}
		got += (unsigned)r;
		CHECK(sleeps <= 4 * NIO);
	}
	CHECK_EQ(io_inflight(ctx), 0);
	/* all reaped, counter cleared: quiet until the next completion */
	io_ctx_notify_clear(ctx);
	CHECK(!readable(nfd, 20));
}

/* The DEFER_TASKRUN race: completions A and B are posted into the CQ by a
 * submit's enter, C completes after it (onto the kernel's empty task-work
 * list: one signal), the clear eats that signal, and a reap that finds A and
 * B in the CQ must still enter the kernel for C: the kernel signals again
 * only once its list was empty, so C would otherwise wait for good. */
static void clear_then_reap(int fd, char *bufs)
{
	io_ctx_t *ctx = NULL;
	struct io_opts o = { .backend = IO_BACKEND_URING, .depth = 8 };
	struct io_cqe cqe[8];
	CHECK_EQ(io_ctx_create(&o, &ctx), 0);
	int file = io_ctx_add_file(ctx, fd);
	CHECK(file >= 0);
	int nfd = io_ctx_notify_fd(ctx);
	CHECK(nfd >= 0);
	for (unsigned i = 0; i < 2; i++)
		CHECK_EQ(io_prep_read(ctx, file, bufs + i * TIO_BS, TIO_BS, (off_t)(i * TIO_BS), i), 0);
	CHECK_EQ(io_submit_batch(ctx), 2);
	usleep(50000);                            /* A and B done in the device */
	CHECK_EQ(io_prep_read(ctx, file, bufs + 2 * TIO_BS, TIO_BS, 2 * TIO_BS, 2), 0);
	CHECK_EQ(io_submit_batch(ctx), 1);        /* its enter posts A and B */
	usleep(50000);                            /* C done, pending in the kernel */
	io_ctx_notify_clear(ctx);
	int got = io_reap(ctx, cqe, 8, 0);
	CHECK(got >= 0);
	if (got < 3) {   /* the rest must be announced, or the sleeper never wakes */
		CHECK(readable(nfd, 2000));
		io_ctx_notify_clear(ctx);
		got += io_reap(ctx, cqe + got, 8 - (unsigned)got, 0);
	}
	printf("clear, then reap: %d of 3 completions\n", got);
	CHECK_EQ(got, 3);
	io_ctx_destroy(ctx);
}

static void run(int fd, enum io_backend b, unsigned flags, const char *fault, const char *name)
{
	io_ctx_t *ctx = NULL;
	struct io_opts o = { .backend = b, .depth = 64, .flags = flags, .fault = fault };
	char *bufs = tio_alloc(NIO * TIO_BS);
	CHECK_EQ(io_ctx_create(&o, &ctx), 0);
	int file = io_ctx_add_file(ctx, fd);
	CHECK(file >= 0);
	int nfd = io_ctx_notify_fd(ctx);
	CHECK(nfd >= 0);
	CHECK_EQ(io_ctx_notify_fd(ctx), nfd);   /* made once */
	CHECK(!readable(nfd, 0));               /* nothing completed yet */
	sleep_until_done(ctx, file, bufs, nfd);
	sleep_until_done(ctx, file, bufs, nfd); /* and again: the fd is reusable */
	printf("%s: backend %s, woken on every batch\n", name, io_backend_name(io_ctx_backend(ctx)));
	if (fault)   /* enter:1 failed the first batch's submit: it went on with libaio */
		CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_AIO);
	io_ctx_destroy(ctx);
	free(bufs);
}

int main(void)
{
	int fd = tio_open_file(NIO * TIO_BS);
	char *w = tio_alloc(TIO_BS);
	for (unsigned i = 0; i < NIO; i++) {
		tio_fill(w, 5, i);
		CHECK_EQ(pwrite(fd, w, TIO_BS, (off_t)(i * TIO_BS)), (ssize_t)TIO_BS);
	}
	free(w);
	io_ctx_t *probe = NULL;
	struct io_opts po = { .backend = IO_BACKEND_URING };
	int have_uring = io_ctx_create(&po, &probe) == 0;
	io_ctx_destroy(probe);
	if (have_uring) {
		run(fd, IO_BACKEND_URING, 0, NULL, "io_uring (DEFER_TASKRUN)");
		run(fd, IO_BACKEND_URING, IO_F_NO_DEFER_TASKRUN, NULL, "io_uring");
		run(fd, IO_BACKEND_URING, IO_F_IOWQ_DEPTH, NULL, "io_uring, a miss ring's flags");
		run(fd, IO_BACKEND_AUTO, 0, "enter:1:EIO", "io_uring -> libaio at the first enter");
		char *b3 = tio_alloc(3 * TIO_BS);
		clear_then_reap(fd, b3);
		free(b3);
	} else {
		printf("io_uring unavailable here: its cases skipped\n");
	}
	run(fd, IO_BACKEND_AIO, 0, NULL, "libaio");
	run(fd, IO_BACKEND_SYNC, 0, NULL, "sync");
	close(fd);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
