/*
 * ycsb.c - the YCSB driver.
 *
 * Keys are 8-byte big-endian record ids.  As in YCSB, "zipfian" requests
 * use the scrambled zipfian generator (popular keys spread over the key
 * space); --dist picks another.  Each transaction has ops_per_txn
 * operations on distinct keys, drawn by the workload's generator:
 *   A 50% read / 50% update      B 95% read / 5% update     C 100% read
 *   D 95% read / 5% insert (latest)   E 95% scan / 5% insert
 *   F 50% read / 50% read-modify-write
 * An update is a blind write of the whole record (X lock, value at commit);
 * read-modify-write reads under an X lock, then writes.
 *
 * Every compute thread keeps `inflight` transactions going at once as small
 * state machines driven by the library's callbacks:
 *
 *   new --stage, execute--> EXEC --ok--> [stage RMW writes] commit --> COMMIT
 *    ^                        \--conflict--> abort --> retry (same priority) --> EXEC
 *    +------------------------ committed <-- COMMIT (--fail--> retry)
 *
 * A retried transaction re-runs the same operations on the same keys, with
 * the same values and the priority of its first attempt: a thread's sequence
 * of transactions, and so (with one in flight and keys of its own) the table
 * it leaves, do not depend on which attempts aborted.  Latency runs from the first attempt to
 * the commit.  Only transactions that finish after the warm-up count.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench/ycsb.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"

#define LOAD_BATCH 64
#define MAX_OPS 128
#define CHECK_SAMPLES 64          /* keys --no-load reads to check the table */

_Static_assert(YCSB_MAX_SERVERS == LOTUS_MAX_SERVERS, "one server limit");

const char *const ycsb_srv_keys[YCSB_SRV_KEYS] = {
	"acquires", "waits", "wait_ns", "grants_after_wait", "rejects", "preemptions",
	"preempted_aborts", "hint_hits", "hint_stale", "bad_msgs",
	"parked_refused", "bytes_refused",   /* LOTUS_ELIMIT answers (docs/net.md) */
	"requests", "cpu_ns",
	/* tiered servers (memserver --capacity): misses and page writers */
	"misses", "miss_reads", "miss_read_ns", "evict_clean", "evict_dirty", "evict_errors",
	"pw_ios", "pw_pages", "pw_cpu_ns",
	/* misses that did not block (misses.c): preads, reads on the rings, parked */
	"miss_sync_reads", "miss_async_reads", "miss_parked", "miss_async_errors",
	"miss_depth_max",
};

static _Atomic int ycsb_stopping;

void ycsb_stop(void)
{
	atomic_store(&ycsb_stopping, 1);
}

enum gop_type { G_READ, G_UPDATE, G_INSERT, G_SCAN, G_RMW };

struct gop {
	uint8_t type;
	uint16_t scan_len;
	uint64_t key;
	uint64_t vseed;           /* update, insert: the value's seed, drawn with the
				     op, so a retry writes what the first attempt did
				     and the thread's draws do not follow its aborts */
	int idx;                  /* op index in the txn */
};

struct ycsb_shared {
	const struct ycsb_opts *o;
	lotus_cluster_t *cl;
	lotus_table_t table;
	_Atomic uint64_t insert_count;    /* ids below this exist */
	_Atomic uint64_t loaded;
	uint64_t t_start, t_warm, t_end;
	pthread_mutex_t trace_mu;
	FILE *trace;
	double mix[5];                    /* cumulative: read, update, insert, scan, rmw */
	enum key_dist dist;
	void *(*thread_fn)(void *);       /* what spawn_all's threads run */
	/* A thread's run ended in an error (a lost server, a failed commit): the
	 * others stop at once rather than each wait for its own timeout. */
	_Atomic int failed;
};

struct ycsb_thread;

struct slot {
	struct ycsb_thread *th;
	lotus_txn_t *t;
	struct gop ops[MAX_OPS];
	unsigned nops, attempts;
	uint64_t start_ns;
	int busy;
	int why;                  /* the error that made the current attempt abort */
};

struct ycsb_thread {
	struct ycsb_shared *sh;
	unsigned idx;
	pthread_t tid;
	lotus_session_t *s;
	struct rng rng;
	struct keygen gen;
	struct slot *slots;
	unsigned active;
	uint64_t started;             /* transactions begun (--txns) */
	int stop_issuing;
	struct ycsb_result res;
	struct lotus_net_counters net_warm;
	struct lotus_txn_counters eng_warm;
	uint64_t cpu_warm_ns, cpu_ns;  /* this thread's CPU time at the warm-up's end; over the run */
	unsigned char *value;
	char *trace_buf;
	size_t trace_len;
	int error;
};

void ycsb_opts_init(struct ycsb_opts *o)
{
	memset(o, 0, sizeof(*o));
	lotus_options_init(&o->lo);
	o->workload = 'A';
	o->records = 100000;
	o->record_size = 1024;
	o->zipf = 0.99;
	o->dist = -1;
	o->ops_per_txn = 16;
	o->threads = 0;
	o->inflight = 1;
	o->max_scan = 100;
	o->seconds = 10;
	o->warmup = 1;
	o->seed = 1;
}

static void set_mix(struct ycsb_shared *sh, char w)
{
	double r = 0, u = 0, i = 0, s = 0, m = 0;
	sh->dist = DIST_SCRAMBLED;  /* YCSB's requestdistribution=zipfian */
	switch (w) {
	case 'A': r = .5; u = .5; break;
	case 'B': r = .95; u = .05; break;
	case 'C': r = 1; break;
	case 'D': r = .95; i = .05; sh->dist = DIST_LATEST; break;
	case 'E': s = .95; i = .05; break;
	default:  r = .5; m = .5; break; /* F */
	}
	sh->mix[0] = r;
	sh->mix[1] = r + u;
	sh->mix[2] = r + u + i;
	sh->mix[3] = r + u + i + s;
	sh->mix[4] = r + u + i + s + m;
}

static void fill_value(unsigned char *v, uint32_t len, uint64_t key, uint64_t salt)
{
	uint64_t x = key * 0x9e3779b97f4a7c15ULL ^ salt;
	for (uint32_t i = 0; i < len; i += 8) {
		x ^= x >> 31;
		x *= 0xbf58476d1ce4e5b9ULL;
		memcpy(v + i, &x, MIN(8u, len - i));
	}
}

static void trace_key(struct ycsb_thread *th, uint64_t key)
{
	if (!th->sh->trace)
		return;
	if (th->trace_len > 60000) {
		pthread_mutex_lock(&th->sh->trace_mu);
		fwrite(th->trace_buf, 1, th->trace_len, th->sh->trace);
		pthread_mutex_unlock(&th->sh->trace_mu);
		th->trace_len = 0;
	}
	th->trace_len += (size_t)sprintf(th->trace_buf + th->trace_len, "%llu\n",
					 (unsigned long long)key);
}

/* ---- load ------------------------------------------------------------------ */

static int load_range(struct ycsb_thread *th, uint64_t from, uint64_t to)
{
	const struct ycsb_opts *o = th->sh->o;
	lotus_txn_t *t = NULL;
	int rc = lotus_txn_begin(th->s, &t);
	for (uint64_t k = from; rc == 0 && k < to && !atomic_load(&ycsb_stopping) &&
	     !atomic_load(&th->sh->failed);) {
		uint64_t end = MIN(to, k + LOAD_BATCH);
		unsigned char key[8];
		for (uint64_t i = k; i < end && rc >= 0; i++) {
			key_from_u64(i, key);
			fill_value(th->value, o->record_size, i, 0);
			rc = lotus_txn_insert(t, th->sh->table, key, 8, th->value, o->record_size);
		}
		if (rc >= 0)
			rc = lotus_txn_commit(t);
		if (rc == 0) {
			atomic_fetch_add(&th->sh->loaded, end - k);
			k = end;
			rc = lotus_txn_recycle(t);
		} else if (lotus_err_retryable(rc)) {
			rc = lotus_txn_restart(t);
		}
	}
	lotus_txn_free(t);
	return rc;
}

