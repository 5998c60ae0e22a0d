/*
 * bank.c - `lotus bank`: concurrent transfers, their ledger, and the verifier.
 *
 * Data (both tables hash-partitioned like any other):
 *   bank_accounts   key: account id, 8 bytes big-endian
 *                   value: balance, int64 big-endian (two's complement)
 *   bank_transfers  key: transfer id, 8 bytes big-endian
 *                   value: from, to, amount: three 8-byte big-endian fields
 *
 * What the verifier checks (on a quiesced cluster), in this order:
 *   V1 every id the ledger acknowledges is a row of bank_transfers
 *   V2 balance(a) = opening + sum(amount into a) - sum(amount out of a),
 *      summed over the rows of bank_transfers
 *   V3 the sum of the balances is accounts x opening
 * They hold because a transfer is one transaction: it reads both accounts
 * under X locks, inserts its own record, and writes both balances.  A record
 * exists exactly when its transfer committed, all of it.
 *
 * Transfer ids are run_id << 32 | n: the run id is random, non-zero, and used
 * by no row of bank_transfers and no run of the ledger, so ids are unique
 * across runs and processes.  The record is inserted in the transfer's first
 * step, so an id that already exists fails loudly (LOTUS_EEXISTS) instead of
 * the insert being skipped at commit.  Balances may go negative: the amount
 * is fixed before the balances are read.
 *
 * Each transfer thread keeps `inflight` transfers going, each a small state
 * machine driven by the library's callbacks:
 *
 *   FREE --xfer_start: rfu from, rfu to, insert record, execute--> EXEC
 *   EXEC --ok (on_exec): write both balances, commit--> COMMIT
 *   EXEC --error (xfer_abort)--> ABORT --conflict (on_abort): restart--> EXEC
 *                                      \--otherwise--> FREE (not committed)
 *   COMMIT --0 (on_commit): ledger "ID"--> FREE --> xfer_start
 *   COMMIT --conflict: restart, same priority--> EXEC
 *   COMMIT --any other error: ledger "maybe ID"--> FREE, the run stops
 *
 * A conflict aborts the transaction everywhere, so a retry is safe.  Any
 * other commit failure leaves the outcome unknown (a server may have applied
 * its part), and so does a transfer still in COMMIT when the run gives up
 * waiting (xfer_drain): those are "maybe".  A transfer that failed before its
 * commit was sent did not commit and is not recorded at all.
 *
 * The ledger (text, appended to; docs/bank.md):
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
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common/json.h"
#include "bench/bank.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "common/ycsb_gen.h"

#define TB_ACCOUNTS     "bank_accounts"
#define TB_TRANSFERS    "bank_transfers"
#define BAL_LEN         8
#define REC_LEN         24
#define SETUP_BATCH     256
#define SCAN_CHUNK      500
#define MAX_AMOUNT      100
#define MAX_TRIES       10000                /* retries of one setup/scan step */
#define LEDGER_BUF      16384
#define LEDGER_FLUSH_NS 100000000ULL         /* thread buffer -> FILE */
#define DRAIN_NS        10000000000ULL       /* wait for in-flight transfers (> lease) */

static _Atomic int bank_stopping;

void bank_stop(void)
{
	atomic_store(&bank_stopping, 1);
}

void bank_opts_init(struct bank_opts *o)
{
	memset(o, 0, sizeof(*o));
	lotus_options_init(&o->lo);
	o->accounts = BANK_DEFAULT_ACCOUNTS;
	o->opening = BANK_DEFAULT_OPENING;
	o->threads = 4;
	o->inflight = 1;
	o->seconds = 10;
	o->run = true;
}

static void put_be64(unsigned char *p, uint64_t v)
{
	key_from_u64(v, p);
}

static uint64_t get_be64(const unsigned char *p)
{
	return key_to_u64(p);
}

/* ---- ledger: writing --------------------------------------------------------- */

struct ledger {
	FILE *f;
	pthread_mutex_t mu;       /* guards f and error */
	int error;                /* first write or sync error, -errno */
};

static int ledger_open(struct ledger *l, const char *path)
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

static void ledger_append(struct ledger *l, const char *buf, size_t len)
{
	pthread_mutex_lock(&l->mu);
	if (fwrite(buf, 1, len, l->f) != len && !l->error)
		l->error = -EIO;
	pthread_mutex_unlock(&l->mu);
}

