/* test_io_setup_flags.c - the optional io_uring setup flags (no DEFER_TASKRUN,
 * SQPOLL, no SINGLE_ISSUER, no registrations) each still move data exactly;
 * a refused flag is dropped, not fatal. */
#include "test_io_util.h"

int main(void)
{
	static const struct { unsigned flags; const char *name; } cases[] = {
		{ 0, "default" },
		{ IO_F_NO_DEFER_TASKRUN, "no_defer_taskrun" },
		{ IO_F_SQPOLL, "sqpoll" },
		{ IO_F_NO_SINGLE_ISSUER, "no_single_issuer" },
		{ IO_F_NO_REG_RING | IO_F_NO_REG_FILES | IO_F_NO_CPU_STATS, "bare" },
	};
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	int fd = tio_open_file(64 * TIO_BS);
	char *bufs = tio_alloc(32 * TIO_BS);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		io_ctx_t *ctx = NULL;
		struct io_opts o = { .flags = cases[i].flags, .depth = 32 };
		struct io_stats st;
		CHECK_EQ(io_ctx_create(&o, &ctx), 0);
		int f = io_ctx_add_file(ctx, fd);
		CHECK_EQ(io_ctx_register_buffer(ctx, bufs, 32 * TIO_BS), 0);
		tio_write_blocks(ctx, f, bufs, 32, 0, 50 + i);
		tio_read_verify(ctx, f, bufs, 32, 0, 50 + i);
		/* the one-call pipeline: submit and wait together */
		for (unsigned j = 0; j < 32; j++)
			CHECK_EQ(io_prep_read(ctx, f, bufs + j * TIO_BS, TIO_BS, j * TIO_BS, j), 0);
		struct io_cqe cqe[32];
		unsigned got = 0;
		int r = io_submit_and_reap(ctx, cqe, 32, 32);
		CHECK(r > 0);
		got += (unsigned)r;
		while (got < 32) {
			r = io_reap(ctx, cqe, 32, 32 - got);
			CHECK(r > 0);
			got += (unsigned)r;
		}
		io_ctx_stats(ctx, &st);
		printf("%-16s backend %s setup_flags 0x%04x enter %llu fixed %llu cpu %llu us\n",
		       cases[i].name, io_backend_name(io_ctx_backend(ctx)), st.setup_flags,
		       (unsigned long long)st.sys_enter, (unsigned long long)st.fixed_ios,
		       (unsigned long long)st.cpu_ns / 1000);
		CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
		CHECK_EQ(st.fallbacks, 0);
		CHECK_EQ(st.fixed_ios, 96);
		if (cases[i].flags & IO_F_NO_CPU_STATS)
			CHECK_EQ(st.cpu_ns, 0);
		io_ctx_destroy(ctx);
	}
	close(fd);
	free(bufs);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
