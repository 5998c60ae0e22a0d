/* test_io_clone_threads.c - one donor registers the buffer pool, other threads
 * clone it (IORING_REGISTER_CLONE_BUFFERS) and do fixed-buffer I/O; a
 * SINGLE_ISSUER donor owned by another thread gives -EEXIST and the cloner
 * carries on with plain buffers; a second clone gives -EBUSY unless
 * IO_CLONE_REPLACE. */
#include <pthread.h>
#include "test_io_util.h"

#define NTHREADS 2
#define PER 32 /* blocks per thread */

static int g_fd;
static char *g_pool;
static io_ctx_t *g_donor, *g_si_donor;

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	io_ctx_t *ctx = NULL;
	struct io_stats st;
	char *mine = g_pool + (size_t)id * PER * TIO_BS;
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	CHECK_EQ(io_ctx_clone_buffers_from(ctx, g_donor), 0);
	int f = io_ctx_add_file(ctx, g_fd);
	tio_write_blocks(ctx, f, mine, PER, (uint64_t)id * PER, 30 + id);
	tio_read_verify(ctx, f, mine, PER, (uint64_t)id * PER, 30 + id);
	io_ctx_stats(ctx, &st);
	CHECK_EQ(st.cloned_buffers, 1);
	CHECK_EQ(st.fixed_ios, 2 * PER);
	/* a second clone: -EBUSY, or replace */
	CHECK_EQ(io_ctx_clone_buffers_from(ctx, g_donor), -EBUSY);
	CHECK_EQ(io_ctx_clone_buffers_ex(ctx, g_donor, IO_CLONE_REPLACE), 0);
	tio_read_verify(ctx, f, mine, PER, (uint64_t)id * PER, 30 + id);
	io_ctx_destroy(ctx);
	return NULL;
}

static void *eexist_worker(void *arg)
{
	io_ctx_t *ctx = NULL;
	struct io_stats st;
	char *mine = g_pool + (size_t)NTHREADS * PER * TIO_BS;
	(void)arg;
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	tio_capture_stderr();
	int r = io_ctx_clone_buffers_from(ctx, g_si_donor);
	CHECK(tio_captured("IO_F_NO_SINGLE_ISSUER"));
	CHECK_EQ(r, -EEXIST);
	int f = io_ctx_add_file(ctx, g_fd);
	tio_write_blocks(ctx, f, mine, PER, NTHREADS * PER, 40);
	tio_read_verify(ctx, f, mine, PER, NTHREADS * PER, 40);
	io_ctx_stats(ctx, &st);
	CHECK(st.cloned_buffers == 0 && st.fixed_ios == 0);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	io_ctx_destroy(ctx);
	return NULL;
}

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	size_t pool = (size_t)(NTHREADS + 1) * PER * TIO_BS;
	struct io_opts donor_opts = { .flags = IO_F_NO_SINGLE_ISSUER };
	pthread_t t[NTHREADS + 1];
	g_fd = tio_open_file(pool);
	g_pool = tio_alloc(pool);

	CHECK_EQ(io_ctx_create(&donor_opts, &g_donor), 0);
	CHECK_EQ(io_ctx_register_buffer(g_donor, g_pool, pool), 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i) == 0);
	for (unsigned i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);

	CHECK_EQ(io_ctx_create(NULL, &g_si_donor), 0); /* SINGLE_ISSUER, owned by main */
	CHECK_EQ(io_ctx_register_buffer(g_si_donor, g_pool, pool), 0);
	CHECK(pthread_create(&t[NTHREADS], NULL, eexist_worker, NULL) == 0);
	pthread_join(t[NTHREADS], NULL);

	/* the owning thread itself may clone from its SINGLE_ISSUER ring */
	io_ctx_t *ctx = NULL;
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	CHECK_EQ(io_ctx_clone_buffers_from(ctx, g_si_donor), 0);
	io_ctx_destroy(ctx);
	/* the donor may go away; clones keep their own reference */
	CHECK_EQ(io_ctx_create(NULL, &ctx), 0);
	CHECK_EQ(io_ctx_clone_buffers_from(ctx, g_donor), 0);
	io_ctx_destroy(g_donor);
	int f = io_ctx_add_file(ctx, g_fd);
	tio_read_verify(ctx, f, g_pool, PER, 0, 30);
	struct io_stats st;
	io_ctx_stats(ctx, &st);
	CHECK_EQ(st.fixed_ios, PER);
	io_ctx_destroy(ctx);
	io_ctx_destroy(g_si_donor);
	close(g_fd);
	free(g_pool);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
