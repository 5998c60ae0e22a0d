/*
 * io_sys.c - the thin wrapper every system call of the I/O layer goes through.
 *
 * Two jobs, kept in one place so neither can be bypassed:
 *   - counters: each wrapper bumps its io_stats.sys_* field per call made;
 *   - fault injection: LOTUS_IO_FAULT (or io_fault_set()) is parsed once per
 *     context at creation; a wrapper whose step is armed returns the chosen
 *     -errno instead of calling the kernel.  Nothing is injected when the spec
 *     is empty, and the check is one branch.
 *
 * Spec grammar (comma-separated):  setup[:E] | enter:N[:E] | reg_ring[:E] |
 *   reg_files[:E] | reg_buffers[:E] | clone[:E] | cqe:N:E | pread:N[:E] | pwrite:N[:E]
 * E is an errno number or name (EOPNOTSUPP, 95); N counts from 1 per context.
 *
 * Invariants: wrappers return >= 0 or -errno and never leave errno for callers;
 * enter:N, cqe:N, pread:N and pwrite:N fire once (the Nth event only).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include "common/log.h"
#include "io/io_int.h"

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static char fault_spec[256];
static int fault_spec_set; /* io_fault_set() called: it wins over the env */

static const struct {
	const char *name;
	int err;
} errno_names[] = {
	{ "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EINTR", EINTR }, { "EIO", EIO },
	{ "ENXIO", ENXIO }, { "EBADF", EBADF }, { "EAGAIN", EAGAIN }, { "ENOMEM", ENOMEM },
	{ "EFAULT", EFAULT }, { "EBUSY", EBUSY }, { "EEXIST", EEXIST }, { "EINVAL", EINVAL },
	{ "EMFILE", EMFILE }, { "ENOSPC", ENOSPC }, { "ENOSYS", ENOSYS },
	{ "EOPNOTSUPP", EOPNOTSUPP }, { "EBADFD", EBADFD }, { "ECANCELED", ECANCELED },
	{ "ETIME", ETIME }, { "EOWNERDEAD", EOWNERDEAD },
};

const char *io_err_name(int err)
{
	if (err < 0)
		err = -err;
	for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
		if (errno_names[i].err == err)
			return errno_names[i].name;
	return "errno";
}

static int parse_errno(const char *s, int dflt)
{
	if (!s || !*s)
		return dflt;
	if (*s == '-')
		s++;
	for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
		if (!strcmp(errno_names[i].name, s))
			return errno_names[i].err;
	int v = atoi(s);
	return v > 0 ? v : dflt;
}

void io_fault_set(const char *spec)
{
	pthread_mutex_lock(&fault_lock);
	snprintf(fault_spec, sizeof(fault_spec), "%s", spec ? spec : "");
	fault_spec_set = 1;
	pthread_mutex_unlock(&fault_lock);
}

/* One "name[:a[:b]]" token. */
static void fault_parse_token(struct io_fault *f, char *tok)
{
	static const char *const reg_names[IO_REG_OTHER] = { "reg_ring", "reg_files",
							     "reg_buffers", "clone" };
	static const int reg_dflt[IO_REG_OTHER] = { EINVAL, EINVAL, ENOMEM, EINVAL };
	char *a = strchr(tok, ':'), *b = NULL;
	if (a) {
		*a++ = '\0';
		b = strchr(a, ':');
		if (b)
			*b++ = '\0';
	}
	if (!strcmp(tok, "setup")) {
		f->setup_err = parse_errno(a, ENOSYS);
		return;
	}
	if (!strcmp(tok, "enter") && a) {
		f->enter_nth = strtoull(a, NULL, 10);
		f->enter_err = parse_errno(b, ENXIO);
		return;
	}
	if (!strcmp(tok, "pread") && a) {
		f->pread_nth = strtoull(a, NULL, 10);
		f->pread_err = parse_errno(b, EIO);
		return;
	}
	if (!strcmp(tok, "pwrite") && a) {
		f->pwrite_nth = strtoull(a, NULL, 10);
		f->pwrite_err = parse_errno(b, EIO);
		return;
	}
	if (!strcmp(tok, "cqe") && a) {
		f->cqe_nth = strtoull(a, NULL, 10);
		f->cqe_err = parse_errno(b, EIO);
		return;
	}
	for (int i = 0; i < IO_REG_OTHER; i++) {
		if (!strcmp(tok, reg_names[i])) {
			f->reg_err[i] = parse_errno(a, reg_dflt[i]);
			return;
		}
	}
	if (*tok)
		log_warn("io: LOTUS_IO_FAULT: unknown fault '%s' ignored", tok);
}

