/*
 * bank_ledger.c - `lotus bank`'s ledger (bank_int.h, docs/bank.md): the
 * file of acknowledged transfer ids, appended to by the transfer threads and
 * read back by the verifier and by the next run.
 *
 * The format:
 *   # run 0x1a2b3c4d accounts 50 opening 1000 ...   one header per run
 *   0x1a2b3c4d00000001                              acknowledged
 *   maybe 0x1a2b3c4d00000002                        outcome unknown
 *   # end 0x1a2b3c4d committed 1 maybe 1 status ok
 * Transfer threads buffer their lines and append them under ledger.mu; the
 * main thread fflush()es and fdatasync()s once a second and at the end.
 *
 * One process at a time: bank_main() holds an exclusive flock() on the ledger
 * from before it connects until it returns, so a second bank on the same
 * ledger stops at once with a clear error instead of interleaving its lines.
 * Under that lock it repairs a torn tail: a last line without its newline
 * (a process killed mid-write) is cut off, with a message on stderr, before
 * anything is read or appended; it was never acknowledged to anyone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "bench/bank_int.h"
#include "common/common.h"
#include "common/log.h"
#include "common/vec.h"

/* ---- ledger: writing --------------------------------------------------------- */

int ledger_open(struct ledger *l, const char *path)
{
	struct stat st;
	l->error = 0;
	l->f = fopen(path, "a");
	if (!l->f)
		return -errno;
	pthread_mutex_init(&l->mu, NULL);
	if (fstat(fileno(l->f), &st) == 0 && st.st_size == 0)
		fprintf(l->f, "# lotus bank ledger v1: acknowledged transfer ids, "
			      "\"maybe <id>\" for unknown outcomes\n");
	return 0;
}

void ledger_append(struct ledger *l, const char *buf, size_t len)
{
	pthread_mutex_lock(&l->mu);
	if (fwrite(buf, 1, len, l->f) != len && !l->error)
		l->error = -EIO;
	pthread_mutex_unlock(&l->mu);
}

void ledger_printf(struct ledger *l, const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&l->mu);
	va_start(ap, fmt);
	if (vfprintf(l->f, fmt, ap) < 0 && !l->error)
		l->error = -EIO;
	va_end(ap);
	pthread_mutex_unlock(&l->mu);
}

/* Make everything appended so far durable.  Main thread. */
int ledger_sync(struct ledger *l)
{
	pthread_mutex_lock(&l->mu);
	if (fflush(l->f) != 0 && !l->error)
		l->error = -errno;
	if (fdatasync(fileno(l->f)) != 0 && !l->error)
		l->error = -errno;
	int rc = l->error;
	pthread_mutex_unlock(&l->mu);
	return rc;
}

int ledger_close(struct ledger *l)
{
	int rc = ledger_sync(l);
	if (fclose(l->f) != 0 && !rc)
		rc = -errno;
	pthread_mutex_destroy(&l->mu);
	return rc;
}

/* Cut a torn last line (no newline) off the ledger open on fd.  0 or -errno. */
static int ledger_repair_tail(int fd, const char *path)
{
	struct stat st;
	char buf[4096];
	if (fstat(fd, &st) != 0)
		return -errno;
	off_t end = st.st_size, pos = end, keep = 0;
	if (end == 0)
		return 0;
	if (pread(fd, buf, 1, end - 1) != 1)
		return -EIO;
	if (buf[0] == '\n')
		return 0;
	while (pos > 0 && keep == 0) {    /* find the last newline */
		size_t n = (size_t)MIN((off_t)sizeof(buf), pos);
		pos -= (off_t)n;
		if (pread(fd, buf, n, pos) != (ssize_t)n)
			return -EIO;
		for (size_t i = n; i-- > 0;)
			if (buf[i] == '\n') {
				keep = pos + (off_t)i + 1;
				break;
			}
	}
	char frag[48] = "";
	ssize_t fn = pread(fd, frag, MIN((off_t)sizeof(frag) - 1, end - keep), keep);
	frag[fn > 0 ? fn : 0] = 0;
	frag[strcspn(frag, "\r\n")] = 0;
	if (ftruncate(fd, keep) != 0 || fsync(fd) != 0)
		return -errno;
	fprintf(stderr, "lotus bank: ledger %s: cut off a torn last line (%lld bytes, '%s%s'): "
		"a bank died while writing it; it acknowledged nothing\n", path,
		(long long)(end - keep), frag, end - keep > (off_t)strlen(frag) ? "..." : "");
	return 0;
}

