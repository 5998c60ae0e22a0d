/*
 * dex_engine.c - `--engine dex`: DEX (Lu et al., VLDB'24) in lotus, as
 * `const struct engine engine_dex` (compute/engine.h).  docs/dex.md says
 * what is and is not reproduced.
 *
 * DEX is one-sided with compute-side partitioning.  It runs on the regions
 * and the RMA primitives of the one-sided engine (os_int.h: a session per
 * thread, each with its endpoints, the page reads with version checks, the
 * inserts and splits), and changes three things:
 *
 *   Partitions   compute server c of n owns the keys whose value v has
 *                (v / LOTUS_DEX_BLOCK) % n == c: ranges of consecutive
 *                keys, so the leaves of a range are one owner's.
 *   Locks        only the owner writes its keys, so their concurrency
 *                control is local: a table of lock words in this process
 *                (bit 63 writer, low bits readers; the last taker's
 *                priority beside it for WAIT_DIE), no CAS on the memory
 *                server.  Data is read and written by RMA as before.
 *   Index cache  one cache of index pages per process, inner and leaf,
 *                keyed by page address, bounded by cache_bytes (8-way sets,
 *                the least recently used of a set evicted).  It needs no
 *                coherence traffic: records never move and only the owner
 *                adds keys to its ranges, so a key found in a cached leaf
 *                is where the page says; a key a cached page does not have,
 *                or a page whose fences do not cover the key, sends the
 *                lookup to the memory server's copy.  Leaves are admitted
 *                with probability cache_admit (inner pages always).
 *   Offloading   a lookup that misses the cache on its path a second time
 *                is pushed down to the memory server (OP_DEX_LOOKUP, dex.h):
 *                one two-sided round trip that also brings the record's
 *                value, instead of two or more RMA reads.
 *
 * Keys of other owners: a read is an unlocked one-sided read (what the
 * owner last committed, not serialised against it: DEX would forward it
 * to the owner, which this does not); writes fail with LOTUS_EUNSUPPORTED.
 * Inserts of any key are safe (leaf page locks on the server).
 *
 * Steps run synchronously on the caller's thread, and their callbacks are
 * queued for the next poll, as the interface requires.
 *
 * Threads: the cluster state (cache, lock table) is shared by the process's
 * sessions (the cache's sets have spin locks, the lock words are atomics);
 * a session and its transactions belong to one thread.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "common/vec.h"
#include "compute/cluster.h"
#include "compute/engine.h"
#include "compute/session.h"
#include "net/wire.h"
#include "onesided/dex.h"
#include "onesided/os_int.h"

#define DEX_WAYS        8
#define DEX_LOCK_BITS   18        /* 2^18 lock words (collisions: false conflicts) */
#define DEX_QUEUE       1024
#define DEX_OFFLOAD_MISSES 2      /* the miss on a path that sends it to the server */
#define DEX_POLL_NS     10000000  /* the two-sided session's pings */
#define DEX_CLUSTERS    64

enum { DX_OFFLOAD = OS_NTYPES, DX_NTYPES };   /* the counters' types: RMA's, then offloads */

/* ---- the index cache ------------------------------------------------------------- */

struct dex_line {
	uint64_t addr;            /* 0: empty */
	uint32_t tag;             /* table << 16 | server */
	uint32_t stamp;           /* last use (the set's LRU) */
	struct os_page pg;
};

struct dex_cache {
	unsigned nsets;           /* 0: no cache */
	struct dex_line *lines;   /* nsets * DEX_WAYS */
	atomic_flag *locks;       /* one per set */
	double admit;             /* leaves admitted with this probability */
	_Atomic uint32_t clock;
	_Atomic uint64_t hits, misses, evictions, admits, offloads;
};

static int cache_init(struct dex_cache *C, uint64_t bytes, double admit)
{
	memset(C, 0, sizeof(*C));
	C->admit = admit > 0 && admit <= 1 ? admit : 1.0;
	if (!bytes)
		return 0;
	uint64_t sets = bytes / (DEX_WAYS * sizeof(struct dex_line));
	C->nsets = (unsigned)MAX(1, MIN(sets, 1u << 30));
	C->lines = calloc((size_t)C->nsets * DEX_WAYS, sizeof(*C->lines));
	C->locks = calloc(C->nsets, sizeof(*C->locks));
	if (!C->lines || !C->locks) {
		free(C->lines);
		free(C->locks);
		C->nsets = 0;
		return -ENOMEM;
	}
	for (unsigned i = 0; i < C->nsets; i++)
		atomic_flag_clear(&C->locks[i]);
	return 0;
}

static unsigned cache_set(const struct dex_cache *C, uint64_t addr, uint32_t tag)
{
	uint64_t h = (addr >> 10) * 0x9e3779b97f4a7c15ULL ^ tag;
	return (unsigned)((h >> 17) % C->nsets);
}