void io_fault_init(struct io_fault *f, const char *own)
{
	char spec[256];
	memset(f, 0, sizeof(*f));
	pthread_mutex_lock(&fault_lock);
	if (own) {
		snprintf(spec, sizeof(spec), "%s", own);
	} else if (fault_spec_set) {
		snprintf(spec, sizeof(spec), "%s", fault_spec);
	} else {
		const char *e = getenv("LOTUS_IO_FAULT");
		snprintf(spec, sizeof(spec), "%s", e ? e : "");
	}
	pthread_mutex_unlock(&fault_lock);
	char *save = NULL;
	for (char *t = strtok_r(spec, ",", &save); t; t = strtok_r(NULL, ",", &save))
		fault_parse_token(f, t);
}

/* cqe:N:E - returns 1 if this completion's result was replaced. */
int io_fault_cqe(struct io_ctx *ctx, int64_t *res)
{
	struct io_fault *f = &ctx->fault;
	if (!f->cqe_nth || ++f->cqes != f->cqe_nth)
		return 0;
	log_info("io: fault injection: completion %llu reports -%s",
		 (unsigned long long)f->cqes, io_err_name(f->cqe_err));
	*res = -f->cqe_err;
	return 1;
}

int io_sys_uring_setup(struct io_ctx *ctx, unsigned entries, struct io_uring *ring,
		       struct io_uring_params *p)
{
	if (ctx->fault.setup_err)
		return -ctx->fault.setup_err;
	return io_uring_queue_init_params(entries, ring, p); /* -errno already */
}

int io_sys_enter(struct io_ctx *ctx, unsigned to_submit, unsigned min_complete, unsigned flags,
		 void *arg, size_t argsz)
{
	struct io_fault *f = &ctx->fault;
	ctx->st.sys_enter++;
	if (f->enter_nth && ++f->enters == f->enter_nth) {
		log_info("io: fault injection: io_uring_enter call %llu fails with -%s",
			 (unsigned long long)f->enters, io_err_name(f->enter_err));
		return -f->enter_err;
	}
	long ret = syscall(__NR_io_uring_enter, ctx->u.enter_fd, to_submit, min_complete,
			   flags | ctx->u.enter_flags, arg, argsz);
	return ret < 0 ? -errno : (int)ret;
}

int io_sys_register(struct io_ctx *ctx, enum io_reg_step step, unsigned opcode, void *arg,
		    unsigned nr)
{
	if (step < IO_REG_OTHER && ctx->fault.reg_err[step])
		return -ctx->fault.reg_err[step];
	long ret = syscall(__NR_io_uring_register, ctx->u.ring.ring_fd, opcode, arg, nr);
	return ret < 0 ? -errno : (int)ret;
}

int io_sys_aio_setup(struct io_ctx *ctx, unsigned depth, io_context_t *actx)
{
	(void)ctx;
	*actx = 0;
	return io_setup((int)depth, actx); /* libaio returns -errno */
}

int io_sys_aio_submit(struct io_ctx *ctx, long n, struct iocb **ios)
{
	ctx->st.sys_submit++;
	return io_submit(ctx->a.actx, n, ios);
}

int io_sys_aio_getevents(struct io_ctx *ctx, long min, long max, struct io_event *ev,
			 struct timespec *ts)
{
	ctx->st.sys_getevents++;
	return io_getevents(ctx->a.actx, min, max, ev, ts);
}

ssize_t io_sys_pread(struct io_ctx *ctx, int fd, void *buf, size_t len, off_t off)
{
	struct io_fault *f = &ctx->fault;
	ctx->st.sys_pread++;
	if (f->pread_nth && ++f->preads == f->pread_nth) {
		log_info("io: fault injection: pread %llu fails with -%s",
			 (unsigned long long)f->preads, io_err_name(f->pread_err));
		return -f->pread_err;
	}
	ssize_t r = pread(fd, buf, len, off);
	return r < 0 ? -errno : r;
}

ssize_t io_sys_pwrite(struct io_ctx *ctx, int fd, const void *buf, size_t len, off_t off,
		      int dsync)
{
	struct io_fault *f = &ctx->fault;
	ctx->st.sys_pwrite++;
	if (f->pwrite_nth && ++f->pwrites == f->pwrite_nth) {
		log_info("io: fault injection: pwrite %llu fails with -%s",
			 (unsigned long long)f->pwrites, io_err_name(f->pwrite_err));
		return -f->pwrite_err;
	}
	ssize_t r;
	if (dsync) {
		struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
		r = pwritev2(fd, &iov, 1, off, RWF_DSYNC);
	} else {
		r = pwrite(fd, buf, len, off);
	}
	return r < 0 ? -errno : r;
}
