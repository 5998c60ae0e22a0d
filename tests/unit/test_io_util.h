/*
 * test_io_util.h - helpers shared by the tests/unit/test_io_*.c programs
 * (header-only: every test is one program).  Exit codes: 0 pass, 1 fail,
 * 77 skip (with the reason as the last line of output).
 */
#ifndef TEST_IO_UTIL_H
#define TEST_IO_UTIL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "io/io.h"
#include "check.h"

#define TIO_BS 4096u

static char tio_dir[512];
static char tio_path[8][600];
static int tio_npaths;


static inline void tio_cleanup(void)
{
	for (int i = 0; i < tio_npaths; i++)
		unlink(tio_path[i]);
	tio_npaths = 0;
	if (tio_dir[0])
		rmdir(tio_dir);
	tio_dir[0] = '\0';
}

static inline void tio_skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tio_cleanup();
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	exit(77);
}

/* A fresh O_DIRECT file of `size` bytes in a temp dir; skips without O_DIRECT. */
static inline int tio_open_file(size_t size)
{
	unsetenv("LOTUS_IO");
	unsetenv("LOTUS_IO_FAULT");
	if (!tio_dir[0]) {
		const char *t = getenv("TMPDIR");
		snprintf(tio_dir, sizeof(tio_dir), "%s/lotus-io-test.XXXXXX", t && *t ? t : "/tmp");
		check_cleanup = tio_cleanup;   /* a failing CHECK removes the files */
		if (!mkdtemp(tio_dir)) {
			tio_dir[0] = '\0';
			tio_skip("SKIP: cannot create a temp dir: %s", strerror(errno));
		}
	}
	char *p = tio_path[tio_npaths];
	snprintf(p, sizeof(tio_path[0]), "%s/f%d", tio_dir, tio_npaths);
	int fd = io_open_direct(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd == -EINVAL)
		tio_skip("SKIP: %s does not support O_DIRECT", tio_dir);
	CHECK(fd >= 0);
	tio_npaths++;
	CHECK(ftruncate(fd, (off_t)size) == 0);
	return fd;
}

static inline void *tio_alloc(size_t len)
{
	void *p = NULL;
	CHECK(posix_memalign(&p, TIO_BS, len) == 0);
	memset(p, 0, len);
	return p;
}

/* The byte a block holds at position i, for a seed and block number. */
static inline unsigned char tio_byte(unsigned seed, uint64_t block, size_t i)
{
	uint64_t x = (seed * 0x9e3779b97f4a7c15ull) ^ (block * 0xbf58476d1ce4e5b9ull) ^ (i / 8);
	x ^= x >> 31;
	x *= 0x94d049bb133111ebull;
	return (unsigned char)(x >> (8 * (i % 8)));
}

static inline void tio_fill(void *buf, unsigned seed, uint64_t block)
{
	unsigned char *b = buf;
	for (size_t i = 0; i < TIO_BS; i++)
		b[i] = tio_byte(seed, block, i);
}

static inline int tio_verify(const void *buf, unsigned seed, uint64_t block)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < TIO_BS; i++)
		if (b[i] != tio_byte(seed, block, i))
			return 0;
	return 1;
}

/* Reap exactly n completions; each user_data in [0, n) must appear once and
 * (unless res_out) carry res == TIO_BS. */
static inline void tio_reap_all(io_ctx_t *ctx, unsigned n, int64_t *res_out)
{
	struct io_cqe cqe[256];
	unsigned char *seen = calloc(n, 1);
	unsigned got = 0;
	CHECK(seen);
	while (got < n) {
		int r = io_reap(ctx, cqe, 256, n - got);
		CHECK(r > 0);
		for (int i = 0; i < r; i++) {
			uint64_t ud = cqe[i].user_data;
			CHECK(ud < n);
			CHECK_EQ(seen[ud], 0);
			seen[ud] = 1;
			if (res_out)
				res_out[ud] = cqe[i].res;
			else
				CHECK_EQ(cqe[i].res, TIO_BS);
		}
		got += (unsigned)r;
	}
	struct io_cqe extra;
	CHECK_EQ(io_reap(ctx, &extra, 1, 0), 0); /* nothing delivered twice */
	CHECK_EQ(io_inflight(ctx), 0);
	free(seen);
}

/* Write blocks [first, first+n) from bufs (one TIO_BS block each), with
 * user_data 0..n-1, and reap them all. */
static inline void tio_write_blocks(io_ctx_t *ctx, int file, char *bufs, unsigned n, uint64_t first,
			     unsigned seed)
{
	for (unsigned i = 0; i < n; i++) {
		tio_fill(bufs + (size_t)i * TIO_BS, seed, first + i);
		int r = (i & 1) ? io_prep_write_dsync(ctx, file, bufs + (size_t)i * TIO_BS, TIO_BS,
						      (off_t)((first + i) * TIO_BS), i)
				: io_prep_write(ctx, file, bufs + (size_t)i * TIO_BS, TIO_BS,
						(off_t)((first + i) * TIO_BS), i);
		CHECK_EQ(r, 0);
	}
	CHECK_EQ(io_submit_batch(ctx), n);
	tio_reap_all(ctx, n, NULL);
}

static inline void tio_read_verify(io_ctx_t *ctx, int file, char *bufs, unsigned n, uint64_t first,
			    unsigned seed)
{
	memset(bufs, 0, (size_t)n * TIO_BS);
	for (unsigned i = 0; i < n; i++)
		CHECK_EQ(io_prep_read(ctx, file, bufs + (size_t)i * TIO_BS, TIO_BS,
				      (off_t)((first + i) * TIO_BS), i), 0);
	struct io_cqe cqe[1];
	(void)cqe;
	CHECK_EQ(io_submit_batch(ctx), n);
	tio_reap_all(ctx, n, NULL);
	for (unsigned i = 0; i < n; i++)
		CHECK(tio_verify(bufs + (size_t)i * TIO_BS, seed, first + i));
}

