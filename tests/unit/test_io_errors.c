/* test_io_errors.c - bad alignment and bad file descriptors give a clear,
 * logged -errno on every backend, never a crash; depth is enforced. */
#include "test_io_util.h"

static void backend_errors(enum io_backend b, int fd)
{
	io_ctx_t *ctx = NULL;
	struct io_opts o = { .backend = b, .depth = 4 };
	char *buf = tio_alloc(8 * TIO_BS);
	struct io_cqe cqe;
	CHECK_EQ(io_ctx_create(&o, &ctx), 0);
	tio_capture_stderr();
	CHECK_EQ(io_ctx_add_file(ctx, -1), -EBADF);
	CHECK(tio_captured("not an open file descriptor"));
	int spare = dup(fd);
	close(spare);
	CHECK_EQ(io_ctx_add_file(ctx, spare), -EBADF); /* closed fd */
	int f = io_ctx_add_file(ctx, fd);
	CHECK(f >= 0);
	CHECK_EQ(io_prep_read(ctx, 7, buf, TIO_BS, 0, 1), -EBADF);   /* no such index */
	CHECK_EQ(io_prep_read(ctx, -1, buf, TIO_BS, 0, 1), -EBADF);
	CHECK_EQ(io_read_sync(ctx, 9, buf, TIO_BS, 0), -EBADF);
	tio_capture_stderr();
	CHECK_EQ(io_prep_read(ctx, f, buf, TIO_BS, 100, 1), -EINVAL); /* offset */
	CHECK(tio_captured("offset is not a multiple of"));
	tio_capture_stderr();
	CHECK_EQ(io_prep_write(ctx, f, buf, 1000, 0, 1), -EINVAL);    /* length */
	CHECK(tio_captured("length is not a multiple of"));
	tio_capture_stderr();
	CHECK_EQ(io_prep_read(ctx, f, buf + 1, TIO_BS, 0, 1), -EINVAL); /* buffer */
	CHECK(tio_captured("buffer address is not a multiple of"));
	CHECK_EQ(io_read_sync(ctx, f, buf + 1, TIO_BS, 0), -EINVAL);
	CHECK_EQ(io_prep_read(ctx, f, NULL, TIO_BS, 0, 1), -EINVAL);
	CHECK_EQ(io_prep_read(ctx, f, buf, TIO_BS, (off_t)-4096, 1), -EINVAL);
	CHECK_EQ(io_inflight(ctx), 0);
	/* depth 4: the fifth prepared I/O is refused */
	for (unsigned i = 0; i < 4; i++)
		CHECK_EQ(io_prep_read(ctx, f, buf + i * TIO_BS, TIO_BS, i * TIO_BS, i), 0);
	CHECK_EQ(io_prep_read(ctx, f, buf + 4 * TIO_BS, TIO_BS, 0, 4), -EAGAIN);
	CHECK_EQ(io_submit_batch(ctx), 4);
	tio_reap_all(ctx, 4, NULL);
	/* reap with nothing in flight returns at once, even when asked to block */
	CHECK_EQ(io_reap(ctx, &cqe, 1, 1), 0);
	/* an fd closed behind the layer's back: an error result, not a crash */
	int fd2 = dup(fd);
	int f2 = io_ctx_add_file(ctx, fd2);
	close(fd2);
	CHECK_EQ(io_prep_read(ctx, f2, buf, TIO_BS, 0, 0), 0);
	CHECK(io_submit_batch(ctx) >= 0);
	int64_t res;
	tio_reap_all(ctx, 1, &res);
	printf("%s: read through a closed fd -> %lld\n", io_backend_name(b), (long long)res);
	CHECK(res == -EBADF || res == TIO_BS); /* TIO_BS: the ring holds a registered ref */
	io_ctx_destroy(ctx);
	free(buf);
}

int main(void)
{
	int fd = tio_open_file(16 * TIO_BS);
	char *buf = tio_alloc(TIO_BS);
	io_ctx_t *ctx = NULL;
	struct io_opts big = { .depth = 1u << 20 };
	CHECK_EQ(io_ctx_create(&big, &ctx), -EINVAL);

	CHECK_EQ(io_check_direct(fd, buf, TIO_BS, 0), 0);
	tio_capture_stderr();
	CHECK_EQ(io_check_direct(fd, buf, TIO_BS, 3), -EINVAL);
	CHECK(tio_captured("offset is not a multiple of"));
	CHECK_EQ(io_check_direct(fd, buf + 1, TIO_BS, 0), -EINVAL);
	CHECK_EQ(io_check_direct(-1, buf, TIO_BS, 0), -EBADF);
	CHECK_EQ(io_check_direct(12345, buf, TIO_BS, 0), -EBADF);

	tio_capture_stderr();
	CHECK_EQ(io_open_direct("/nonexistent-lotus-dir/x", O_RDONLY, 0), -ENOENT);
	CHECK(tio_captured("No such file"));
	/* tmpfs: no O_DIRECT before Linux 6.6; either way the answer is clear */
	int t = io_open_direct("/dev/shm/lotus-io-test-probe", O_RDWR | O_CREAT, 0600);
	printf("O_DIRECT on /dev/shm: %s\n", t >= 0 ? "supported" : strerror(-t));
	CHECK(t >= 0 || t == -EINVAL || t == -ENOENT || t == -EACCES);
	if (t >= 0) {
		close(t);
		unlink("/dev/shm/lotus-io-test-probe");
	}

	backend_errors(IO_BACKEND_SYNC, fd);
	backend_errors(IO_BACKEND_AIO, fd);
	if (tio_have_uring())
		backend_errors(IO_BACKEND_URING, fd);
	close(fd);
	free(buf);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