/* ---- transactions ---------------------------------------------------------- */

static void slot_start(struct slot *sl);
static void slot_fail(struct slot *sl, int rc);
static void on_exec(lotus_txn_t *t, int rc, void *arg);
static int txns_done(struct ycsb_thread *th);

static int key_taken(const struct slot *sl, unsigned n, uint64_t key)
{
	for (unsigned i = 0; i < n; i++)
		if (sl->ops[i].key == key && sl->ops[i].type != G_SCAN)
			return 1;
	return 0;
}

/* --engine dex: compute server c of n owns the ranges of LOTUS_DEX_BLOCK keys
 * whose index is c mod n, and sends only those keys to DEX (its clients send
 * each request to the key's owner).  Key k maps to the key at the same place
 * in the nearest owned range at or below it, folded into 0..records-1. */
static uint64_t dex_own_key(const struct ycsb_opts *o, uint64_t k)
{
	uint64_t n = o->lo.compute_count ? o->lo.compute_count : 1, c = o->lo.compute_id;
	uint64_t B = LOTUS_DEX_BLOCK, stride = B * n;
	uint64_t r = k / stride * stride + c * B + k % B;
	while (r >= o->records)
		r = r >= stride ? r - stride : c * B + (r - c * B) % (o->records - c * B);
	return r;
}

static uint64_t next_key(struct ycsb_thread *th)
{
	uint64_t k = keygen_next(&th->gen, &th->rng);
	if (th->sh->o->lo.engine == LOTUS_ENGINE_DEX || th->sh->o->owned_keys)
		k = dex_own_key(th->sh->o, k);
	trace_key(th, k);
	return k;
}

/* Draw the operations of a new transaction: distinct keys, the workload's mix. */
static void slot_generate(struct slot *sl)
{
	struct ycsb_thread *th = sl->th;
	struct ycsb_shared *sh = th->sh;
	unsigned n = sh->o->ops_per_txn;
	for (unsigned i = 0; i < n; i++) {
		struct gop *g = &sl->ops[i];
		double p = rng_double(&th->rng);
		g->type = p < sh->mix[0] ? G_READ : p < sh->mix[1] ? G_UPDATE
			  : p < sh->mix[2] ? G_INSERT : p < sh->mix[3] ? G_SCAN : G_RMW;
		if (g->type == G_INSERT) {
			g->key = atomic_fetch_add(&sh->insert_count, 1);
			g->vseed = rng_next(&th->rng);
			continue;
		}
		g->scan_len = (uint16_t)(1 + rng_below(&th->rng, sh->o->max_scan));
		unsigned tries = 0;
		do
			g->key = next_key(th);
		while (g->type != G_SCAN && key_taken(sl, i, g->key) && ++tries < 1000);
		if (g->type == G_UPDATE)
			g->vseed = rng_next(&th->rng);
	}
	sl->nops = n;
}

static int slot_stage(struct slot *sl)
{
	struct ycsb_thread *th = sl->th;
	const struct ycsb_opts *o = th->sh->o;
	lotus_table_t tb = th->sh->table;
	unsigned char key[8];
	int rc = 0;
	for (unsigned i = 0; i < sl->nops && rc >= 0; i++) {
		struct gop *g = &sl->ops[i];
		key_from_u64(g->key, key);
		switch (g->type) {
		case G_READ:
			rc = lotus_txn_read(sl->t, tb, key, 8);
			break;
		case G_RMW:
			rc = lotus_txn_read_for_update(sl->t, tb, key, 8);
			break;
		case G_SCAN:
			rc = lotus_txn_scan(sl->t, tb, key, 8, g->scan_len);
			break;
		case G_UPDATE:
		case G_INSERT:
			fill_value(th->value, o->record_size, g->key, g->vseed);
			rc = g->type == G_UPDATE
			     ? lotus_txn_write(sl->t, tb, key, 8, th->value, o->record_size)
			     : lotus_txn_insert(sl->t, tb, key, 8, th->value, o->record_size);
			break;
		}
		g->idx = rc;
	}
	return rc < 0 ? rc : 0;
}

static void slot_retry(struct slot *sl, int why)
{
	struct ycsb_thread *th = sl->th;
	uint64_t now = clock_now_ns();
	if (now >= th->sh->t_warm && now < th->sh->t_end) {
		th->res.aborted++;
		if (why == LOTUS_EABORTED)
			th->res.aborts_conflict++;
		else if (why == LOTUS_EPREEMPTED)
			th->res.aborts_preempted++;
		else
			th->res.aborts_other++;
	}
	sl->attempts++;
	int rc = lotus_txn_restart(sl->t);
	if (rc == 0)
		rc = slot_stage(sl);
	if (rc == 0)
		rc = lotus_txn_execute_async(sl->t, on_exec, sl);
	if (rc && lotus_err_retryable(rc)) {   /* refused at once (a failover): abort, retry */
		slot_fail(sl, rc);
		return;
	}
	if (rc) {
		log_error("cannot retry: %s", lotus_strerror(rc));
		th->error = rc;
		sl->busy = 0;
		th->active--;
	}
}

static void on_abort(lotus_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	slot_retry(sl, sl->why);
}

/* The connection to a memory server failed (EUNAVAIL), it stopped answering
 * (ETIMEOUT) or this process's lease with it expired (ELEASE): stop the run. */
static int server_lost(int rc)
{
	return rc == LOTUS_EUNAVAIL || rc == LOTUS_ETIMEOUT || rc == LOTUS_ELEASE ||
	       rc == LOTUS_EINDOUBT;
}

static void slot_fail(struct slot *sl, int rc)
{
	struct ycsb_thread *th = sl->th;
	if (!lotus_err_retryable(rc) && !server_lost(rc)) {
		log_error("transaction failed: %s", lotus_strerror(rc));
		th->error = rc;
	}
	if (server_lost(rc)) {
		th->error = LOTUS_EUNAVAIL;
		th->stop_issuing = 1;
	}
	sl->why = rc;
	if (lotus_txn_abort_async(sl->t, on_abort, sl) != 0)
		slot_retry(sl, rc);
}

static void on_commit(lotus_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	struct ycsb_thread *th = sl->th;
	if (rc && !lotus_err_retryable(rc)) {
		log_error("commit failed: %s", lotus_strerror(rc));
		th->error = server_lost(rc) ? LOTUS_EUNAVAIL : rc;
		th->stop_issuing |= server_lost(rc);
		sl->busy = 0;
		th->active--;
		return;
	}
	if (rc) {
		slot_retry(sl, rc);
		return;
	}
	uint64_t now = clock_now_ns();
	if (now >= th->sh->t_warm && now < th->sh->t_end) {
		th->res.committed++;
		th->res.ops += sl->nops;
		hist_record(&th->res.lat, now - sl->start_ns);
		if (sl->attempts + 1 > th->res.retries_max)
			th->res.retries_max = sl->attempts + 1;
	}
	sl->busy = 0;
	th->active--;
	if (!th->stop_issuing && now < th->sh->t_end && !txns_done(th))
		slot_start(sl);
}

/* --txns: this thread has begun all the transactions it should run. */
static int txns_done(struct ycsb_thread *th)
{
	return th->sh->o->txns && th->started >= th->sh->o->txns;
}