/* Redirect stderr to a temp file so a test can check a logged message. */
static FILE *tio_err_file;
static int tio_err_saved = -1;

static inline void tio_capture_stderr(void)
{
	fflush(stderr);
	tio_err_file = tmpfile();
	CHECK(tio_err_file);
	tio_err_saved = dup(2);
	dup2(fileno(tio_err_file), 2);
}

/* Restore stderr; 1 if the captured text contains needle (also echoed). */
static inline int tio_captured(const char *needle)
{
	char buf[8192];
	fflush(stderr);
	dup2(tio_err_saved, 2);
	close(tio_err_saved);
	rewind(tio_err_file);
	size_t n = fread(buf, 1, sizeof(buf) - 1, tio_err_file);
	buf[n] = '\0';
	fclose(tio_err_file);
	fputs(buf, stderr);
	return strstr(buf, needle) != NULL;
}

/* 1 if a forced io_uring context can be created here. */
static inline int tio_have_uring(void)
{
	/* the tests pick backends and faults themselves */
	unsetenv("LOTUS_IO");
	unsetenv("LOTUS_IO_FAULT");
	io_ctx_t *c = NULL;
	struct io_opts o = { .backend = IO_BACKEND_URING, .depth = 8 };
	if (io_ctx_create(&o, &c) < 0)
		return 0;
	io_ctx_destroy(c);
	return 1;
}

/* Each backend x batch {1, 8, 128} x read/write x {plain, registered} buffer:
 * data written is read back byte-exact, each completion delivered once. */
static inline void tio_rw_matrix(enum io_backend b)
{
	static const unsigned batches[] = { 1, 8, 128 };
	const unsigned rounds = 2;
	int fd = tio_open_file((size_t)rounds * 128 * TIO_BS * 2 * 3);
	char *region = tio_alloc((size_t)128 * TIO_BS);
	char *plain = tio_alloc((size_t)128 * TIO_BS);
	char *sbuf = tio_alloc(TIO_BS);
	uint64_t first = 0;
	for (int reg = 0; reg < 2; reg++) {
		for (unsigned bi = 0; bi < 3; bi++) {
			unsigned n = batches[bi], seed = 100 * (unsigned)reg + bi + 1;
			struct io_opts o = { .backend = b, .depth = 128 };
			io_ctx_t *ctx = NULL;
			CHECK_EQ(io_ctx_create(&o, &ctx), 0);
			CHECK_EQ(io_ctx_backend(ctx), b);
			int file = io_ctx_add_file(ctx, fd);
			CHECK(file >= 0);
			char *bufs = plain;
			if (reg) {
				CHECK_EQ(io_ctx_register_buffer(ctx, region, (size_t)128 * TIO_BS), 0);
				bufs = region;
			}
			for (unsigned r = 0; r < rounds; r++) {
				tio_write_blocks(ctx, file, bufs, n, first + (uint64_t)r * n, seed);
				tio_read_verify(ctx, file, bufs, n, first + (uint64_t)r * n, seed);
			}
			/* synchronous single-block read: always pread */
			struct io_stats s0, s1;
			io_ctx_stats(ctx, &s0);
			CHECK_EQ(io_read_sync(ctx, file, sbuf, TIO_BS, (off_t)(first * TIO_BS)),
				 TIO_BS);
			CHECK(tio_verify(sbuf, seed, first));
			io_ctx_stats(ctx, &s1);
			CHECK_EQ(s1.sys_pread, s0.sys_pread + 1);
			CHECK_EQ(s1.sys_enter, s0.sys_enter);
			CHECK_EQ(s1.sys_submit, s0.sys_submit);
			CHECK_EQ(s1.ios, 4ull * n + 1);
			CHECK_EQ(s1.bytes, (4ull * n + 1) * TIO_BS);
			CHECK_EQ(s1.fallbacks, 0);
			if (b == IO_BACKEND_URING) {
				CHECK(s1.sys_enter > 0 && s1.sys_submit == 0);
				CHECK(s1.sys_enter <= 4ull * rounds); /* one per batch, at most two */
				CHECK_EQ(s1.reg_buffers, reg);
				CHECK_EQ(s1.fixed_ios, reg ? 4ull * n : 0);
			} else if (b == IO_BACKEND_AIO) {
				CHECK(s1.sys_submit >= 2ull * rounds && s1.sys_getevents > 0);
				CHECK_EQ(s1.sys_enter, 0);
			} else {
				CHECK_EQ(s1.sys_pwrite, 2ull * n);
				CHECK_EQ(s1.sys_pread, 2ull * n + 1);
			}
			printf("%s batch %3u %s buffer: ok (enter %llu submit %llu getevents %llu "
			       "fixed %llu cpu %llu us)\n", io_backend_name(b), n,
			       reg ? "registered" : "plain", (unsigned long long)s1.sys_enter,
			       (unsigned long long)s1.sys_submit,
			       (unsigned long long)s1.sys_getevents,
			       (unsigned long long)s1.fixed_ios,
			       (unsigned long long)s1.cpu_ns / 1000);
			io_ctx_destroy(ctx);
			first += (uint64_t)rounds * n;
		}
	}
	close(fd);
	free(region);
	free(plain);
	free(sbuf);
	tio_cleanup();
}
#endif