static void set_lock(struct dex_cache *C, unsigned set)
{
	while (atomic_flag_test_and_set_explicit(&C->locks[set], memory_order_acquire))
		sched_yield();
}

static void set_unlock(struct dex_cache *C, unsigned set)
{
	atomic_flag_clear_explicit(&C->locks[set], memory_order_release);
}

/* A copy of the cached page at addr into *pg; 1 if it was there. */
static int cache_get(struct dex_cache *C, uint64_t addr, uint32_t tag, struct os_page *pg)
{
	if (!C->nsets)
		return 0;
	unsigned set = cache_set(C, addr, tag);
	struct dex_line *l = &C->lines[(size_t)set * DEX_WAYS];
	int hit = 0;
	set_lock(C, set);
	for (unsigned w = 0; w < DEX_WAYS; w++)
		if (l[w].addr == addr && l[w].tag == tag) {
			memcpy(pg, &l[w].pg, sizeof(*pg));
			l[w].stamp = atomic_fetch_add_explicit(&C->clock, 1, memory_order_relaxed);
			hit = 1;
			break;
		}
	set_unlock(C, set);
	return hit;
}

/* Admit (or refresh) the page at addr. */
static void cache_put(struct dex_cache *C, uint64_t addr, uint32_t tag, const struct os_page *pg)
{
	if (!C->nsets)
		return;
	unsigned set = cache_set(C, addr, tag);
	struct dex_line *l = &C->lines[(size_t)set * DEX_WAYS];
	uint32_t now = atomic_fetch_add_explicit(&C->clock, 1, memory_order_relaxed);
	int victim = -1, evict = 0;
	set_lock(C, set);
	for (unsigned w = 0; w < DEX_WAYS && victim < 0; w++)
		if (l[w].addr == addr && l[w].tag == tag)
			victim = (int)w;
	for (unsigned w = 0; w < DEX_WAYS && victim < 0; w++)
		if (!l[w].addr)
			victim = (int)w;
	if (victim < 0) {
		victim = 0;
		for (unsigned w = 1; w < DEX_WAYS; w++)   /* oldest, wrap-around aware */
			if ((int32_t)(l[w].stamp - l[victim].stamp) < 0)
				victim = (int)w;
		evict = 1;
	}
	l[victim].addr = addr;
	l[victim].tag = tag;
	l[victim].stamp = now;
	memcpy(&l[victim].pg, pg, sizeof(*pg));
	set_unlock(C, set);
	atomic_fetch_add_explicit(&C->admits, 1, memory_order_relaxed);
	if (evict)
		atomic_fetch_add_explicit(&C->evictions, 1, memory_order_relaxed);
}

static void cache_drop(struct dex_cache *C, uint64_t addr, uint32_t tag)
{
	if (!C->nsets)
		return;
	unsigned set = cache_set(C, addr, tag);
	struct dex_line *l = &C->lines[(size_t)set * DEX_WAYS];
	set_lock(C, set);
	for (unsigned w = 0; w < DEX_WAYS; w++)
		if (l[w].addr == addr && l[w].tag == tag)
			l[w].addr = 0;
	set_unlock(C, set);
}

/* ---- the cluster's state ----------------------------------------------------------- */

struct dex_lock {
	_Atomic uint64_t word;    /* OS_LOCK_W: a writer; low bits: readers */
	_Atomic uint64_t ts;      /* WAIT_DIE: the priority of its last taker */
};

struct dex_cluster {
	os_engine_t *e;
	struct dex_cache cache;
	struct dex_lock *locks;
	unsigned id, count;
	int cc;
	unsigned wait_ms;
};

static pthread_mutex_t dex_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { const lotus_cluster_t *c; struct dex_cluster *d; } dex_clusters[DEX_CLUSTERS];

static struct dex_cluster *dex_cluster_of(const lotus_cluster_t *c)
{
	struct dex_cluster *d = NULL;
	pthread_mutex_lock(&dex_mu);
	for (unsigned i = 0; i < DEX_CLUSTERS && !d; i++)
		if (dex_clusters[i].c == c)
			d = dex_clusters[i].d;
	pthread_mutex_unlock(&dex_mu);
	return d;
}

static int dex_cluster_set(const lotus_cluster_t *c, struct dex_cluster *d)
{
	int rc = -ENOMEM;
	pthread_mutex_lock(&dex_mu);
	for (unsigned i = 0; i < DEX_CLUSTERS && rc; i++)
		if (dex_clusters[i].c == (d ? NULL : c)) {
			dex_clusters[i].c = d ? c : NULL;
			dex_clusters[i].d = d;
			rc = 0;
		}
	pthread_mutex_unlock(&dex_mu);
	return rc;
}

static void dex_cluster_free(struct dex_cluster *d)
{
	if (!d)
		return;
	os_engine_destroy(d->e);
	free(d->cache.lines);
	free(d->cache.locks);
	free(d->locks);
	free(d);
}

