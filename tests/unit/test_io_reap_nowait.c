/* test_io_reap_nowait.c - non-blocking reaps on the default ring (DEFER_TASKRUN:
 * completions reach the CQ only when the owner enters the kernel with
 * GETEVENTS) still see every completion, and make no system call they do not
 * need: none when the caller already holds completions, none when nothing is
 * in flight, one per io_submit_and_reap.  The same polling loop runs on a ring
 * with IO_F_NO_DEFER_TASKRUN. */
#include <time.h>
#include "test_io_util.h"

#define SETUP_DEFER_TASKRUN (1u << 13) /* IORING_SETUP_DEFER_TASKRUN */
#define NIO 16u

static uint64_t enters(io_ctx_t *ctx)
{
	struct io_stats st;
	io_ctx_stats(ctx, &st);
	return st.sys_enter;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void prep_reads(io_ctx_t *ctx, int f, char *bufs, unsigned n, uint64_t ud0)
{
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ(io_prep_read(ctx, f, bufs + (size_t)i * TIO_BS, TIO_BS,
				      (off_t)((ud0 + i) * TIO_BS), ud0 + i), 0);
}

/* Poll with min_complete 0 until n completions arrived (5 s at most). */
static void poll_until(io_ctx_t *ctx, unsigned n)
{
	struct io_cqe cqe[NIO];
	unsigned got = 0;
	for (int spins = 0; got < n; spins++) {
		CHECK(spins < 25000);
		int r = io_reap(ctx, cqe, NIO, 0);
		CHECK(r >= 0);
		for (int i = 0; i < r; i++)
			CHECK_EQ(cqe[i].res, TIO_BS);
		got += (unsigned)r;
		if (!r)
			usleep(200);
	}
	CHECK_EQ(io_inflight(ctx), 0);
}

static void run(int fd, char *bufs, unsigned flags, const char *name)
{
	io_ctx_t *ctx = NULL;
	struct io_opts o = { .depth = 64, .flags = flags | IO_F_NO_CPU_STATS };
	struct io_cqe cqe[2 * NIO];
	struct io_stats st;
	CHECK_EQ(io_ctx_create(&o, &ctx), 0);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	int f = io_ctx_add_file(ctx, fd);
	CHECK(f >= 0);
	io_ctx_stats(ctx, &st);
	int dt = !!(st.setup_flags & SETUP_DEFER_TASKRUN);
	printf("%s: setup_flags 0x%x, DEFER_TASKRUN %s\n", name, st.setup_flags, dt ? "on" : "off");
	if (!(flags & IO_F_NO_DEFER_TASKRUN) && !dt)
		printf("%s: the kernel refused DEFER_TASKRUN; checking the fallback ring\n", name);
	if (flags & IO_F_NO_DEFER_TASKRUN)
		CHECK(!dt);

	/* 1. submit, then poll without blocking until everything is back */
	prep_reads(ctx, f, bufs, NIO, 0);
	CHECK_EQ(io_submit_batch(ctx), NIO);
	poll_until(ctx, NIO);

	/* 2. nothing in flight: a non-blocking reap makes no system call */
	uint64_t e0 = enters(ctx);
	CHECK_EQ(io_reap(ctx, cqe, NIO, 0), 0);
	CHECK_EQ(enters(ctx), e0);

	/* 3. all done in the device; the first reap enters (DEFER_TASKRUN) at
	 * most once and collects every completion, the next ones need no call */
	prep_reads(ctx, f, bufs, NIO, 0);
	CHECK_EQ(io_submit_batch(ctx), NIO);
	sleep_ms(100);
	e0 = enters(ctx);
	unsigned got = 0;
	int r = io_reap(ctx, cqe, 4, 0);
	CHECK_EQ(r, 4);
	got += 4;
	printf("%s: first reap made %llu enters\n", name, (unsigned long long)(enters(ctx) - e0));
	/* at most once: the submit's own enter may already have run the
	 * deferred completions of reads that finished inline */
	CHECK(enters(ctx) - e0 <= (uint64_t)dt);
	while (got < NIO) {
		r = io_reap(ctx, cqe, 4, 0);
		CHECK_EQ(r, 4);
		got += 4;
	}
	CHECK(enters(ctx) - e0 <= (uint64_t)dt);

	/* 4. completions already held: no call to look for more */
	prep_reads(ctx, f, bufs, NIO, 0);
	CHECK_EQ(io_submit_batch(ctx), NIO);
	sleep_ms(100);
	CHECK_EQ(io_reap(ctx, cqe, 4, 0), 4);      /* 12 wait in the layer now */
	prep_reads(ctx, f, bufs + NIO * TIO_BS, 8, NIO);
	CHECK_EQ(io_submit_batch(ctx), 8);
	sleep_ms(100);
	e0 = enters(ctx);
	r = io_reap(ctx, cqe, 2 * NIO, 0);
	CHECK(r >= 12);
	CHECK_EQ(enters(ctx), e0);
	poll_until(ctx, 8 - (unsigned)(r - 12));

	/* 5. io_submit_and_reap with min 0: one system call, never two */
	prep_reads(ctx, f, bufs, 8, 0);
	e0 = enters(ctx);
	r = io_submit_and_reap(ctx, cqe, 2 * NIO, 0);
	CHECK(r >= 0);
	CHECK_EQ(enters(ctx) - e0, 1);
	poll_until(ctx, 8 - (unsigned)r);

	/* 6. blocking reap: waits for exactly what it asked for */
	prep_reads(ctx, f, bufs, NIO, 0);
	CHECK_EQ(io_submit_batch(ctx), NIO);
	tio_reap_all(ctx, NIO, NULL);
	io_ctx_destroy(ctx);
}

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	int fd = tio_open_file(64 * TIO_BS);
	char *bufs = tio_alloc(2 * NIO * TIO_BS);
	/* Written blocks: an O_DIRECT read of a hole completes inside the submit
	 * call, and this test needs reads that complete later, in the device. */
	io_ctx_t *w = NULL;
	struct io_opts o = { .depth = 2 * NIO };
	CHECK_EQ(io_ctx_create(&o, &w), 0);
	tio_write_blocks(w, io_ctx_add_file(w, fd), bufs, 2 * NIO, 0, 7);
	io_ctx_destroy(w);
	run(fd, bufs, 0, "default");
	run(fd, bufs, IO_F_NO_DEFER_TASKRUN, "no_defer_taskrun");
	close(fd);
	free(bufs);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