static void on_exec(lotus_txn_t *t, int rc, void *arg)
{
	struct slot *sl = arg;
	struct ycsb_thread *th = sl->th;
	if (rc) {
		slot_fail(sl, rc);
		return;
	}
	unsigned char key[8];
	for (unsigned i = 0; i < sl->nops; i++) {
		struct gop *g = &sl->ops[i];
		if (g->type != G_RMW)
			continue;
		const void *v;
		size_t vlen;
		if (lotus_txn_result(t, g->idx, &v, &vlen) != 0)
			continue;
		memcpy(th->value, v, MIN(vlen, (size_t)th->sh->o->record_size));
		th->value[0]++;
		key_from_u64(g->key, key);
		lotus_txn_write(t, th->sh->table, key, 8, th->value, vlen);
	}
	rc = lotus_txn_commit_async(t, on_commit, sl);
	if (rc)
		slot_fail(sl, rc);
}

static void slot_start(struct slot *sl)
{
	struct ycsb_thread *th = sl->th;
	int rc = lotus_txn_recycle(sl->t);
	th->started++;
	slot_generate(sl);
	sl->attempts = 0;
	sl->start_ns = clock_now_ns();
	if (rc == 0)
		rc = slot_stage(sl);
	if (rc == 0)
		rc = lotus_txn_execute_async(sl->t, on_exec, sl);
	if (rc && !lotus_err_retryable(rc)) {
		log_error("cannot start a transaction: %s", lotus_strerror(rc));
		th->error = rc;
		return;
	}
	sl->busy = 1;
	th->active++;
	if (rc)   /* refused at once (a failover): abort, retry */
		slot_fail(sl, rc);
}

/* a -= b, or a += b (sign -1 / 1) */
static void eng_add(struct lotus_attempt_counters *a, const struct lotus_attempt_counters *b,
		    int sign)
{
	a->attempts += (uint64_t)sign * b->attempts;
	a->round_trips += (uint64_t)sign * b->round_trips;
	a->ops += (uint64_t)sign * b->ops;
	a->bytes_sent += (uint64_t)sign * b->bytes_sent;
	a->bytes_recv += (uint64_t)sign * b->bytes_recv;
	for (unsigned i = 0; i < LOTUS_OP_TYPES; i++) {
		a->type[i].ops += (uint64_t)sign * b->type[i].ops;
		a->type[i].bytes_sent += (uint64_t)sign * b->type[i].bytes_sent;
		a->type[i].bytes_recv += (uint64_t)sign * b->type[i].bytes_recv;
	}
}