static int dx_cluster_open(lotus_cluster_t *c)
{
	const char *hosts[LOTUS_MAX_SERVERS];
	uint16_t ports[LOTUS_MAX_SERVERS];
	for (unsigned i = 0; i < c->nservers; i++) {
		hosts[i] = c->servers[i].host;
		ports[i] = c->servers[i].port;
	}
	if (c->opts.cc != LOTUS_NO_WAIT && c->opts.cc != LOTUS_WAIT_DIE) {
		log_error("dex: the dex engine runs no_wait or wait_die only");
		return LOTUS_EUNSUPPORTED;
	}
	struct dex_cluster *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->id = c->opts.compute_id;
	d->count = c->opts.compute_count ? c->opts.compute_count : 1;
	d->cc = c->opts.cc;
	d->wait_ms = 1000;
	/* the one-sided sessions' own cache of upper pages serves only the
	 * descents of inserts: keep it small, DEX's cache is the one above */
	struct os_engine_opts o = {
		.transport = c->transport, .nservers = c->nservers, .hosts = hosts,
		.ports = ports, .cc = c->opts.cc, .cache_bytes = 64u << 10,
		.timeout_ms = c->opts.timeout_ms, .lease_ms = c->lease_ms,
		.secret_file = c->secret_path[0] ? c->secret_path : NULL,
	};
	int rc = cache_init(&d->cache, c->opts.cache_bytes, c->opts.cache_admit);
	if (rc == 0)
		d->locks = calloc((size_t)1 << DEX_LOCK_BITS, sizeof(*d->locks));
	if (rc == 0 && !d->locks)
		rc = -ENOMEM;
	if (rc == 0)
		rc = os_engine_create(&o, &d->e);
	if (rc == 0)
		rc = dex_cluster_set(c, d);
	if (rc)
		dex_cluster_free(d);
	return rc;
}

static void dx_cluster_close(lotus_cluster_t *c)
{
	struct dex_cluster *d = dex_cluster_of(c);
	dex_cluster_set(c, NULL);
	dex_cluster_free(d);
}

static int dex_owns(const struct dex_cluster *d, uint64_t key)
{
	return (unsigned)((key / LOTUS_DEX_BLOCK) % d->count) == d->id;
}

/* ---- sessions and transactions ------------------------------------------------------ */

/* Traffic of one attempt: the RMA tally (os_rma_* count into it) and the
 * offloaded lookups. */
struct dex_tally {
	struct os_tally rma;
	uint64_t off_ops, off_out, off_in;
};

struct dex_done {
	lotus_txn_t *t;
	lotus_txn_cb cb;
	void *arg;
	int rc;
};

struct dex_session {
	struct dex_cluster *d;
	os_session_t *os;
	unsigned tid[LOTUS_MAX_TABLES];   /* os table + 1; 0: not attached yet */
	struct dex_done q[DEX_QUEUE];
	unsigned qhead, qlen;
	uint64_t next_id, last_poll_ns, last_prio, rng;
	struct dex_tally committed, aborted;
	uint64_t commits, aborts;
};

enum { DK_READ, DK_READ_X, DK_WRITE, DK_INSERT };
enum { DH_NONE, DH_S, DH_X, DH_SHARED };   /* DH_SHARED: an earlier op holds the word */
enum { DT_IDLE, DT_EXECUTED, DT_FAILED, DT_DONE };

struct dex_op {
	uint8_t kind, held, owned, done, located, missing, found, has_val;
	unsigned tid, sv;
	uint32_t slot;
	uint64_t key, rec;
	unsigned char *val;       /* write/insert */
	size_t vlen;
	unsigned char *res;       /* read: 8-byte length, then the value */
	size_t rlen;
};

struct dex_txn {
	struct lotus_txn pub;
	struct dex_session *ss;
	int state, err;
	struct dex_op *ops;
	unsigned n;
	size_t cap;
	struct dex_tally tally;
};

static struct dex_session *ss_of(const lotus_session_t *s)
{
	return s->eng;
}

static struct dex_txn *dt_of(lotus_txn_t *t)
{
	return container_of(t, struct dex_txn, pub);
}

static int dx_session_open(lotus_session_t *s)
{
	struct dex_session *ss = calloc(1, sizeof(*ss));
	if (!ss)
		return -ENOMEM;
	ss->d = dex_cluster_of(s->cl);
	int rc = ss->d ? os_session_open(ss->d->e, &ss->os) : LOTUS_ESTATE;
	if (rc) {
		free(ss);
		return rc;
	}
	ss->rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)(uintptr_t)ss ^ clock_now_ns();
	s->eng = ss;
	return 0;
}

static void dx_session_close(lotus_session_t *s)
{
	struct dex_session *ss = ss_of(s);
	if (!ss)
		return;
	os_session_close(ss->os);
	free(ss);
	s->eng = NULL;
}

