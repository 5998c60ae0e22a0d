/*
 * test_redo_util.h - helpers for the redo log and checkpoint tests
 * (tests/unit/test_redo_*.c, test_ckpt_*.c; header-only, every test is one
 * program).  Exit codes: 0 pass, 1 fail, 77 skip with the reason on the last
 * line.  The data directory is a fresh lotus-dur.XXXXXX under the first of
 * $TMPDIR, /tmp, /var/tmp and the current directory that supports O_DIRECT
 * (the log needs it), so a source tree is not littered.  It is removed at
 * every exit (pass, CHECK failure, skip, exit() from any thread) and, best
 * effort, on SIGINT/SIGTERM/SIGHUP (the runner's timeout); set
 * LOTUS_TEST_KEEP=1 to keep it for a look.
 */
#ifndef TEST_REDO_UTIL_H
#define TEST_REDO_UTIL_H
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lotus.h"
#include "io/io.h"
#include "check.h"

static char tdur_dir[1024];

static int tdur_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb; (void)flag; (void)f;
	return remove(p);
}

static void tdur_cleanup(void)
{
	if (tdur_dir[0] && getenv("LOTUS_TEST_KEEP"))
		fprintf(stderr, "test data kept in %s\n", tdur_dir);
	else if (tdur_dir[0])
		nftw(tdur_dir, tdur_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	tdur_dir[0] = '\0';
}

/* Best effort (nftw is not async-signal-safe, but a test killed by its
 * timeout should not leave a data directory behind). */
static void tdur_on_signal(int sig)
{
	signal(sig, SIG_DFL);
	tdur_cleanup();
	raise(sig);
}

static void tdur_cleanup_at_exit(void)
{
	static int done;
	if (done++)
		return;
	atexit(tdur_cleanup);
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], tdur_on_signal);
}


static void tdur_skip(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tdur_cleanup();
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	exit(77);
}

static int tdur_try_dir(const char *base)
{
	snprintf(tdur_dir, sizeof(tdur_dir), "%s/lotus-dur.XXXXXX", base);
	if (!mkdtemp(tdur_dir)) {
		tdur_dir[0] = '\0';
		return 0;
	}
	char p[1100];
	snprintf(p, sizeof(p), "%s/probe", tdur_dir);
	int fd = open(p, O_RDWR | O_CREAT | O_DIRECT, 0644);
	if (fd >= 0) {
		close(fd);
		unlink(p);
		return 1;
	}
	rmdir(tdur_dir);             /* no O_DIRECT here: not kept even with LOTUS_TEST_KEEP */
	tdur_dir[0] = '\0';
	return 0;
}

/* Make the test directory; skip (77) if no candidate supports O_DIRECT
 * (tmpfs does not, so a tmpfs /tmp falls through to /var/tmp). */
static const char *tdur_setup(void)
{
	const char *t = getenv("TMPDIR");
	unsetenv("LOTUS_IO_FAULT");
	tdur_cleanup_at_exit();
	if ((t && *t && tdur_try_dir(t)) || tdur_try_dir("/tmp") || tdur_try_dir("/var/tmp") ||
	    tdur_try_dir("."))
		return tdur_dir;
	tdur_skip("skip: no directory with O_DIRECT support ($TMPDIR, /tmp, /var/tmp, .)");
	return NULL;
}

static inline const char *tdur_backend_name(enum io_backend b)
{
	return b == IO_BACKEND_URING ? "uring" : b == IO_BACKEND_AIO ? "aio" :
	       b == IO_BACKEND_SYNC ? "sync" : "auto";
}

/* Deterministic test payloads: length and bytes from a 64-bit id. */
static inline uint64_t tdur_mix(uint64_t x)
{
	x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
	return x;
}

static inline uint32_t tdur_payload(uint64_t id, unsigned char *buf, uint32_t maxlen)
{
	uint64_t h = tdur_mix(id);
	uint32_t len = (uint32_t)(h % (maxlen + 1));
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (unsigned char)(tdur_mix(h + i / 8) >> (8 * (i % 8)));
	return len;
}
#endif
