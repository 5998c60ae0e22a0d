/* opts.c - see opts.h. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli/opts.h"
#include "common/common.h"

int cli_fail(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "lotus %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see lotus %s --help)\n", cmd);
	return 2;
}

struct cli_opt *cli_find(struct cli_opt *opts, const char *name)
{
	for (struct cli_opt *o = opts; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

static void cli_help(const char *cmd, const char *usage, const struct cli_opt *opts)
{
	/* One write: `lotus X --help | grep -q` under pipefail must not see a
	 * SIGPIPE because grep left after the first of several writes (the
	 * help is the first output, so the buffer may still be set). */
	static char buf[1 << 16];
	setvbuf(stdout, buf, _IOFBF, sizeof(buf));
	printf("usage: lotus %s [options]\n%s\n\noptions:\n", cmd, usage);
	for (const struct cli_opt *o = opts; o->name; o++) {
		char left[64];
		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->metavar ? " " : "",
			 o->metavar ? o->metavar : "");
		printf("  %-26s %s", left, o->help);
		if (o->kind == OPT_CHOICE && o->choices) {
			printf(" (");
			for (const char *const *c = o->choices; *c; c++)
				printf("%s%s", c == o->choices ? "" : "|", *c);
			printf(")");
		}
		printf("\n");
	}
	printf("  %-26s %s\n", "--help", "show this help");
	fflush(stdout);
}

static int cli_set(const char *cmd, struct cli_opt *o, const char *val)
{
	uint64_t u;
	double d;
	int rc = 0;
	switch (o->kind) {
	case OPT_FLAG:
		*(bool *)o->dst = true;
		return 0;
	case OPT_STR:
		if (!*val)
			return cli_fail(cmd, "--%s needs a non-empty value", o->name);
		*(const char **)o->dst = val;
		return 0;
	case OPT_CHOICE:
		for (int i = 0; o->choices[i]; i++)
			if (!strcmp(o->choices[i], val)) {
				*(int *)o->dst = i;
				return 0;
			}
		return cli_fail(cmd, "--%s: '%s' is not one of the choices", o->name, val);
	case OPT_RANGE:
		if (parse_range(val, &((uint64_t *)o->dst)[0], &((uint64_t *)o->dst)[1]))
			return cli_fail(cmd, "--%s: '%s' is not MIN-MAX", o->name, val);
		return 0;
	case OPT_DOUBLE:
		rc = parse_double(val, &d);
		u = 0;
		break;
	case OPT_SIZE:
		rc = parse_size(val, &u);
		d = (double)u;
		break;
	default:
		rc = parse_u64(val, &u);
		d = (double)u;
		break;
	}
	if (rc)
		return cli_fail(cmd, "--%s: '%s' is not a valid %s", o->name, val,
				o->kind == OPT_SIZE ? "size" : "number");
	if (o->max > o->min && (d < o->min || d > o->max))
		return cli_fail(cmd, "--%s: %s is out of range [%.15g, %.15g]", o->name, val, o->min,
				o->max);
	switch (o->kind) {
	case OPT_INT:
		if (u > 0x7fffffff)
			return cli_fail(cmd, "--%s: %s is too large", o->name, val);
		*(int *)o->dst = (int)u;
		break;
	case OPT_DOUBLE:
		*(double *)o->dst = d;
		break;
	default:
		*(uint64_t *)o->dst = u;
		break;
	}
	return 0;
}

int cli_parse(const char *cmd, const char *usage, struct cli_opt *opts, int argc,
	      char **argv, char **rest, int *nrest)
{
	int n = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			cli_help(cmd, usage, opts);
			return 1;
		}
		if (strncmp(a, "--", 2) != 0) {
			if (!rest)
				return cli_fail(cmd, "unexpected argument '%s'", a);
			rest[n++] = argv[i];
			continue;
		}
		char name[64];
		const char *eq = strchr(a + 2, '=');
		size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		if (len >= sizeof(name))
			return cli_fail(cmd, "unknown option '%s'", a);
		memcpy(name, a + 2, len);
		name[len] = 0;
		struct cli_opt *o = cli_find(opts, name);
		if (!o)
			return cli_fail(cmd, "unknown option '--%s'", name);
		const char *val = NULL;
		if (o->kind != OPT_FLAG) {
			if (eq)
				val = eq + 1;
			else if (i + 1 < argc)
				val = argv[++i];
			else
				return cli_fail(cmd, "--%s needs a value", name);
		} else if (eq) {
			return cli_fail(cmd, "--%s takes no value", name);
		}
		int rc = cli_set(cmd, o, val);
		if (rc)
			return rc;
		o->seen = true;
	}
	if (nrest)
		*nrest = n;
	return 0;
}

/* ---- stop signals ------------------------------------------------------------ */

static void (*stop_fn)(void);
static char stop_msg[160];
static size_t stop_msg_len;
static volatile sig_atomic_t stop_sig;

static void stop_exit(int sig)
{
	if (write(STDERR_FILENO, stop_msg, stop_msg_len) < 0) {
		/* nothing to do: exiting anyway */
	}
	_exit(128 + sig);
}

static void on_alarm(int sig)
{
	(void)sig;
	stop_exit(stop_sig);
}

static volatile sig_atomic_t stop_ms;   /* monotonic ms of the first signal */

static long mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);   /* async-signal-safe */
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_stop_signal(int sig)
{
	if (stop_sig) {
		/* a second signal: now; but `timeout` and a terminal's Ctrl-C may
		 * deliver one signal twice (to the process and to its group) */
		if (mono_ms() - stop_ms >= 500)
			stop_exit(sig);
		return;
	}
	stop_sig = sig;
	stop_ms = mono_ms();
	signal(SIGALRM, on_alarm);
	alarm(CLI_STOP_GRACE_S);
	if (stop_fn)
		stop_fn();
}

void cli_stop_signals(const char *cmd, void (*stop)(void))
{
	stop_fn = stop;
	int n = snprintf(stop_msg, sizeof(stop_msg), "lotus %s: still busy %d s after the stop "
			 "signal (waiting for a memory server?); exiting\n", cmd, CLI_STOP_GRACE_S);
	stop_msg_len = n > 0 ? MIN((size_t)n, sizeof(stop_msg) - 1) : 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}
