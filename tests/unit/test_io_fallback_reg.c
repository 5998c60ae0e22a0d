/* test_io_fallback_reg.c - level 3: a failed registration step (ring fd, file
 * table, buffers, clone) only drops that optimisation; the ring keeps working.
 * Also: what a clean setup registers, and the RLIMIT_MEMLOCK hint. */
#include "test_io_util.h"

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	int fd = tio_open_file(64 * TIO_BS), fd2 = tio_open_file(64 * TIO_BS);
	char *bufs = tio_alloc(16 * TIO_BS);
	io_ctx_t *ctx = NULL, *donor = NULL;
	struct io_stats st;

	/* clean setup: everything registered, a file added later joins the set */
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	int f1 = io_ctx_add_file(ctx, fd);
	CHECK_EQ(io_ctx_register_buffer(ctx, bufs, 16 * TIO_BS), 0);
	tio_write_blocks(ctx, f1, bufs, 16, 0, 1);
	int f2 = io_ctx_add_file(ctx, fd2);
	tio_write_blocks(ctx, f2, bufs, 16, 0, 2);
	tio_read_verify(ctx, f2, bufs, 16, 0, 2);
	io_ctx_stats(ctx, &st);
	printf("clean: reg_ring %d reg_files %d (%u files) reg_buffers %d iowq_capped %d "
	       "setup_flags 0x%x fixed_ios %llu\n", st.reg_ring, st.reg_files, st.fixed_files,
	       st.reg_buffers, st.iowq_capped, st.setup_flags, (unsigned long long)st.fixed_ios);
	CHECK(st.reg_ring == 1 && st.reg_files == 1 && st.reg_buffers == 1);
	CHECK_EQ(st.fixed_files, 2);
	CHECK_EQ(st.iowq_capped, 1);
	CHECK_EQ(st.fixed_ios, 48);
	CHECK((st.setup_flags & 0x1018) == 0x1018); /* SINGLE_ISSUER | CLAMP | CQSIZE */
	io_ctx_destroy(ctx);

	/* every registration fails: the ring still does the I/O */
	io_fault_set("reg_ring,reg_files,reg_buffers");
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	io_fault_set("");
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	f1 = io_ctx_add_file(ctx, fd);
	CHECK(f1 >= 0);
	tio_capture_stderr();
	int r = io_ctx_register_buffer(ctx, bufs, 16 * TIO_BS);
	CHECK(tio_captured("raise RLIMIT_MEMLOCK (ulimit -l"));
	CHECK_EQ(r, -ENOMEM);
	tio_write_blocks(ctx, f1, bufs, 16, 16, 3);
	tio_read_verify(ctx, f1, bufs, 16, 16, 3);
	io_ctx_stats(ctx, &st);
	CHECK(st.reg_ring == 0 && st.reg_files == 0 && st.reg_buffers == 0);
	CHECK_EQ(st.fixed_files, 0);
	CHECK_EQ(st.fixed_ios, 0);
	CHECK_EQ(st.fallbacks, 0);
	CHECK(st.sys_enter > 0);
	io_ctx_destroy(ctx);

	/* a failed clone leaves the destination working with plain buffers */
	struct io_opts dopts = { .flags = IO_F_NO_SINGLE_ISSUER };
	CHECK_EQ(io_ctx_create(&dopts, &donor), 0);
	CHECK_EQ(io_ctx_register_buffer(donor, bufs, 16 * TIO_BS), 0);
	io_fault_set("clone");
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	io_fault_set("");
	CHECK_EQ(io_ctx_clone_buffers_from(ctx, donor), -EINVAL);
	f1 = io_ctx_add_file(ctx, fd);
	tio_write_blocks(ctx, f1, bufs, 16, 32, 4);
	tio_read_verify(ctx, f1, bufs, 16, 32, 4);
	io_ctx_stats(ctx, &st);
	CHECK(st.cloned_buffers == 0 && st.fixed_ios == 0);
	io_ctx_destroy(ctx);
	io_ctx_destroy(donor);

	/* options that skip registration (for the Table 7 breakdown) */
	struct io_opts bare = { .flags = IO_F_NO_REG_RING | IO_F_NO_REG_FILES };
	CHECK_EQ(io_ctx_create(&bare, &ctx), 0);
	f1 = io_ctx_add_file(ctx, fd);
	tio_read_verify(ctx, f1, bufs, 16, 32, 4);
	io_ctx_stats(ctx, &st);
	CHECK(st.reg_ring == 0 && st.reg_files == 0);
	io_ctx_destroy(ctx);

	close(fd);
	close(fd2);
	free(bufs);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