static void eng_sub(struct lotus_attempt_counters *a, const struct lotus_attempt_counters *b)
{
	eng_add(a, b, -1);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int run_txns(struct ycsb_thread *th)
{
	struct ycsb_shared *sh = th->sh;
	unsigned k = sh->o->inflight ? sh->o->inflight : 1;
	int warm_taken = 0, rc = 0;
	th->slots = calloc(k, sizeof(*th->slots));
	if (!th->slots)
		return -ENOMEM;
	for (unsigned i = 0; i < k && rc == 0; i++) {
		th->slots[i].th = th;
		rc = lotus_txn_begin(th->s, &th->slots[i].t);
	}
	if (rc == 0 && clock_now_ns() >= sh->t_warm) {  /* no warm-up: count from the first */
		lotus_session_counters(th->s, &th->net_warm);
		lotus_session_txn_counters(th->s, &th->eng_warm);   /* not the load's */
		th->cpu_warm_ns = thread_cpu_ns();
		warm_taken = 1;
	}
	for (unsigned i = 0; i < k && rc == 0 && !txns_done(th); i++)
		slot_start(&th->slots[i]);
	while (rc == 0 && !th->error && !atomic_load(&sh->failed)) {
		uint64_t now = clock_now_ns();
		if (!warm_taken && now >= sh->t_warm) {
			lotus_session_counters(th->s, &th->net_warm);
			lotus_session_txn_counters(th->s, &th->eng_warm);
			th->cpu_warm_ns = thread_cpu_ns();
			warm_taken = 1;
		}
		if (now >= sh->t_end || atomic_load(&ycsb_stopping) || txns_done(th))
			th->stop_issuing = 1;
		if (th->stop_issuing && (th->active == 0 || now > sh->t_end + 10000000000ULL))
			break;
		lotus_session_poll(th->s, 1);
		/* A lost server ends the run now, not when a transaction says so:
		 * a commit whose vote went with the server asks the others for up
		 * to timeout_ms, and with every slot in such a commit nothing else
		 * would end the run that long.  What is in flight is left to the
		 * library (in doubt: the servers settle it). */
		if (lotus_session_lost(th->s, NULL))
			th->error = LOTUS_EUNAVAIL;
	}
	if (rc || th->error)
		atomic_store(&sh->failed, 1);
	lotus_session_counters(th->s, &th->res.net);
	th->cpu_ns = warm_taken ? thread_cpu_ns() - th->cpu_warm_ns : 0;
	th->res.net.msgs_sent -= th->net_warm.msgs_sent;
	th->res.net.bytes_sent -= th->net_warm.bytes_sent;
	th->res.net.msgs_recv -= th->net_warm.msgs_recv;
	th->res.net.bytes_recv -= th->net_warm.bytes_recv;
	th->res.net.reqs_sent -= th->net_warm.reqs_sent;
	th->res.net.local_hits -= th->net_warm.local_hits;
	lotus_session_txn_counters(th->s, &th->res.eng);
	eng_sub(&th->res.eng.committed, &th->eng_warm.committed);
	eng_sub(&th->res.eng.aborted, &th->eng_warm.aborted);
	for (unsigned i = 0; i < k; i++)
		if (th->slots[i].t && !th->slots[i].busy)
			lotus_txn_free(th->slots[i].t);
	free(th->slots);
	return rc ? rc : th->error;
}

/* ---- threads --------------------------------------------------------------- */

static void *load_main(void *arg)
{
	struct ycsb_thread *th = arg;
	const struct ycsb_opts *o = th->sh->o;
	unsigned n = o->threads;
	uint64_t per = (o->records + n - 1) / n;
	uint64_t from = th->idx * per, to = MIN(o->records, from + per);
	if (from < to)
		th->error = load_range(th, from, to);
	if (th->error)
		atomic_store(&th->sh->failed, 1);
	return NULL;
}

static void *run_main(void *arg)
{
	struct ycsb_thread *th = arg;
	th->error = run_txns(th);
	return NULL;
}

static _Atomic unsigned threads_done;

/* The memory servers' counters at the start of the measured run, taken by the
 * main thread on its own session while the run threads work. */
struct srv_snap {
	lotus_session_t *s;
	unsigned nservers;
	bool taken;
	uint64_t v[YCSB_MAX_SERVERS][YCSB_SRV_KEYS];
	bool ok[YCSB_MAX_SERVERS];
};

static uint64_t json_u64(const char *text, const char *key, bool *found);

static void srv_read(lotus_session_t *s, unsigned nservers,
		     uint64_t v[][YCSB_SRV_KEYS], bool *ok)
{
	for (unsigned sv = 0; sv < nservers && sv < YCSB_MAX_SERVERS; sv++) {
		const char *txt = lotus_server_stats(s, sv);
		ok[sv] = txt != NULL;
		for (unsigned k = 0; k < YCSB_SRV_KEYS; k++)
			v[sv][k] = json_u64(txt, ycsb_srv_keys[k], NULL);
	}
}

static void *spawn_trampoline(void *p)
{
	struct ycsb_thread *th = p;
	th->sh->thread_fn(th);
	atomic_fetch_add(&threads_done, 1);
	return NULL;
}

static int spawn_all(struct ycsb_thread *ths, unsigned n, void *(*fn)(void *), int progress,
		     struct ycsb_shared *sh, struct srv_snap *snap)
{
	unsigned started = 0;
	atomic_store(&threads_done, 0);
	sh->thread_fn = fn;
	if (snap && clock_now_ns() >= sh->t_warm) {   /* no warm-up: before any txn */
		srv_read(snap->s, snap->nservers, snap->v, snap->ok);
		snap->taken = true;
	}
	for (; started < n; started++)
		if (pthread_create(&ths[started].tid, NULL, spawn_trampoline, &ths[started]))
			break;
	uint64_t last = clock_now_ns();
	while ((progress || snap) && atomic_load(&threads_done) < started &&
	       !atomic_load(&ycsb_stopping)) {
		usleep(snap ? 10000 : 50000);
		if (snap && !snap->taken && clock_now_ns() >= sh->t_warm) {
			srv_read(snap->s, snap->nservers, snap->v, snap->ok);
			snap->taken = true;
		}
		if (progress && clock_now_ns() - last >= 1000000000ULL && !sh->o->quiet) {
			last = clock_now_ns();
			uint64_t l = atomic_load(&sh->loaded);
			fprintf(stderr, "ycsb: loading %llu/%llu records (%.0f%%)\n",
				(unsigned long long)l, (unsigned long long)sh->o->records,
				100.0 * (double)l / (double)sh->o->records);
		}
	}
	for (unsigned i = 0; i < started; i++)
		pthread_join(ths[i].tid, NULL);
	if (snap && !snap->taken) {   /* stopped before the warm-up ended */
		srv_read(snap->s, snap->nservers, snap->v, snap->ok);
		snap->taken = true;
	}
	return started == n ? 0 : -EAGAIN;
}

static void srv_delta(lotus_session_t *s, const struct srv_snap *before, struct ycsb_result *res);

/* --no-load: the table must hold what --records and --record-size say, or the
 * run would measure misses and report them as success.  Reads CHECK_SAMPLES
 * keys spread over 0..records-1 (both ends included).  0, or LOTUS_ENOTFOUND
 * with res->message naming the problem. */
static int check_loaded(struct ycsb_shared *sh, lotus_session_t *s, struct ycsb_result *res)
{
	const struct ycsb_opts *o = sh->o;
	unsigned n = (unsigned)MIN((uint64_t)CHECK_SAMPLES, o->records), missing = 0, badlen = 0;
	uint64_t first_missing = 0;
	size_t seen_len = 0;
	lotus_txn_t *t;
	int rc = lotus_txn_begin(s, &t);
	for (int attempt = 0; rc == 0 && attempt < 100; attempt++) {
		unsigned char k[8];
		missing = badlen = 0;
		for (unsigned i = 0; i < n; i++) {
			key_from_u64(n > 1 ? i * (o->records - 1) / (n - 1) : 0, k);
			lotus_txn_read(t, sh->table, k, 8);
		}
		rc = lotus_txn_execute(t);
		for (unsigned i = 0; rc == 0 && i < n; i++) {
			const void *v;
			size_t vlen;
			uint64_t id = n > 1 ? i * (o->records - 1) / (n - 1) : 0;
			if (lotus_txn_result(t, (int)i, &v, &vlen) != 0) {
				if (!missing++)
					first_missing = id;
			} else if (vlen != o->record_size) {
				badlen++;
				seen_len = vlen;
			}
		}
		if (rc == 0)
			rc = lotus_txn_commit(t);
		else
			lotus_txn_abort(t);
		if (!lotus_err_retryable(rc))
			break;
		rc = lotus_txn_restart(t);
	}
	lotus_txn_free(t);
	if (rc)
		return rc;
	if (missing == n)
		snprintf(res->message, sizeof(res->message), "--no-load: the table usertable is "
			 "empty (none of %u sampled keys of 0..%llu exists): load it first (run without "
			 "--no-load)", n, (unsigned long long)o->records - 1);
	else if (missing)
		snprintf(res->message, sizeof(res->message), "--no-load: the table usertable holds "
			 "fewer records than --records %llu (record %llu and %u of %u sampled keys are "
			 "missing): give the --records it was loaded with, or load it again",
			 (unsigned long long)o->records, (unsigned long long)first_missing, missing, n);
	else if (badlen)
		snprintf(res->message, sizeof(res->message), "--no-load: the table's records are "
			 "%zu B, not --record-size %u: give the --record-size it was loaded with",
			 seen_len, o->record_size);
	return res->message[0] ? LOTUS_ENOTFOUND : 0;
}

/* --digest: read the whole table in key order (after the run, with the
 * co-partitioned cache's dirty records written back) and hash it, so two runs
 * can be compared for the same final table. */
static int table_digest(struct ycsb_shared *sh, lotus_session_t *s, struct ycsb_result *res)
{
	lotus_txn_t *t;
	uint64_t h = 0xcbf29ce484222325ULL, next = 0, rows = 0;
	uint64_t end = atomic_load(&sh->insert_count);
	int rc = lotus_txn_begin(s, &t);
	while (rc == 0 && next < end) {
		unsigned char k[8];
		unsigned n = (unsigned)MIN(256, end - next);
		lotus_txn_recycle(t);
		for (unsigned i = 0; i < n; i++) {
			key_from_u64(next + i, k);
			lotus_txn_read(t, sh->table, k, 8);
		}
		rc = lotus_txn_execute(t);
		for (unsigned i = 0; rc == 0 && i < n; i++) {
			const void *v;
			size_t vlen;
			int r = lotus_txn_result(t, (int)i, &v, &vlen);
			if (r == LOTUS_ENOTFOUND)
				continue;
			if (r) {   /* an I/O error is not a missing row: no digest */
				rc = r;
				break;
			}
			key_from_u64(next + i, k);
			h = (h ^ fnv1a64(k, 8)) * 0x100000001b3ULL;
			h = (h ^ fnv1a64(v, vlen)) * 0x100000001b3ULL;
			rows++;
		}
		if (rc == 0)
			rc = lotus_txn_commit(t);
		else
			lotus_txn_abort(t);
		if (lotus_err_retryable(rc)) {
			rc = 0;
			continue;
		}
		next += n;
	}
	lotus_txn_free(t);
	res->digest = h;
	res->digest_rows = rows;
	return rc;
}

static int threads_setup(struct ycsb_shared *sh, struct ycsb_thread *ths, unsigned n)
{
	const struct ycsb_opts *o = sh->o;
	for (unsigned i = 0; i < n; i++) {
		struct ycsb_thread *th = &ths[i];
		th->sh = sh;
		th->idx = i;
		rng_seed(&th->rng, o->seed * 1000003 + i);
		hist_init(&th->res.lat);
		th->value = calloc(1, o->record_size + 8);
		th->trace_buf = sh->trace ? malloc(65536) : NULL;
		if (!th->value || (sh->trace && !th->trace_buf))
			return -ENOMEM;
		keygen_init(&th->gen, sh->dist, o->records, o->zipf, &sh->insert_count);
		if (i > 0)
			th->gen.z = ths[0].gen.z; /* zeta is costly: compute it once */
		int rc = lotus_session_open(sh->cl, &th->s);
		if (rc)
			return rc;
	}
	return 0;
}

static void threads_teardown(struct ycsb_shared *sh, struct ycsb_thread *ths, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (sh->trace && ths[i].trace_len)
			fwrite(ths[i].trace_buf, 1, ths[i].trace_len, sh->trace);
		lotus_session_close(ths[i].s);
		free(ths[i].value);
		free(ths[i].trace_buf);
	}
}

