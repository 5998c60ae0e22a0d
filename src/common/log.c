/* log.c - see log.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/log.h"

#include "lotus.h"

/* the public levels are these */
_Static_assert(LOTUS_LOG_DEBUG == (int)LOG_DEBUG && LOTUS_LOG_INFO == (int)LOG_INFO &&
	       LOTUS_LOG_WARN == (int)LOG_WARN && LOTUS_LOG_ERROR == (int)LOG_ERROR,
	       "lotus_log_level matches log_level");

static char log_tag[32] = "lotus";
/* The sink: one pair, published by the release store of log_sink (read
 * with acquire, so a logging thread sees the arg written with it). */
static log_sink_fn _Atomic log_sink;
static void *log_sink_arg;
static int log_level = -1;
static _Atomic unsigned log_errors;

unsigned log_error_count(void)
{
	return log_errors;
}

void log_set_tag(const char *tag)
{
	snprintf(log_tag, sizeof(log_tag), "%s", tag);
}

void log_set_level(enum log_level lvl)
{
	__atomic_store_n(&log_level, (int)lvl, __ATOMIC_RELAXED);
}

/* The level is read from LOTUS_LOG on first use, by whichever threads get
 * there first: each computes the same value and stores it whole (atomic, so
 * no thread sees a half-set level). */
int log_enabled(enum log_level lvl)
{
	int cur = __atomic_load_n(&log_level, __ATOMIC_RELAXED);
	if (cur < 0) {
		const char *e = getenv("LOTUS_LOG");
		cur = LOG_INFO;
		if (e && !strcasecmp(e, "debug")) cur = LOG_DEBUG;
		if (e && !strcasecmp(e, "warn")) cur = LOG_WARN;
		if (e && !strcasecmp(e, "error")) cur = LOG_ERROR;
		__atomic_store_n(&log_level, cur, __ATOMIC_RELAXED);
	}
	return (int)lvl >= cur;
}

/* "2026-12-02T00:50:24.123Z " into buf (at least 32 bytes): UTC, ms. */
static int log_stamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!gmtime_r(&ts.tv_sec, &tm))
		return snprintf(buf, len, "? ");
	return snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ", tm.tm_year + 1900,
			tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			ts.tv_nsec / 1000000);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	char line[1024];
	va_list ap;
	if (!log_enabled(lvl))
		return;
	int n = log_stamp(line, sizeof(line));
	if (n > 0 && (size_t)n < sizeof(line))
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s: %s: ", log_tag, names[lvl]);
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	log_sink_fn fn = atomic_load_explicit(&log_sink, memory_order_acquire);
	if (fn) {
		fn(lvl, line, log_sink_arg);
	} else {
		/* one write per line: lines of several threads (and, with
		 * --log-file, of an O_APPEND file) never interleave */
		size_t len = strlen(line);
		if (len == sizeof(line) - 1)
			len--;   /* cut: make room for the newline */
		line[len++] = '\n';
		ssize_t w = write(STDERR_FILENO, line, len);
		(void)w;   /* nowhere left to report it */
	}
	if (lvl == LOG_ERROR)
		log_errors++;
}

int log_throttle_pass(struct log_throttle *t, unsigned lines, uint64_t window_ns,
		      uint64_t *missed)
{
	uint64_t now = clock_now_ns();
	*missed = 0;
	if (!t->window_start || now - t->window_start >= window_ns) {
		t->window_start = now;
		t->printed = 0;
	}
	if (t->printed >= lines) {
		t->missed++;
		t->missed_at = t->window_start;
		return 0;
	}
	t->printed++;
	*missed = t->missed;
	t->missed = 0;
	return 1;
}

uint64_t log_throttle_flush(struct log_throttle *t, uint64_t window_ns)
{
	if (!t->missed || clock_now_ns() - t->missed_at < window_ns)
		return 0;
	uint64_t n = t->missed;
	t->missed = 0;
	return n;
}

void log_set_sink(log_sink_fn fn, void *arg)
{
	atomic_store_explicit(&log_sink, NULL, memory_order_release);
	log_sink_arg = arg;
	atomic_store_explicit(&log_sink, fn, memory_order_release);
}

void log_sink_clear(log_sink_fn fn, void *arg)
{
	if (atomic_load_explicit(&log_sink, memory_order_acquire) == fn && log_sink_arg == arg)
		log_set_sink(NULL, NULL);
}

/* --log-file: the path, and the reopen a SIGHUP does (open and dup2 are
 * async-signal-safe; dup2 swaps fd 2 at once, so each line goes whole to
 * the old file or to the new one). */
static char log_path[4096];

static int log_file_attach(void)
{
	int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	int rc = dup2(fd, STDERR_FILENO) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

static void log_on_sighup(int sig)
{
	int saved = errno;
	(void)sig;
	log_file_attach();   /* failed: the lines keep going to the old file */
	errno = saved;
}

int log_file_open(const char *path)
{
	if (snprintf(log_path, sizeof(log_path), "%s", path) >= (int)sizeof(log_path))
		return -ENAMETOOLONG;
	int rc = log_file_attach();
	if (rc) {
		log_path[0] = 0;
		return rc;
	}
	struct sigaction sa = { .sa_handler = log_on_sighup, .sa_flags = SA_RESTART };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGHUP, &sa, NULL);
	return 0;
}
