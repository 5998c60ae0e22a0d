/*
 * durbench.c - `lotus durbench`: figures for the durability storage engine
 * (src/store/redo.c, src/store/ckpt.c) on each I/O backend.
 *
 *   log      T threads append R-byte records and wait for each (group commit)
 *            for S seconds, on io_uring and on libaio: commits/s, records per
 *            log write, log writer CPU per write, process CPU per write,
 *            system calls per write
 *   ckpt     a store of --size bytes of 8 KiB pages (1 KiB values) is written
 *            by a full checkpoint on io_uring, libaio and sync: pages/s, MB/s,
 *            CPU per page
 *   recover  the checkpoint is read back into a fresh store on each backend
 *            (1 MiB direct reads, 256 outstanding, CRC-checked, store_rebuild):
 *            seconds and MB/s
 *
 * Files go to a fresh directory under --dir (default $TMPDIR, else .), which
 * is removed at the end unless --keep, also after Ctrl-C or SIGTERM (the
 * benchmark runs in a child process).  --json prints one JSON document: an
 * array of one object per result, closed also when a step fails.
 * Progress goes to stderr (unless --quiet): a line as each step starts, and
 * one a second while the store fills.
 * The entry point is durbench_run() (durbench.h); its options are parsed by
 * src/cli/cli_durbench.c, `lotus durbench`.
 */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include "bench/durbench.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "store/ckpt.h"
#include "store/redo.h"
#include "store/store.h"

const char *const durbench_parts[] = { "all", "log", "ckpt", "recover", NULL };
static const enum io_backend db_backends[] = { IO_BACKEND_URING, IO_BACKEND_AIO, IO_BACKEND_SYNC };

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb; (void)flag; (void)f;
	return remove(p);
}