/* Lock the ledger for this process (see the top comment) and repair its tail.
 * Returns the locked fd, -1 when the file does not exist and !create (the
 * reader reports that), or -2 after writing the reason to msg. */
int ledger_lock(const char *path, bool create, char *msg, size_t len)
{
	int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
	if (fd < 0) {
		if (errno == ENOENT && !create)
			return -1;
		snprintf(msg, len, "cannot open the ledger %s: %s", path, strerror(errno));
		return -2;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(fd);
		if (e == EWOULDBLOCK)
			snprintf(msg, len, "the ledger %s is in use by another lotus bank; give each "
				 "concurrent bank its own --ledger", path);
		else
			snprintf(msg, len, "cannot lock the ledger %s: %s", path, strerror(e));
		return -2;
	}
	int rc = ledger_repair_tail(fd, path);
	if (rc) {
		close(fd);
		snprintf(msg, len, "cannot repair the ledger %s: %s", path, strerror(-rc));
		return -2;
	}
	return fd;
}

/* ---- ledger: reading --------------------------------------------------------- */

static int push_u64(uint64_t **a, size_t *n, size_t *cap, uint64_t v)
{
	if (vec_reserve(*a, *cap, *n + 1, 1024))
		return -ENOMEM;
	(*a)[(*n)++] = v;
	return 0;
}

static int ledger_header(struct ledger_data *d, const char *line, unsigned lineno)
{
	unsigned run;
	unsigned long long acc;
	long long opening;
	if (sscanf(line, "# run %x accounts %llu opening %lld", &run, &acc, &opening) != 3) {
		snprintf(d->error, sizeof(d->error), "ledger line %u: malformed run header", lineno);
		return 0;
	}
	if (vec_reserve(d->runs, d->cap_runs, d->nruns + 1, 16))
		return -ENOMEM;
	d->runs[d->nruns++] = run;
	if (!d->have_header) {
		d->have_header = true;
		d->accounts = acc;
		d->opening = opening;
	} else if ((d->accounts != acc || d->opening != opening) && !d->error[0]) {
		snprintf(d->error, sizeof(d->error),
			 "ledger line %u: run 0x%08x used %llu accounts x %lld, an earlier run %llu x %lld",
			 lineno, run, acc, opening, (unsigned long long)d->accounts,
			 (long long)d->opening);
	}
	return 0;
}

static int ledger_line(struct ledger_data *d, char *line, unsigned lineno)
{
	line[strcspn(line, "\r\n")] = 0;
	if (!strncmp(line, "# run ", 6))
		return ledger_header(d, line, lineno);
	const char *p = line + strspn(line, " \t");
	if (*p == '#' || *p == 0)
		return 0;
	bool maybe = !strncmp(p, "maybe ", 6);
	if (maybe)
		p += 6;
	char *end;
	errno = 0;
	uint64_t id = strtoull(p, &end, 0);
	if (end == p || errno || end[strspn(end, " \t")] != 0) {
		if (!d->error[0])
			snprintf(d->error, sizeof(d->error), "ledger line %u: cannot parse '%.60s'",
				 lineno, line);
		return 0;
	}
	return maybe ? push_u64(&d->maybes, &d->nmaybes, &d->cap_maybes, id)
		     : push_u64(&d->acks, &d->nacks, &d->cap_acks, id);
}

int ledger_read(const char *path, struct ledger_data *d, bool may_be_absent)
{
	memset(d, 0, sizeof(*d));
	FILE *f = fopen(path, "r");
	if (!f)
		return errno == ENOENT && may_be_absent ? 0 : -errno;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	unsigned lineno = 0;
	int rc = 0;
	while (rc == 0 && (n = getline(&line, &cap, f)) > 0) {
		lineno++;
		if (line[n - 1] != '\n')
			break;  /* torn last line (only if ledger_lock() could not run) */
		rc = ledger_line(d, line, lineno);
	}
	if (rc == 0 && ferror(f))
		rc = -EIO;
	free(line);
	fclose(f);
	return rc;
}

void ledger_data_free(struct ledger_data *d)
{
	free(d->acks);
	free(d->maybes);
	free(d->runs);
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}
