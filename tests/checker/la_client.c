/*
 * la_client.c - the list-append workload client of the serializability
 * checker (docs/checker.md).  It knows lotus only through include/lotus.h.
 *
 * Each of --threads threads opens one session and keeps --inflight
 * transactions going with the asynchronous API.  A transaction is a random
 * plan of 1..--max-ops operations over --keys hot keys ("k000".."kNNN" in
 * table "la"):
 *   read     lotus_txn_read, the value is a list
 *   append   read_for_update (unless the txn already knows the value), then a
 *            write of list + [e] (an insert of [e] when the key is absent);
 *            a list longer than --max-list is deleted instead
 *   insert   a blind insert of [e] (EEXISTS when the key exists)
 *   delete   read_for_update (unless known), then delete
 *   scan     up to 8 rows from a random hot key on
 * Every element e is unique in the whole run: client id, thread, counter.
 * A value is the list's elements in hex, separated by spaces.
 *
 * The plan runs in groups: ops on distinct keys are staged together and
 * sent with one execute; every group is executed, then the transaction
 * commits with nothing left staged.  Each attempt is logged as JSON lines to
 * --log (one write(2) per line, so a kill -9 loses no line already written;
 * it can cut the line being written short, past its first page, and the
 * checker drops such a torn last line: its commit was never sent):
 *   {"id":..,"ops":[..],"doomed":0|1}       just before the commit is sent
 *   {"id":..,"end":"ok|aborted|failed|unknown","rc":"..."}  its outcome
 * or a single line with both when the attempt ends before its commit.
 * Ops in the log: ["r",k,L|null] ["x",k,L|null] (read for update),
 * ["a",k,e,L'] (wrote list L'), ["i",k,e,"ok"|"exists"], ["d",k,"ok"|..],
 * ["s",start,count,[[k,L],..]], ["S",count,[row numbers]] (cold scan).
 *
 * Outcomes: ok (commit returned 0), aborted (a conflict), failed (a definite
 * error, e.g. ENOSPACE, or the attempt never sent its commit), unknown (the
 * server was lost, a timeout, or no answer within --txn-timeout: such an
 * attempt is abandoned and never reused; an answer that comes later is
 * logged as {"id":..,"late":step,"rc":..}; the client exits 4 at the end).
 *
 * Fault aids: --sticky P makes a fraction P of the transactions stage an
 * oversize value on purpose (the call fails with ETOOBIG; the commit that
 * follows must fail and nothing may land: the attempt is logged "doomed");
 * --ballast B inserts B-byte records into table "laball" to fill a server;
 * --cold N with --load-cold loads N static rows into "lacold" and --cold N
 * alone makes a few transactions scan N/2+N/4 of them.
 *
 * Exit: 0 done, 2 usage, 3 a memory server was lost, 4 transactions hung,
 * 1 other errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <lotus.h>

#define MAX_KEYS 256
#define MAX_OPS 20
#define MAX_STAGED 64
#define HOT_MAX_VALUE 16384

struct opts {
	const char *config, *log_path, *transport;
	enum lotus_cc cc;
	enum lotus_batch batch;
	enum lotus_partitioning part;
	uint64_t cache;
	unsigned client_id, compute_id, compute_count, threads, inflight, keys, max_ops, max_list;
	unsigned ballast, cold, load_cold, final, ryw, value_max;
	double seconds, txn_timeout, sticky, ballast_prob, scan_prob;
	uint64_t seed;
};
static struct opts O;

static int log_fd = -1;
static atomic_int server_lost, hung_total, fatal;
static lotus_table_t tb_hot, tb_ball, tb_cold;
static unsigned owned[MAX_KEYS], nowned;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- a growable text buffer for JSON lines ------------------------------ */

struct buf { char *p; size_t n, cap; };

static void buf_put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k >= 0 && (size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (k >= 0 && cap - b->n <= (size_t)k)
			cap *= 2;
		char *np = realloc(b->p, cap);
		if (!np) {
			fprintf(stderr, "la-client: out of memory\n");
			_exit(1);
		}
		b->p = np;
		b->cap = cap;
	}
}

static void log_line(const char *line, size_t n)
{
	while (n) {  /* O_APPEND: one write per line keeps lines whole */
		ssize_t k = write(log_fd, line, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			fprintf(stderr, "la-client: log write: %s\n", strerror(errno));
			_exit(1);
		}
		line += k;
		n -= (size_t)k;
	}
}

/* ---- lists ---------------------------------------------------------------- */

struct list { uint64_t *e; unsigned n, cap; };

static void list_push(struct list *l, uint64_t v)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->e = realloc(l->e, l->cap * sizeof(*l->e));
		if (!l->e)
			_exit(1);
	}
	l->e[l->n++] = v;
}

/* Parse "hex hex ..." into l; -1 if the bytes are not such a list. */
static int list_parse(struct list *l, const void *v, size_t n)
{
	const char *p = v, *end = p + n;
	l->n = 0;
	while (p < end) {
		uint64_t x = 0;
		int digits = 0;
		while (p < end && *p != ' ') {
			char c = *p++;
			int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
			if (d < 0 || digits++ >= 16)
				return -1;
			x = x << 4 | (uint64_t)d;
		}
		if (!digits)
			return -1;
		list_push(l, x);
		if (p < end)
			p++;
	}
	return 0;
}

static size_t list_format(const struct list *l, char *out, size_t cap)
{
	size_t n = 0;
	for (unsigned i = 0; i < l->n && n + 18 < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, i ? " %" PRIx64 : "%" PRIx64, l->e[i]);
	return n;
}

static void json_list(struct buf *b, const struct list *l)
{
	buf_put(b, "[");
	for (unsigned i = 0; i < l->n; i++)
		buf_put(b, i ? ",%" PRIu64 : "%" PRIu64, l->e[i]);
	buf_put(b, "]");
}

/* ---- transactions ----------------------------------------------------------- */

enum { OP_R, OP_APPEND, OP_INSERT, OP_DELETE, OP_SCAN, OP_COLD };
enum { K_UNKNOWN, K_NIL, K_LIST, K_PRESENT };  /* what the txn knows of a key */
enum { X_FREE, X_EXEC, X_COMMIT, X_ABORT, X_HUNG, X_BACKOFF };
enum { S_READ, S_RFU, S_WRITE, S_INSERT, S_APPEND_INS, S_DELETE, S_SCAN, S_COLD, S_BALLAST,
       S_BALLAST_DEL };

