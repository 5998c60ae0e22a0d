/* test_io_fallback_enter.c - level 2 from a failed io_uring_enter: the I/Os
 * the kernel already owned are drained, the rest are resubmitted to libaio,
 * each completes exactly once; later I/O uses libaio; another context in
 * another thread is unaffected. */
#include <pthread.h>
#include "test_io_util.h"

static int g_fd;

/* enter:N fails the Nth enter; `first` I/Os were submitted before it. */
static void fallback_case(const char *spec, unsigned first, unsigned second)
{
	io_ctx_t *ctx = NULL;
	struct io_opts o = { .depth = 64 };
	char *bufs = tio_alloc(64 * TIO_BS);
	struct io_stats st;
	unsigned n = first + second;
	io_fault_set(spec);
	CHECK_EQ(io_ctx_create(&o, &ctx), 0);
	io_fault_set("");
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	int file = io_ctx_add_file(ctx, g_fd);
	CHECK(file >= 0);
	CHECK_EQ(io_ctx_register_buffer(ctx, bufs, 64 * TIO_BS), 0);
	for (unsigned i = 0; i < n; i++) {
		tio_fill(bufs + i * TIO_BS, 11, i);
		CHECK_EQ(io_prep_write(ctx, file, bufs + i * TIO_BS, TIO_BS, i * TIO_BS, i), 0);
		if (i + 1 == first)
			CHECK_EQ(io_submit_batch(ctx), first); /* enter 1: accepted */
	}
	CHECK_EQ(io_submit_batch(ctx), second); /* enter 2 fails -> libaio */
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_AIO);
	tio_reap_all(ctx, n, NULL);
	io_ctx_stats(ctx, &st);
	printf("%s: fallbacks %llu resubmitted %llu enter %llu submit %llu\n", spec,
	       (unsigned long long)st.fallbacks, (unsigned long long)st.resubmitted,
	       (unsigned long long)st.sys_enter, (unsigned long long)st.sys_submit);
	CHECK_EQ(st.fallbacks, 1);
	CHECK(st.resubmitted >= second && st.resubmitted <= n);
	CHECK_EQ(st.reg_buffers, 0);
	uint64_t enters = st.sys_enter, submits = st.sys_submit;
	tio_read_verify(ctx, file, bufs, n, 0, 11); /* later I/O: libaio */
	io_ctx_stats(ctx, &st);
	CHECK_EQ(st.sys_enter, enters);
	CHECK(st.sys_submit > submits);
	CHECK_EQ(st.ios, 2ull * n);
	io_ctx_destroy(ctx);
	free(bufs);
}

static pthread_barrier_t bar;

static void *bystander(void *arg)
{
	io_ctx_t *ctx = arg;
	char *bufs = tio_alloc(16 * TIO_BS);
	int file = io_ctx_add_file(ctx, g_fd);
	CHECK(file >= 0);
	pthread_barrier_wait(&bar); /* the other context falls back now */
	pthread_barrier_wait(&bar);
	tio_write_blocks(ctx, file, bufs, 16, 100, 5);
	tio_read_verify(ctx, file, bufs, 16, 100, 5);
	struct io_stats st;
	io_ctx_stats(ctx, &st);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	CHECK_EQ(st.fallbacks, 0);
	free(bufs);
	return NULL;
}

static void *bystander_main(void *arg)
{
	io_ctx_t *ctx = NULL;
	(void)arg;
	io_fault_set("");
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	void *r = bystander(ctx);
	io_ctx_destroy(ctx);
	return r;
}

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	g_fd = tio_open_file(256 * TIO_BS);
	pthread_t t;
	pthread_barrier_init(&bar, NULL, 2);
	CHECK(pthread_create(&t, NULL, bystander_main, NULL) == 0);
	pthread_barrier_wait(&bar);
	fallback_case("enter:2", 16, 16);       /* 16 owned by the kernel, 16 not */
	pthread_barrier_wait(&bar);
	pthread_join(t, NULL);
	fallback_case("enter:1:EBADFD", 8, 8);  /* nothing reached the kernel */
	fallback_case("enter:2:EOPNOTSUPP", 1, 40);
	close(g_fd);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
