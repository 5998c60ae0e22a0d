/* test_io_clone_fork.c - fork after clone: the parent creates a donor and a
 * disabled SINGLE_ISSUER ring (IO_F_R_DISABLED), registers the shared buffer
 * once, clones it, adds the file, forks; the child enables the ring
 * (IORING_REGISTER_ENABLE_RINGS makes it the single issuer) and does
 * fixed-buffer I/O.  Also: a clone across processes is refused. */
#include <sys/mman.h>
#include <sys/wait.h>
#include "test_io_util.h"

#define N 32

static int child(io_ctx_t *ctx, io_ctx_t *donor, char *shm, int file)
{
	struct io_cqe cqe;
	struct io_stats st;
	/* before enable: refused, not crashed */
	CHECK_EQ(io_prep_read(ctx, file, shm, TIO_BS, 0, 0), 0);
	CHECK_EQ(io_submit_batch(ctx), -EBADFD);
	CHECK_EQ(io_ctx_enable(ctx), 0);
	CHECK_EQ(io_submit_batch(ctx), 1);
	CHECK_EQ(io_reap(ctx, &cqe, 1, 1), 1);
	CHECK_EQ(cqe.res, TIO_BS);
	tio_write_blocks(ctx, file, shm, N, 0, 77);
	tio_read_verify(ctx, file, shm, N, 0, 77);
	io_ctx_stats(ctx, &st);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	CHECK_EQ(st.cloned_buffers, 1);
	CHECK_EQ(st.fixed_ios, 2 * N + 1);
	printf("child: reg_ring %d reg_files %d fixed_ios %llu setup_flags 0x%x\n", st.reg_ring,
	       st.reg_files, (unsigned long long)st.fixed_ios, st.setup_flags);
	/* the parent's donor ring, from this process */
	io_ctx_t *mine = NULL;
	CHECK_EQ(io_ctx_create(NULL, &mine), 0);
	int r = io_ctx_clone_buffers_from(mine, donor);
	printf("child: clone from the parent's ring -> %d (%s)\n", r, strerror(-r));
	CHECK(r == -EINVAL || r == -EEXIST || r == 0);
	io_ctx_destroy(mine);
	io_ctx_destroy(ctx);
	fflush(stdout);
	return 0;
}

int main(void)
{
	if (!tio_have_uring())
		tio_skip("SKIP: io_uring is not available here");
	size_t len = N * TIO_BS;
	int fd = tio_open_file(len);
	char *shm = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CHECK(shm != MAP_FAILED);
	io_ctx_t *donor = NULL, *ctx = NULL;
	struct io_opts dopts = { .flags = IO_F_NO_SINGLE_ISSUER };
	struct io_opts copts = { .flags = IO_F_R_DISABLED };
	CHECK_EQ(io_ctx_create(&dopts, &donor), 0);
	CHECK_EQ(io_ctx_register_buffer(donor, shm, len), 0);
	CHECK_EQ(io_ctx_create(&copts, &ctx), 0);
	CHECK_EQ(io_ctx_backend(ctx), IO_BACKEND_URING);
	CHECK_EQ(io_ctx_clone_buffers_from(ctx, donor), 0);
	int file = io_ctx_add_file(ctx, fd);
	CHECK(file >= 0);
	fflush(stdout);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0)
		_exit(child(ctx, donor, shm, file));
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the parent sees the child's writes on disk */
	char *buf = tio_alloc(TIO_BS);
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(pread(fd, buf, TIO_BS, (off_t)i * TIO_BS), TIO_BS);
		CHECK(tio_verify(buf, 77, i));
	}
	io_ctx_destroy(ctx); /* the parent's copy */
	io_ctx_destroy(donor);
	munmap(shm, len);
	free(buf);
	close(fd);
	tio_cleanup();
	printf("PASS\n");
	return 0;
}
