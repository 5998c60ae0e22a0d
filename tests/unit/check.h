/*
 * check.h - the one check kit of lotus's unit tests.
 *
 * Every test program under tests/unit/ includes this header (directly or
 * through one of the area helpers: testutil.h, test_io_util.h, ...).  A test
 * exits as tests/run reads it:
 *
 *   0   CHECK_PASS   every check held
 *   1   CHECK_FAIL   a check failed: its file, line and expression are printed
 *   77  CHECK_SKIP   the machine lacks what the test needs (SKIP)
 *
 * Checks are fatal: the first one that fails ends the program.  The test's
 * cleanup hook (check_cleanup) runs first, so it can remove its files and
 * processes and give back a redirected stderr before the failure is printed.
 *
 *   CHECK(cond)               cond must hold
 *   CHECK(cond, fmt, ...)     the same, with a printf-style explanation
 *   CHECK_EQ(a, b)            a == b, as long long; both values are printed
 *   CHECK_RC(expr)            expr returns >= 0; a negative return is printed
 *                             with lotus_strerror()
 *   EXPECT(expr, want)        expr returns exactly want (an error code test)
 *   SKIP(fmt, ...)            exit 77 with the reason
 *
 * check_note (a string the test may fill, e.g. "seed 1234") is printed with
 * every failure, so a fuzz failure can be replayed.
 *
 * Thread rule: a check may fail on any thread; the cleanup hook then runs on
 * that thread, and exit() ends the others.
 */
#ifndef LOTUS_TESTS_CHECK_H
#define LOTUS_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"

#define CHECK_PASS 0
#define CHECK_FAIL 1
#define CHECK_SKIP 77

/* Set by a test that owns files or processes; run once before a failing
 * check or SKIP exits. */
static void (*check_cleanup)(void) __attribute__((unused));
/* Printed with every failure when non-empty. */
static char check_note[256] __attribute__((unused));

static void check_run_cleanup_(void) __attribute__((unused));
static void check_run_cleanup_(void)
{
	void (*fn)(void) = check_cleanup;
	check_cleanup = NULL;
	if (fn)
		fn();
}

/* fmt always starts with one space (see CHECK): a bare CHECK(cond) passes
 * " " and prints no explanation. */
static void check_fail_(const char *file, int line, const char *what, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5), unused));
static void check_fail_(const char *file, int line, const char *what, const char *fmt, ...)
{
	fflush(stdout);
	check_run_cleanup_();        /* first: it may give stderr back */
	fprintf(stderr, "FAIL %s:%d: %s", file, line, what);
	if (fmt[0] && fmt[1]) {
		va_list ap;
		va_start(ap, fmt);
		fputs(":", stderr);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	if (check_note[0])
		fprintf(stderr, " (%s)", check_note);
	fputc('\n', stderr);
	exit(CHECK_FAIL);
}

#define CHECK(cond, ...)                                                               \
	do {                                                                           \
		if (!(cond))                                                           \
			check_fail_(__FILE__, __LINE__, #cond, " " __VA_ARGS__);       \
	} while (0)

#define CHECK_EQ(a, b)                                                                 \
	do {                                                                           \
		long long a_ = (long long)(a), b_ = (long long)(b);                    \
		if (a_ != b_)                                                          \
			check_fail_(__FILE__, __LINE__, #a " == " #b, " %lld != %lld", \
				    a_, b_);                                           \
	} while (0)

#define CHECK_RC(expr)                                                                 \
	do {                                                                           \
		int rc_ = (expr);                                                      \
		if (rc_ < 0)                                                           \
			check_fail_(__FILE__, __LINE__, #expr, " returned %d (%s)", rc_, \
				    lotus_strerror(rc_));                              \
	} while (0)

#define EXPECT(expr, want)                                                             \
	do {                                                                           \
		int rc_ = (expr), want_ = (want);                                      \
		if (rc_ != want_)                                                      \
			check_fail_(__FILE__, __LINE__, #expr,                         \
				    " gave %d (%s), want %s = %d", rc_,                \
				    lotus_strerror(rc_), #want, want_);                \
	} while (0)

#define SKIP(...)                                                                      \
	do {                                                                           \
		fflush(stdout);                                                        \
		check_run_cleanup_();                                                  \
		printf("SKIP: " __VA_ARGS__);                                          \
		putchar('\n');                                                         \
		exit(CHECK_SKIP);                                                      \
	} while (0)

#endif