static double ss_random(struct dex_session *ss)
{
	ss->rng ^= ss->rng << 13;
	ss->rng ^= ss->rng >> 7;
	ss->rng ^= ss->rng << 17;
	return (double)(ss->rng >> 11) / 9007199254740992.0;
}

static uint64_t new_priority(struct dex_session *ss)
{
	uint64_t p = (clock_wall_ns() & ~0xfffULL) | (ss->d->id & 0xfff);
	if (p <= ss->last_prio)
		p = ss->last_prio + 0x1000;
	ss->last_prio = p;
	return p;
}

static int dx_poll(lotus_session_t *s, int timeout_ms)
{
	struct dex_session *ss = ss_of(s);
	uint64_t now = clock_now_ns();
	int n = 0;
	if (now - ss->last_poll_ns > DEX_POLL_NS || !ss->qlen) {
		ss->last_poll_ns = now;
		os_session_poll(ss->os);
		session_lock(s);
		n += session_progress(s, ss->qlen ? 0 : MIN(timeout_ms, 1), ss->qlen > 0);
		session_unlock(s);
		session_yield(s);
	}
	for (unsigned todo = ss->qlen; todo > 0 && ss->qlen > 0; todo--) {
		struct dex_done dn = ss->q[ss->qhead];
		ss->qhead = (ss->qhead + 1) % DEX_QUEUE;
		ss->qlen--;
		dn.cb(dn.t, dn.rc, dn.arg);
		n++;
	}
	return n;
}

static void ops_clear(struct dex_txn *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		free(t->ops[i].val);
		free(t->ops[i].res);
	}
	t->n = 0;
	t->err = 0;
	t->state = DT_IDLE;
	memset(&t->tally, 0, sizeof(t->tally));
}

static int dx_begin(lotus_session_t *s, lotus_txn_t **out)
{
	struct dex_session *ss = ss_of(s);
	struct dex_txn *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->ss = ss;
	t->pub.eng = s->cl->engine;
	t->pub.s = s;
	t->pub.id = ++ss->next_id;
	t->pub.prio = new_priority(ss);
	*out = &t->pub;
	return 0;
}

static int txn_abort(struct dex_txn *t);

static int dx_restart(lotus_txn_t *pt, bool new_prio)
{
	struct dex_txn *t = dt_of(pt);
	if (t->state == DT_EXECUTED || t->state == DT_FAILED)
		txn_abort(t);     /* releases what it holds, counts the attempt */
	ops_clear(t);
	pt->id = ++t->ss->next_id;
	if (new_prio)
		pt->prio = new_priority(t->ss);
	return 0;
}

static void dx_free(lotus_txn_t *pt)
{
	struct dex_txn *t = dt_of(pt);
	ops_clear(t);
	free(t->ops);
	free(t);
}

static int dex_table(lotus_session_t *s, lotus_table_t tb, unsigned *tid)
{
	struct dex_session *ss = ss_of(s);
	lotus_cluster_t *c = s->cl;
	if (tb >= LOTUS_MAX_TABLES || tb >= c->ntables)
		return LOTUS_ENOTABLE;
	if (!ss->tid[tb]) {
		unsigned id;
		int rc = os_session_attach(ss->os, c->tables[tb].name, &id);
		if (rc)
			return rc;
		ss->tid[tb] = id + 1;
	}
	*tid = ss->tid[tb] - 1;
	return 0;
}