static void merge_results(struct ycsb_result *res, struct ycsb_thread *ths, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		struct ycsb_result *r = &ths[i].res;
		res->committed += r->committed;
		res->aborted += r->aborted;
		res->ops += r->ops;
		res->aborts_conflict += r->aborts_conflict;
		res->aborts_preempted += r->aborts_preempted;
		res->aborts_other += r->aborts_other;
		res->net.msgs_sent += r->net.msgs_sent;
		res->net.bytes_sent += r->net.bytes_sent;
		res->net.msgs_recv += r->net.msgs_recv;
		res->net.bytes_recv += r->net.bytes_recv;
		res->net.reqs_sent += r->net.reqs_sent;
		res->net.hint_stale += r->net.hint_stale;
		res->net.local_hits += r->net.local_hits;
		eng_add(&res->eng.committed, &r->eng.committed, 1);
		eng_add(&res->eng.aborted, &r->eng.aborted, 1);
		if (!res->eng.engine) {  /* names: every session of a run has the same */
			res->eng.engine = r->eng.engine;
			res->eng.ntypes = r->eng.ntypes;
			memcpy(res->eng.type_names, r->eng.type_names, sizeof(res->eng.type_names));
		}
		res->client_cpu_ns += ths[i].cpu_ns;
		res->client_reqs += r->net.reqs_sent;
		res->retries_max = MAX(res->retries_max, r->retries_max);
		hist_merge(&res->lat, &r->lat);
		if (ths[i].error && !res->error)
			res->error = ths[i].error;
	}
}

static int ycsb_phases(struct ycsb_shared *sh, struct ycsb_thread *ths, unsigned n,
		       lotus_session_t *main_s, struct ycsb_result *res)
{
	const struct ycsb_opts *o = sh->o;
	int rc = lotus_table_create(ths[0].s, "usertable", o->record_size, &sh->table);
	if (rc == LOTUS_EEXISTS) {
		/* It exists with another record size: say which. */
		lotus_table_t tb;
		uint32_t have = lotus_table_open(ths[0].s, "usertable", &tb) == 0
				? lotus_table_max_value(ths[0].s, tb) : 0;
		if (have)
			snprintf(res->message, sizeof(res->message), "the table usertable holds "
				 "records of %u B, not --record-size %u: give the --record-size it was "
				 "loaded with%s", have, o->record_size,
				 o->no_load ? "" : ", or load a fresh cluster");
	}
	if (rc) {
		if (!res->message[0])
			snprintf(res->message, sizeof(res->message), "cannot create the table "
				 "usertable: %s", lotus_strerror(rc));
		return rc;
	}
	if (!o->no_load) {
		uint64_t t0 = clock_now_ns();
		spawn_all(ths, n, load_main, 1, sh, NULL);
		for (unsigned i = 0; i < n; i++)
			if (ths[i].error)
				return ths[i].error;
		res->load_seconds = (double)(clock_now_ns() - t0) / 1e9;
		if (atomic_load(&ycsb_stopping)) {
			snprintf(res->message, sizeof(res->message), "interrupted while loading: "
				 "%llu of %llu records loaded", (unsigned long long)atomic_load(&sh->loaded),
				 (unsigned long long)o->records);
			return -EINTR;
		}
		if (!o->quiet)
			fprintf(stderr, "ycsb: loaded %llu records in %.1f s\n",
				(unsigned long long)atomic_load(&sh->loaded), res->load_seconds);
	} else if ((rc = check_loaded(sh, ths[0].s, res)) != 0) {
		if (!res->message[0])
			snprintf(res->message, sizeof(res->message), "--no-load: cannot read the "
				 "table: %s", lotus_strerror(rc));
		return rc;
	}
	res->loaded = atomic_load(&sh->loaded);
	res->servers = lotus_cluster_servers(sh->cl);
	sh->t_start = clock_now_ns();
	sh->t_warm = sh->t_start + (uint64_t)(o->txns ? 0 : o->warmup * 1e9);
	sh->t_end = o->txns ? UINT64_MAX / 2 : sh->t_warm + (uint64_t)(o->seconds * 1e9);
	if (!o->no_run) {
		struct srv_snap snap = { .s = main_s, .nservers = res->servers };
		if (!o->quiet && o->txns)
			fprintf(stderr, "ycsb: running workload %c, %llu transactions per thread\n",
				o->workload, (unsigned long long)o->txns);
		else if (!o->quiet)
			fprintf(stderr, "ycsb: running workload %c for %g s (+%g s warm-up)\n",
				o->workload, o->seconds, o->warmup);
		spawn_all(ths, n, run_main, 0, sh, &snap);
		uint64_t end = MIN(clock_now_ns(), sh->t_end);
		res->seconds = end > sh->t_warm ? (double)(end - sh->t_warm) / 1e9 : 0;
		merge_results(res, ths, n);
		/* after a failed run a server may be the lost one: asking it for
		 * its counters would only wait out another timeout */
		if (!atomic_load(&sh->failed))
			srv_delta(main_s, &snap, res);
	}
	lotus_cluster_cache_counters(sh->cl, &res->cache);
	if (o->digest && !res->error)
		return table_digest(sh, ths[0].s, res);
	return res->error == LOTUS_EUNAVAIL ? res->error : 0;
}

int ycsb_run(const struct ycsb_opts *o, struct ycsb_result *res)
{
	struct ycsb_shared sh = { .o = o };
	struct ycsb_thread *ths = NULL;
	unsigned n = o->threads ? o->threads : (unsigned)cpu_count();
	struct ycsb_opts oo = *o;
	int rc;

	memset(res, 0, sizeof(*res));
	hist_init(&res->lat);
	if ((o->lo.engine == LOTUS_ENGINE_DEX || o->owned_keys) &&
	    o->records <= (uint64_t)o->lo.compute_id * LOTUS_DEX_BLOCK) {
		snprintf(res->message, sizeof(res->message), "--engine dex / --owned-keys: compute server %u owns "
			 "no key below --records %llu (it owns ranges of %u keys, the first at %llu)",
			 o->lo.compute_id, (unsigned long long)o->records, (unsigned)LOTUS_DEX_BLOCK,
			 (unsigned long long)o->lo.compute_id * LOTUS_DEX_BLOCK);
		return LOTUS_ECONFIG;
	}
	oo.threads = n;
	sh.o = &oo;
	atomic_store(&ycsb_stopping, 0);
	atomic_store(&sh.insert_count, o->records);
	pthread_mutex_init(&sh.trace_mu, NULL);
	set_mix(&sh, o->workload);
	if (o->dist >= 0)
		sh.dist = (enum key_dist)o->dist;
	if (o->trace_keys && !(sh.trace = fopen(o->trace_keys, "w"))) {
		log_error("cannot write %s: %s", o->trace_keys, strerror(errno));
		return -errno;
	}
	rc = lotus_connect(&o->lo, &sh.cl);
	if (rc)
		goto out;
	ths = calloc(n, sizeof(*ths));
	rc = ths ? threads_setup(&sh, ths, n) : -ENOMEM;
	lotus_session_t *main_s = NULL;   /* the main thread's own, for server stats */
	if (rc == 0)
		rc = lotus_session_open(sh.cl, &main_s);
	if (rc == 0)
		rc = ycsb_phases(&sh, ths, n, main_s, res);
	lotus_session_close(main_s);
	if (ths)
		threads_teardown(&sh, ths, n);
	free(ths);
	lotus_disconnect(sh.cl);
out:
	if (sh.trace)
		fclose(sh.trace);
	pthread_mutex_destroy(&sh.trace_mu);
	return rc;
}

/* ---- reporting ------------------------------------------------------------- */

static uint64_t json_u64(const char *text, const char *key, bool *found)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = text ? strstr(text, pat) : NULL;
	if (found)
		*found = p != NULL;
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

