/* test_io_fallback_setup.c - level 1: io_uring setup fails -> the context uses
 * libaio for its lifetime; a forced io_uring context fails instead; LOTUS_IO
 * picks the backend. */
#include "test_io_util.h"

static void check_aio_context(int fd, const char *spec)
{
	io_ctx_t *ctx = NULL;
	char *bufs = tio_alloc(8 * TIO_BS);
	struct io_stats st;
	io_fault_set(spec);
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_AIO);
	int file = io_ctx_add_file(ctx, fd);
	CHECK(file >= 0);
	CHECK_EQ(io_ctx_register_buffer(ctx, bufs, 8 * TIO_BS), 0); /* nothing to register */
	tio_write_blocks(ctx, file, bufs, 8, 0, 7);
	tio_read_verify(ctx, file, bufs, 8, 0, 7);
	io_ctx_stats(ctx, &st);
	CHECK_EQ(st.setup_fallback, 1);
	CHECK_EQ(st.sys_enter, 0);
	CHECK(st.sys_submit >= 2 && st.sys_getevents >= 2);
	CHECK_EQ(st.reg_buffers, 0);
	io_ctx_destroy(ctx);
	free(bufs);
}

int main(void)
{
	int fd = tio_open_file(64 * TIO_BS);
	io_ctx_t *ctx = NULL;
	struct io_opts forced = { .backend = IO_BACKEND_URING };

	check_aio_context(fd, "setup");        /* kernel without io_uring */
	check_aio_context(fd, "setup:EPERM");  /* sysctl / seccomp refusal */

	io_fault_set("setup");
	CHECK_EQ(io_ctx_create(&forced, &ctx), -ENOSYS);
	CHECK(ctx == NULL);

	io_fault_set("");
	setenv("LOTUS_IO", "sync", 1);
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_SYNC);
	io_ctx_destroy(ctx);
	setenv("LOTUS_IO", "aio", 1);
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_AIO);
	io_ctx_destroy(ctx);
	setenv("LOTUS_IO", "bogus", 1);
	CHECK_EQ(io_ctx_create(NULL, &ctx), -EINVAL);
	unsetenv("LOTUS_IO");
	if (tio_have_uring()) {
		CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
		CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING); /* the default */
		io_ctx_destroy(ctx);
	}
	close(fd);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