static int dx_stage(lotus_txn_t *pt, const struct engine_op *eo)
{
	struct dex_txn *t = dt_of(pt);
	unsigned tid;
	if (t->err)
		return t->err;
	if (t->state != DT_IDLE && t->state != DT_EXECUTED)
		return LOTUS_ESTATE;
	int rc = dex_table(pt->s, eo->table, &tid);
	uint8_t kind = 0;
	if (rc == 0 && eo->klen != 8)
		rc = LOTUS_EUNSUPPORTED;
	if (rc == 0) {
		switch (eo->kind) {
		case ENGINE_READ: kind = DK_READ; break;
		case ENGINE_READ_X: kind = DK_READ_X; break;
		case ENGINE_WRITE: kind = DK_WRITE; break;
		case ENGINE_INSERT: kind = DK_INSERT; break;
		default: rc = LOTUS_EUNSUPPORTED; break;   /* DELETE, SCAN: not yet */
		}
	}
	uint64_t key = rc == 0 ? os_key_u64(eo->key) : 0;
	int owned = rc == 0 && dex_owns(t->ss->d, key);
	if (rc == 0 && !owned && (kind == DK_READ_X || kind == DK_WRITE))
		rc = LOTUS_EUNSUPPORTED;   /* only the owner writes a key */
	/* a write of a key this transaction read for update keeps that op */
	for (unsigned i = 0; rc == 0 && kind == DK_WRITE && i < t->n; i++) {
		struct dex_op *p = &t->ops[i];
		if (p->tid == tid && p->key == key && p->kind == DK_READ_X) {
			unsigned char *v = malloc(eo->vlen ? eo->vlen : 1);
			if (!v)
				return -ENOMEM;
			memcpy(v, eo->value, eo->vlen);
			free(p->val);
			p->val = v;
			p->vlen = eo->vlen;
			p->has_val = 1;
			return (int)i;
		}
	}
	if (rc == 0 && vec_reserve(t->ops, t->cap, t->n + 1, 16))
		rc = -ENOMEM;
	if (rc) {
		t->err = rc;
		return rc;
	}
	struct dex_op *op = &t->ops[t->n];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->tid = tid;
	op->key = key;
	op->owned = (uint8_t)owned;
	op->sv = (unsigned)(fnv1a64(eo->key, 8) % t->ss->os->nsrv);   /* lotus's routing */
	op->slot = (uint32_t)((fnv1a64(eo->key, 8) ^ tid * 0x9e3779b97f4a7c15ULL) >>
			      (64 - DEX_LOCK_BITS));
	if (kind == DK_WRITE || kind == DK_INSERT) {
		op->val = malloc(eo->vlen ? eo->vlen : 1);
		if (!op->val) {
			t->err = -ENOMEM;
			return -ENOMEM;
		}
		memcpy(op->val, eo->value, eo->vlen);
		op->vlen = eo->vlen;
		op->has_val = 1;
	}
	return (int)t->n++;
}

/* ---- local locks ------------------------------------------------------------------------ */