struct plan_op { int kind; unsigned key, count; };
struct staged { int lop, pi, what; uint64_t elem; };

struct thread;
struct xact {
	struct thread *th;
	lotus_txn_t *t;
	int state;
	uint64_t seq, start_ns, wake_ns;
	unsigned attempts;
	struct plan_op plan[MAX_OPS];
	unsigned nplan, cursor;
	int kstate[MAX_KEYS];
	struct list klist[MAX_KEYS];
	struct staged st[MAX_STAGED];
	unsigned nst;
	struct buf ops;       /* JSON of the ops so far, without brackets */
	unsigned nlogged;
	int doomed, writes, ballast_ins, ballast_del, ballast_done;
	unsigned char wrote[MAX_KEYS];   /* keys this attempt has written */
	char ballast_key[64];
};

struct thread {
	unsigned idx;
	pthread_t tid;
	lotus_session_t *s;
	uint64_t rng, elem_seq, txn_seq;
	struct xact *x;
	unsigned active, hung;
	int stop, lost;
	char (*ballast)[64];   /* FIFO of this thread's committed ballast keys */
	unsigned b_head, b_n, b_cap, b_seq;
	int enospace;
	unsigned long ok, aborted, failed, unknown, late;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static unsigned rng_below(uint64_t *s, unsigned n) { return (unsigned)(rng_next(s) % n); }
static double rng_unit(uint64_t *s) { return (rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static void key_name(unsigned k, char out[16]) { snprintf(out, 16, "k%03u", k); }

static void xact_exec(struct xact *x);
static void on_exec(lotus_txn_t *t, int rc, void *arg);
static void on_commit(lotus_txn_t *t, int rc, void *arg);
static void on_abort(lotus_txn_t *t, int rc, void *arg);

static const char *rc_name(int rc) { return rc ? lotus_strerror(rc) : "ok"; }

static void x_log_op(struct xact *x, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_put(&x->ops, "%s%s", x->nlogged++ ? "," : "", tmp);
}

static void x_log_list_op(struct xact *x, const char *kind, unsigned key, const uint64_t *elem,
			  const struct list *l)
{
	buf_put(&x->ops, "%s[\"%s\",%u,", x->nlogged++ ? "," : "", kind, key);
	if (elem)
		buf_put(&x->ops, "%" PRIu64 ",", *elem);
	if (l)
		json_list(&x->ops, l);
	else
		buf_put(&x->ops, "null");
	buf_put(&x->ops, "]");
}

static void x_id(struct xact *x, char *out, size_t n)
{
	snprintf(out, n, "%u.%u.%" PRIu64, O.client_id, x->th->idx, x->seq);
}

/* The attempt's record: the ops line (pending or complete) and/or its end. */
static void x_write_ops(struct xact *x, const char *end, int rc)
{
	struct buf b = { 0 };
	char id[48];
	x_id(x, id, sizeof(id));
	buf_put(&b, "{\"id\":\"%s\",\"ops\":[", id);
	if (x->ops.n)
		buf_put(&b, "%.*s", (int)x->ops.n, x->ops.p);
	buf_put(&b, "],\"doomed\":%d", x->doomed);
	if (end)
		buf_put(&b, ",\"end\":\"%s\",\"rc\":\"%s\"", end, rc_name(rc));
	buf_put(&b, "}\n");
	log_line(b.p, b.n);
	free(b.p);
}

static void x_write_end(struct xact *x, const char *end, int rc)
{
	char line[160], id[48];
	x_id(x, id, sizeof(id));
	int n = snprintf(line, sizeof(line), "{\"id\":\"%s\",\"end\":\"%s\",\"rc\":\"%s\"}\n", id, end,
			 rc_name(rc));
	log_line(line, (size_t)n);
}

static uint64_t new_elem(struct thread *th)
{
	return (uint64_t)O.client_id << 40 | (uint64_t)th->idx << 32 | ++th->elem_seq;
}

static unsigned pick_key(struct thread *th)
{
	return owned[rng_below(&th->rng, nowned)];
}

static void x_plan(struct xact *x)
{
	struct thread *th = x->th;
	double u0 = rng_unit(&th->rng);   /* 1..max_ops, short ones more often */
	x->nplan = 1 + (unsigned)(u0 * u0 * O.max_ops);
	if (x->nplan > O.max_ops)
		x->nplan = O.max_ops;
	for (unsigned i = 0; i < x->nplan; i++) {
		struct plan_op *p = &x->plan[i];
		double u = rng_unit(&th->rng);
		p->key = pick_key(th);
		p->count = 1 + rng_below(&th->rng, 8);
		if (u < O.scan_prob)
			p->kind = OP_SCAN;
		else if (u < O.scan_prob + 0.35)
			p->kind = OP_R;
		else if (u < O.scan_prob + 0.80)
			p->kind = OP_APPEND;
		else if (u < O.scan_prob + 0.90)
			p->kind = OP_INSERT;
		else
			p->kind = OP_DELETE;
	}
	if (O.cold && rng_below(&th->rng, 50) == 0)
		x->plan[rng_below(&th->rng, x->nplan)].kind = OP_COLD;
}

/* Start a new attempt (restart keeps the priority; new keeps nothing). */
static int x_begin(struct xact *x, int retry)
{
	struct thread *th = x->th;
	if (retry && x->state != X_BACKOFF) {
		/* back off a random while, longer with every conflict in a row */
		unsigned cap = x->attempts < 6 ? 50u << x->attempts : 3200;
		x->attempts++;
		x->state = X_BACKOFF;
		x->wake_ns = now_ns() + 1000ull * rng_below(&th->rng, cap);
		return 0;
	}
	if (!retry)
		x->attempts = 0;
	int rc = retry ? lotus_txn_restart(x->t) : lotus_txn_recycle(x->t);
	if (rc)
		return rc;
	x->seq = ++th->txn_seq;
	x->start_ns = now_ns();
	x->cursor = 0;
	x->ops.n = 0;
	x->nlogged = 0;
	x->writes = 0;
	x->ballast_ins = x->ballast_del = x->ballast_done = 0;
	for (unsigned k = 0; k < O.keys; k++)
		x->kstate[k] = K_UNKNOWN;
	memset(x->wrote, 0, sizeof(x->wrote));
	if (!retry)
		x_plan(x);
	x->doomed = O.sticky > 0 && rng_unit(&th->rng) < O.sticky;
	x->state = X_EXEC;
	th->active++;
	xact_exec(x);
	return 0;
}

static void x_done(struct xact *x)
{
	x->state = X_FREE;
	x->th->active--;
}

static void x_abort(struct xact *x)
{
	x->state = X_ABORT;
	int rc = lotus_txn_abort_async(x->t, on_abort, x);
	if (rc)
		x_done(x);
}

/* The attempt ended before its commit was sent: nothing of it may land. */
static void x_fail_early(struct xact *x, int rc)
{
	struct thread *th = x->th;
	int retry = lotus_err_retryable(rc);
	x_write_ops(x, retry ? "aborted" : "failed", rc);
	if (retry)
		th->aborted++;
	else
		th->failed++;
	if (rc == LOTUS_EUNAVAIL) {
		th->lost = 1;
		atomic_store(&server_lost, 1);
	}
	x->doomed = retry ? 2 : 0;   /* 2: retry after the abort */
	x_abort(x);
}

/* Stage ballast: a new big record, or the deletion of an old one. */
static void x_stage_ballast(struct xact *x)
{
	struct thread *th = x->th;
	if (!O.ballast || x->nst + 2 > MAX_STAGED)
		return;
	if (th->b_n && (th->enospace || th->b_n > 64 || rng_below(&th->rng, 4) == 0)) {
		int lop = lotus_txn_delete(x->t, tb_ball, th->ballast[th->b_head],
					   strlen(th->ballast[th->b_head]));
		if (lop >= 0) {
			x->st[x->nst++] = (struct staged){ lop, -1, S_BALLAST_DEL, 0 };
			x->ballast_del = 1;
		}
	}
	if (rng_unit(&th->rng) < O.ballast_prob) {
		static char junk[65536];
		snprintf(x->ballast_key, sizeof(x->ballast_key), "b%u.%u.%u", O.client_id, th->idx,
			 ++th->b_seq);
		int lop = lotus_txn_insert(x->t, tb_ball, x->ballast_key, strlen(x->ballast_key), junk,
					   O.ballast);
		if (lop >= 0) {
			x->st[x->nst++] = (struct staged){ lop, -1, S_BALLAST, 0 };
			x->ballast_ins = 1;
		}
	}
}

/* Stage one op of the plan; 1 if it was staged (cursor advanced or not),
 * 0 if the group must end before it. */
static int x_stage(struct xact *x, const struct plan_op *p, unsigned char *touched)
{
	struct thread *th = x->th;
	char k[16];
	int lop;
	key_name(p->key, k);
	if (!O.ryw && (p->kind == OP_SCAN ? x->writes > 0
		       : ((p->kind == OP_R || p->kind == OP_INSERT) && x->wrote[p->key]) ||
			 x->wrote[p->key] == 2)) {
		x->cursor++;   /* --ryw 0: never look at this attempt's own writes */
		return 1;
	}
	if (p->kind == OP_SCAN || p->kind == OP_COLD) {
		if (x->nst)
			return 0;
		if (p->kind == OP_COLD) {
			lop = lotus_txn_scan(x->t, tb_cold, "z", 1, O.cold / 2 + O.cold / 4);
			x->st[x->nst++] = (struct staged){ lop, (int)x->cursor, S_COLD, 0 };
		} else {
			lop = lotus_txn_scan(x->t, tb_hot, k, strlen(k), p->count);
			x->st[x->nst++] = (struct staged){ lop, (int)x->cursor, S_SCAN, 0 };
		}
		x->cursor++;
		return lop >= 0 ? 1 : lop;
	}
	if (touched[p->key])
		return 0;
	touched[p->key] = 1;
	if (p->kind != OP_R)
		x->wrote[p->key] = 1;
	int ks = x->kstate[p->key];
	if (p->kind == OP_R) {
		lop = lotus_txn_read(x->t, tb_hot, k, strlen(k));
		x->st[x->nst++] = (struct staged){ lop, (int)x->cursor++, S_READ, 0 };
		return lop >= 0 ? 1 : lop;
	}
	if (p->kind == OP_INSERT) {
		uint64_t e = new_elem(th);
		char v[20];
		int n = snprintf(v, sizeof(v), "%" PRIx64, e);
		lop = lotus_txn_insert(x->t, tb_hot, k, strlen(k), v, (size_t)n);
		x->st[x->nst++] = (struct staged){ lop, (int)x->cursor++, S_INSERT, e };
		x->writes++;
		return lop >= 0 ? 1 : lop;
	}
	/* append and delete need the current value first */
	if (ks == K_UNKNOWN || ks == K_PRESENT) {
		lop = lotus_txn_read_for_update(x->t, tb_hot, k, strlen(k));
		x->st[x->nst++] = (struct staged){ lop, (int)x->cursor, S_RFU, 0 };
		return lop >= 0 ? 1 : lop;   /* cursor stays: the write comes next group */
	}
	struct list *l = &x->klist[p->key];
	if (p->kind == OP_DELETE || (ks == K_LIST && l->n >= O.max_list)) {
		x->cursor++;
		if (ks == K_NIL)
			return 1;    /* nothing to delete */
		lop = lotus_txn_delete(x->t, tb_hot, k, strlen(k));
		x->st[x->nst++] = (struct staged){ lop, (int)x->cursor - 1, S_DELETE, 0 };
		x->wrote[p->key] = 2;   /* deleted: --ryw 0 leaves the key alone now */
		x->writes++;
		return lop >= 0 ? 1 : lop;
	}
	uint64_t e = new_elem(th);
	x->cursor++;
	if (ks == K_NIL) {
		char v[20];
		int n = snprintf(v, sizeof(v), "%" PRIx64, e);
		lop = lotus_txn_insert(x->t, tb_hot, k, strlen(k), v, (size_t)n);
		x->st[x->nst++] = (struct staged){ lop, (int)x->cursor - 1, S_APPEND_INS, e };
	} else {
		static __thread char v[HOT_MAX_VALUE + 32];
		list_push(l, e);
		size_t n = list_format(l, v, sizeof(v));
		l->n--;
		lop = lotus_txn_write(x->t, tb_hot, k, strlen(k), v, n);
		x->st[x->nst++] = (struct staged){ lop, (int)x->cursor - 1, S_WRITE, e };
	}
	x->writes++;
	return lop >= 0 ? 1 : lop;
}

/* A doomed attempt: an oversize value (must fail), then the rest of its
 * writes, then commit at once.  The commit must fail and nothing may land. */
static void x_doom(struct xact *x)
{
	static char big[HOT_MAX_VALUE + 1];
	struct thread *th = x->th;
	char k[16];
	unsigned key = pick_key(th);
	key_name(key, k);
	int rc = lotus_txn_write(x->t, tb_hot, k, strlen(k), big, sizeof(big));
	x_log_op(x, "[\"oversize\",%u,\"%s\"]", key, rc_name(rc < 0 ? rc : 0));
	for (; x->cursor < x->nplan; x->cursor++) {
		struct plan_op *p = &x->plan[x->cursor];
		int ks = x->kstate[p->key];
		key_name(p->key, k);
		if (p->kind == OP_APPEND && ks == K_LIST && x->klist[p->key].n < O.max_list) {
			static __thread char v[HOT_MAX_VALUE + 32];
			struct list *l = &x->klist[p->key];
			uint64_t e = new_elem(th);
			list_push(l, e);
			size_t n = list_format(l, v, sizeof(v));
			lotus_txn_write(x->t, tb_hot, k, strlen(k), v, n);
			x_log_list_op(x, "a", p->key, &e, l);
		} else if (p->kind == OP_INSERT || (p->kind == OP_APPEND && ks == K_NIL)) {
			uint64_t e = new_elem(th);
			char v[20];
			int n = snprintf(v, sizeof(v), "%" PRIx64, e);
			lotus_txn_insert(x->t, tb_hot, k, strlen(k), v, (size_t)n);
			x_log_op(x, "[\"i\",%u,%" PRIu64 ",\"staged\"]", p->key, e);
		} else if (p->kind == OP_DELETE && ks == K_LIST) {
			lotus_txn_delete(x->t, tb_hot, k, strlen(k));
			x_log_op(x, "[\"d\",%u,\"staged\"]", p->key);
		}
	}
	x_write_ops(x, NULL, 0);
	x->state = X_COMMIT;
	rc = lotus_txn_commit_async(x->t, on_commit, x);
	if (rc) {
		x_write_end(x, "failed", rc);
		x->th->failed++;
		x->doomed = 0;
		x_abort(x);
	}
}

/* Stage the next group and execute it, or commit when the plan is done. */
static void xact_exec(struct xact *x)
{
	unsigned char touched[MAX_KEYS] = { 0 };
	x->nst = 0;
	if (x->doomed == 1 && x->cursor > 0 && x->cursor >= x->nplan / 2) {
		x_doom(x);
		return;
	}
	if (!x->ballast_done) {
		x->ballast_done = 1;
		x_stage_ballast(x);
	}
	while (x->cursor < x->nplan && x->nst + 1 < MAX_STAGED) {
		int r = x_stage(x, &x->plan[x->cursor], touched);
		if (r < 0) {
			x_log_op(x, "[\"stage-error\",\"%s\"]", rc_name(r));
			x_fail_early(x, r);
			return;
		}
		if (r == 0 || (x->nst && (x->st[x->nst - 1].what == S_RFU ||
					  x->st[x->nst - 1].what >= S_SCAN)))
			break;
	}
	if (x->nst == 0) {   /* the plan is done: commit */
		if (x->doomed == 1) {
			x_doom(x);
			return;
		}
		x_write_ops(x, NULL, 0);
		x->state = X_COMMIT;
		int rc = lotus_txn_commit_async(x->t, on_commit, x);
		if (rc) {
			x_write_end(x, "failed", rc);
			x->th->failed++;
			x_abort(x);
		}
		return;
	}
	int rc = lotus_txn_execute_async(x->t, on_exec, x);
	if (rc)
		x_fail_early(x, rc);
}

static void x_read_result(struct xact *x, const struct staged *s, const char *kind)
{
	unsigned key = x->plan[s->pi].key;
	const void *v;
	size_t n;
	int rc = lotus_txn_result(x->t, s->lop, &v, &n);
	struct list *l = &x->klist[key];
	if (rc == LOTUS_ENOTFOUND) {
		x->kstate[key] = K_NIL;
		l->n = 0;
		x_log_list_op(x, kind, key, NULL, NULL);
	} else if (rc == 0 && list_parse(l, v, n) == 0 && l->n) {
		x->kstate[key] = K_LIST;
		x_log_list_op(x, kind, key, NULL, l);
	} else {
		x_log_op(x, "[\"bad-read\",%u,\"%s\",%zu]", key, rc_name(rc), rc ? 0 : n);
		x->kstate[key] = K_UNKNOWN;
	}
}

static void x_scan_result(struct xact *x, const struct staged *s)
{
	int rows = lotus_txn_scan_rows(x->t, s->lop);
	struct list l = { 0 };
	if (s->what == S_COLD) {
		buf_put(&x->ops, "%s[\"S\",%u,[", x->nlogged++ ? "," : "", O.cold / 2 + O.cold / 4);
		for (int i = 0; i < rows; i++) {
			const void *k, *v;
			size_t kl, vl;
			char name[16] = { 0 };
			lotus_txn_scan_row(x->t, s->lop, (unsigned)i, &k, &kl, &v, &vl);
			memcpy(name, k, kl < 15 ? kl : 15);
			buf_put(&x->ops, i ? ",%d" : "%d", name[0] == 'z' ? atoi(name + 1) : -1);
		}
		buf_put(&x->ops, "]]");
		return;
	}
	unsigned start = x->plan[s->pi].key;
	buf_put(&x->ops, "%s[\"s\",%u,%u,[", x->nlogged++ ? "," : "", start, x->plan[s->pi].count);
	for (int i = 0; i < rows; i++) {
		const void *k, *v;
		size_t kl, vl;
		char name[16] = { 0 };
		lotus_txn_scan_row(x->t, s->lop, (unsigned)i, &k, &kl, &v, &vl);
		memcpy(name, k, kl < 15 ? kl : 15);
		int key = name[0] == 'k' ? atoi(name + 1) : -1;
		buf_put(&x->ops, "%s[%d,", i ? "," : "", key);
		if (list_parse(&l, v, vl) == 0 && l.n)
			json_list(&x->ops, &l);
		else
			buf_put(&x->ops, "\"bad\"");
		buf_put(&x->ops, "]");
		/* a scanned row is a read: later appends build on it */
		if (key >= 0 && (unsigned)key < O.keys && x->kstate[key] == K_UNKNOWN && l.n) {
			x->kstate[key] = K_LIST;
			x->klist[key].n = 0;
			for (unsigned j = 0; j < l.n; j++)
				list_push(&x->klist[key], l.e[j]);
		}
	}
	buf_put(&x->ops, "]]");
	free(l.e);
}

/* An answer for an attempt already abandoned as hung: note it, keep it off. */
static void x_late(struct xact *x, const char *step, int rc)
{
	char line[200], id[48];
	x_id(x, id, sizeof(id));
	int n = snprintf(line, sizeof(line), "{\"id\":\"%s\",\"late\":\"%s\",\"rc\":\"%s\"}\n",
			 id, step, rc_name(rc));
	log_line(line, (size_t)n);
	x->th->late++;
}

static void on_exec(lotus_txn_t *t, int rc, void *arg)
{
	struct xact *x = arg;
	if (x->state == X_HUNG) {
		x_late(x, "execute", rc);
		return;
	}
	if (rc) {
		x_fail_early(x, rc);
		return;
	}
	for (unsigned i = 0; i < x->nst; i++) {
		struct staged *s = &x->st[i];
		unsigned key = s->pi >= 0 ? x->plan[s->pi].key : 0;
		struct list *l = &x->klist[key];
		int r = s->what >= S_SCAN ? 0 : lotus_txn_result(t, s->lop, NULL, NULL);
		switch (s->what) {
		case S_READ: x_read_result(x, s, "r"); break;
		case S_RFU: x_read_result(x, s, "x"); break;
		case S_SCAN: case S_COLD: x_scan_result(x, s); break;
		case S_WRITE:
			if (r == 0) {
				list_push(l, s->elem);
				x_log_list_op(x, "a", key, &s->elem, l);
			} else {   /* the write was refused: its element must never show */
				x_log_op(x, "[\"a-failed\",%u,%" PRIu64 ",\"%s\"]", key, s->elem,
					 rc_name(r));
			}
			break;
		case S_APPEND_INS:
		case S_INSERT:
			if (r == 0) {
				l->n = 0;
				list_push(l, s->elem);
				x->kstate[key] = K_LIST;
				if (s->what == S_APPEND_INS)
					x_log_list_op(x, "a", key, &s->elem, l);
				else
					x_log_op(x, "[\"i\",%u,%" PRIu64 ",\"ok\"]", key, s->elem);
			} else {
				x_log_op(x, "[\"i\",%u,%" PRIu64 ",\"%s\"]", key, s->elem,
					 r == LOTUS_EEXISTS ? "exists" : rc_name(r));
				if (r == LOTUS_EEXISTS && x->kstate[key] != K_LIST)
					x->kstate[key] = K_PRESENT;
			}
			break;
		case S_DELETE:
			x_log_op(x, "[\"d\",%u,\"%s\"]", key, r == 0 ? "ok" : rc_name(r));
			if (r == 0) {
				x->kstate[key] = K_NIL;
				l->n = 0;
			}
			break;
		default: break;
		}
	}
	xact_exec(x);
}

static void ballast_push(struct thread *th, const char *k)
{
	if (th->b_n == th->b_cap) {
		unsigned cap = th->b_cap ? th->b_cap * 2 : 64;
		char (*nb)[64] = malloc(cap * sizeof(*nb));
		if (!nb)
			_exit(1);
		for (unsigned i = 0; i < th->b_n; i++)
			memcpy(nb[i], th->ballast[(th->b_head + i) % th->b_cap], 64);
		free(th->ballast);
		th->ballast = nb;
		th->b_head = 0;
		th->b_cap = cap;
	}
	memcpy(th->ballast[(th->b_head + th->b_n++) % th->b_cap], k, 64);
}

static void on_commit(lotus_txn_t *t, int rc, void *arg)
{
	struct xact *x = arg;
	struct thread *th = x->th;
	if (x->state == X_HUNG) {
		x_late(x, "commit", rc);
		return;
	}
	const char *end;
	if (rc == 0)
		end = "ok", th->ok++;
	else if (lotus_err_retryable(rc))
		end = "aborted", th->aborted++;
	else if (rc == LOTUS_ENOSPACE || rc == LOTUS_EREADONLY || rc == LOTUS_ETOOBIG ||
		 rc == LOTUS_ESTATE || rc == LOTUS_EEXISTS || rc == LOTUS_ENOTFOUND ||
		 rc == LOTUS_EPROTO)
		end = "failed", th->failed++;
	else
		end = "unknown", th->unknown++;
	x_write_end(x, end, rc);
	th->enospace = rc == LOTUS_ENOSPACE;
	if (rc == 0 && x->ballast_del) {
		th->b_head = (th->b_head + 1) % th->b_cap;
		th->b_n--;
	}
	if (rc == 0 && x->ballast_ins)
		ballast_push(th, x->ballast_key);
	if (rc == LOTUS_EUNAVAIL) {
		th->lost = 1;
		atomic_store(&server_lost, 1);
	}
	x_done(x);
	if (!th->stop && !th->lost) {
		int r = lotus_err_retryable(rc) ? x_begin(x, 1) : x_begin(x, 0);
		if (r)
			th->lost = 1;
	}
}

static void on_abort(lotus_txn_t *t, int rc, void *arg)
{
	struct xact *x = arg;
	struct thread *th = x->th;
	if (x->state == X_HUNG) {
		x_late(x, "abort", rc);
		return;
	}
	int retry = x->doomed == 2;
	x_done(x);
	if (!th->stop && !th->lost) {
		int r = x_begin(x, retry);
		if (r)
			th->lost = 1;
	}
}

/* Abandon attempts older than --txn-timeout: their outcome is unknown. */
static void x_check_hung(struct thread *th, uint64_t now)
{
	uint64_t lim = (uint64_t)(O.txn_timeout * 1e9);
	for (unsigned i = 0; i < O.inflight; i++) {
		struct xact *x = &th->x[i];
		if (x->state == X_FREE || x->state == X_HUNG || x->state == X_BACKOFF ||
		    now - x->start_ns < lim)
			continue;
		if (x->state == X_EXEC) {
			x_log_op(x, "[\"hung\"]");
			x_write_ops(x, "unknown", LOTUS_ETIMEOUT);
		} else if (x->state == X_COMMIT) {
			x_write_end(x, "unknown", LOTUS_ETIMEOUT);
		}
		x->state = X_HUNG;
		th->active--;
		th->hung++;
		th->unknown++;
		atomic_fetch_add(&hung_total, 1);
	}
}

struct thread_arg { struct thread th; lotus_cluster_t *cl; uint64_t t_end; };

static void *run_thread(void *arg)
{
	struct thread_arg *ta = arg;
	struct thread *th = &ta->th;
	int rc = lotus_session_open(ta->cl, &th->s);
	if (rc) {
		fprintf(stderr, "la-client: session: %s\n", lotus_strerror(rc));
		atomic_store(rc == LOTUS_EUNAVAIL ? &server_lost : &fatal, 1);
		return NULL;
	}
	th->x = calloc(O.inflight, sizeof(*th->x));
	for (unsigned i = 0; i < O.inflight; i++) {
		th->x[i].th = th;
		rc = lotus_txn_begin(th->s, &th->x[i].t);
		if (rc) {
			atomic_store(&fatal, 1);
			return NULL;
		}
	}
	for (unsigned i = 0; i < O.inflight; i++)
		if (x_begin(&th->x[i], 0))
			th->lost = 1;
	uint64_t drain_end = 0;
	for (;;) {
		uint64_t now = now_ns();
		if (!th->stop && (now >= ta->t_end || atomic_load(&server_lost) || atomic_load(&fatal)))
			th->stop = 1;
		if (th->lost)
			th->stop = 1;
		if (th->stop && !drain_end)
			drain_end = now + (uint64_t)(O.txn_timeout * 1e9) + 1000000000ull;
		x_check_hung(th, now);
		for (unsigned i = 0; i < O.inflight; i++) {
			struct xact *x = &th->x[i];
			if (x->state != X_BACKOFF || now < x->wake_ns)
				continue;
			if (th->stop || x_begin(x, 1))
				x->state = X_FREE;
		}
		if (th->stop && (th->active == 0 || now >= drain_end))
			break;
		lotus_session_poll(th->s, 1);
	}
	for (unsigned i = 0; i < O.inflight; i++) {
		struct xact *x = &th->x[i];
		if (x->state == X_EXEC) {
			x_log_op(x, "[\"hung\"]");
			x_write_ops(x, "unknown", LOTUS_ETIMEOUT);
		} else if (x->state == X_COMMIT) {
			x_write_end(x, "unknown", LOTUS_ETIMEOUT);
		}
		if (x->state == X_EXEC || x->state == X_COMMIT || x->state == X_ABORT)
			th->unknown++;
	}
	return NULL;
}

/* ---- the special modes: load the cold table, read everything once -------- */

static int run_load_cold(lotus_session_t *s)
{
	lotus_txn_t *t;
	int rc = lotus_txn_begin(s, &t);
	for (unsigned i = 0; rc == 0 && i < O.load_cold; i += 100) {
		for (int attempt = 0; attempt < 100; attempt++) {
			for (unsigned j = i; j < i + 100 && j < O.load_cold; j++) {
				char k[16];
				int n = snprintf(k, sizeof(k), "z%05u", j);
				lotus_txn_write(t, tb_cold, k, (size_t)n, "cold", 4);
			}
			rc = lotus_txn_commit(t);
			if (rc == 0 || !lotus_err_retryable(rc))
				break;
			lotus_txn_abort(t);
			lotus_txn_restart(t);
		}
		if (rc == 0)
			rc = lotus_txn_recycle(t);
	}
	if (rc == 0) {
		char line[64];
		int n = snprintf(line, sizeof(line), "{\"cold_loaded\":%u}\n", O.load_cold);
		log_line(line, (size_t)n);
	}
	return rc;
}

static int run_final(lotus_session_t *s)
{
	lotus_txn_t *t;
	int rc = lotus_txn_begin(s, &t);
	for (int attempt = 0; rc == 0 && attempt < 200; attempt++) {
		int lops[MAX_KEYS];
		for (unsigned k = 0; k < O.keys; k++) {
			char name[16];
			key_name(k, name);
			lops[k] = lotus_txn_read(t, tb_hot, name, strlen(name));
		}
		rc = lotus_txn_execute(t);
		if (rc == 0) {
			struct buf b = { 0 };
			struct list l = { 0 };
			buf_put(&b, "{\"id\":\"final\",\"final\":1,\"ops\":[");
			for (unsigned k = 0; k < O.keys; k++) {
				const void *v;
				size_t n;
				int r = lotus_txn_result(t, lops[k], &v, &n);
				buf_put(&b, "%s[\"r\",%u,", k ? "," : "", k);
				if (r == 0 && list_parse(&l, v, n) == 0 && l.n)
					json_list(&b, &l);
				else
					buf_put(&b, "null");
				buf_put(&b, "]");
			}
			rc = lotus_txn_commit(t);
			buf_put(&b, "],\"doomed\":0,\"end\":\"%s\",\"rc\":\"%s\"}\n",
				rc == 0 ? "ok" : "aborted", rc_name(rc));
			if (rc == 0)
				log_line(b.p, b.n);
			free(b.p);
			free(l.e);
		} else {
			lotus_txn_abort(t);
		}
		if (rc == 0 || !lotus_err_retryable(rc))
			break;
		lotus_txn_restart(t);
		usleep(10000);
	}
	return rc;
}

/* ---- options ------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: la-client --config FILE --log FILE [options]\n"
		"List-append workload for the serializability checker (docs/checker.md).\n"
		"  --config FILE        cluster config file (required)\n"
		"  --log FILE           JSON-lines history, appended to (required)\n"
		"  --client-id N        unique per process start (default 1); element ids use it\n"
		"  --compute-id N       compute server id (default 0)\n"
		"  --compute-count N    compute servers (default 1; co partitioning: keys owned)\n"
		"  --cc P               no_wait | wait_die | wound_wait (default wait_die)\n"
		"  --batch B            none | intra | inter (default intra)\n"
		"  --cache SIZE         record cache bytes, e.g. 1M (default 0)\n"
		"  --partitioning P     none | co (default none)\n"
		"  --threads T          threads, one session each (default 2)\n"
		"  --inflight K         transactions in flight per thread (default 2)\n"
		"  --keys N             hot keys (default 24, at most 256)\n"
		"  --max-ops N          operations per transaction, 1..N (default 20, at most 20)\n"
		"  --max-list N         delete a key instead of appending past N elements (default 40)\n"
		"  --seconds S          run time (default 5)\n"
		"  --txn-timeout S      abandon an attempt after S seconds as unknown (default 10)\n"
		"  --scan-prob P        share of scan ops (default 0.08)\n"
		"  --sticky P           share of transactions that stage an oversize value\n"
		"                       on purpose and must then fail to commit (default 0)\n"
		"  --ballast BYTES      insert records of BYTES into table laball (fill a server)\n"
		"  --ballast-prob P     share of transactions that insert ballast (default 0.5)\n"
		"  --value-max N        the largest value of tables la and laball (default\n"
		"                       16384 and 60000; a tiered server's 8 KiB pages want\n"
		"                       N below about 8000)\n"
		"  --cold N             rows in table lacold; 1 in 50 txns scans 3N/4 of them\n"
		"  --load-cold N        load N cold rows and exit\n"
		"  --final              read every hot key in one transaction, log it, exit\n"
		"  --ryw 0|1            1 (default): reads, inserts and scans may follow the\n"
		"                       attempt's own writes (read-your-writes is checked)\n"
		"  --seed N             random seed (default: time and client id)\n"
		"  --help               this text\n");
}

static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	uint64_t m = 1;
	if (*end == 'K' || *end == 'k') m = 1024, end++;
	else if (*end == 'M' || *end == 'm') m = 1024 * 1024, end++;
	else if (*end == 'G' || *end == 'g') m = 1024ull * 1024 * 1024, end++;
	if (*end || v < 0) {
		fprintf(stderr, "la-client: bad size '%s'\n", s);
		exit(2);
	}
	return (uint64_t)(v * (double)m);
}

static double parse_num(const char *opt, const char *s, double lo, double hi)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "la-client: %s: bad value '%s' (%g..%g)\n", opt, s, lo, hi);
		exit(2);
	}
	return v;
}

static void parse_args(int argc, char **argv)
{
	O = (struct opts){ .cc = LOTUS_WAIT_DIE, .batch = LOTUS_BATCH_INTRA, .client_id = 1,
			   .compute_count = 1, .threads = 2, .inflight = 2, .keys = 24,
			   .max_ops = 20, .max_list = 40, .seconds = 5, .txn_timeout = 10,
			   .scan_prob = -1, .ballast_prob = 0.5, .ryw = 1 };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help")) { usage(stdout); exit(0); }
		if (!strcmp(a, "--final")) { O.final = 1; continue; }
		if (!v) { fprintf(stderr, "la-client: %s needs a value (see --help)\n", a); exit(2); }
		i++;
		if (!strcmp(a, "--config")) O.config = v;
		else if (!strcmp(a, "--log")) O.log_path = v;
		else if (!strcmp(a, "--client-id")) O.client_id = (unsigned)parse_num(a, v, 0, 65535);
		else if (!strcmp(a, "--compute-id")) O.compute_id = (unsigned)parse_num(a, v, 0, 4095);
		else if (!strcmp(a, "--compute-count")) O.compute_count = (unsigned)parse_num(a, v, 1, 4096);
		else if (!strcmp(a, "--threads")) O.threads = (unsigned)parse_num(a, v, 1, 64);
		else if (!strcmp(a, "--inflight")) O.inflight = (unsigned)parse_num(a, v, 1, 64);
		else if (!strcmp(a, "--keys")) O.keys = (unsigned)parse_num(a, v, 1, MAX_KEYS);
		else if (!strcmp(a, "--max-ops")) O.max_ops = (unsigned)parse_num(a, v, 1, MAX_OPS);
		else if (!strcmp(a, "--max-list")) O.max_list = (unsigned)parse_num(a, v, 1, 500);
		else if (!strcmp(a, "--seconds")) O.seconds = parse_num(a, v, 0, 1e6);
		else if (!strcmp(a, "--txn-timeout")) O.txn_timeout = parse_num(a, v, 0.1, 3600);
		else if (!strcmp(a, "--scan-prob")) O.scan_prob = parse_num(a, v, 0, 0.5);
		else if (!strcmp(a, "--sticky")) O.sticky = parse_num(a, v, 0, 1);
		else if (!strcmp(a, "--ballast")) O.ballast = (unsigned)parse_num(a, v, 0, 60000);
		else if (!strcmp(a, "--value-max")) O.value_max = (unsigned)parse_num(a, v, 1024, HOT_MAX_VALUE);
		else if (!strcmp(a, "--ballast-prob")) O.ballast_prob = parse_num(a, v, 0, 1);
		else if (!strcmp(a, "--cold")) O.cold = (unsigned)parse_num(a, v, 0, 99999);
		else if (!strcmp(a, "--load-cold")) O.load_cold = (unsigned)parse_num(a, v, 1, 99999);
		else if (!strcmp(a, "--ryw")) O.ryw = (unsigned)parse_num(a, v, 0, 1);
		else if (!strcmp(a, "--seed")) O.seed = (uint64_t)parse_num(a, v, 0, 1e18);
		else if (!strcmp(a, "--cache")) O.cache = parse_size(v);
		else if (!strcmp(a, "--cc")) {
			if (!strcmp(v, "no_wait")) O.cc = LOTUS_NO_WAIT;
			else if (!strcmp(v, "wait_die")) O.cc = LOTUS_WAIT_DIE;
			else if (!strcmp(v, "wound_wait")) O.cc = LOTUS_WOUND_WAIT;
			else { fprintf(stderr, "la-client: --cc: unknown protocol '%s'\n", v); exit(2); }
		} else if (!strcmp(a, "--batch")) {
			if (!strcmp(v, "none")) O.batch = LOTUS_BATCH_NONE;
			else if (!strcmp(v, "intra")) O.batch = LOTUS_BATCH_INTRA;
			else if (!strcmp(v, "inter")) O.batch = LOTUS_BATCH_INTER;
			else { fprintf(stderr, "la-client: --batch: unknown mode '%s'\n", v); exit(2); }
		} else if (!strcmp(a, "--partitioning")) {
			if (!strcmp(v, "none")) O.part = LOTUS_PART_NONE;
			else if (!strcmp(v, "co")) O.part = LOTUS_PART_CO;
			else { fprintf(stderr, "la-client: --partitioning: unknown '%s'\n", v); exit(2); }
		} else {
			fprintf(stderr, "la-client: unknown option %s (see --help)\n", a);
			exit(2);
		}
	}
	if (!O.config || !O.log_path) {
		fprintf(stderr, "la-client: --config and --log are required (see --help)\n");
		exit(2);
	}
	if (O.compute_id >= O.compute_count) {
		fprintf(stderr, "la-client: --compute-id must be below --compute-count\n");
		exit(2);
	}
	if (O.scan_prob < 0)
		O.scan_prob = 0.08;
}

/* Co partitioning: this process touches only the keys it owns.  The owner of
 * a key is hash(key) % compute_count with lotus's routing hash, FNV-1a 64
 * (upper 32 bits); without co partitioning every key is ours. */
static void compute_owned(void)
{
	nowned = 0;
	for (unsigned k = 0; k < O.keys; k++) {
		char name[16];
		key_name(k, name);
		uint64_t h = 0xcbf29ce484222325ull;
		for (const char *p = name; *p; p++)
			h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
		if (O.part != LOTUS_PART_CO || (unsigned)((h >> 32) % O.compute_count) == O.compute_id)
			owned[nowned++] = k;
	}
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	compute_owned();
	if (!nowned) {
		fprintf(stderr, "la-client: compute id %u owns none of the %u keys\n", O.compute_id,
			O.keys);
		return 2;
	}
	log_fd = open(O.log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (log_fd < 0) {
		fprintf(stderr, "la-client: %s: %s\n", O.log_path, strerror(errno));
		return 2;
	}
	struct lotus_options lo;
	lotus_options_init(&lo);
	lo.config_path = O.config;
	lo.cc = O.cc;
	lo.batch = O.batch;
	lo.partitioning = O.part;
	lo.compute_id = O.compute_id;
	lo.compute_count = O.compute_count;
	lo.cache_bytes = O.cache;
	lotus_cluster_t *cl;
	int rc = lotus_connect(&lo, &cl);
	if (rc) {
		fprintf(stderr, "la-client: connect: %s\n", lotus_strerror(rc));
		return rc == LOTUS_EUNAVAIL ? 3 : 1;
	}
	lotus_session_t *s;
	rc = lotus_session_open(cl, &s);
	if (rc == 0)
		rc = lotus_table_create(s, "la", O.value_max ? O.value_max : HOT_MAX_VALUE, &tb_hot);
	if (rc == 0)
		rc = lotus_table_create(s, "laball", O.value_max ? O.value_max : 60000, &tb_ball);
	if (rc == 0)
		rc = lotus_table_create(s, "lacold", 64, &tb_cold);
	if (rc) {
		fprintf(stderr, "la-client: setup: %s\n", lotus_strerror(rc));
		return rc == LOTUS_EUNAVAIL ? 3 : 1;
	}
	if (O.load_cold || O.final) {
		rc = O.load_cold ? run_load_cold(s) : run_final(s);
		if (rc)
			fprintf(stderr, "la-client: %s: %s\n", O.load_cold ? "load" : "final read",
				lotus_strerror(rc));
		lotus_session_close(s);
		lotus_disconnect(cl);
		return rc == 0 ? 0 : rc == LOTUS_EUNAVAIL ? 3 : 1;
	}
	lotus_session_close(s);   /* the threads open their own */
	uint64_t seed = O.seed ? O.seed : (uint64_t)time(NULL) * 1000003u + O.client_id;
	struct thread_arg *ta = calloc(O.threads, sizeof(*ta));
	uint64_t t_end = now_ns() + (uint64_t)(O.seconds * 1e9);
	for (unsigned i = 0; i < O.threads; i++) {
		ta[i].th.idx = i;
		ta[i].th.rng = seed * 31 + i;
		ta[i].cl = cl;
		ta[i].t_end = t_end;
		if (pthread_create(&ta[i].th.tid, NULL, run_thread, &ta[i])) {
			fprintf(stderr, "la-client: cannot start a thread\n");
			return 1;
		}
	}
	unsigned long ok = 0, ab = 0, fa = 0, un = 0, hung_n = 0, late = 0;
	int hung = 0;
	for (unsigned i = 0; i < O.threads; i++) {
		pthread_join(ta[i].th.tid, NULL);
		ok += ta[i].th.ok, ab += ta[i].th.aborted, fa += ta[i].th.failed;
		un += ta[i].th.unknown;
		hung_n += ta[i].th.hung;
		late += ta[i].th.late;
		hung += ta[i].th.hung > 0 || ta[i].th.active > 0;
	}
	fprintf(stderr, "la-client %u: ok %lu aborted %lu failed %lu unknown %lu (abandoned after "
		"--txn-timeout %lu, answered later %lu)%s%s\n", O.client_id, ok, ab, fa, un, hung_n,
		late, atomic_load(&server_lost) ? " (server lost)" : "",
		hung ? " (transactions still unanswered)" : "");
	fsync(log_fd);
	if (atomic_load(&server_lost) || hung) {
		/* transactions may still belong to the library: leave without
		 * tearing the cluster down under them */
		_exit(atomic_load(&server_lost) ? 3 : 4);
	}
	for (unsigned i = 0; i < O.threads; i++) {
		for (unsigned j = 0; j < O.inflight; j++)
			lotus_txn_free(ta[i].th.x[j].t);
		lotus_session_close(ta[i].th.s);
	}
	lotus_disconnect(cl);
	return atomic_load(&fatal) ? 1 : 0;
}