static void progress(const struct durbench_opts *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void progress(const struct durbench_opts *c, const char *fmt, ...)
{
	va_list ap;
	if (c->quiet)
		return;
	fflush(stdout);   /* results so far first */
	fprintf(stderr, "durbench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int backend_works(enum io_backend b)
{
	struct io_opts o = { .backend = b };
	io_ctx_t *ctx;
	if (io_ctx_create(&o, &ctx) < 0)
		return 0;
	int ok = io_ctx_backend(ctx) == b;
	io_ctx_destroy(ctx);
	return ok;
}

/* ---- log ---- */

struct log_arg {
	redo_t *log;
	uint64_t deadline, commits;
	uint32_t record;
	int err;
};

static void *log_worker(void *p)
{
	struct log_arg *a = p;
	unsigned char buf[4096];
	memset(buf, 0xab, sizeof(buf));
	while (clock_now_ns() < a->deadline) {
		uint64_t lsn;
		int rc = redo_append(a->log, REDO_USER, a->commits, buf, a->record, &lsn);
		if (!rc)
			rc = redo_wait(a->log, lsn);
		if (rc) {
			a->err = rc;
			break;
		}
		a->commits++;
	}
	return NULL;
}

/* --json: the rows printed so far; json_row() opens the array or separates. */
static unsigned db_rows;

static bool json_row(void)
{
	fputs(db_rows++ ? ",\n" : "[", stdout);
	return true;
}

static int bench_log(struct durbench_opts *c, enum io_backend b)
{
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/log-%s", c->work, io_backend_name(b));
	struct redo_opts o = { .dir = dir, .backend = b };
	redo_t *log;
	int rc = redo_open(&o, 0, &log);
	if (rc)
		return rc;
	struct log_arg args[64];
	pthread_t th[64];
	int n = MIN(c->threads, 64);
	progress(c, "log on %s: %d threads x %llu B records for %g s", io_backend_name(b), n,
		 (unsigned long long)c->record, c->seconds);
	uint64_t t0 = clock_now_ns(), cpu0 = clock_process_cpu_ns();
	for (int i = 0; i < n; i++) {
		args[i] = (struct log_arg){ log, t0 + (uint64_t)(c->seconds * 1e9), 0,
					    (uint32_t)MIN(c->record, 4096), 0 };
		pthread_create(&th[i], NULL, log_worker, &args[i]);
	}
	uint64_t commits = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		commits += args[i].commits;
		if (args[i].err)
			rc = args[i].err;
	}
	double secs = (double)(clock_now_ns() - t0) / 1e9;
	uint64_t cpu = clock_process_cpu_ns() - cpu0;
	struct redo_stats s;
	redo_stats(log, &s);
	redo_close(log);
	double w = s.writes ? (double)s.writes : 1;
	if (c->json && json_row())
		printf("{\"bench\":\"log\",\"backend\":\"%s\",\"threads\":%d,\"record_bytes\":%llu,"
		       "\"seconds\":%.2f,\"commits_per_s\":%.0f,\"writes\":%llu,"
		       "\"records_per_write\":%.2f,\"bytes_per_write\":%.0f,"
		       "\"writer_cpu_us_per_write\":%.2f,\"process_cpu_us_per_write\":%.2f,"
		       "\"syscalls_per_write\":%.2f}", s.backend, n,
		       (unsigned long long)c->record, secs, commits / secs,
		       (unsigned long long)s.writes, s.records / w, s.bytes / w,
		       s.cpu_ns / w / 1e3, cpu / w / 1e3, s.syscalls / w);
	else
		printf("log      %-6s %d threads x %llu B: %8.0f commits/s, %7llu writes, %5.2f "
		       "records/write, writer CPU %6.2f us/write, process CPU %6.2f us/write, "
		       "%.2f syscalls/write\n", s.backend, n, (unsigned long long)c->record,
		       commits / secs, (unsigned long long)s.writes, s.records / w,
		       s.cpu_ns / w / 1e3, cpu / w / 1e3, s.syscalls / w);
	return rc;
}

/* ---- checkpoint and recovery ---- */

static int fill_store(struct durbench_opts *c, store_t **out)
{
	store_t *st;
	int rc = store_create(c->size + (c->size >> 3) + (64u << 20), 8192, &st);
	if (rc)
		return rc;
	uint16_t tid;
	rc = store_table_create(st, "bench", 1024, &tid);
	unsigned char key[8], val[1024];
	memset(val, 0x5c, sizeof(val));
	struct store_stats ss = { 0 };
	uint64_t t0 = clock_now_ns(), last = t0;
	progress(c, "filling a store with %.0f MiB of 1 KiB records", (double)c->size / 1048576.0);
	for (uint64_t i = 0; !rc; i++) {
		if ((i & 1023) == 0) {
			store_stats(st, &ss);
			if (ss.pages_used * 8192 >= c->size)
				break;
			if (clock_now_ns() - last >= 1000000000ULL) {
				last = clock_now_ns();
				progress(c, "filling: %.0f%%", 100.0 * (double)ss.pages_used * 8192 /
					 (double)c->size);
			}
		}
		key_from_u64(i, key);
		memcpy(val, &i, sizeof(i));
		store_loc_t loc;
		rc = store_insert(st, tid, key, 8, val, sizeof(val), &loc);
	}
	if (rc) {
		store_destroy(st);
		return rc;
	}
	progress(c, "filled in %.1f s", (double)(clock_now_ns() - t0) / 1e9);
	*out = st;
	return 0;
}

static int bench_ckpt(struct durbench_opts *c, store_t *st, enum io_backend b)
{
	char dir[1200];
	snprintf(dir, sizeof(dir), "%s/ckpt-%s", c->work, io_backend_name(b));
	struct ckpt_opts o = { .dir = dir, .backend = b };
	ckpt_t *ck;
	int rc = ckpt_open(st, NULL, &o, &ck);
	if (rc)
		return rc;
	struct ckpt_stats s;
	progress(c, "checkpoint on %s", io_backend_name(b));
	uint64_t cpu0 = clock_process_cpu_ns();
	rc = ckpt_run(ck, &s);
	uint64_t cpu = clock_process_cpu_ns() - cpu0;
	ckpt_close(ck);
	if (rc)
		return rc;
	double secs = (double)s.elapsed_ns / 1e9, pages = s.pages ? (double)s.pages : 1;
	if (c->json && json_row())
		printf("{\"bench\":\"ckpt\",\"backend\":\"%s\",\"pages\":%llu,\"bytes\":%llu,"
		       "\"ios\":%llu,\"seconds\":%.3f,\"pages_per_s\":%.0f,\"mb_per_s\":%.1f,"
		       "\"thread_cpu_us_per_page\":%.3f,\"process_cpu_us_per_page\":%.3f,"
		       "\"syscalls\":%llu}", s.backend, (unsigned long long)s.pages,
		       (unsigned long long)s.bytes, (unsigned long long)s.ios, secs,
		       s.pages / secs, s.bytes / secs / 1e6, s.cpu_ns / pages / 1e3,
		       cpu / pages / 1e3, (unsigned long long)s.syscalls);
	else
		printf("ckpt     %-6s %llu pages (%.0f MiB, %llu I/Os) in %.3f s: %8.0f pages/s, "
		       "%7.1f MB/s, CPU %.3f us/page (thread), %.3f us/page (process)\n", s.backend,
		       (unsigned long long)s.pages, s.bytes / 1048576.0, (unsigned long long)s.ios,
		       secs, s.pages / secs, s.bytes / secs / 1e6, s.cpu_ns / pages / 1e3,
		       cpu / pages / 1e3);
	return 0;
}

static int bench_recover(struct durbench_opts *c, const char *from, enum io_backend b)
{
	store_t *st;
	int rc = store_create(c->size + (c->size >> 3) + (64u << 20), 8192, &st);
	if (rc)
		return rc;
	progress(c, "recovery on %s", io_backend_name(b));
	uint64_t replay_from, cpu0 = clock_process_cpu_ns();
	struct ckpt_recover_stats s;
	rc = ckpt_recover(st, from, b, &replay_from, &s);
	uint64_t cpu = clock_process_cpu_ns() - cpu0;
	store_destroy(st);
	if (rc)
		return rc;
	double secs = (double)s.elapsed_ns / 1e9;
	if (c->json && json_row())
		printf("{\"bench\":\"recover\",\"backend\":\"%s\",\"pages\":%llu,\"bytes\":%llu,"
		       "\"records\":%llu,\"seconds\":%.3f,\"mb_per_s\":%.1f,\"process_cpu_s\":%.3f}",
		       s.backend, (unsigned long long)s.pages, (unsigned long long)s.bytes,
		       (unsigned long long)s.records, secs, s.bytes / secs / 1e6, cpu / 1e9);
	else
		printf("recover  %-6s %llu pages (%.0f MiB, %llu records) in %.3f s: %7.1f MB/s, "
		       "process CPU %.3f s\n", s.backend, (unsigned long long)s.pages,
		       s.bytes / 1048576.0, (unsigned long long)s.records, secs,
		       s.bytes / secs / 1e6, cpu / 1e9);
	return 0;
}

static int run_all(struct durbench_opts *c)
{
	int rc = 0;
	if (c->only == 0 || c->only == 1)
		for (unsigned i = 0; i < 2 && !rc; i++)
			if (backend_works(db_backends[i]))
				rc = bench_log(c, db_backends[i]);
	if (rc || c->only == 1)
		return rc;
	store_t *st;
	rc = fill_store(c, &st);
	if (rc)
		return rc;
	const char *last = NULL;
	static char from[1200];
	for (unsigned i = 0; i < 3 && !rc; i++) {
		if (!backend_works(db_backends[i]) || (c->only == 3 && last))
			continue;
		rc = bench_ckpt(c, st, db_backends[i]);
		snprintf(from, sizeof(from), "%s/ckpt-%s", c->work, io_backend_name(db_backends[i]));
		last = from;
	}
	store_destroy(st);
	if (rc || c->only == 2 || !last)
		return rc;
	for (unsigned i = 0; i < 3 && !rc; i++)
		if (backend_works(db_backends[i]))
			rc = bench_recover(c, last, db_backends[i]);
	return rc;
}

static volatile sig_atomic_t db_child;

static void db_forward(int sig)
{
	if (db_child > 0)
		kill((pid_t)db_child, sig);
}

/* Run the benchmark in a child, so that Ctrl-C (or SIGTERM) stops it wherever
 * it is and this process still removes the work directory.  The exit status
 * of the child, or 130 after a signal. */
static int run_json(struct durbench_opts *c)
{
	int rc = run_all(c);
	if (c->json)
		fputs(db_rows ? "]\n" : "[]\n", stdout);
	return rc;
}

static int run_in_child(struct durbench_opts *c)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		int rc = run_json(c);
		if (rc)
			fprintf(stderr, "lotus durbench: %s\n", lotus_strerror(rc));
		fflush(NULL);
		_exit(rc ? 1 : 0);
	}
	if (pid < 0) {
		int rc = run_json(c);
		if (rc)
			fprintf(stderr, "lotus durbench: %s\n", lotus_strerror(rc));
		return rc ? 1 : 0;
	}
	db_child = pid;
	struct sigaction sa = { .sa_handler = db_forward };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "lotus durbench: interrupted (%s)%s\n", strsignal(WTERMSIG(st)),
			c->keep ? "" : "; the work directory is removed");
		return 130;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int durbench_run(struct durbench_opts *c)
{
	const char *base = c->dir ? c->dir : getenv("TMPDIR");
	if (!base || !*base)
		base = ".";
	snprintf(c->work, sizeof(c->work), "%s/lotus-durbench.XXXXXX", base);
	if (!mkdtemp(c->work)) {
		fprintf(stderr, "lotus durbench: cannot create a directory under %s: %s\n", base,
			strerror(errno));
		return 1;
	}
	int rc = run_in_child(c);
	if (!c->keep)
		nftw(c->work, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