static int lock_try(struct dex_lock *l, int x, uint64_t *seen)
{
	uint64_t w = atomic_load_explicit(&l->word, memory_order_relaxed);
	for (;;) {
		*seen = w;
		if (x ? w != 0 : (w & OS_LOCK_W) != 0)
			return 0;
		if (atomic_compare_exchange_weak_explicit(&l->word, &w, x ? OS_LOCK_W : w + 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			return 1;
	}
}

/* Take op's local lock (its slot's word): 0, LOTUS_EABORTED. */
static int lock_op(struct dex_txn *t, struct dex_op *op)
{
	struct dex_cluster *d = t->ss->d;
	struct dex_lock *l = &d->locks[op->slot];
	int x = op->kind != DK_READ;
	/* an earlier op of this transaction on the same word (the same key, or
	 * a collision): share its lock, upgrading S to X when it is the only reader */
	for (struct dex_op *p = t->ops; p < op; p++) {
		if (p->slot != op->slot || (p->held != DH_S && p->held != DH_X))
			continue;
		if (p->held == DH_X || !x) {
			op->held = DH_SHARED;
			return 0;
		}
		uint64_t one = 1;
		if (atomic_compare_exchange_strong(&l->word, &one, OS_LOCK_W)) {
			p->held = DH_X;
			op->held = DH_SHARED;
			return 0;
		}
		return LOTUS_EABORTED;
	}
	uint64_t deadline = 0, seen;
	for (;;) {
		if (lock_try(l, x, &seen)) {
			if (d->cc == LOTUS_WAIT_DIE)
				atomic_store_explicit(&l->ts, t->pub.prio, memory_order_relaxed);
			op->held = x ? DH_X : DH_S;
			return 0;
		}
		/* NO_WAIT aborts; WAIT_DIE: an older one waits, a younger one dies */
		if (d->cc != LOTUS_WAIT_DIE ||
		    t->pub.prio >= atomic_load_explicit(&l->ts, memory_order_relaxed))
			return LOTUS_EABORTED;
		uint64_t now = clock_now_ns();
		if (!deadline)
			deadline = now + (uint64_t)d->wait_ms * 1000000;
		else if (now > deadline)
			return LOTUS_EABORTED;
		os_maybe_poll(t->ss->os);
		sched_yield();
	}
}

static void release_all(struct dex_txn *t)
{
	struct dex_lock *locks = t->ss->d->locks;
	for (unsigned i = 0; i < t->n; i++) {
		struct dex_op *op = &t->ops[i];
		if (op->held == DH_S)
			atomic_fetch_sub_explicit(&locks[op->slot].word, 1, memory_order_release);
		else if (op->held == DH_X)
			atomic_store_explicit(&locks[op->slot].word, 0, memory_order_release);
		op->held = DH_NONE;
	}
}

/* ---- lookups: the cache, the walk, offloading ---------------------------------------- */

/* The lookup pushed down to server sv (OP_DEX_LOOKUP): one lotus message
 * and its reply on the session's connection.  op->rec, and the value into
 * op->res when want_data. */
static int offload(struct dex_txn *t, struct dex_op *op, int want_data)
{
	os_session_t *s = t->ss->os;
	const char *name = s->tabs[op->tid].name;
	struct wire_buf b;
	struct wire_req r = { .op = OP_DEX_LOOKUP, .key_len = (uint16_t)strlen(name),
			      .arg = op->key };
	wire_buf_init(&b);
	int rc = wire_buf_begin(&b, WIRE_REQ, 0, 1);
	if (rc == 0)
		rc = wire_buf_add_req(&b, &r, name, NULL);
	if (rc) {
		wire_buf_free(&b);
		return rc;
	}
	size_t len;
	wire_buf_end(&b);
	unsigned char *msg = wire_buf_detach(&b, &len);
	if (!s->conn[op->sv] || s->broken) {
		free(msg);
		return LOTUS_EUNAVAIL;
	}
	s->rep_got = 0;
	rc = net_send(s->conn[op->sv], msg, len);
	uint64_t deadline = clock_now_ns() + (uint64_t)s->e->o.timeout_ms * 1000000;
	while (rc == 0 && !s->rep_got && !s->broken) {
		if (clock_now_ns() > deadline)
			return LOTUS_ETIMEOUT;
		net_progress(s->w);
	}
	if (rc)
		return rc;
	if (!s->rep_got)
		return LOTUS_EUNAVAIL;
	t->tally.off_ops++;
	t->tally.off_out += len;
	t->tally.off_in += s->rep_len;
	t->tally.rma.round_trips++;
	atomic_fetch_add_explicit(&t->ss->d->cache.offloads, 1, memory_order_relaxed);
	if (s->rep_status == LOTUS_ENOTFOUND) {
		op->missing = 1;
		return 0;
	}
	if (s->rep_status)
		return s->rep_status;
	const struct dex_lookup_rep *lr = s->rep_val;
	uint32_t vmax = s->tabs[op->tid].value_max;
	if (s->rep_len < sizeof(*lr) || lr->len > vmax || s->rep_len != sizeof(*lr) + lr->len)
		return LOTUS_EPROTO;
	op->rec = lr->rec;
	op->located = 1;
	if (want_data) {
		op->res = malloc(8 + (size_t)vmax);
		if (!op->res)
			return -ENOMEM;
		memcpy(op->res, &lr->len, 8);
		memcpy(op->res + 8, lr + 1, lr->len);
		op->rlen = lr->len;
		op->found = 1;
	}
	return 0;
}

/* Find op's record: the cache and RMA reads, or the server (offload). */
static int locate(struct dex_txn *t, struct dex_op *op, int want_data)
{
	struct dex_session *ss = t->ss;
	os_session_t *s = ss->os;
	struct dex_cache *C = &ss->d->cache;
	uint32_t tag = op->tid << 16 | op->sv;
	struct os_srv_table *st = &s->tabs[op->tid].sv[op->sv];
	struct os_page pg;
	int rc, misses = 0;
	uint64_t addr = st->root;
	if (!addr && (rc = os_read_root(s, op->tid, op->sv, &addr)) != 0)
		return rc;
	for (unsigned steps = 0; steps < OS_MAX_DEPTH * 4; steps++) {
		int cached = cache_get(C, addr, tag, &pg);
		if (cached) {
			atomic_fetch_add_explicit(&C->hits, 1, memory_order_relaxed);
		} else {
			atomic_fetch_add_explicit(&C->misses, 1, memory_order_relaxed);
			if (++misses >= DEX_OFFLOAD_MISSES)
				return offload(t, op, want_data);
			if ((rc = os_read_page(s, op->tid, op->sv, addr, &pg)) != 0)
				return rc;
			if (pg.level > 0 || C->admit >= 1 || ss_random(ss) < C->admit)
				cache_put(C, addr, tag, &pg);
		}
		int outside = op->key < pg.low || (pg.high != OS_KEY_INF && op->key >= pg.high);
		if (outside && !cached && op->key >= pg.low && pg.sibling) {
			addr = pg.sibling;       /* a split moved the key right */
			continue;
		}
		if (outside || pg.count == 0) {
			/* a stale copy (or a page we cannot place): the server decides */
			if (cached)
				cache_drop(C, addr, tag);
			return offload(t, op, want_data);
		}
		if (pg.level > 0) {
			addr = pg.e[os_child_index(&pg, op->key)].ptr;
			continue;
		}
		int i = os_leaf_search(&pg, op->key);
		if (i >= 0 && pg.e[i].ptr) {    /* ptr 0: a deleted key's mark */
			op->rec = pg.e[i].ptr;
			op->located = 1;
			return 0;
		}
		if (cached) {     /* maybe added since the copy was taken: the server
				     answers, and the next lookup reads the page again */
			cache_drop(C, addr, tag);
			return offload(t, op, want_data);
		}
		op->missing = 1;
		return 0;
	}
	return LOTUS_ETIMEOUT;
}

/* ---- steps ------------------------------------------------------------------------------ */

static void attempt_end(struct dex_txn *t, int committed)
{
	struct dex_session *ss = t->ss;
	struct dex_tally *d = committed ? &ss->committed : &ss->aborted;
	os_tally_add(&d->rma, &t->tally.rma);
	d->off_ops += t->tally.off_ops;
	d->off_out += t->tally.off_out;
	d->off_in += t->tally.off_in;
	if (committed)
		ss->commits++;
	else
		ss->aborts++;
	memset(&t->tally, 0, sizeof(t->tally));
}

/* Lock, locate and read every op not done yet. */
static int run_ops(struct dex_txn *t)
{
	os_session_t *s = t->ss->os;
	int rc = 0;
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct dex_op *op = &t->ops[i];
		if (op->done)
			continue;
		if (op->owned && (rc = lock_op(t, op)) != 0)
			break;
		if (op->kind == DK_INSERT) {
			op->done = 1;
			continue;
		}
		int want = op->kind == DK_READ || op->kind == DK_READ_X;
		if ((rc = locate(t, op, want)) != 0)
			break;
		if (want && op->located && !op->found) {
			uint32_t vmax = s->tabs[op->tid].value_max;
			op->res = malloc(8 + (size_t)vmax);
			if (!op->res) {
				rc = -ENOMEM;
				break;
			}
			rc = os_rma_get(s, op->tid, op->sv, op->rec + OS_REC_DATA, op->res,
					8 + (size_t)vmax);
			uint64_t len;
			memcpy(&len, op->res, 8);
			op->rlen = MIN(len, vmax);
			op->found = rc == 0;
		}
		op->done = 1;
	}
	return rc;
}

static int txn_execute(struct dex_txn *t)
{
	if (t->err)
		return t->err;
	if (t->state != DT_IDLE)
		return LOTUS_ESTATE;
	os_session_t *s = t->ss->os;
	s->cur = &t->tally.rma;
	int rc = run_ops(t);
	s->cur = &s->cnt.other;
	if (rc) {
		release_all(t);
		t->state = DT_FAILED;
		return rc;
	}
	t->state = DT_EXECUTED;
	return 0;
}

static int txn_abort(struct dex_txn *t)
{
	if (t->state == DT_DONE)
		return LOTUS_ESTATE;
	release_all(t);
	attempt_end(t, 0);
	t->state = DT_DONE;
	return 0;
}

static int txn_commit(struct dex_txn *t)
{
	if (t->err)
		return t->err;
	if (t->state != DT_IDLE && t->state != DT_EXECUTED)
		return LOTUS_ESTATE;
	os_session_t *s = t->ss->os;
	s->cur = &t->tally.rma;
	int rc = run_ops(t);              /* ops staged after the execute */
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct dex_op *op = &t->ops[i];
		if (op->kind == DK_INSERT || !op->has_val || op->missing)
			continue;
		unsigned char *buf = malloc(8 + op->vlen);
		if (!buf) {
			rc = -ENOMEM;
			break;
		}
		uint64_t len = op->vlen;
		memcpy(buf, &len, 8);
		memcpy(buf + 8, op->val, op->vlen);
		rc = os_rma_put(s, op->tid, op->sv, op->rec + OS_REC_DATA, buf, 8 + op->vlen);
		free(buf);
	}
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct dex_op *op = &t->ops[i];
		if ((op->kind != DK_INSERT && !op->missing) || !op->has_val)
			continue;
		os_txn_t ot = { .s = s };
		struct os_op oo = { .kind = K_INSERT, .tid = op->tid, .sv = op->sv, .key = op->key,
				    .val = op->val, .vlen = op->vlen, .has_val = 1 };
		rc = os_tree_insert(&ot, &oo);
		if (rc == LOTUS_EEXISTS && op->missing)
			rc = LOTUS_EABORTED;   /* inserted meanwhile: try again */
	}
	s->cur = &s->cnt.other;
	if (rc) {
		release_all(t);
		t->state = DT_FAILED;
		if (rc == LOTUS_EEXISTS || rc == LOTUS_ENOTFOUND || rc == LOTUS_EABORTED)
			txn_abort(t);
		return rc;
	}
	for (unsigned sv = 0; sv < s->nsrv; sv++)   /* data before the next owner's read */
		os_rma_fence(s, sv);
	release_all(t);
	attempt_end(t, 1);
	t->state = DT_DONE;
	return 0;
}

