/*
 * cli_netbench.c - `lotus netbench`: the raw transport's round-trip rate.
 *
 *   lotus netbench [--transport tcp|sm] [--outstanding N] [--size B] [--seconds S]
 *       starts `lotus netbench --serve 127.0.0.1:0` as a child process (same
 *       binary), runs the client against it with 1 and then 32 requests
 *       outstanding (or just --outstanding N), and stops the child on exit or
 *       Ctrl-C.  The child also dies with its parent (PR_SET_PDEATHSIG).
 *   lotus netbench --connect HOST:PORT ...   uses a server that is already up
 *   lotus netbench --serve HOST:PORT         is the server side; it prints
 *       "netbench: serving on HOST:PORT" once listening and runs until SIGINT/TERM
 *
 * --json prints one JSON document: {"runs":[{...},...]}, one object per run.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include "bench/netbench.h"
#include "cli/cli.h"
#include "cli/opts.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "net/door.h"

static const char *const transports[] = { "tcp", "sm", "rc", "ud", "dc", NULL };
static volatile int stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static char serve_host[256];

static void serve_ready(uint16_t port)
{
	printf("netbench: serving on %s:%u\n", serve_host, port);
	fflush(stdout);
}

/* Fork/exec the server side; returns its pid and port, or -1. */
static int secret_fd = -1;   /* our own secret for the spawned server */