/* res->srv = the counters now minus those of before; cc_stats = their sums. */
static void srv_delta(lotus_session_t *s, const struct srv_snap *before, struct ycsb_result *res)
{
	uint64_t sum[YCSB_SRV_KEYS] = { 0 };
	unsigned nsv = MIN(before->nservers, (unsigned)YCSB_MAX_SERVERS);
	srv_read(s, nsv, res->srv, res->srv_ok);
	res->srv_cpu_ok = nsv > 0;
	for (unsigned sv = 0; sv < nsv; sv++) {
		res->srv_ok[sv] = res->srv_ok[sv] && before->ok[sv];
		/* a server too old to report its CPU time says 0 */
		if (!res->srv_ok[sv] || !res->srv[sv][YCSB_SRV_CPU])
			res->srv_cpu_ok = false;
		for (unsigned k = 0; k < YCSB_SRV_KEYS; k++) {
			uint64_t a = res->srv[sv][k], b = k == YCSB_SRV_DEPTH ? 0 : before->v[sv][k];
			res->srv[sv][k] = res->srv_ok[sv] && a >= b ? a - b : 0;
			sum[k] += res->srv[sv][k];
		}
	}
	res->srv_reqs = sum[YCSB_SRV_REQS];
	res->srv_cpu_ns = sum[YCSB_SRV_CPU];
	char *out = res->cc_stats;
	size_t len = sizeof(res->cc_stats);
	size_t n = (size_t)snprintf(out, len, "{");
	for (unsigned k = 0; k < YCSB_SRV_CC_KEYS && n < len; k++)
		n += (size_t)snprintf(out + n, len - n, "%s\"%s\":%llu", k ? "," : "",
				      ycsb_srv_keys[k], (unsigned long long)sum[k]);
	if (n < len)
		snprintf(out + n, len - n, "}");
}

/* The tiered servers' counters over the run, summed over the servers:
 * t[i] = ycsb_srv_keys[YCSB_SRV_TIER + i] (the depth: the highest of the
 * servers).  0 if no server is tiered. */
static int tier_sums(const struct ycsb_result *r, uint64_t t[YCSB_SRV_TIER_N])
{
	uint64_t any = 0;
	const unsigned depth = YCSB_SRV_DEPTH - YCSB_SRV_TIER;
	memset(t, 0, YCSB_SRV_TIER_N * sizeof(*t));
	for (unsigned sv = 0; sv < YCSB_MAX_SERVERS; sv++)
		for (unsigned i = 0; r->srv_ok[sv] && i < YCSB_SRV_TIER_N; i++)
			t[i] = i == depth ? MAX(t[i], r->srv[sv][YCSB_SRV_TIER + i])
				 : t[i] + r->srv[sv][YCSB_SRV_TIER + i];
	for (unsigned i = 0; i < YCSB_SRV_TIER_N; i++)
		any |= t[i];
	return any != 0;
}

static const char *cc_name(enum lotus_cc cc)
{
	return cc == LOTUS_WAIT_DIE ? "wait_die" : cc == LOTUS_WOUND_WAIT ? "wound_wait" : "no_wait";
}

static const char *engine_name(enum lotus_engine e)
{
	return e == LOTUS_ENGINE_ONESIDED ? "onesided" : e == LOTUS_ENGINE_DEX ? "dex" : "twosided";
}

static const char *batch_name(enum lotus_batch b)
{
	return b == LOTUS_BATCH_NONE ? "none" : b == LOTUS_BATCH_INTER ? "inter" : "intra";
}

/* The memory servers' counters over the run: one row per server, and a total. */
static void print_srv_table(FILE *f, const struct ycsb_result *r)
{
	static const char *const head[YCSB_SRV_CC_KEYS] = {
		"acquires", "waits", "wait ms", "granted", "rejects", "preempts", "pre-abort",
		"hint hit", "stale", "bad msgs", "park lim", "byte lim",
	};
	uint64_t sum[YCSB_SRV_CC_KEYS] = { 0 };
	unsigned nsv = MIN(r->servers, (unsigned)YCSB_MAX_SERVERS);
	fprintf(f, "  %-12s over the run (all clients), per memory server:\n", "servers");
	fprintf(f, "  %12s", "server");
	for (unsigned k = 0; k < YCSB_SRV_CC_KEYS; k++)
		fprintf(f, " %9s", head[k]);
	fprintf(f, "\n");
	for (unsigned sv = 0; sv <= nsv; sv++) {
		const uint64_t *v = sv < nsv ? r->srv[sv] : sum;
		if (sv < nsv && !r->srv_ok[sv]) {
			fprintf(f, "  %12u %9s\n", sv, "(no stats)");
			continue;
		}
		if (sv < nsv)
			fprintf(f, "  %12u", sv);
		else if (nsv > 1)
			fprintf(f, "  %12s", "total");
		else
			break;
		for (unsigned k = 0; k < YCSB_SRV_CC_KEYS; k++) {
			if (sv < nsv)
				sum[k] += v[k];
			if (!strcmp(ycsb_srv_keys[k], "wait_ns"))
				fprintf(f, " %9.1f", (double)v[k] / 1e6);
			else
				fprintf(f, " %9llu", (unsigned long long)v[k]);
		}
		fprintf(f, "\n");
	}
}

/* --no-run: what was loaded (and the digest), no run table. */
static void print_no_run(FILE *f, const struct ycsb_opts *o, const struct ycsb_result *r,
			 bool json)
{
	if (json) {
		fprintf(f, "{\"records\":%llu,\"record_size\":%u,\"loaded\":%llu,"
			"\"load_seconds\":%.3f,\"servers\":%u,\"no_run\":true",
			(unsigned long long)o->records, o->record_size, (unsigned long long)r->loaded,
			r->load_seconds, r->servers);
		if (o->digest)
			fprintf(f, ",\"digest\":\"%016llx\",\"digest_rows\":%llu",
				(unsigned long long)r->digest, (unsigned long long)r->digest_rows);
		fprintf(f, "}\n");
		return;
	}
	if (o->no_load)
		fprintf(f, "lotus ycsb: table of %llu records of %u B on %u servers checked (--no-load --no-run)\n",
			(unsigned long long)o->records, o->record_size, r->servers);
	else
		fprintf(f, "lotus ycsb: loaded %llu records of %u B on %u servers in %.1f s (--no-run)\n",
			(unsigned long long)r->loaded, o->record_size, r->servers, r->load_seconds);
	if (o->digest)
		fprintf(f, "  %-12s %016llx over %llu rows\n", "digest", (unsigned long long)r->digest,
			(unsigned long long)r->digest_rows);
}

static double per(uint64_t x, uint64_t n)
{
	return n ? (double)x / (double)n : 0;
}

/* "by_type":{"read":{"ops":..,"bytes_sent":..,"bytes_recv":..},...} per attempt */
static void json_by_type(FILE *f, const struct lotus_txn_counters *e,
			 const struct lotus_attempt_counters *a, const char *suffix)
{
	fprintf(f, "\"by_type\":{");
	for (unsigned i = 0; i < e->ntypes && i < LOTUS_OP_TYPES; i++)
		fprintf(f, "%s\"%s\":{\"ops%s\":%.3f,\"bytes_sent%s\":%.1f,\"bytes_recv%s\":%.1f}",
			i ? "," : "", e->type_names[i], suffix, per(a->type[i].ops, a->attempts),
			suffix, per(a->type[i].bytes_sent, a->attempts),
			suffix, per(a->type[i].bytes_recv, a->attempts));
	fprintf(f, "}");
}

/* The engine's counts, inside "net": per committed transaction (its own
 * attempt), per aborted attempt, and everything per committed transaction. */