static int queue_done(struct dex_txn *t, lotus_txn_cb cb, void *arg, int rc)
{
	struct dex_session *ss = t->ss;
	if (ss->qlen == DEX_QUEUE)
		return -ENOMEM;
	ss->q[(ss->qhead + ss->qlen++) % DEX_QUEUE] = (struct dex_done){ &t->pub, cb, arg, rc };
	return 0;
}

static int dx_execute(lotus_txn_t *pt, lotus_txn_cb cb, void *arg)
{
	struct dex_txn *t = dt_of(pt);
	if (t->ss->qlen == DEX_QUEUE)
		return -ENOMEM;
	os_session_t *s = t->ss->os;
	claim(s);
	int rc = txn_execute(t);
	unclaim(s);
	if (rc == LOTUS_ESTATE || (t->err && rc == t->err))
		return rc;
	return queue_done(t, cb, arg, rc);
}

static int dx_commit(lotus_txn_t *pt, lotus_txn_cb cb, void *arg)
{
	struct dex_txn *t = dt_of(pt);
	if (t->ss->qlen == DEX_QUEUE)
		return -ENOMEM;
	if (t->err)
		return t->err;
	os_session_t *s = t->ss->os;
	claim(s);
	int rc = txn_commit(t);
	unclaim(s);
	if (rc == LOTUS_ESTATE)
		return rc;
	return queue_done(t, cb, arg, rc);
}

