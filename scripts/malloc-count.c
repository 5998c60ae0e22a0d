/*
 * malloc-count.c - an LD_PRELOAD shim that counts a process's heap
 * allocations, for the "no allocation per request" check
 * (tests/integration/alloc_per_req.sh, scripts/bench-percore).
 *
 * It counts every call of malloc, calloc, realloc (with a size: a realloc
 * to 0 is a free), posix_memalign, aligned_alloc, memalign, valloc and
 * pvalloc, in every thread, and passes each call on to glibc's own
 * __libc_* entry points (no dlsym, which itself allocates).  free is not
 * wrapped.  The count is written as one line "pid PID allocs N":
 *   - at exit, to $MALLOC_COUNT_OUT (appended) or else to stderr;
 *   - on the signal $MALLOC_COUNT_SIGNAL (a number, e.g. 12 for SIGUSR2),
 *     to $MALLOC_COUNT_OUT, so that a long-running server can be sampled
 *     before and after a run (the handler only calls open/write/close).
 * Built by the Makefile as $(BUILD)/lib/malloc-count.so; not part of lotus.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static atomic_uint_fast64_t mc_count;
static char mc_path[512];

static inline void mc_bump(void)
{
	atomic_fetch_add_explicit(&mc_count, 1, memory_order_relaxed);
}

void *malloc(size_t n)
{
	mc_bump();
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	mc_bump();
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	if (n || !p)
		mc_bump();
	return __libc_realloc(p, n);
}

void *memalign(size_t al, size_t n)
{
	mc_bump();
	return __libc_memalign(al, n);
}

void *aligned_alloc(size_t al, size_t n)
{
	mc_bump();
	return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
	if (al < sizeof(void *) || (al & (al - 1)))
		return EINVAL;
	mc_bump();
	void *p = __libc_memalign(al, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *valloc(size_t n)
{
	mc_bump();
	return __libc_valloc(n);
}

void *pvalloc(size_t n)
{
	mc_bump();
	return __libc_pvalloc(n);
}

/* "pid PID allocs N\n" into buf, without stdio (signal-safe). */
static size_t mc_line(char *buf, size_t cap)
{
	char num[2][24];
	uint64_t v[2] = { (uint64_t)getpid(), atomic_load(&mc_count) };
	size_t nl[2];
	for (int i = 0; i < 2; i++) {
		char tmp[24];
		size_t k = 0;
		do {
			tmp[k++] = (char)('0' + v[i] % 10);
			v[i] /= 10;
		} while (v[i]);
		for (size_t j = 0; j < k; j++)
			num[i][j] = tmp[k - 1 - j];
		nl[i] = k;
	}
	size_t n = 0;
#define MC_PUT(s, l) do { if (n + (l) < cap) { memcpy(buf + n, (s), (l)); n += (l); } } while (0)
	MC_PUT("pid ", 4);
	MC_PUT(num[0], nl[0]);
	MC_PUT(" allocs ", 8);
	MC_PUT(num[1], nl[1]);
	MC_PUT("\n", 1);
#undef MC_PUT
	return n;
}

static void mc_report(int to_stderr)
{
	char line[96];
	size_t n = mc_line(line, sizeof(line));
	int fd = mc_path[0] ? open(mc_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
	if (fd >= 0) {
		ssize_t r = write(fd, line, n);
		(void)r;
		close(fd);
	} else if (to_stderr) {
		ssize_t r = write(2, line, n);
		(void)r;
	}
}

static void mc_on_signal(int sig)
{
	int e = errno;
	(void)sig;
	mc_report(0);
	errno = e;
}

__attribute__((constructor)) static void mc_init(void)
{
	const char *p = getenv("MALLOC_COUNT_OUT");
	if (p && strlen(p) < sizeof(mc_path))
		strcpy(mc_path, p);
	const char *s = getenv("MALLOC_COUNT_SIGNAL");
	if (s && *s) {
		int sig = atoi(s);
		if (sig > 0 && sig < NSIG) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_handler = mc_on_signal;
			sa.sa_flags = SA_RESTART;
			sigaction(sig, &sa, NULL);
		}
	}
}

__attribute__((destructor)) static void mc_fini(void)
{
	mc_report(1);
}