static void json_engine(FILE *f, const struct ycsb_result *r)
{
	const struct lotus_txn_counters *e = &r->eng;
	const struct lotus_attempt_counters *c = &e->committed, *a = &e->aborted;
	uint64_t n = c->attempts;
	fprintf(f, ",\"engine\":\"%s\",\"round_trips_per_txn\":%.3f,\"ops_per_txn\":%.3f,"
		"\"bytes_sent_per_txn\":%.1f,\"bytes_recv_per_txn\":%.1f,",
		e->engine ? e->engine : "", per(c->round_trips, n), per(c->ops, n),
		per(c->bytes_sent, n), per(c->bytes_recv, n));
	json_by_type(f, e, c, "_per_txn");
	fprintf(f, ",\"committed\":{\"attempts\":%llu,\"round_trips\":%llu,\"ops\":%llu,"
		"\"bytes_sent\":%llu,\"bytes_recv\":%llu}",
		(unsigned long long)n, (unsigned long long)c->round_trips,
		(unsigned long long)c->ops, (unsigned long long)c->bytes_sent,
		(unsigned long long)c->bytes_recv);
	fprintf(f, ",\"aborted\":{\"attempts\":%llu,\"round_trips\":%llu,\"ops\":%llu,"
		"\"bytes_sent\":%llu,\"bytes_recv\":%llu,\"round_trips_per_attempt\":%.3f,"
		"\"ops_per_attempt\":%.3f,\"bytes_sent_per_attempt\":%.1f,"
		"\"bytes_recv_per_attempt\":%.1f,",
		(unsigned long long)a->attempts, (unsigned long long)a->round_trips,
		(unsigned long long)a->ops, (unsigned long long)a->bytes_sent,
		(unsigned long long)a->bytes_recv, per(a->round_trips, a->attempts),
		per(a->ops, a->attempts), per(a->bytes_sent, a->attempts),
		per(a->bytes_recv, a->attempts));
	json_by_type(f, e, a, "_per_attempt");
	fprintf(f, "},\"all_per_committed_txn\":{\"round_trips\":%.3f,\"ops\":%.3f,"
		"\"bytes_sent\":%.1f,\"bytes_recv\":%.1f}",
		per(c->round_trips + a->round_trips, n), per(c->ops + a->ops, n),
		per(c->bytes_sent + a->bytes_sent, n), per(c->bytes_recv + a->bytes_recv, n));
}

/* The same for people: three lines and the types of a committed one. */
static void print_engine(FILE *f, const struct ycsb_result *r)
{
	const struct lotus_txn_counters *e = &r->eng;
	const struct lotus_attempt_counters *c = &e->committed, *a = &e->aborted;
	uint64_t n = c->attempts;
	fprintf(f, "  %-12s %.2f round trips  %.2f ops  %.0f B sent  %.0f B received"
		"   (%s engine, %llu committed)\n", "per txn", per(c->round_trips, n), per(c->ops, n),
		per(c->bytes_sent, n), per(c->bytes_recv, n), e->engine ? e->engine : "?",
		(unsigned long long)n);
	fprintf(f, "  %-12s", "  by type");
	for (unsigned i = 0, k = 0; i < e->ntypes && i < LOTUS_OP_TYPES; i++) {
		if (!c->type[i].ops)
			continue;
		fprintf(f, "%s %s %.2f ops %.0f/%.0f B", k++ ? "," : "", e->type_names[i],
			per(c->type[i].ops, n), per(c->type[i].bytes_sent, n),
			per(c->type[i].bytes_recv, n));
	}
	fprintf(f, "\n");
	fprintf(f, "  %-12s %.2f round trips  %.2f ops  %.0f B sent  %.0f B received"
		"   (each of %llu aborted attempts)\n", "per abort", per(a->round_trips, a->attempts),
		per(a->ops, a->attempts), per(a->bytes_sent, a->attempts),
		per(a->bytes_recv, a->attempts), (unsigned long long)a->attempts);
}

