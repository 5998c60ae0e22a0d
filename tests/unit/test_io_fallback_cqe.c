/* test_io_fallback_cqe.c - level 2 from a completion: a CQE reporting a non-I/O
 * error (-EOPNOTSUPP) switches the context to libaio and that I/O and all in
 * flight complete exactly once; an ordinary I/O error (-EIO) is just handed
 * to the caller.  IOPOLL on a device without poll queues is the real-world
 * case (the kernel answers -EOPNOTSUPP). */
#include "test_io_util.h"

static int g_fd;

static void nonio_error_falls_back(void)
{
	io_ctx_t *ctx = NULL;
	char *bufs = tio_alloc(32 * TIO_BS);
	struct io_stats st;
	io_fault_set("cqe:3:EOPNOTSUPP");
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	io_fault_set("");
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	int file = io_ctx_add_file(ctx, g_fd);
	tio_write_blocks(ctx, file, bufs, 32, 0, 21); /* every res == TIO_BS, once */
	io_ctx_stats(ctx, &st);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_AIO);
	CHECK_EQ(st.fallbacks, 1);
	CHECK(st.resubmitted >= 1 && st.resubmitted <= 32);
	printf("cqe:3:EOPNOTSUPP: resubmitted %llu of 32\n", (unsigned long long)st.resubmitted);
	uint64_t enters = st.sys_enter;
	tio_read_verify(ctx, file, bufs, 32, 0, 21);
	io_ctx_stats(ctx, &st);
	CHECK_EQ(st.sys_enter, enters);
	CHECK(st.sys_submit > 0 && st.sys_getevents > 0);
	io_ctx_destroy(ctx);
	free(bufs);
}

static void io_error_is_delivered(void)
{
	io_ctx_t *ctx = NULL;
	char *bufs = tio_alloc(8 * TIO_BS);
	int64_t res[8];
	struct io_stats st;
	io_fault_set("cqe:2:EIO");
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	io_fault_set("");
	int file = io_ctx_add_file(ctx, g_fd);
	for (unsigned i = 0; i < 8; i++)
		CHECK_EQ(io_prep_read(ctx, file, bufs + i * TIO_BS, TIO_BS, i * TIO_BS, i), 0);
	CHECK_EQ(io_submit_batch(ctx), 8);
	tio_reap_all(ctx, 8, res);
	unsigned eio = 0;
	for (unsigned i = 0; i < 8; i++) {
		CHECK(res[i] == TIO_BS || res[i] == -EIO);
		eio += res[i] == -EIO;
	}
	CHECK_EQ(eio, 1);
	io_ctx_stats(ctx, &st);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	CHECK_EQ(st.fallbacks, 0);
	io_ctx_destroy(ctx);
	free(bufs);
}

static void iopoll_real(void)
{
	io_ctx_t *ctx = NULL;
	struct io_opts o = { .flags = IO_F_IOPOLL };
	char *bufs = tio_alloc(16 * TIO_BS);
	struct io_stats st;
	CHECK_EQ(io_ctx_create(&o, &ctx), 0);
	int file = io_ctx_add_file(ctx, g_fd);
	tio_write_blocks(ctx, file, bufs, 16, 40, 9);
	tio_read_verify(ctx, file, bufs, 16, 40, 9);
	io_ctx_stats(ctx, &st);
	printf("IOPOLL here: backend %s, fallbacks %llu, setup flags 0x%x\n",
	       io_backend_name(io_ctx_backend(ctx)), (unsigned long long)st.fallbacks,
	       st.setup_flags);
	io_ctx_destroy(ctx);
	free(bufs);
}

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	g_fd = tio_open_file(64 * TIO_BS);
	nonio_error_falls_back();
	io_error_is_delivered();
	iopoll_real();
	close(g_fd);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