static void ledger_printf(struct ledger *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void ledger_printf(struct ledger *l, const char *fmt, ...)
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
static int ledger_sync(struct ledger *l)
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

static int ledger_close(struct ledger *l)
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
static int ledger_lock(const char *path, bool create, char *msg, size_t len)
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

struct ledger_data {
	uint64_t *acks, *maybes;
	size_t nacks, nmaybes, cap_acks, cap_maybes;
	uint32_t *runs;
	size_t nruns, cap_runs;
	bool have_header;
	uint64_t accounts;        /* of the first run header */
	int64_t opening;
	char error[200];          /* a malformed line, or runs that disagree */
};

static int push_u64(uint64_t **a, size_t *n, size_t *cap, uint64_t v)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		uint64_t *p = realloc(*a, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		*a = p;
		*cap = c;
	}
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
	if (d->nruns == d->cap_runs) {
		size_t c = d->cap_runs ? d->cap_runs * 2 : 16;
		uint32_t *p = realloc(d->runs, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->runs = p;
		d->cap_runs = c;
	}
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

/* Read a ledger; a missing file is an empty ledger when may_be_absent. */
static int ledger_read(const char *path, struct ledger_data *d, bool may_be_absent)
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

static void ledger_data_free(struct ledger_data *d)
{
	free(d->acks);
	free(d->maybes);
	free(d->runs);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- table reads ---------------------------------------------------------------- */

typedef int (*row_fn)(void *arg, uint64_t key, const unsigned char *v, size_t vlen);

/*
 * Read every row of tb (8-byte keys) in key order, SCAN_CHUNK rows per
 * transaction, handing each to fn after its chunk committed.  Consistent only
 * on a quiesced table.  0, an error of the library, or fn's error.
 */
static int scan_table(lotus_session_t *s, lotus_table_t tb, uint64_t start, unsigned limit,
		      row_fn fn, void *arg)
{
	lotus_txn_t *t;
	unsigned tries = 0, seen = 0;
	int rc = lotus_txn_begin(s, &t);
	while (rc == 0 && seen < limit) {
		unsigned char k[8];
		key_from_u64(start, k);
		rc = lotus_txn_recycle(t);
		int op = rc ? rc : lotus_txn_scan(t, tb, k, 8, MIN(SCAN_CHUNK, limit - seen));
		rc = op < 0 ? op : lotus_txn_execute(t);
		if (rc == 0)
			rc = lotus_txn_commit(t);
		else
			lotus_txn_abort(t);
		if (lotus_err_retryable(rc) && ++tries < MAX_TRIES) {
			rc = 0;
			continue;
		}
		int n = rc ? rc : lotus_txn_scan_rows(t, op);
		if (n <= 0) {
			rc = n;
			break;
		}
		for (int i = 0; i < n && rc == 0; i++) {
			const void *key, *v;
			size_t klen, vlen;
			rc = lotus_txn_scan_row(t, op, (unsigned)i, &key, &klen, &v, &vlen);
			if (rc == 0 && klen != 8)
				rc = LOTUS_EPROTO;
			if (rc == 0) {
				uint64_t id = get_be64(key);
				rc = fn(arg, id, v, vlen);
				start = id + 1;
				if (id == UINT64_MAX)
					limit = seen; /* the key space is exhausted */
			}
		}
		seen += (unsigned)n;
	}
	lotus_txn_free(t);
	return rc;
}

struct accounts_view {
	uint64_t *ids;            /* ascending */
	int64_t *balance;
	size_t n, cap;
	int64_t total;
	uint64_t bad_len_id;      /* an account whose value is not 8 bytes */
	bool bad_len;
};

static int account_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen)
{
	struct accounts_view *a = arg;
	if (a->n == a->cap) {
		size_t c = a->cap ? a->cap * 2 : 1024;
		uint64_t *ids = realloc(a->ids, c * sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		a->ids = ids;
		int64_t *b = realloc(a->balance, c * sizeof(*b));
		if (!b)
			return -ENOMEM;
		a->balance = b;
		a->cap = c;
	}
	if (vlen != BAL_LEN && !a->bad_len) {
		a->bad_len = true;
		a->bad_len_id = id;
	}
	int64_t bal = vlen == BAL_LEN ? (int64_t)get_be64(v) : 0;
	a->ids[a->n] = id;
	a->balance[a->n++] = bal;
	a->total += bal;
	return 0;
}

static void accounts_free(struct accounts_view *a)
{
	free(a->ids);
	free(a->balance);
}

/* Index of account id, or -1. */
static ssize_t account_find(const struct accounts_view *a, uint64_t id)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->n && a->ids[lo] == id ? (ssize_t)lo : -1;
}

struct transfer_rec {
	uint64_t id, from, to;
	int64_t amount;
};

struct transfers_view {
	struct transfer_rec *r;   /* ascending id */
	size_t n, cap;
	uint64_t rows;            /* every row, well-formed or not */
	uint64_t bad_len_id;
	bool bad_len;
};

static int transfer_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen)
{
	struct transfers_view *tv = arg;
	tv->rows++;
	if (tv->n == tv->cap) {
		size_t c = tv->cap ? tv->cap * 2 : 4096;
		struct transfer_rec *p = realloc(tv->r, c * sizeof(*p));
		if (!p)
			return -ENOMEM;
		tv->r = p;
		tv->cap = c;
	}
	if (vlen != REC_LEN) {
		if (!tv->bad_len) {
			tv->bad_len = true;
			tv->bad_len_id = id;
		}
		return 0;
	}
	tv->r[tv->n++] = (struct transfer_rec){ .id = id, .from = get_be64(v),
						.to = get_be64(v + 8),
						.amount = (int64_t)get_be64(v + 16) };
	return 0;
}

static int first_row(void *arg, uint64_t id, const unsigned char *v, size_t vlen)
{
	*(uint64_t *)arg = id;
	return 0;
}

/* ---- setup ------------------------------------------------------------------------ */

struct bank_shared {
	const struct bank_opts *o;
	lotus_cluster_t *cl;
	lotus_table_t accounts, transfers;
	uint64_t naccounts;
	int64_t opening;
	uint32_t run_id;
	struct ledger ledger;
	uint64_t t_start, t_end;
	_Atomic uint32_t next_seq;    /* low half of transfer ids */
	_Atomic int halt;             /* a failure or a lost server: stop issuing */
	_Atomic unsigned running;     /* transfer threads still running */
};

static int create_accounts(lotus_session_t *s, lotus_table_t tb, uint64_t n, int64_t opening)
{
	lotus_txn_t *t;
	unsigned tries = 0;
	unsigned char k[8], v[BAL_LEN];
	int rc = lotus_txn_begin(s, &t);
	put_be64(v, (uint64_t)opening);
	for (uint64_t a = 0; rc == 0 && a < n && !atomic_load(&bank_stopping);) {
		uint64_t end = MIN(n, a + SETUP_BATCH);
		rc = lotus_txn_recycle(t);
		for (uint64_t i = a; i < end && rc >= 0; i++) {
			key_from_u64(i, k);
			rc = lotus_txn_insert(t, tb, k, 8, v, BAL_LEN);
		}
		rc = rc < 0 ? rc : lotus_txn_commit(t);
		if (rc == 0)
			a = end;
		else if (lotus_err_retryable(rc) && ++tries < MAX_TRIES)
			rc = 0;
	}
	if (rc == 0 && atomic_load(&bank_stopping))
		rc = -EINTR;
	lotus_txn_free(t);
	return rc;
}

static int fail_msg(char *msg, size_t len, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_msg(char *msg, size_t len, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, len, fmt, ap);
	va_end(ap);
	return rc;
}

/* Create the accounts on a first run, or continue the existing bank. */
static int bank_setup(struct bank_shared *sh, lotus_session_t *s, struct bank_run_result *res,
		      size_t ledger_transfers)
{
	const struct bank_opts *o = sh->o;
	struct accounts_view a = { 0 };
	int rc = scan_table(s, sh->accounts, 0, UINT32_MAX, account_row, &a);
	if (rc) {
		rc = fail_msg(res->message, sizeof(res->message), rc, "cannot read %s: %s",
			      TB_ACCOUNTS, lotus_strerror(rc));
	} else if (a.n == 0 && ledger_transfers) {
		/* A new bank would be verified against an old bank's transfers. */
		res->refused = true;
		rc = fail_msg(res->message, sizeof(res->message), LOTUS_ECONFIG,
			      "the ledger %s holds %zu transfers of an earlier bank, but the cluster "
			      "holds no bank (a new --data-dir or cluster?); use a new --ledger",
			      o->ledger, ledger_transfers);
	} else if (a.n == 0) {
		sh->naccounts = o->accounts;
		sh->opening = o->opening;
		res->created = true;
		rc = create_accounts(s, sh->accounts, o->accounts, o->opening);
		if (rc)
			fail_msg(res->message, sizeof(res->message), rc, "cannot create the accounts: %s",
				 lotus_strerror(rc));
	} else if (o->accounts_given && o->accounts != a.n) {
		rc = fail_msg(res->message, sizeof(res->message), LOTUS_ECONFIG,
			      "%s already holds %zu accounts, not --accounts %llu (omit it to continue)",
			      TB_ACCOUNTS, a.n, (unsigned long long)o->accounts);
	} else if (a.n < 2 || a.ids[a.n - 1] != a.n - 1 || a.bad_len) {
		rc = fail_msg(res->message, sizeof(res->message), LOTUS_ECONFIG,
			      "%s is not a bank of accounts 0..%zu with 8-byte balances", TB_ACCOUNTS,
			      a.n - 1);
	} else if (o->opening_given ? a.total != (int64_t)a.n * o->opening : a.total % (int64_t)a.n) {
		rc = fail_msg(res->message, sizeof(res->message), LOTUS_ECONFIG,
			      "%s is inconsistent before the run: %zu accounts hold %lld in total%s "
			      "(see lotus bank --verify)", TB_ACCOUNTS, a.n, (long long)a.total,
			      o->opening_given ? ", not accounts x --opening" : "");
	} else {
		sh->naccounts = a.n;
		sh->opening = a.total / (int64_t)a.n;
	}
	res->accounts = sh->naccounts;
	res->opening = sh->opening;
	accounts_free(&a);
	return rc;
}

static uint32_t random_u32(void)
{
	uint32_t r;
	if (getrandom(&r, sizeof(r), 0) == sizeof(r))
		return r;
	return (uint32_t)(clock_wall_ns() ^ (uint64_t)getpid() << 16);
}

/* A non-zero run id no ledger run and no row of bank_transfers uses yet. */
static int pick_run_id(struct bank_shared *sh, lotus_session_t *s, const struct ledger_data *ld)
{
	for (int tries = 0; tries < 64; tries++) {
		uint32_t r = random_u32();
		bool used = r == 0;
		for (size_t i = 0; i < ld->nruns && !used; i++)
			used = ld->runs[i] == r;
		uint64_t first = 0;
		int rc = used ? 0 : scan_table(s, sh->transfers, (uint64_t)r << 32, 1, first_row, &first);
		if (rc)
			return rc;
		if (!used && first >> 32 != r) {
			sh->run_id = r;
			return 0;
		}
	}
	return -EAGAIN;
}

/* ---- transfers ------------------------------------------------------------------ */

enum xfer_state { X_FREE, X_EXEC, X_COMMIT, X_ABORT };

struct bank_thread;

struct xfer {                     /* one transfer slot of a thread */
	struct bank_thread *th;
	lotus_txn_t *t;
	enum xfer_state state;
	uint64_t id, from, to;
	int64_t amount;
	int op_from, op_to, op_rec;
	unsigned attempts;
	int why;                  /* the error that made the current attempt abort */
};

struct bank_thread {              /* owned by its thread; counters read by main */
	struct bank_shared *sh;
	unsigned idx;
	pthread_t tid;
	lotus_session_t *s;
	struct rng rng;
	struct xfer *x;
	unsigned active;
	bool stop_issuing;
	_Atomic uint64_t committed, aborted, maybe;
	int error;                /* first failure of this thread */
	char msg[200];
	char buf[LEDGER_BUF];     /* ledger lines not yet appended */
	size_t len;
	uint64_t flushed_ns;
};

static void on_exec(lotus_txn_t *t, int rc, void *arg);
static void on_commit(lotus_txn_t *t, int rc, void *arg);
static void on_abort(lotus_txn_t *t, int rc, void *arg);

/* A memory server is gone for this client: its connection failed
 * (EUNAVAIL), it stopped answering for a lease or a deadline (ETIMEOUT),
 * or this process's own lease with it expired (ELEASE).  The run stops and
 * reports "memory server lost" (exit 3) in every case. */
static bool server_lost(int rc)
{
	return rc == LOTUS_EUNAVAIL || rc == LOTUS_ETIMEOUT || rc == LOTUS_ELEASE ||
	       rc == LOTUS_EINDOUBT;
}

static void th_fail(struct bank_thread *th, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void th_fail(struct bank_thread *th, int rc, const char *fmt, ...)
{
	if (!th->error) {
		va_list ap;
		th->error = rc;
		va_start(ap, fmt);
		vsnprintf(th->msg, sizeof(th->msg), fmt, ap);
		va_end(ap);
	}
	th->stop_issuing = true;
	atomic_store(&th->sh->halt, 1);
}

static void th_ledger_flush(struct bank_thread *th)
{
	if (th->len)
		ledger_append(&th->sh->ledger, th->buf, th->len);
	th->len = 0;
	th->flushed_ns = clock_now_ns();
}

static void th_ledger(struct bank_thread *th, bool maybe, uint64_t id)
{
	if (th->len > sizeof(th->buf) - 32)
		th_ledger_flush(th);
	th->len += (size_t)sprintf(th->buf + th->len, "%s0x%016" PRIx64 "\n",
				   maybe ? "maybe " : "", id);
	if (maybe)
		atomic_fetch_add_explicit(&th->maybe, 1, memory_order_relaxed);
}

static void xfer_done(struct xfer *x)
{
	x->state = X_FREE;
	x->th->active--;
}

/* Stage the first step (both accounts X-locked, the record inserted) and send it. */
static int xfer_send(struct xfer *x)
{
	struct bank_shared *sh = x->th->sh;
	unsigned char k[8], rec[REC_LEN];
	key_from_u64(x->from, k);
	x->op_from = lotus_txn_read_for_update(x->t, sh->accounts, k, 8);
	key_from_u64(x->to, k);
	x->op_to = lotus_txn_read_for_update(x->t, sh->accounts, k, 8);
	key_from_u64(x->id, k);
	put_be64(rec, x->from);
	put_be64(rec + 8, x->to);
	put_be64(rec + 16, (uint64_t)x->amount);
	x->op_rec = lotus_txn_insert(x->t, sh->transfers, k, 8, rec, REC_LEN);
	if (x->op_from < 0 || x->op_to < 0 || x->op_rec < 0)
		return MIN(x->op_from, MIN(x->op_to, x->op_rec));
	x->state = X_EXEC;
	return lotus_txn_execute_async(x->t, on_exec, x);
}

static void xfer_start(struct xfer *x)
{
	struct bank_thread *th = x->th;
	struct bank_shared *sh = th->sh;
	uint32_t seq = atomic_fetch_add(&sh->next_seq, 1) + 1;
	if (seq == 0) {  /* 2^32 transfers in one run: start another run */
		th->stop_issuing = true;
		return;
	}
	x->id = (uint64_t)sh->run_id << 32 | seq;
	x->from = rng_below(&th->rng, sh->naccounts);
	x->to = rng_below(&th->rng, sh->naccounts - 1);
	x->to += x->to >= x->from;
	x->amount = (int64_t)rng_below(&th->rng, MAX_AMOUNT) + 1;
	x->attempts = 0;
	int rc = lotus_txn_recycle(x->t);
	if (rc == 0)
		rc = xfer_send(x);
	if (rc) {
		x->state = X_FREE;
		th_fail(th, rc, "cannot start a transfer: %s", lotus_strerror(rc));
		return;
	}
	th->active++;
}

/* Another attempt of the same transfer, with the priority of the first. */
static void xfer_retry(struct xfer *x)
{
	x->attempts++;
	int rc = lotus_txn_restart(x->t);
	if (rc == 0)
		rc = xfer_send(x);
	if (rc) {
		th_fail(x->th, rc, "cannot retry a transfer: %s", lotus_strerror(rc));
		xfer_done(x);
	}
}

static void xfer_abort(struct xfer *x, int why)
{
	x->why = why;
	x->state = X_ABORT;
	int rc = lotus_txn_abort_async(x->t, on_abort, x);
	if (rc) {
		th_fail(x->th, rc, "cannot abort a transfer: %s", lotus_strerror(rc));
		xfer_done(x);
	}
}

static void on_abort(lotus_txn_t *t, int rc, void *arg)
{
	struct xfer *x = arg;
	struct bank_thread *th = x->th;
	if (lotus_err_retryable(x->why)) {
		atomic_fetch_add_explicit(&th->aborted, 1, memory_order_relaxed);
		if (th->stop_issuing)
			xfer_done(x);  /* stopping: it did not commit, leave it */
		else
			xfer_retry(x);
		return;
	}
	if (server_lost(x->why))
		th_fail(th, LOTUS_EUNAVAIL, "memory server lost: %s", lotus_strerror(x->why));
	else
		th_fail(th, x->why, "transfer 0x%016" PRIx64 " failed: %s", x->id,
			lotus_strerror(x->why));
	xfer_done(x);
}

static int read_balance(lotus_txn_t *t, int op, int64_t *out)
{
	const void *v;
	size_t len;
	int rc = lotus_txn_result(t, op, &v, &len);
	if (rc == 0 && len != BAL_LEN)
		rc = LOTUS_EPROTO;
	if (rc == 0)
		*out = (int64_t)get_be64(v);
	return rc;
}

static void on_exec(lotus_txn_t *t, int rc, void *arg)
{
	struct xfer *x = arg;
	struct bank_thread *th = x->th;
	struct bank_shared *sh = th->sh;
	int64_t from, to;
	unsigned char k[8], v[BAL_LEN];
	if (rc) {
		xfer_abort(x, rc);
		return;
	}
	rc = lotus_txn_result(t, x->op_rec, NULL, NULL);
	if (rc == LOTUS_EEXISTS && x->attempts) {
		/* an attempt that failed with a conflict was applied after all */
		th_ledger(th, true, x->id);
		th_fail(th, rc, "transfer 0x%016" PRIx64 " was applied by an attempt whose commit "
			"reported a conflict", x->id);
	} else if (rc) {
		th_fail(th, rc, "cannot insert transfer 0x%016" PRIx64 ": %s", x->id,
			lotus_strerror(rc));
	} else if ((rc = read_balance(t, x->op_from, &from)) != 0) {
		th_fail(th, rc, "account %" PRIu64 ": %s", x->from, lotus_strerror(rc));
	} else if ((rc = read_balance(t, x->op_to, &to)) != 0) {
		th_fail(th, rc, "account %" PRIu64 ": %s", x->to, lotus_strerror(rc));
	}
	if (rc) {
		xfer_abort(x, rc);
		return;
	}
	key_from_u64(x->from, k);
	put_be64(v, (uint64_t)(from - x->amount));
	rc = lotus_txn_write(t, sh->accounts, k, 8, v, BAL_LEN);
	key_from_u64(x->to, k);
	put_be64(v, (uint64_t)(to + x->amount));
	if (rc >= 0)
		rc = lotus_txn_write(t, sh->accounts, k, 8, v, BAL_LEN);
	x->state = X_COMMIT;
	if (rc >= 0)
		rc = lotus_txn_commit_async(t, on_commit, x);
	if (rc < 0)
		xfer_abort(x, rc);
}

static void on_commit(lotus_txn_t *t, int rc, void *arg)
{
	struct xfer *x = arg;
	struct bank_thread *th = x->th;
	if (rc == 0) {
		th_ledger(th, false, x->id);
		atomic_fetch_add_explicit(&th->committed, 1, memory_order_relaxed);
		xfer_done(x);
		if (!th->stop_issuing)
			xfer_start(x);
		return;
	}
	if (lotus_err_retryable(rc)) {  /* aborted everywhere: not applied */
		atomic_fetch_add_explicit(&th->aborted, 1, memory_order_relaxed);
		if (th->stop_issuing)
			xfer_done(x);
		else
			xfer_retry(x);
		return;
	}
	th_ledger(th, true, x->id);
	if (server_lost(rc))
		th_fail(th, LOTUS_EUNAVAIL, "memory server lost: %s", lotus_strerror(rc));
	else
		th_fail(th, rc, "commit of transfer 0x%016" PRIx64 " failed: %s", x->id,
			lotus_strerror(rc));
	xfer_done(x);
}

/* After the drain deadline: what is still committing may or may not commit. */
static unsigned xfer_drain(struct bank_thread *th, unsigned k)
{
	unsigned left = 0;
	for (unsigned i = 0; i < k; i++) {
		struct xfer *x = &th->x[i];
		if (x->state == X_FREE)
			continue;
		if (x->state == X_COMMIT)
			th_ledger(th, true, x->id);
		left++;
	}
	return left;
}

static void *bank_thread_main(void *arg)
{
	struct bank_thread *th = arg;
	struct bank_shared *sh = th->sh;
	unsigned k = sh->o->inflight ? sh->o->inflight : 1, left = 0;
	uint64_t drain_end = 0;
	int rc = lotus_session_open(sh->cl, &th->s);
	th->x = rc ? NULL : calloc(k, sizeof(*th->x));
	if (!rc && !th->x)
		rc = -ENOMEM;
	for (unsigned i = 0; i < k && rc == 0; i++) {
		th->x[i].th = th;
		rc = lotus_txn_begin(th->s, &th->x[i].t);
	}
	if (rc)
		th_fail(th, rc, "cannot open a session: %s", lotus_strerror(rc));
	for (unsigned i = 0; i < k && !th->stop_issuing; i++)
		xfer_start(&th->x[i]);
	th->flushed_ns = clock_now_ns();
	while (th->x) {
		uint64_t now = clock_now_ns();
		if (!th->stop_issuing && (now >= sh->t_end || atomic_load(&bank_stopping) ||
					  atomic_load(&sh->halt)))
			th->stop_issuing = true;
		if (th->stop_issuing && !drain_end)
			drain_end = now + DRAIN_NS;
		if (th->stop_issuing && (th->active == 0 || now >= drain_end))
			break;
		lotus_session_poll(th->s, 1);
		if (now - th->flushed_ns >= LEDGER_FLUSH_NS)
			th_ledger_flush(th);
	}
	if (th->x && (left = xfer_drain(th, k)) != 0)
		log_warn("bank: %u transfers still in flight after %.0f s; committing ones are 'maybe'",
			 left, DRAIN_NS / 1e9);
	th_ledger_flush(th);
	/* Transactions still in flight belong to the library until they finish;
	 * they are left (with their slots) rather than freed under it. */
	for (unsigned i = 0; th->x && i < k; i++)
		if (th->x[i].t && th->x[i].state == X_FREE)
			lotus_txn_free(th->x[i].t);
	if (!left) {
		free(th->x);
		th->x = NULL;
		lotus_session_close(th->s);
		th->s = NULL;
	}
	atomic_fetch_sub(&sh->running, 1);
	return NULL;
}

static void progress_line(struct bank_shared *sh, struct bank_thread *ths, unsigned n,
			  uint64_t *last)
{
	uint64_t c = 0, a = 0, m = 0;
	for (unsigned i = 0; i < n; i++) {
		c += atomic_load_explicit(&ths[i].committed, memory_order_relaxed);
		a += atomic_load_explicit(&ths[i].aborted, memory_order_relaxed);
		m += atomic_load_explicit(&ths[i].maybe, memory_order_relaxed);
	}
	fprintf(stderr, "bank: %5.1f s  committed %llu (%llu/s)  aborted %llu  maybe %llu\n",
		(double)(clock_now_ns() - sh->t_start) / 1e9, (unsigned long long)c,
		(unsigned long long)(c - *last), (unsigned long long)a, (unsigned long long)m);
	*last = c;
}

/* Start the transfer threads, print progress and sync the ledger each second.
 * Main thread; s is its (idle) session, polled so that it stays connected for
 * the verification that may follow. */
static void run_threads(struct bank_shared *sh, lotus_session_t *s, struct bank_thread *ths,
			unsigned n)
{
	uint64_t next = clock_now_ns() + 1000000000ULL, last = 0;
	unsigned started = 0;
	atomic_store(&sh->running, n);
	for (unsigned i = 0; i < n; i++, started++)
		if (pthread_create(&ths[i].tid, NULL, bank_thread_main, &ths[i]))
			break;
	atomic_fetch_sub(&sh->running, n - started);
	if (started < n) {
		ths[started].error = -EAGAIN;
		snprintf(ths[started].msg, sizeof(ths[started].msg), "cannot start a thread");
		atomic_store(&sh->halt, 1);
	}
	while (atomic_load(&sh->running) > 0) {
		lotus_session_poll(s, 20);  /* keeps the main session's connections alive */
		if (clock_now_ns() < next)
			continue;
		next += 1000000000ULL;
		ledger_sync(&sh->ledger);
		if (!sh->o->quiet)
			progress_line(sh, ths, n, &last);
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(ths[i].tid, NULL);
}

static void merge_threads(struct bank_run_result *res, struct bank_thread *ths, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct bank_thread *th = &ths[i];
		res->committed += atomic_load(&th->committed);
		res->aborted += atomic_load(&th->aborted);
		res->maybe += atomic_load(&th->maybe);
		/* a lost server outranks whatever failed because of it */
		if (th->error && (!res->error || th->error == LOTUS_EUNAVAIL) &&
		    res->error != LOTUS_EUNAVAIL) {
			res->error = th->error;
			snprintf(res->message, sizeof(res->message), "%s", th->msg);
		}
	}
}

static const char *cc_name(enum lotus_cc cc)
{
	return cc == LOTUS_WAIT_DIE ? "wait_die" : cc == LOTUS_WOUND_WAIT ? "wound_wait" : "no_wait";
}

static int bank_run(struct bank_shared *sh, lotus_session_t *s, struct bank_run_result *res)
{
	const struct bank_opts *o = sh->o;
	unsigned n = o->threads ? o->threads : 1;
	struct ledger_data ld;
	int rc = ledger_read(o->ledger, &ld, true);
	if (rc)
		return fail_msg(res->message, sizeof(res->message), rc, "cannot read the ledger %s: %s",
				o->ledger, lotus_strerror(rc));
	rc = bank_setup(sh, s, res, ld.nacks + ld.nmaybes);
	if (rc == 0 && (rc = pick_run_id(sh, s, &ld)) != 0)
		fail_msg(res->message, sizeof(res->message), rc, "cannot pick a run id: %s",
			 lotus_strerror(rc));
	ledger_data_free(&ld);
	if (rc == 0 && (rc = ledger_open(&sh->ledger, o->ledger)) != 0)
		fail_msg(res->message, sizeof(res->message), rc, "cannot append to the ledger %s: %s",
			 o->ledger, lotus_strerror(rc));
	if (rc)
		return rc;
	res->run_id = sh->run_id;
	ledger_printf(&sh->ledger, "# run 0x%08x accounts %llu opening %lld cc %s threads %u "
		      "inflight %u pid %d time %lld%s\n", sh->run_id,
		      (unsigned long long)sh->naccounts, (long long)sh->opening, cc_name(o->lo.cc),
		      n, o->inflight, (int)getpid(), (long long)time(NULL),
		      res->created ? " created" : " continued");
	if ((rc = ledger_sync(&sh->ledger)) != 0) {
		ledger_close(&sh->ledger);
		return fail_msg(res->message, sizeof(res->message), rc, "cannot write the ledger %s: %s",
				o->ledger, lotus_strerror(rc));
	}
	if (!o->quiet)
		fprintf(stderr, "bank: run 0x%08x: %llu accounts (%s), opening %lld, %u threads x %u, %.0f s\n",
			sh->run_id, (unsigned long long)sh->naccounts,
			res->created ? "created" : "continued", (long long)sh->opening, n,
			o->inflight, o->seconds);
	struct bank_thread *ths = calloc(n, sizeof(*ths));
	if (!ths) {
		ledger_close(&sh->ledger);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < n; i++) {
		ths[i].sh = sh;
		ths[i].idx = i;
		rng_seed(&ths[i].rng, (uint64_t)sh->run_id * 1000003 + i);
	}
	sh->t_start = clock_now_ns();
	sh->t_end = sh->t_start + (uint64_t)(o->seconds * 1e9);
	run_threads(sh, s, ths, n);
	res->seconds = (double)(MIN(clock_now_ns(), sh->t_end) - sh->t_start) / 1e9;
	merge_threads(res, ths, n);
	ledger_printf(&sh->ledger, "# end 0x%08x committed %llu maybe %llu status %s\n", sh->run_id,
		      (unsigned long long)res->committed, (unsigned long long)res->maybe,
		      !res->error ? "ok" : res->error == LOTUS_EUNAVAIL ? "unavailable" : "error");
	rc = ledger_close(&sh->ledger);
	if (rc && !res->error) {
		res->error = rc;
		snprintf(res->message, sizeof(res->message), "cannot write the ledger %s: %s",
			 o->ledger, lotus_strerror(rc));
	}
	for (unsigned i = 0; ths && i < n; i++)
		if (ths[i].x)  /* left with transactions in flight: keep them alive */
			ths = NULL;
	free(ths);
	return 0;
}

/* ---- verification ----------------------------------------------------------------- */

static bool verify_fail(struct bank_verify_result *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static bool verify_fail(struct bank_verify_result *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->error, sizeof(v->error), fmt, ap);
	va_end(ap);
	v->ok = false;
	return false;
}

static bool rec_present(const struct transfers_view *tv, uint64_t id)
{
	size_t lo = 0, hi = tv->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tv->r[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < tv->n && tv->r[lo].id == id;
}

/* V1: every acknowledged id has its record (acks sorted). */
static bool verify_acks(struct bank_verify_result *v, const struct ledger_data *ld,
			const struct transfers_view *tv)
{
	for (size_t i = 0; i < ld->nacks; i++) {
		if (i && ld->acks[i] == ld->acks[i - 1])
			return verify_fail(v, "transfer 0x%016" PRIx64 " acknowledged twice in the ledger",
					   ld->acks[i]);
		if (!rec_present(tv, ld->acks[i]))
			return verify_fail(v, "transfer 0x%016" PRIx64 " acknowledged in the ledger "
					   "but missing from %s", ld->acks[i], TB_TRANSFERS);
	}
	for (size_t i = 0; i < ld->nmaybes; i++)
		v->maybe_in_db += rec_present(tv, ld->maybes[i]);
	return true;
}

/* V2: each balance is the opening balance plus the account's transfers. */
static bool verify_balances(struct bank_verify_result *v, const struct accounts_view *a,
			    const struct transfers_view *tv, int64_t opening)
{
	int64_t *expect = malloc((a->n ? a->n : 1) * sizeof(*expect));
	bool ok = true;
	if (!expect)
		return verify_fail(v, "out of memory");
	for (size_t i = 0; i < a->n; i++)
		expect[i] = opening;
	for (size_t i = 0; i < tv->n && ok; i++) {
		const struct transfer_rec *r = &tv->r[i];
		ssize_t f = account_find(a, r->from), t = account_find(a, r->to);
		if (f < 0 || t < 0)
			ok = verify_fail(v, "transfer 0x%016" PRIx64 " in %s names account %" PRIu64
					 ", which is not in %s", r->id, TB_TRANSFERS,
					 f < 0 ? r->from : r->to, TB_ACCOUNTS);
		else {
			expect[f] -= r->amount;
			expect[t] += r->amount;
		}
	}
	for (size_t i = 0; i < a->n && ok; i++)
		if (a->balance[i] != expect[i])
			ok = verify_fail(v, "account %" PRIu64 " holds %lld, but its opening balance %lld "
					 "plus its transfers in %s give %lld", a->ids[i],
					 (long long)a->balance[i], (long long)opening, TB_TRANSFERS,
					 (long long)expect[i]);
	free(expect);
	return ok;
}

/* V3: the accounts and their total are those the runs started with. */
static bool verify_total(struct bank_verify_result *v, const struct ledger_data *ld,
			 const struct accounts_view *a)
{
	if (ld->have_header && ld->accounts != a->n)
		return verify_fail(v, "%s holds %zu accounts, but the ledger's runs used %llu",
				   TB_ACCOUNTS, a->n, (unsigned long long)ld->accounts);
	if (v->total != v->expected_total)
		return verify_fail(v, "the total is %lld, not %zu accounts x %lld = %lld",
				   (long long)v->total, a->n, (long long)v->opening,
				   (long long)v->expected_total);
	return true;
}

/* The database is checked as it is once quiet.  After a lost client or server,
 * a transaction prepared on several servers may be settled on one of them and
 * not yet on another; a scan does not wait for an insert that is not applied
 * yet.  So wait (up to VERIFY_SETTLE_S) until no server holds a prepared
 * transaction ("prepared" in its stats). */
#define VERIFY_SETTLE_S 15
static void verify_settle(struct bank_shared *sh, lotus_session_t *s)
{
	uint64_t deadline = clock_now_ns() + VERIFY_SETTLE_S * 1000000000ULL;
	unsigned n = lotus_cluster_servers(sh->cl);
	for (;;) {
		unsigned busy = 0;
		for (unsigned sv = 0; sv < n; sv++) {
			const char *st = lotus_server_stats(s, sv);
			const char *p = st ? strstr(st, "\"prepared\":") : NULL;
			busy += p && atoi(p + 11) > 0;
		}
		if (!busy)
			return;
		if (clock_now_ns() > deadline) {
			log_warn("bank: %u memory server(s) still hold prepared transactions after %d s; "
				 "verifying anyway", busy, VERIFY_SETTLE_S);
			return;
		}
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

static int bank_verify(struct bank_shared *sh, lotus_session_t *s, struct bank_verify_result *v)
{
	const struct bank_opts *o = sh->o;
	struct ledger_data ld;
	struct accounts_view a = { 0 };
	struct transfers_view tv = { 0 };
	int rc = ledger_read(o->ledger, &ld, false);
	v->ok = true;
	if (rc) {
		verify_fail(v, "cannot read the ledger %s: %s", o->ledger, lotus_strerror(rc));
		return 0;
	}
	qsort(ld.acks, ld.nacks, sizeof(*ld.acks), cmp_u64);
	verify_settle(sh, s);
	rc = scan_table(s, sh->accounts, 0, UINT32_MAX, account_row, &a);
	if (rc == 0)
		rc = scan_table(s, sh->transfers, 0, UINT32_MAX, transfer_row, &tv);
	if (rc) {
		verify_fail(v, "cannot read the tables: %s", lotus_strerror(rc));
		goto out;
	}
	v->accounts = a.n;
	v->transfers_in_db = tv.rows;
	v->acknowledged = ld.nacks;
	v->maybe = ld.nmaybes;
	v->opening = o->opening_given || !ld.have_header ? o->opening : ld.opening;
	v->total = a.total;
	v->expected_total = (int64_t)a.n * v->opening;
	if (ld.error[0])
		verify_fail(v, "%s: %s", o->ledger, ld.error);
	else if (a.n == 0)
		verify_fail(v, "%s is empty: nothing to verify (wrong cluster?)", TB_ACCOUNTS);
	else if (a.bad_len)
		verify_fail(v, "account %" PRIu64 " has a value that is not an 8-byte balance",
			    a.bad_len_id);
	else if (tv.bad_len)
		verify_fail(v, "transfer 0x%016" PRIx64 " has a record that is not 24 bytes",
			    tv.bad_len_id);
	else if (verify_acks(v, &ld, &tv) && verify_balances(v, &a, &tv, v->opening))
		verify_total(v, &ld, &a);
out:
	accounts_free(&a);
	free(tv.r);
	ledger_data_free(&ld);
	return 0;
}

/* ---- the whole command -------------------------------------------------------------- */

int bank_main(const struct bank_opts *o, struct bank_run_result *run,
	      struct bank_verify_result *ver)
{
	struct bank_shared sh = { .o = o };
	lotus_session_t *s = NULL;
	memset(run, 0, sizeof(*run));
	memset(ver, 0, sizeof(*ver));
	int lock_fd = ledger_lock(o->ledger, o->run, run->message, sizeof(run->message));
	if (lock_fd == -2)
		return -EBUSY;
	if (o->run && o->lo.local_servers > 0 && !o->lo.data_dir && lock_fd >= 0) {
		/* A plain --local cluster starts empty: an earlier run's transfers
		 * cannot be in it, so --verify would report them all missing. */
		struct ledger_data ld;
		int lrc = ledger_read(o->ledger, &ld, true);
		size_t n = ld.nacks + ld.nmaybes;
		ledger_data_free(&ld);
		if (lrc == 0 && n) {
			run->refused = true;
			snprintf(run->message, sizeof(run->message), "the ledger %s holds %zu transfers "
				 "of an earlier bank, but a --local cluster starts empty; use a new "
				 "--ledger, or --data-dir / --config for a cluster that keeps its data",
				 o->ledger, n);
			close(lock_fd);
			return LOTUS_ECONFIG;
		}
	}
	int rc = lotus_connect(&o->lo, &sh.cl);
	if (rc) {
		fail_msg(run->message, sizeof(run->message), rc, "cannot connect: %s",
			 lotus_strerror(rc));
		if (lock_fd >= 0)
			close(lock_fd);
		return rc;
	}
	run->servers = lotus_cluster_servers(sh.cl);
	rc = lotus_session_open(sh.cl, &s);
	if (rc == 0)
		rc = lotus_table_create(s, TB_ACCOUNTS, BAL_LEN, &sh.accounts);
	if (rc == 0)
		rc = lotus_table_create(s, TB_TRANSFERS, REC_LEN, &sh.transfers);
	if (rc)
		fail_msg(run->message, sizeof(run->message), rc, "cannot open the bank's tables: %s",
			 lotus_strerror(rc));
	if (rc == 0 && o->run)
		rc = bank_run(&sh, s, run);
	if (rc == 0 && o->verify && !run->error)
		rc = bank_verify(&sh, s, ver);
	lotus_session_close(s);
	lotus_disconnect(sh.cl);
	if (lock_fd >= 0)
		close(lock_fd);   /* releases the lock */
	return rc;
}

/* ---- output ------------------------------------------------------------------------ */


static const char *run_status(const struct bank_run_result *r)
{
	return !r->error ? "ok" : r->error == LOTUS_EUNAVAIL ? "unavailable" : "error";
}

void bank_print_run(FILE *f, const struct bank_opts *o, const struct bank_run_result *r, bool json)
{
	double tps = r->seconds > 0 ? (double)r->committed / r->seconds : 0;
	if (json) {
		fprintf(f, "{\"committed\":%llu,\"aborted\":%llu,\"maybe\":%llu,\"txn_per_s\":%.1f,"
			"\"seconds\":%.3f,\"run_id\":\"0x%08x\",\"accounts\":%llu,\"opening\":%lld,"
			"\"created\":%s,\"cc\":\"%s\",\"threads\":%u,\"inflight\":%u,\"servers\":%u,"
			"\"status\":\"%s\",\"error\":",
			(unsigned long long)r->committed, (unsigned long long)r->aborted,
			(unsigned long long)r->maybe, tps, r->seconds, r->run_id,
			(unsigned long long)r->accounts, (long long)r->opening,
			r->created ? "true" : "false", cc_name(o->lo.cc), o->threads, o->inflight,
			r->servers, run_status(r));
		json_write_str(f, r->message);
		fputc('}', f);
		return;
	}
	fprintf(f, "lotus bank: run 0x%08x, %llu accounts x %lld (%s), cc %s, %u servers, "
		   "%u threads x %u in flight\n", r->run_id, (unsigned long long)r->accounts,
		(long long)r->opening, r->created ? "created" : "continued", cc_name(o->lo.cc),
		r->servers, o->threads, o->inflight);
	fprintf(f, "  %-10s %llu transfers in %.1f s (%.1f txn/s)\n", "committed",
		(unsigned long long)r->committed, r->seconds, tps);
	fprintf(f, "  %-10s %llu attempts (conflicts, retried)\n", "aborted",
		(unsigned long long)r->aborted);
	fprintf(f, "  %-10s %llu transfers of unknown outcome\n", "maybe",
		(unsigned long long)r->maybe);
	fprintf(f, "  %-10s %s\n", "status", r->error ? r->message : "ok");
}

void bank_print_verify(FILE *f, const struct bank_verify_result *v, bool json)
{
	if (json) {
		fprintf(f, "{\"ok\":%s,\"accounts\":%llu,\"transfers_in_db\":%llu,\"acknowledged\":%llu,"
			"\"maybe\":%llu,\"maybe_in_db\":%llu,\"total\":%lld,\"expected_total\":%lld,"
			"\"error\":", v->ok ? "true" : "false", (unsigned long long)v->accounts,
			(unsigned long long)v->transfers_in_db, (unsigned long long)v->acknowledged,
			(unsigned long long)v->maybe, (unsigned long long)v->maybe_in_db,
			(long long)v->total, (long long)v->expected_total);
		json_write_str(f, v->error);
		fputc('}', f);
		return;
	}
	fprintf(f, "lotus bank --verify: %s\n", v->ok ? "OK" : "FAILED");
	fprintf(f, "  %-14s %llu, total %lld (expected %lld)\n", "accounts",
		(unsigned long long)v->accounts, (long long)v->total, (long long)v->expected_total);
	fprintf(f, "  %-14s %llu in %s\n", "transfers", (unsigned long long)v->transfers_in_db,
		TB_TRANSFERS);
	fprintf(f, "  %-14s %llu acknowledged, %llu maybe (%llu of them committed)\n", "ledger",
		(unsigned long long)v->acknowledged, (unsigned long long)v->maybe,
		(unsigned long long)v->maybe_in_db);
	if (!v->ok)
		fprintf(f, "  %-14s %s\n", "discrepancy", v->error);
}