static pid_t spawn_server(const char *transport, unsigned spin_us, const char *secret,
			  uint16_t *port)
{
	int pfd[2];
	if (pipe(pfd))
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(pfd[1], STDOUT_FILENO);
		close(pfd[0]);
		close(pfd[1]);
		char spin[16];
		snprintf(spin, sizeof(spin), "%u", spin_us);
		fcntl(secret_fd, F_SETFD, 0);   /* the server inherits the secret */
		execl("/proc/self/exe", "lotus", "netbench", "--serve", "127.0.0.1:0",
		      "--transport", transport, "--spin-us", spin, "--secret-file", secret,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	/* Wait (bounded) for the "serving on" line. */
	char line[256];
	size_t n = 0;
	uint64_t deadline = clock_now_ns() + 10000000000ULL;
	*port = 0;
	while (n < sizeof(line) - 1 && clock_now_ns() < deadline && !stop_flag) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		if (poll(&p, 1, 100) <= 0)
			continue;
		ssize_t k = read(pfd[0], line + n, sizeof(line) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		line[n] = 0;
		char *colon = strchr(line, '\n') ? strrchr(line, ':') : NULL;
		if (colon) {
			*port = (uint16_t)atoi(colon + 1);
			break;
		}
	}
	close(pfd[0]);
	if (*port == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

static void stop_server(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 300; i++) {   /* 3 s, then insist */
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void print_result(const struct netbench_result *r, int json, int first)
{
	if (json) {
		printf("%s{\"transport\":\"%s\",\"outstanding\":%u,\"size\":%zu,\"seconds\":%.3f,"
		       "\"round_trips\":%llu,\"rtt_per_s\":%.1f,\"lat_us\":{\"mean\":%.2f,"
		       "\"p50\":%.2f,\"p99\":%.2f}}", first ? "{\"runs\":[" : ",",
		       r->transport, r->outstanding, r->size, r->seconds,
		       (unsigned long long)r->round_trips, r->rtt_per_s, r->lat_mean_us,
		       r->lat_p50_us, r->lat_p99_us);
		return;
	}
	if (first)
		printf("%-9s %11s %6s %8s %12s %12s %10s %10s %10s\n", "transport", "outstanding",
		       "size", "seconds", "round_trips", "rtt/s", "mean_us", "p50_us", "p99_us");
	printf("%-9s %11u %6zu %8.2f %12llu %12.0f %10.2f %10.2f %10.2f\n", r->transport,
	       r->outstanding, r->size, r->seconds, (unsigned long long)r->round_trips,
	       r->rtt_per_s, r->lat_mean_us, r->lat_p50_us, r->lat_p99_us);
}

int cmd_netbench(int argc, char **argv)
{
	int tr = 0;
	bool json = false;
	uint64_t outstanding = 0, size = 64;
	double seconds = 3, warmup = 0.2;
	uint64_t spin_us = 1000;
	const char *connect = NULL, *serve = NULL, *secret = NULL;
	bool insecure = false;
	struct cli_opt opts[] = {
		{ "transport", OPT_CHOICE, &tr, "T", "transport (default tcp)", transports },
		{ "outstanding", OPT_U64, &outstanding, "N",
		  "requests in flight (default: one run with 1, one with 32)", .min = 1, .max = 4096 },
		{ "size", OPT_SIZE, &size, "BYTES", "message size, header included (default 64, min 32)",
		  .min = 32, .max = 64 << 20 },
		{ "seconds", OPT_DOUBLE, &seconds, "S", "measured time per run (default 3)",
		  .min = 0.01, .max = 86400 },
		{ "warmup", OPT_DOUBLE, &warmup, "S", "unmeasured warm-up per run (default 0.2)",
		  .min = 0, .max = 3600 },
		{ "spin-us", OPT_U64, &spin_us, "US",
		  "busy-poll time before a side sleeps on its wakeup fd (default 1000, or "
		  "$LOTUS_NET_SPIN_US; 0: sleep at once, as on a host whose cores are shared)",
		  .max = 10000000 },
		{ "connect", OPT_STR, &connect, "HOST:PORT", "use a running `netbench --serve` server" },
		{ "serve", OPT_STR, &serve, "HOST:PORT", "be the server: echo messages until SIGINT/TERM" },
		{ "secret-file", OPT_STR, &secret, "FILE", "the shared secret the connection proves (with --serve/--connect; without both, a random one)" },
		{ "insecure", OPT_FLAG, &insecure, NULL, "--serve off loopback without a secret" },
		{ "json", OPT_FLAG, &json, NULL, "print one JSON document {\"runs\":[{..},..]} (one object per run) instead of the table" },
		{ 0 },
	};
	int rc = cli_parse("netbench",
			   "Measure the raw transport's round-trip rate: request/response of a\n"
			   "small message with 1 and with 32 outstanding.  Without --connect it\n"
			   "starts its own server process on 127.0.0.1 and stops it on exit.",
			   opts, argc, argv, NULL, NULL);
	if (rc)
		return rc == 1 ? 0 : rc;
	if (connect && serve)
		return cli_fail("netbench", "--connect and --serve exclude each other");
	/* The transport reads a spin budget of 0 in its options as "the default";
	 * LOTUS_NET_SPIN_US is the one knob that means 0 too, and the server
	 * process inherits it.  The flag wins over the variable, as in ycsb. */
	if (cli_find(opts, "spin-us")->seen) {
		char buf[24];
		snprintf(buf, sizeof(buf), "%llu", (unsigned long long)spin_us);
		setenv("LOTUS_NET_SPIN_US", buf, 1);
	}

	char host[256] = "127.0.0.1";
	uint16_t port = 0;
	const char *hp = serve ? serve : connect;
	if (hp && parse_hostport(hp, host, sizeof(host), &port))
		return cli_fail("netbench", "bad address '%s' (want HOST:PORT)", hp);
	if (connect && port == 0)
		return cli_fail("netbench", "--connect needs a port");
	catch_signals();

	if (serve) {
		snprintf(serve_host, sizeof(serve_host), "%s", host);
		rc = netbench_serve(transports[tr], host, port, (unsigned)spin_us, secret, insecure,
				    &stop_flag, serve_ready);
		if (rc)
			fprintf(stderr, "lotus netbench: serve on %s: %s\n", hp, lotus_strerror(rc));
		return rc ? 1 : 0;
	}

	pid_t child = -1;
	char own_secret[32];
	if (!connect && !secret) {
		int fd = door_secret_memfd(own_secret, sizeof(own_secret));
		if (fd < 0)
			return 1;
		secret_fd = fd;
		secret = own_secret;
	}
	if (!connect) {
		signal(SIGPIPE, SIG_IGN);
		child = spawn_server(transports[tr], (unsigned)spin_us, secret, &port);
		if (child < 0) {
			fprintf(stderr, "lotus netbench: could not start the server process\n");
			return 1;
		}
	}
	unsigned runs[2] = { 1, 32 };
	unsigned nruns = 2;
	if (outstanding) {
		runs[0] = (unsigned)outstanding;
		nruns = 1;
	}
	rc = 0;
	unsigned printed = 0;
	for (unsigned i = 0; i < nruns && !stop_flag && rc == 0; i++) {
		struct netbench_opts o = { .transport = transports[tr], .host = host, .port = port,
					   .outstanding = runs[i], .size = size, .seconds = seconds,
					   .warmup = warmup, .spin_us = (unsigned)spin_us,
					   .stop = &stop_flag, .secret_file = secret };
		struct netbench_result r;
		rc = netbench_run(&o, &r);
		if (rc) {
			fprintf(stderr, "lotus netbench: %s\n", lotus_strerror(rc));
			break;
		}
		print_result(&r, json, printed++ == 0);
		fflush(stdout);
	}
	if (json && (printed || rc == 0))
		printf("%s]}\n", printed ? "" : "{\"runs\":[");
	fflush(stdout);
	stop_server(child);
	return rc ? 1 : (stop_flag ? 130 : 0);
}