static int dx_abort(lotus_txn_t *pt, lotus_txn_cb cb, void *arg)
{
	struct dex_txn *t = dt_of(pt);
	if (t->ss->qlen == DEX_QUEUE)
		return -ENOMEM;
	int rc = txn_abort(t);
	if (rc)
		return rc;
	return queue_done(t, cb, arg, 0);
}

static int dx_finished(const lotus_txn_t *pt)
{
	return container_of(pt, const struct dex_txn, pub)->state == DT_DONE;
}

static int dx_result(const lotus_txn_t *pt, int i, const void **value, size_t *vlen)
{
	const struct dex_txn *t = container_of(pt, const struct dex_txn, pub);
	if (i < 0 || (unsigned)i >= t->n || !t->ops[i].found)
		return LOTUS_ENOTFOUND;
	*value = t->ops[i].res + 8;
	*vlen = t->ops[i].rlen;
	return 0;
}

static int dx_scan_rows(const lotus_txn_t *t, int op)
{
	return LOTUS_EUNSUPPORTED;
}

static int dx_scan_row(const lotus_txn_t *t, int op, unsigned i, const void **key, size_t *klen,
		       const void **value, size_t *vlen)
{
	return LOTUS_EUNSUPPORTED;
}

/* ---- counters ---------------------------------------------------------------------------- */

static void tally_to(struct lotus_attempt_counters *d, const struct dex_tally *t, uint64_t n)
{
	d->attempts = n;
	d->round_trips = t->rma.round_trips;
	for (int i = 0; i < OS_NTYPES; i++) {
		d->ops += t->rma.ops[i];
		d->bytes_sent += t->rma.out[i];
		d->bytes_recv += t->rma.in[i];
		d->type[i].ops = t->rma.ops[i];
		d->type[i].bytes_sent = t->rma.out[i];
		d->type[i].bytes_recv = t->rma.in[i];
	}
	d->ops += t->off_ops;
	d->bytes_sent += t->off_out;
	d->bytes_recv += t->off_in;
	d->type[DX_OFFLOAD].ops = t->off_ops;
	d->type[DX_OFFLOAD].bytes_sent = t->off_out;
	d->type[DX_OFFLOAD].bytes_recv = t->off_in;
}

static void dx_counters(const lotus_session_t *s, struct lotus_txn_counters *out)
{
	const struct dex_session *ss = ss_of(s);
	out->engine = "dex";
	out->ntypes = DX_NTYPES;
	for (int i = 0; i < OS_NTYPES; i++)
		out->type_names[i] = os_op_type_name((enum os_op_type)i);
	out->type_names[DX_OFFLOAD] = "offload";
	tally_to(&out->committed, &ss->committed, ss->commits);
	tally_to(&out->aborted, &ss->aborted, ss->aborts);
}

/* cache.hit_rate: index pages found in the cache over pages looked up. */
static void dx_cache_counters(lotus_cluster_t *c, struct lotus_cache_counters *out)
{
	struct dex_cluster *d = dex_cluster_of(c);
	if (!d)
		return;
	out->hits = atomic_load(&d->cache.hits);
	out->misses = atomic_load(&d->cache.misses);
	out->evictions = atomic_load(&d->cache.evictions);
	out->entries = MIN(atomic_load(&d->cache.admits) - out->evictions,
			   (uint64_t)d->cache.nsets * DEX_WAYS);
	out->bytes = out->entries * sizeof(struct dex_line);
}

const struct engine engine_dex = {
	.name = "dex",
	.cluster_open = dx_cluster_open,
	.cluster_close = dx_cluster_close,
	.session_open = dx_session_open,
	.session_close = dx_session_close,
	.poll = dx_poll,
	.begin = dx_begin,
	.restart = dx_restart,
	.free = dx_free,
	.stage = dx_stage,
	.execute = dx_execute,
	.commit = dx_commit,
	.abort = dx_abort,
	.finished = dx_finished,
	.result = dx_result,
	.scan_rows = dx_scan_rows,
	.scan_row = dx_scan_row,
	.counters = dx_counters,
	.cache_counters = dx_cache_counters,
};