void ycsb_print(FILE *f, const struct ycsb_opts *o, const struct ycsb_result *r, bool json,
		const char *transport, unsigned servers_unused)
{
	if (o->no_run) {
		print_no_run(f, o, r, json);
		return;
	}
	unsigned servers = r->servers;
	double secs = r->seconds > 0 ? r->seconds : 1;
	double c = r->committed ? (double)r->committed : 1;
	double attempts = (double)(r->committed + r->aborted);
	double abort_rate = attempts > 0 ? (double)r->aborted / attempts : 0;
	double us = 1e-3;
	double reqs_per_msg = r->net.msgs_sent ? (double)r->net.reqs_sent / (double)r->net.msgs_sent : 0;
	unsigned threads = o->threads ? o->threads : (unsigned)cpu_count();
	uint64_t lookups = r->cache.hits + r->cache.misses;
	double hit_rate = lookups ? (double)r->cache.hits / (double)lookups : 0;
	uint64_t tier[YCSB_SRV_TIER_N];
	/* CPU per request: "null" when a figure is missing */
	char srv_cpu[32] = "null", cli_cpu[32] = "null";
	/* The one-sided engine's RMA operations are not requests a server's
	 * workers run, and the few requests they do serve (table attach,
	 * stats) would make their CPU time per request a meaningless figure. */
	bool onesided = o->lo.engine == LOTUS_ENGINE_ONESIDED || o->lo.engine == LOTUS_ENGINE_DEX;
	if (r->srv_cpu_ok && r->srv_reqs && !onesided)
		snprintf(srv_cpu, sizeof(srv_cpu), "%.3f", (double)r->srv_cpu_ns / 1e3 / (double)r->srv_reqs);
	if (r->client_cpu_ns && r->client_reqs)
		snprintf(cli_cpu, sizeof(cli_cpu), "%.3f",
			 (double)r->client_cpu_ns / 1e3 / (double)r->client_reqs);
	if (json) {
		fprintf(f, "{\"workload\":\"%c\",\"engine\":\"%s\",\"cc\":\"%s\",\"threads\":%u,\"inflight\":%u,"
			"\"ops_per_txn\":%u,\"records\":%llu,\"record_size\":%u,\"zipf\":%g,"
			"\"transport\":\"%s\",\"servers\":{\"count\":%u,\"requests\":%llu,"
			"\"cpu_s\":%.6f,\"cpu_us_per_req\":%s%s},"
			"\"client\":{\"threads\":%u,\"requests\":%llu,\"cpu_s\":%.6f,"
			"\"cpu_us_per_req\":%s},\"batch\":\"%s\",\"partitioning\":\"%s\","
			"\"compute_id\":%u,\"compute_count\":%u,\"seconds\":%.3f,"
			"\"txns_committed\":%llu,\"txns_aborted\":%llu,\"abort_rate\":%.5f,"
			"\"txn_per_s\":%.1f,\"ops_per_s\":%.1f,\"max_attempts\":%llu,"
			"\"aborts\":{\"conflict\":%llu,\"preempted\":%llu,\"other\":%llu},"
			"\"lat_us\":{\"mean\":%.1f,\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f},"
			"\"net\":{\"msgs_sent\":%llu,\"bytes_sent\":%llu,\"msgs_recv\":%llu,"
			"\"bytes_recv\":%llu,\"msgs_per_txn\":%.2f,\"bytes_per_txn\":%.1f,"
			"\"reqs_per_msg\":%.2f",
			o->workload, engine_name(o->lo.engine), cc_name(o->lo.cc), threads,
			o->inflight, o->ops_per_txn,
			(unsigned long long)o->records, o->record_size, o->zipf, transport, servers,
			(unsigned long long)r->srv_reqs, (double)r->srv_cpu_ns / 1e9, srv_cpu,
			onesided ? ",\"note\":\"one-sided operations are not server requests: "
				   "no CPU per request\"" : "",
			threads, (unsigned long long)r->client_reqs, (double)r->client_cpu_ns / 1e9,
			cli_cpu, batch_name(o->lo.batch), o->lo.partitioning == LOTUS_PART_CO ? "co" : "none",
			o->lo.compute_id, o->lo.compute_count, r->seconds, (unsigned long long)r->committed,
			(unsigned long long)r->aborted, abort_rate, (double)r->committed / secs,
			(double)r->ops / secs, (unsigned long long)r->retries_max,
			(unsigned long long)r->aborts_conflict, (unsigned long long)r->aborts_preempted,
			(unsigned long long)r->aborts_other, hist_mean(&r->lat) * us,
			hist_percentile(&r->lat, 50) * us, hist_percentile(&r->lat, 99) * us,
			hist_percentile(&r->lat, 99.9) * us, (unsigned long long)r->net.msgs_sent,
			(unsigned long long)r->net.bytes_sent, (unsigned long long)r->net.msgs_recv,
			(unsigned long long)r->net.bytes_recv,
			(double)(r->net.msgs_sent + r->net.msgs_recv) / c,
			(double)(r->net.bytes_sent + r->net.bytes_recv) / c, reqs_per_msg);
		json_engine(f, r);
		fprintf(f, "},\"cc_stats\":%s,"
			"\"cache\":{\"hits\":%llu,\"misses\":%llu,\"hit_rate\":%.4f,"
			"\"stale_hints\":%llu,\"evictions\":%llu,\"writebacks\":%llu,"
			"\"local_hits\":%llu}",
			r->cc_stats[0] ? r->cc_stats : "{}", (unsigned long long)r->cache.hits,
			(unsigned long long)r->cache.misses, hit_rate,
			(unsigned long long)r->cache.stale_hints, (unsigned long long)r->cache.evictions,
			(unsigned long long)r->cache.writebacks, (unsigned long long)r->net.local_hits);
		if (tier_sums(r, tier))
			fprintf(f, ",\"tier\":{\"misses\":%llu,\"misses_per_txn\":%.3f,\"miss_reads\":%llu,"
				"\"miss_read_mean_us\":%.1f,\"evict_clean\":%llu,\"evict_dirty\":%llu,"
				"\"evict_errors\":%llu,\"pw_ios\":%llu,\"pw_pages\":%llu,\"pw_iops\":%.1f,"
				"\"pw_cpu_us_per_page\":%.3f,\"miss_sync_reads\":%llu,"
				"\"miss_async_reads\":%llu,\"miss_parked\":%llu,\"miss_async_errors\":%llu,"
				"\"miss_depth_max\":%llu}", (unsigned long long)tier[0],
				(double)tier[0] / c, (unsigned long long)tier[1],
				tier[9] || tier[1] ? (double)tier[2] / 1e3 / (double)(tier[9] ? tier[9] : tier[1])
						   : 0.0,
				(unsigned long long)tier[3], (unsigned long long)tier[4],
				(unsigned long long)tier[5], (unsigned long long)tier[6],
				(unsigned long long)tier[7], (double)tier[6] / secs,
				tier[7] ? (double)tier[8] / 1e3 / (double)tier[7] : 0.0,
				(unsigned long long)tier[9], (unsigned long long)tier[10],
				(unsigned long long)tier[11], (unsigned long long)tier[12],
				(unsigned long long)tier[13]);
		if (o->digest)   /* no digest was computed without --digest */
			fprintf(f, ",\"digest\":\"%016llx\",\"digest_rows\":%llu",
				(unsigned long long)r->digest, (unsigned long long)r->digest_rows);
		fprintf(f, "}\n");
		return;
	}
	fprintf(f, "lotus ycsb: workload %c, %s, cc %s, batch %s, %s, %u servers, %u threads x %u in flight,\n"
		   "            %u ops/txn, %llu records of %u B, zipf %.2f\n",
		o->workload, engine_name(o->lo.engine), cc_name(o->lo.cc), batch_name(o->lo.batch), transport, servers, threads,
		o->inflight, o->ops_per_txn, (unsigned long long)o->records, o->record_size, o->zipf);
	fprintf(f, "  %-12s %12.1f txn/s %12.1f ops/s   (%llu committed in %.1f s)\n", "throughput",
		(double)r->committed / secs, (double)r->ops / secs,
		(unsigned long long)r->committed, r->seconds);
	fprintf(f, "  %-12s %11.2f %%    %llu aborted attempts (conflict %llu, preempted %llu, other %llu)\n",
		"abort rate", 100 * abort_rate, (unsigned long long)r->aborted,
		(unsigned long long)r->aborts_conflict, (unsigned long long)r->aborts_preempted,
		(unsigned long long)r->aborts_other);
	fprintf(f, "  %-12s mean %.0f  p50 %.0f  p99 %.0f  p99.9 %.0f us\n", "latency",
		hist_mean(&r->lat) * us, hist_percentile(&r->lat, 50) * us,
		hist_percentile(&r->lat, 99) * us, hist_percentile(&r->lat, 99.9) * us);
	fprintf(f, "  %-12s %.2f msgs/txn  %.0f bytes/txn  %.2f requests/msg\n", "network",
		(double)(r->net.msgs_sent + r->net.msgs_recv) / c,
		(double)(r->net.bytes_sent + r->net.bytes_recv) / c, reqs_per_msg);
	print_engine(f, r);
	fprintf(f, "  %-12s memory servers %s us/request%s (%llu requests, %.2f s of their "
		"workers), compute threads %s us/request (%llu requests)\n", "cpu",
		onesided || !strcmp(srv_cpu, "null") ? "n/a" : srv_cpu,
		onesided ? " (one-sided operations are not requests)" : "",
		(unsigned long long)r->srv_reqs, (double)r->srv_cpu_ns / 1e9,
		strcmp(cli_cpu, "null") ? cli_cpu : "n/a",   /* "null" is the JSON's word */
		(unsigned long long)r->client_reqs);
	if (o->lo.cache_bytes)
		fprintf(f, "  %-12s %.1f %% hits (%llu of %llu), %llu stale hints, %llu evictions, %llu write-backs\n",
			"cache", 100 * hit_rate, (unsigned long long)r->cache.hits,
			(unsigned long long)lookups, (unsigned long long)r->cache.stale_hints,
			(unsigned long long)r->cache.evictions, (unsigned long long)r->cache.writebacks);
	if (tier_sums(r, tier))
		fprintf(f, "  %-12s %llu misses (%.2f/txn), %llu reads: %llu preads of mean %.1f us, "
			"%llu on the workers' rings for %llu parked requests (at most %llu in flight, "
			"%llu failed); evictions %llu "
			"clean, %llu dirty, %llu write errors; page writers %llu writes (%.0f/s), %llu "
			"pages, %.2f us CPU/page\n", "tier", (unsigned long long)tier[0],
			(double)tier[0] / c, (unsigned long long)tier[1], (unsigned long long)tier[9],
			tier[9] ? (double)tier[2] / 1e3 / (double)tier[9] : 0.0,
			(unsigned long long)tier[10], (unsigned long long)tier[11],
			(unsigned long long)tier[13], (unsigned long long)tier[12],
			(unsigned long long)tier[3], (unsigned long long)tier[4],
			(unsigned long long)tier[5], (unsigned long long)tier[6], (double)tier[6] / secs,
			(unsigned long long)tier[7], tier[7] ? (double)tier[8] / 1e3 / (double)tier[7] : 0.0);
	if (o->digest)
		fprintf(f, "  %-12s %016llx over %llu rows\n", "digest", (unsigned long long)r->digest,
			(unsigned long long)r->digest_rows);
	print_srv_table(f, r);
}
