/*
 * bank.c - `lotus bank`: concurrent transfers, their ledger, and the verifier;
 * this file is the workload (setup and the transfer threads); the ledger is
 * in bank_ledger.c, reading the tables and verifying in bank_verify.c
 * (bank_int.h holds what they share).
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
#include "bench/bank_int.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "common/ycsb_gen.h"

_Atomic int bank_stopping;

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

/* ---- setup ------------------------------------------------------------------------ */

static int create_accounts(lotus_session_t *s, lotus_table_t tb, uint64_t n, int64_t opening)
{
	lotus_txn_t *t;
	struct retry r = { 0 };
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
		if (rc == 0) {
			a = end;
			retry_reset(&r);
		} else if (lotus_err_retryable(rc) && retry_again(&r)) {
			rc = 0;
		}
	}
	if ((rc == 0 || lotus_err_retryable(rc)) && atomic_load(&bank_stopping))
		rc = -EINTR;
	lotus_txn_free(t);
	return rc;
}

bool retry_again(struct retry *r)
{
	uint64_t now = clock_now_ns();
	if (!r->deadline_ns)
		r->deadline_ns = now + RETRY_S * 1000000000ULL;
	if (now > r->deadline_ns || atomic_load(&bank_stopping))
		return false;
	if (++r->tries > 16) {   /* not a passing conflict: back off */
		unsigned shift = MIN(r->tries - 16, 20u);
		struct timespec ts = { 0, (long)MIN(50000ULL << shift, RETRY_SLEEP_MAX_NS) };
		nanosleep(&ts, NULL);
	}
	return true;
}

int fail_msg(char *msg, size_t len, int rc, const char *fmt, ...)
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

const char *cc_name(enum lotus_cc cc)
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

/* ---- the whole command -------------------------------------------------------------- */

int bank_main(const struct bank_opts *o, struct bank_run_result *run,
	      struct bank_verify_result *ver)
{
	struct bank_shared sh = { .o = o };
	lotus_session_t *s = NULL;
	memset(run, 0, sizeof(*run));
	memset(ver, 0, sizeof(*ver));
	int lock_fd = o->no_ledger ? -1 : ledger_lock(o->ledger, o->run, run->message,
							    sizeof(run->message));
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
