/*
 * os_engine.c - the one-sided baseline's compute side (os_engine.h).
 *
 * Every access to a memory server is an RMA operation on its region
 * (os_layout.h) through the session's endpoint to it, waited for before the
 * next one (rma_get/rma_put/rma_cas/rma_faa; each counts one op of its type,
 * its payload bytes and one round trip into the current tally: the
 * transaction attempt's, or the session's "other").  The lotus messages on
 * the same endpoint carry only the attach request and its reply, and the
 * servers' liveness pings on shared memory, which os_session_poll() answers.
 *
 * Index: find_level() descends from the root (its address read once from the
 * region header) to the page of a level that holds the key.  Internal pages
 * come from the session's page cache when present (direct-mapped by address,
 * cache_bytes / 1 KiB slots), else they are read and cached; leaves are
 * always read.  A read page is accepted only when its two version words
 * agree (a torn read is read again).  A page whose high fence is at or below
 * the key sends the reader right (B-link); a page whose low fence is above it
 * means a cached parent was stale: the descent restarts without the cache.
 *
 * Locks (the record's 16-byte header): read the header, then CAS.
 *   S: free when the writer bit is clear; CAS lock -> lock + 1 (a CAS lost to
 *      another reader retries with the value it returned).  Released by FAA -1.
 *   X: free when the word is 0 (1: our own S lock, an upgrade); CAS -> W.
 *      Released by a put of 0, after the data put and a fence.
 *   NO_WAIT aborts on a conflict.  WAIT_DIE puts its priority into the
 *   header's ts word after each CAS it wins; on a conflict a transaction older
 *   than the ts there re-reads the header until the lock is free (for at
 *   most wait_ms), a younger one aborts.  Nothing orders the waiters: when
 *   the lock is released the first CAS wins, whichever transaction sent it
 *   (the paper's Fig. 3), so WAIT_DIE here is not starvation-free.
 *
 * Inserts (at commit): the record is allocated by FAA on the region's cursor
 * and written, then the leaf is locked by CAS on its page lock, read, and
 * the entry added; a full page splits Sherman-style: the new right page is
 * written first, then the left one with its new fence and sibling, then the
 * separator goes into the parent the same way (a new root is installed by
 * CAS on the region header's root word).
 *
 * The lease keeper: a memory server gives a connection up when it hears
 * nothing on it for a lease, and only a progressed worker answers its PINGs.
 * A session's worker (its own, not the two-sided session's) is progressed by
 * its user's calls, so a session left idle for a lease (a thread done with
 * its work while others go on, a phase that uses other sessions) would lose
 * its connections.  One thread per engine therefore progresses, every
 * lease/8, each session not polled for that long that it can claim at once.
 * The claim (s->claim) keeps it out of a session its user is in: every
 * public call that may touch the worker holds it (a depth count; the user
 * waits while the keeper's short progress runs), and the code of a step's
 * coroutine never takes it, so a step suspended between calls leaves its
 * session claimable (the keeper may complete its RMA requests; the step sees
 * them done when it resumes).  The worker is UCS_THREAD_MODE_SERIALIZED.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <ucp/api/ucp.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "lotus.h"
#include "net/net.h"
#include "onesided/os_engine.h"
#include "onesided/os_layout.h"

#define OS_MAX_SERVERS  64
#define OS_MAX_TABLES   8
#define OS_MAX_DEPTH    64        /* pages visited by one descent, at most */
#define OS_TORN_MAX     10000     /* re-reads of one torn page before giving up */
#define OS_PAGE_SPINS   1000000   /* CAS attempts on a page lock */
#define OS_POLL_NS      50000000  /* answer liveness pings at least this often */

struct os_engine {
	struct os_engine_opts o;
	net_ctx_t *net;
	char hosts[OS_MAX_SERVERS][256];
	uint16_t ports[OS_MAX_SERVERS];
	_Atomic unsigned nsessions;   /* sessions open on any thread */
	/* the lease keeper: the open sessions, under live_mu */
	pthread_mutex_t live_mu;
	pthread_cond_t keeper_cv;
	pthread_t keeper;
	int keeper_on, keeper_stop;
	os_session_t *live;
};

struct os_srv_table {
	ucp_rkey_h rkey;
	uint64_t base, root;
};

struct os_table {
	char name[65];
	uint32_t value_max;
	struct os_srv_table sv[OS_MAX_SERVERS];
};

struct os_cpage {
	uint64_t addr;            /* 0: empty slot */
	unsigned sv, tid;
	struct os_page page;
};

struct os_session {
	os_engine_t *e;
	net_worker_t *w;
	ucp_worker_h uw;
	unsigned nsrv, sid;
	net_conn_t *conn[OS_MAX_SERVERS];
	ucp_ep_h ep[OS_MAX_SERVERS];
	struct os_table tabs[OS_MAX_TABLES];
	unsigned ntabs;
	struct os_cpage *cache;
	size_t ncache;
	struct os_counters cnt;
	struct os_tally *cur;     /* where rma_* count */
	int broken;
	uint64_t last_poll_ns, last_prio;
	/* steps running as coroutines (os_txn_step), and the one running now */
	ucontext_t sched;
	os_txn_t *active, *running;
	unsigned nactive;
	/* the attach reply being waited for */
	int rep_got, rep_status;
	void *rep_val;
	size_t rep_len;
	/* >0: its user is in a call (depth); -1: the keeper progresses it */
	_Atomic int claim;
	os_session_t *live_prev, *live_next;
};

enum { HELD_NONE, HELD_S, HELD_X };
enum { K_READ, K_READ_X, K_WRITE, K_INSERT };

struct os_op {
	uint8_t kind, held, has_val, located, missing, upsert;
	unsigned tid, sv;
	uint64_t key, rec;
	unsigned char kb[8];
	unsigned char *val;       /* write/insert: the value; read: the result */
	size_t vlen;
	int found;                /* read: a result is there */
	unsigned char *res;
	size_t rlen;
};

enum { TX_IDLE, TX_EXECUTED, TX_FAILED, TX_DONE };

struct os_txn {
	os_session_t *s;
	int state;
	uint64_t prio;
	struct os_op *ops;
	unsigned n, cap;
	struct os_tally tally;
	/* a step running as a coroutine (os_txn_step) */
	ucontext_t ctx;
	void *stack;
	int step, step_rc, step_done, stepping;
	os_step_cb cb;
	void *cb_arg;
	os_txn_t *next_active;
};

#define OS_STACK (256u << 10)

const char *os_op_type_name(enum os_op_type t)
{
	static const char *names[] = { "read", "write", "cas", "faa" };
	return t < OS_NTYPES ? names[t] : "unknown";
}

void os_tally_add(struct os_tally *d, const struct os_tally *s)
{
	for (int i = 0; i < OS_NTYPES; i++) {
		d->ops[i] += s->ops[i];
		d->out[i] += s->out[i];
		d->in[i] += s->in[i];
	}
	d->round_trips += s->round_trips;
}

void os_counters_add(struct os_counters *d, const struct os_counters *s)
{
	os_tally_add(&d->committed, &s->committed);
	os_tally_add(&d->aborted, &s->aborted);
	os_tally_add(&d->other, &s->other);
	d->commits += s->commits;
	d->aborts += s->aborts;
	d->torn_reads += s->torn_reads;
	d->wait_rereads += s->wait_rereads;
	d->cache_hits += s->cache_hits;
	d->cache_misses += s->cache_misses;
	d->splits += s->splits;
}

/* ---- RMA, one operation at a time ---------------------------------------------- */

/* Inside a step's coroutine: let the session's other steps run (a lock
 * being polled may be held by one of them). */
static void step_yield(os_session_t *s)
{
	os_txn_t *t = s->running;
	if (!t)
		return;
	swapcontext(&t->ctx, &s->sched);
	s->cur = &t->tally;
}

static int rma_wait(os_session_t *s, ucs_status_ptr_t req)
{
	if (req == NULL)
		return 0;
	if (UCS_PTR_IS_ERR(req)) {
		s->broken = 1;
		return LOTUS_EUNAVAIL;
	}
	uint64_t deadline = 0;
	for (unsigned i = 0;; i++) {
		ucs_status_t st = ucp_request_check_status(req);
		if (st != UCS_INPROGRESS) {
			ucp_request_free(req);
			if (st == UCS_OK)
				return 0;
			s->broken = 1;
			return LOTUS_EUNAVAIL;
		}
		if (s->running)      /* a step's coroutine: let the others run meanwhile */
			step_yield(s);
		else
			ucp_worker_progress(s->uw);
		if ((i & 1023) == 1023 || s->running) {
			uint64_t now = clock_now_ns();
			if (!deadline)
				deadline = now + (uint64_t)s->e->o.timeout_ms * 1000000;
			else if (now > deadline) {
				ucp_request_cancel(s->uw, req);
				ucp_worker_progress(s->uw);
				ucp_request_free(req);
				s->broken = 1;
				return LOTUS_ETIMEOUT;
			}
		}
	}
}

static void count(os_session_t *s, enum os_op_type t, size_t out, size_t in)
{
	s->cur->ops[t]++;
	s->cur->out[t] += out;
	s->cur->in[t] += in;
	s->cur->round_trips++;
}

static int rma_get(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, void *buf,
		   size_t len)
{
	if (s->broken)
		return LOTUS_EUNAVAIL;
	ucp_request_param_t p = { 0 };
	count(s, OS_READ, 0, len);
	return rma_wait(s, ucp_get_nbx(s->ep[sv], buf, len, addr, s->tabs[tid].sv[sv].rkey, &p));
}

static int rma_put(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, const void *buf,
		   size_t len)
{
	if (s->broken)
		return LOTUS_EUNAVAIL;
	ucp_request_param_t p = { 0 };
	count(s, OS_WRITE, len, 0);
	return rma_wait(s, ucp_put_nbx(s->ep[sv], buf, len, addr, s->tabs[tid].sv[sv].rkey, &p));
}

static int rma_atomic(os_session_t *s, unsigned tid, unsigned sv, ucp_atomic_op_t op,
		      uint64_t addr, uint64_t value, uint64_t *result)
{
	if (s->broken)
		return LOTUS_EUNAVAIL;
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_REPLY_BUFFER,
		.datatype = ucp_dt_make_contig(8),
		.reply_buffer = result,
	};
	if (op == UCP_ATOMIC_OP_CSWAP)
		count(s, OS_CAS, 16, 8);
	else
		count(s, OS_FAA, 8, 8);
	return rma_wait(s, ucp_atomic_op_nbx(s->ep[sv], op, &value, 1, addr,
					     s->tabs[tid].sv[sv].rkey, &p));
}

/* *old gets the word's value before the CAS (== expect: it was swapped).
 * UCX's CSWAP compares with the operand buffer and swaps in the reply
 * buffer's value, which then receives the old one. */
static int rma_cas(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, uint64_t expect,
		   uint64_t swap, uint64_t *old)
{
	*old = swap;
	return rma_atomic(s, tid, sv, UCP_ATOMIC_OP_CSWAP, addr, expect, old);
}

static int rma_faa(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, uint64_t add,
		   uint64_t *old)
{
	return rma_atomic(s, tid, sv, UCP_ATOMIC_OP_ADD, addr, add, old);
}

/* Order the puts before it before those after it.  UCX 1.13 has no
 * ucp_ep_fence: the worker's fence covers every endpoint of the session. */
static void rma_fence(os_session_t *s, unsigned sv)
{
	(void)sv;
	ucp_worker_fence(s->uw);
}

/* ---- the page cache and the index --------------------------------------------- */

static struct os_cpage *cache_slot(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr)
{
	if (!s->ncache)
		return NULL;
	uint64_t h = (addr / OS_PAGE_SIZE) * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)sv << 8 | tid);
	return &s->cache[(h >> 17) % s->ncache];
}

static const struct os_page *cache_find(os_session_t *s, unsigned tid, unsigned sv,
					uint64_t addr)
{
	struct os_cpage *c = cache_slot(s, tid, sv, addr);
	if (c && c->addr == addr && c->sv == sv && c->tid == tid) {
		s->cnt.cache_hits++;
		return &c->page;
	}
	return NULL;
}

static void cache_put(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr,
		      const struct os_page *pg)
{
	struct os_cpage *c = cache_slot(s, tid, sv, addr);
	if (!c)
		return;
	c->addr = addr;
	c->sv = sv;
	c->tid = tid;
	c->page = *pg;
}

static void cache_drop(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr)
{
	struct os_cpage *c = cache_slot(s, tid, sv, addr);
	if (c && c->addr == addr && c->sv == sv && c->tid == tid)
		c->addr = 0;
}

/* Read a page, again while its two versions differ (a torn read). */
static int read_page(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr,
		     struct os_page *pg)
{
	for (unsigned i = 0; i < OS_TORN_MAX; i++) {
		int rc = rma_get(s, tid, sv, addr, pg, sizeof(*pg));
		if (rc)
			return rc;
		if (pg->front == pg->rear)
			return 0;
		s->cnt.torn_reads++;
	}
	return LOTUS_ETIMEOUT;
}

static int read_root(os_session_t *s, unsigned tid, unsigned sv, uint64_t *root)
{
	struct os_srv_table *st = &s->tabs[tid].sv[sv];
	int rc = rma_get(s, tid, sv, st->base + offsetof(struct os_region_hdr, root), root, 8);
	if (rc == 0)
		st->root = *root;
	return rc;
}

/* Index of the child of internal page pg that covers key. */
static unsigned child_index(const struct os_page *pg, uint64_t key)
{
	unsigned lo = 0, hi = pg->count;   /* the last e[i].key <= key */
	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (pg->e[mid].key <= key)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Position of key in leaf pg, or -(insertion point) - 1. */
static int leaf_search(const struct os_page *pg, uint64_t key)
{
	int lo = 0, hi = pg->count - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (pg->e[mid].key == key)
			return mid;
		if (pg->e[mid].key < key)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -lo - 1;
}

/* Descend to the page of `level` that holds key: *addr and a validated copy
 * in *out.  path (may be NULL) gets the address of each internal page passed
 * at its level (0 where the descent did not pass one). */
static int find_level(os_session_t *s, unsigned tid, unsigned sv, uint64_t key, unsigned level,
		      uint64_t *addr_out, struct os_page *out, uint64_t *path)
{
	int use_cache = 1, rc;
	uint64_t root = s->tabs[tid].sv[sv].root;
	if (!root && (rc = read_root(s, tid, sv, &root)) != 0)
		return rc;
	for (int restarts = 0; restarts < 8; restarts++) {
		uint64_t addr = root;
		if (path)
			memset(path, 0, OS_MAX_DEPTH * sizeof(*path));
		for (unsigned step = 0; step < OS_MAX_DEPTH * 4; step++) {
			const struct os_page *pg = use_cache ? cache_find(s, tid, sv, addr) : NULL;
			if (!pg) {
				if ((rc = read_page(s, tid, sv, addr, out)) != 0)
					return rc;
				pg = out;
				if (pg->level > 0) {
					s->cnt.cache_misses++;
					cache_put(s, tid, sv, addr, pg);
				}
			}
			if (key < pg->low || pg->level < level) {   /* a stale way here */
				cache_drop(s, tid, sv, addr);
				break;
			}
			if (pg->high != OS_KEY_INF && key >= pg->high && pg->sibling) {
				if (pg != out)
					cache_drop(s, tid, sv, addr);
				addr = pg->sibling;
				continue;
			}
			if (pg->level == level) {
				if (pg != out)
					*out = *pg;
				*addr_out = addr;
				return 0;
			}
			if (path && pg->level < OS_MAX_DEPTH)
				path[pg->level] = addr;
			addr = pg->e[child_index(pg, key)].ptr;
		}
		use_cache = 0;
		if ((rc = read_root(s, tid, sv, &root)) != 0)
			return rc;
	}
	return LOTUS_ETIMEOUT;
}

/* ---- sessions ----------------------------------------------------------------- */

static void os_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	os_session_t *s = arg;
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	(void)c;
	if (wire_msg_check(data, len) != 0 || h->type != WIRE_REP)
		return;
	wire_iter_init(&it, data, len);
	while (wire_next_rep(&it, &r, &k, &v) == 1) {
		if (r->op != OP_OS_ATTACH)
			continue;
		s->rep_status = r->status;
		free(s->rep_val);
		s->rep_val = r->value_len ? malloc(r->value_len) : NULL;
		s->rep_len = s->rep_val ? r->value_len : 0;
		if (s->rep_val)
			memcpy(s->rep_val, v, r->value_len);
		s->rep_got = 1;
	}
}

static void os_on_close(void *arg, net_conn_t *c, int reason)
{
	os_session_t *s = arg;
	for (unsigned i = 0; i < s->nsrv; i++)
		if (s->conn[i] == c) {
			s->conn[i] = NULL;
			s->broken = 1;
		}
}

static const struct net_handlers os_handlers = {
	.on_msg = os_on_msg,
	.on_close = os_on_close,
};

/* The user's claim on its session, for one public call (nests). */
static void claim(os_session_t *s)
{
	int v = atomic_load_explicit(&s->claim, memory_order_relaxed);
	for (;;) {
		if (v < 0) {            /* the keeper is in it, briefly */
			sched_yield();
			v = atomic_load_explicit(&s->claim, memory_order_relaxed);
		} else if (atomic_compare_exchange_weak_explicit(&s->claim, &v, v + 1,
								 memory_order_acquire,
								 memory_order_relaxed)) {
			return;
		}
	}
}

static void unclaim(os_session_t *s)
{
	atomic_fetch_sub_explicit(&s->claim, 1, memory_order_release);
}

static void *keeper_main(void *arg)
{
	os_engine_t *e = arg;
	uint64_t period_ns = (uint64_t)MAX(e->o.lease_ms / 8, 10u) * 1000000ULL;
	pthread_mutex_lock(&e->live_mu);
	while (!e->keeper_stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + period_ns;
		ts.tv_sec += (time_t)(ns / 1000000000ULL);
		ts.tv_nsec = (long)(ns % 1000000000ULL);
		pthread_cond_timedwait(&e->keeper_cv, &e->live_mu, &ts);
		for (os_session_t *s = e->live; s && !e->keeper_stop; s = s->live_next) {
			int free_claim = 0;
			if (!atomic_compare_exchange_strong_explicit(&s->claim, &free_claim, -1,
								     memory_order_acquire,
								     memory_order_relaxed))
				continue;    /* its user is in it, and progresses it */
			uint64_t now = clock_now_ns();
			if (now - s->last_poll_ns >= period_ns) {
				s->last_poll_ns = now;
				net_progress(s->w);
			}
			atomic_store_explicit(&s->claim, 0, memory_order_release);
		}
	}
	pthread_mutex_unlock(&e->live_mu);
	return NULL;
}

static void keeper_add(os_engine_t *e, os_session_t *s)
{
	pthread_mutex_lock(&e->live_mu);
	s->live_prev = NULL;
	s->live_next = e->live;
	if (e->live)
		e->live->live_prev = s;
	e->live = s;
	if (!e->keeper_on && !e->keeper_stop) {
		if (pthread_create(&e->keeper, NULL, keeper_main, e) == 0)
			e->keeper_on = 1;
		else
			log_warn("onesided: no lease keeper thread: a session must be polled "
				 "within every lease (%u ms)", e->o.lease_ms);
	}
	pthread_mutex_unlock(&e->live_mu);
}

static void keeper_remove(os_engine_t *e, os_session_t *s)
{
	pthread_mutex_lock(&e->live_mu);   /* waits for a keeper pass over s */
	if (s->live_prev)
		s->live_prev->live_next = s->live_next;
	else if (e->live == s)
		e->live = s->live_next;
	if (s->live_next)
		s->live_next->live_prev = s->live_prev;
	s->live_next = s->live_prev = NULL;
	pthread_mutex_unlock(&e->live_mu);
}

int os_engine_create(const struct os_engine_opts *o, os_engine_t **out)
{
	if (!o->nservers || o->nservers > OS_MAX_SERVERS)
		return LOTUS_ECONFIG;
	if (o->cc != LOTUS_NO_WAIT && o->cc != LOTUS_WAIT_DIE) {
		log_error("onesided: the one-sided engine runs no_wait or wait_die only");
		return LOTUS_EUNSUPPORTED;
	}
	os_engine_t *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->o = *o;
	if (!e->o.cache_bytes)
		e->o.cache_bytes = 16u << 20;
	if (!e->o.timeout_ms)
		e->o.timeout_ms = 10000;
	if (!e->o.wait_ms)
		e->o.wait_ms = 1000;
	if (!e->o.lease_ms)
		e->o.lease_ms = 3000;   /* net's default lease */
	for (unsigned i = 0; i < o->nservers; i++) {
		snprintf(e->hosts[i], sizeof(e->hosts[i]), "%s", o->hosts[i]);
		e->ports[i] = o->ports[i];
	}
	const char *hosts[OS_MAX_SERVERS];
	for (unsigned i = 0; i < o->nservers; i++)
		hosts[i] = e->hosts[i];
	e->o.hosts = NULL;
	e->o.ports = NULL;
	e->o.secret_file = NULL;
	struct net_opts no = { .transport = o->transport, .lease_ms = e->o.lease_ms,
			       .secret_file = o->secret_file, .hosts = hosts,
			       .nhosts = o->nservers };
	int rc = net_ctx_create(&no, &e->net);
	if (rc) {
		free(e);
		return rc;
	}
	pthread_condattr_t ca;
	pthread_mutex_init(&e->live_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->keeper_cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = e;
	return 0;
}

void os_engine_destroy(os_engine_t *e)
{
	if (!e)
		return;
	pthread_mutex_lock(&e->live_mu);
	e->keeper_stop = 1;
	pthread_cond_broadcast(&e->keeper_cv);
	int on = e->keeper_on;
	e->keeper_on = 0;
	pthread_mutex_unlock(&e->live_mu);
	if (on)
		pthread_join(e->keeper, NULL);
	pthread_cond_destroy(&e->keeper_cv);
	pthread_mutex_destroy(&e->live_mu);
	net_ctx_destroy(e->net);
	free(e);
}

const char *os_engine_transport(const os_engine_t *e)
{
	return net_ctx_transport(e->net);
}

static void session_poll(os_session_t *s)
{
	s->last_poll_ns = clock_now_ns();
	net_progress(s->w);
}

void os_session_poll(os_session_t *s)
{
	claim(s);
	session_poll(s);
	unclaim(s);
}

static void maybe_poll(os_session_t *s)
{
	if (clock_now_ns() - s->last_poll_ns > OS_POLL_NS)
		session_poll(s);
}

int os_session_open(os_engine_t *e, os_session_t **out)
{
	os_session_t *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->e = e;
	s->nsrv = e->o.nservers;
	s->sid = atomic_fetch_add(&e->nsessions, 1);
	s->cur = &s->cnt.other;
	s->ncache = e->o.cache_bytes / sizeof(struct os_cpage);
	s->cache = s->ncache ? calloc(s->ncache, sizeof(*s->cache)) : NULL;
	int rc = s->ncache && !s->cache ? -ENOMEM : 0;
	if (rc == 0)
		rc = net_worker_create_shared(e->net, &os_handlers, s, &s->w);
	for (unsigned i = 0; rc == 0 && i < s->nsrv; i++) {
		rc = net_connect(s->w, e->hosts[i], e->ports[i], (int)e->o.timeout_ms, &s->conn[i]);
		if (rc == 0)
			s->ep[i] = net_conn_ep(s->conn[i]);
	}
	if (rc) {
		os_session_close(s);
		return rc;
	}
	s->uw = net_worker_ucp(s->w);
	s->last_poll_ns = clock_now_ns();
	keeper_add(e, s);
	*out = s;
	return 0;
}

void os_session_close(os_session_t *s)
{
	if (!s)
		return;
	if (s->uw)   /* added to the keeper's list (the last step of open) */
		keeper_remove(s->e, s);
	for (unsigned t = 0; t < s->ntabs; t++)
		for (unsigned i = 0; i < s->nsrv; i++)
			if (s->tabs[t].sv[i].rkey)
				ucp_rkey_destroy(s->tabs[t].sv[i].rkey);
	if (s->w)
		net_worker_destroy(s->w);
	free(s->rep_val);
	free(s->cache);
	free(s);
}

/* One OP_OS_ATTACH round trip to server sv (a lotus message, counted by net). */
static int attach_one(os_session_t *s, unsigned sv, const char *name, struct os_table *tb)
{
	struct wire_buf b;
	struct wire_req r = { .op = OP_OS_ATTACH, .key_len = (uint16_t)strlen(name) };
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
	s->rep_got = 0;
	rc = net_send(s->conn[sv], msg, len);
	uint64_t deadline = clock_now_ns() + (uint64_t)s->e->o.timeout_ms * 1000000;
	while (rc == 0 && !s->rep_got && !s->broken) {
		if (clock_now_ns() > deadline)
			return LOTUS_ETIMEOUT;
		net_wait(s->w, 100);
	}
	if (rc)
		return rc;
	if (!s->rep_got)
		return LOTUS_EUNAVAIL;
	if (s->rep_status)
		return s->rep_status;
	const struct os_attach_info *ai = s->rep_val;
	if (s->rep_len < sizeof(*ai) || s->rep_len < sizeof(*ai) + ai->rkey_len)
		return LOTUS_EPROTO;
	ucs_status_t st = ucp_ep_rkey_unpack(s->ep[sv], ai + 1, &tb->sv[sv].rkey);
	if (st != UCS_OK) {
		log_error("onesided: cannot unpack the rkey of server %u: %s", sv,
			  ucs_status_string(st));
		return LOTUS_EUNSUPPORTED;
	}
	tb->sv[sv].base = ai->base;
	tb->value_max = ai->value_max;
	return 0;
}

static int session_attach(os_session_t *s, const char *name, unsigned *tid);

int os_session_attach(os_session_t *s, const char *name, unsigned *tid)
{
	claim(s);
	int rc = session_attach(s, name, tid);
	unclaim(s);
	return rc;
}

static int session_attach(os_session_t *s, const char *name, unsigned *tid)
{
	for (unsigned i = 0; i < s->ntabs; i++)
		if (strcmp(s->tabs[i].name, name) == 0) {
			*tid = i;
			return 0;
		}
	if (s->ntabs == OS_MAX_TABLES || strlen(name) > 64)
		return LOTUS_EUNSUPPORTED;
	struct os_table *tb = &s->tabs[s->ntabs];
	memset(tb, 0, sizeof(*tb));
	snprintf(tb->name, sizeof(tb->name), "%s", name);
	for (unsigned sv = 0; sv < s->nsrv; sv++) {
		int rc = attach_one(s, sv, name, tb);
		if (rc) {
			for (unsigned j = 0; j <= sv; j++)
				if (tb->sv[j].rkey)
					ucp_rkey_destroy(tb->sv[j].rkey);
			memset(tb, 0, sizeof(*tb));
			return rc;
		}
	}
	*tid = s->ntabs++;
	return 0;
}

uint32_t os_session_value_max(const os_session_t *s, unsigned tid)
{
	return tid < s->ntabs ? s->tabs[tid].value_max : 0;
}

void os_session_counters(const os_session_t *s, struct os_counters *out)
{
	*out = s->cnt;
}

/* ---- transactions --------------------------------------------------------------- */

static uint64_t next_priority(os_session_t *s)
{
	/* Older = smaller.  Unique per process: the low 8 bits are the session. */
	uint64_t p = (clock_now_ns() << 8) | (s->sid & 0xff);
	if (p <= s->last_prio)
		p = s->last_prio + 256;
	s->last_prio = p;
	return p;
}

int os_txn_begin(os_session_t *s, os_txn_t **out)
{
	os_txn_t *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->s = s;
	t->prio = next_priority(s);
	*out = t;
	return 0;
}

static void ops_clear(os_txn_t *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		free(t->ops[i].val);
		free(t->ops[i].res);
	}
	t->n = 0;
}

static int txn_abort(os_txn_t *t);

void os_txn_free(os_txn_t *t)
{
	if (!t)
		return;
	os_session_t *s = t->s;
	claim(s);
	if (t->stepping)   /* a step cannot be cut off: run it to its end */
		while (t->stepping)
			os_session_run(t->s);
	free(t->stack);
	if (t->state == TX_EXECUTED || t->state == TX_FAILED || (t->state == TX_IDLE && t->n))
		txn_abort(t);
	ops_clear(t);
	free(t->ops);
	free(t);
	unclaim(s);
}

static int txn_reset(os_txn_t *t)
{
	if (t->state == TX_EXECUTED || t->state == TX_FAILED || (t->state == TX_IDLE && t->n))
		txn_abort(t);
	ops_clear(t);
	memset(&t->tally, 0, sizeof(t->tally));
	t->state = TX_IDLE;
	maybe_poll(t->s);
	return t->s->broken ? LOTUS_EUNAVAIL : 0;
}

int os_txn_recycle(os_txn_t *t)
{
	claim(t->s);
	t->prio = next_priority(t->s);
	int rc = txn_reset(t);
	unclaim(t->s);
	return rc;
}

int os_txn_restart(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_reset(t);
	unclaim(t->s);
	return rc;
}

uint64_t os_txn_priority(const os_txn_t *t)
{
	return t->prio;
}

void os_txn_set_priority(os_txn_t *t, uint64_t prio)
{
	t->prio = prio;
}

static struct os_op *op_find(os_txn_t *t, unsigned tid, uint64_t key)
{
	for (unsigned i = 0; i < t->n; i++)
		if (t->ops[i].tid == tid && t->ops[i].key == key && t->ops[i].kind != K_INSERT)
			return &t->ops[i];
	return NULL;
}

static int stage(os_txn_t *t, int kind, unsigned tid, const void *key, size_t klen,
		 const void *val, size_t vlen)
{
	os_session_t *s = t->s;
	if (t->state != TX_IDLE && t->state != TX_EXECUTED)
		return LOTUS_ESTATE;
	if (tid >= s->ntabs)
		return LOTUS_ENOTABLE;
	if (klen != 8)
		return LOTUS_EUNSUPPORTED;
	if (vlen > s->tabs[tid].value_max)
		return LOTUS_ETOOBIG;
	uint64_t k = os_key_u64(key);
	if (kind == K_WRITE) {           /* a key read for update takes the value */
		struct os_op *prev = op_find(t, tid, k);
		if (prev && (prev->kind == K_READ_X || prev->kind == K_WRITE)) {
			unsigned char *v = malloc(vlen ? vlen : 1);
			if (!v)
				return -ENOMEM;
			memcpy(v, val, vlen);
			free(prev->val);
			prev->val = v;
			prev->vlen = vlen;
			prev->has_val = 1;
			return (int)(prev - t->ops);
		}
	}
	if (t->n == t->cap) {
		unsigned cap = t->cap ? t->cap * 2 : 16;
		struct os_op *no = realloc(t->ops, cap * sizeof(*no));
		if (!no)
			return -ENOMEM;
		t->ops = no;
		t->cap = cap;
	}
	struct os_op *op = &t->ops[t->n];
	memset(op, 0, sizeof(*op));
	op->kind = (uint8_t)kind;
	op->tid = tid;
	op->key = k;
	memcpy(op->kb, key, 8);
	op->sv = (unsigned)(fnv1a64(key, 8) % s->nsrv);   /* lotus's routing */
	if (kind == K_WRITE || kind == K_INSERT) {
		op->val = malloc(vlen ? vlen : 1);
		if (!op->val)
			return -ENOMEM;
		memcpy(op->val, val, vlen);
		op->vlen = vlen;
		op->has_val = 1;
	}
	return (int)t->n++;
}

int os_txn_read(os_txn_t *t, unsigned tid, const void *key, size_t klen)
{
	return stage(t, K_READ, tid, key, klen, NULL, 0);
}

int os_txn_read_for_update(os_txn_t *t, unsigned tid, const void *key, size_t klen)
{
	return stage(t, K_READ_X, tid, key, klen, NULL, 0);
}

int os_txn_write(os_txn_t *t, unsigned tid, const void *key, size_t klen, const void *val,
		 size_t vlen)
{
	return stage(t, K_WRITE, tid, key, klen, val, vlen);
}

int os_txn_insert(os_txn_t *t, unsigned tid, const void *key, size_t klen, const void *val,
		  size_t vlen)
{
	return stage(t, K_INSERT, tid, key, klen, val, vlen);
}

/* Find op's record through the index. */
static int locate(os_txn_t *t, struct os_op *op)
{
	struct os_page leaf;
	uint64_t addr;
	int rc = find_level(t->s, op->tid, op->sv, op->key, 0, &addr, &leaf, NULL);
	if (rc)
		return rc;
	int i = leaf_search(&leaf, op->key);
	if (i < 0)
		return LOTUS_ENOTFOUND;
	op->rec = leaf.e[i].ptr;
	op->located = 1;
	return 0;
}

/* Take op's record lock in mode (HELD_S or HELD_X) by read-header-then-CAS. */
static int lock_rec(os_txn_t *t, struct os_op *op, int mode)
{
	os_session_t *s = t->s;
	uint64_t hdr[2], old, wait_until = 0;
	int rc = rma_get(s, op->tid, op->sv, op->rec, hdr, sizeof(hdr));
	while (rc == 0) {
		uint64_t cur = hdr[0], want;
		int is_free;
		if (mode == HELD_S) {
			is_free = !(cur & OS_LOCK_W);
			want = cur + 1;
		} else {
			is_free = cur == (op->held == HELD_S ? 1u : 0u);
			want = OS_LOCK_W;
		}
		if (is_free) {
			if ((rc = rma_cas(s, op->tid, op->sv, op->rec, cur, want, &old)) != 0)
				return rc;
			if (old == cur)
				break;
			hdr[0] = old;   /* lost the race: decide again on what is there */
			continue;
		}
		if (s->e->o.cc == LOTUS_NO_WAIT || !(t->prio < hdr[1]))
			return LOTUS_EABORTED;       /* NO_WAIT, or WAIT_DIE: die */
		uint64_t now = clock_now_ns();       /* WAIT_DIE: older, wait by polling */
		if (!wait_until)
			wait_until = now + (uint64_t)s->e->o.wait_ms * 1000000;
		else if (now > wait_until)
			return LOTUS_EABORTED;
		s->cnt.wait_rereads++;
		maybe_poll(s);
		step_yield(s);
		rc = rma_get(s, op->tid, op->sv, op->rec, hdr, sizeof(hdr));
	}
	if (rc)
		return rc;
	op->held = (uint8_t)mode;
	if (s->e->o.cc == LOTUS_WAIT_DIE)    /* the owner's priority, for others to compare */
		rc = rma_put(s, op->tid, op->sv, op->rec + 8, &t->prio, 8);
	return rc;
}

static int release_rec(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	int rc = 0;
	uint64_t old, zero = 0;
	if (op->held == HELD_S)
		rc = rma_faa(s, op->tid, op->sv, op->rec, (uint64_t)-1, &old);
	else if (op->held == HELD_X)
		rc = rma_put(s, op->tid, op->sv, op->rec, &zero, 8);
	op->held = HELD_NONE;
	return rc;
}

static void attempt_end(os_txn_t *t, int committed)
{
	os_session_t *s = t->s;
	os_tally_add(committed ? &s->cnt.committed : &s->cnt.aborted, &t->tally);
	if (committed)
		s->cnt.commits++;
	else
		s->cnt.aborts++;
	memset(&t->tally, 0, sizeof(t->tally));
	s->cur = &s->cnt.other;
}

/* Locate and lock every op not locked yet (inserts: at commit). */
static int lock_all(os_txn_t *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		struct os_op *op = &t->ops[i];
		int mode = op->kind == K_READ ? HELD_S : HELD_X;
		if (op->kind == K_INSERT || op->held >= mode)
			continue;
		if (op->missing)
			continue;
		int rc = op->located ? 0 : locate(t, op);
		if (rc == LOTUS_ENOTFOUND) {   /* per op, as lotus reports it */
			if (op->kind == K_WRITE) {
				op->kind = K_INSERT;   /* a blind write of a new key */
				op->upsert = 1;
			} else
				op->missing = 1;
			continue;
		}
		if (rc == 0)
			rc = lock_rec(t, op, mode);
		if (rc)
			return rc;
	}
	return 0;
}

/* The public calls claim the session; a step's coroutine calls txn_* (it may
 * be suspended between its user's calls, when the session must be
 * claimable). */
static int txn_execute(os_txn_t *t)
{
	os_session_t *s = t->s;
	if (t->state != TX_IDLE && t->state != TX_EXECUTED)
		return LOTUS_ESTATE;
	s->cur = &t->tally;
	int rc = lock_all(t);
	/* the data, only once every lock is held */
	uint32_t vmax = 0;
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct os_op *op = &t->ops[i];
		if ((op->kind != K_READ && op->kind != K_READ_X) || op->found || op->missing)
			continue;
		vmax = s->tabs[op->tid].value_max;
		op->res = malloc(8 + (size_t)vmax);
		if (!op->res) {
			rc = -ENOMEM;
			break;
		}
		rc = rma_get(s, op->tid, op->sv, op->rec + OS_REC_DATA, op->res, 8 + (size_t)vmax);
		uint64_t len;
		memcpy(&len, op->res, 8);
		op->rlen = MIN(len, vmax);
		op->found = rc == 0;
	}
	s->cur = &s->cnt.other;
	if (rc) {
		t->state = TX_FAILED;
		return rc;
	}
	t->state = TX_EXECUTED;
	return 0;
}

int os_txn_finished(const os_txn_t *t)
{
	return t->state == TX_DONE;
}

int os_txn_result(const os_txn_t *t, int op, const void **val, size_t *vlen)
{
	if (op < 0 || (unsigned)op >= t->n || !t->ops[op].found)
		return LOTUS_ENOTFOUND;
	*val = t->ops[op].res + 8;
	*vlen = t->ops[op].rlen;
	return 0;
}

static int tree_insert(os_txn_t *t, struct os_op *op);

static int txn_commit(os_txn_t *t)
{
	os_session_t *s = t->s;
	if (t->state != TX_IDLE && t->state != TX_EXECUTED)
		return LOTUS_ESTATE;
	s->cur = &t->tally;
	int rc = lock_all(t);            /* writes staged after the execute */
	for (unsigned i = 0; rc == 0 && i < t->n; i++) {
		struct os_op *op = &t->ops[i];
		if (op->kind == K_INSERT || !op->has_val || op->missing)
			continue;
		unsigned char *buf = malloc(8 + op->vlen);
		if (!buf) {
			rc = -ENOMEM;
			break;
		}
		uint64_t len = op->vlen;
		memcpy(buf, &len, 8);
		memcpy(buf + 8, op->val, op->vlen);
		rc = rma_put(s, op->tid, op->sv, op->rec + OS_REC_DATA, buf, 8 + op->vlen);
		free(buf);
	}
	for (unsigned i = 0; rc == 0 && i < t->n; i++)
		if ((t->ops[i].kind == K_INSERT || t->ops[i].missing) && t->ops[i].has_val) {
			rc = tree_insert(t, &t->ops[i]);
			if (rc == LOTUS_EEXISTS && (t->ops[i].upsert || t->ops[i].missing))
				rc = LOTUS_EABORTED;   /* inserted meanwhile: try again */
		}
	if (rc) {
		s->cur = &s->cnt.other;
		t->state = TX_FAILED;
		if (rc == LOTUS_EEXISTS || rc == LOTUS_ENOTFOUND)
			txn_abort(t);
		return rc;
	}
	for (unsigned sv = 0; sv < s->nsrv; sv++)   /* data before the unlocks */
		rma_fence(s, sv);
	for (unsigned i = 0; i < t->n; i++) {
		int r2 = release_rec(t, &t->ops[i]);
		if (r2 && !rc)
			rc = r2;
	}
	attempt_end(t, 1);
	t->state = TX_DONE;
	return rc;
}

static int txn_abort(os_txn_t *t)
{
	os_session_t *s = t->s;
	if (t->state == TX_DONE)
		return LOTUS_ESTATE;
	s->cur = &t->tally;
	int rc = 0;
	for (unsigned i = 0; i < t->n; i++) {
		int r2 = release_rec(t, &t->ops[i]);
		if (r2 && !rc)
			rc = r2;
	}
	attempt_end(t, 0);
	t->state = TX_DONE;
	return rc;
}

int os_txn_execute(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_execute(t);
	unclaim(t->s);
	return rc;
}

int os_txn_commit(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_commit(t);
	unclaim(t->s);
	return rc;
}

int os_txn_abort(os_txn_t *t)
{
	claim(t->s);
	int rc = txn_abort(t);
	unclaim(t->s);
	return rc;
}

/* ---- inserts and splits -------------------------------------------------------- */

static int region_alloc(os_session_t *s, unsigned tid, unsigned sv, uint64_t bytes,
			uint64_t *addr)
{
	struct os_srv_table *st = &s->tabs[tid].sv[sv];
	uint64_t end;
	int rc = rma_faa(s, tid, sv, st->base + offsetof(struct os_region_hdr, alloc), bytes, addr);
	if (rc == 0)
		rc = rma_get(s, tid, sv, st->base + offsetof(struct os_region_hdr, end), &end, 8);
	if (rc == 0 && *addr + bytes > end)
		rc = LOTUS_ENOSPACE;
	return rc;
}

static int page_lock(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr)
{
	uint64_t old;
	for (unsigned i = 0; i < OS_PAGE_SPINS; i++) {
		int rc = rma_cas(s, tid, sv, addr, 0, 1, &old);
		if (rc || old == 0)
			return rc;
		maybe_poll(s);
		step_yield(s);
	}
	return LOTUS_ETIMEOUT;
}

/* Write a locked page back (all but its lock word), then unlock it. */
static int page_write_unlock(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr,
			     struct os_page *pg)
{
	uint64_t zero = 0;
	pg->front++;
	pg->rear = pg->front;
	int rc = rma_put(s, tid, sv, addr + 8, (unsigned char *)pg + 8, sizeof(*pg) - 8);
	rma_fence(s, sv);
	if (rc == 0)
		rc = rma_put(s, tid, sv, addr, &zero, 8);
	return rc;
}

static void page_insert_at(struct os_page *pg, unsigned pos, uint64_t key, uint64_t ptr)
{
	memmove(&pg->e[pos + 1], &pg->e[pos], (pg->count - pos) * sizeof(pg->e[0]));
	pg->e[pos].key = key;
	pg->e[pos].ptr = ptr;
	pg->count++;
}

/* Add (key, ptr) at `level` of the tree: the page found from start (0: a
 * descent), moving right as needed; split and recurse upwards if full. */
static int level_insert(os_txn_t *t, unsigned tid, unsigned sv, unsigned level, uint64_t key,
			uint64_t ptr, uint64_t start, uint64_t *path)
{
	os_session_t *s = t->s;
	struct os_page pg;
	uint64_t addr = start, old;
	int rc;
	if (!addr && (rc = find_level(s, tid, sv, key, level, &addr, &pg, path)) != 0)
		return rc;
	for (;;) {
		if ((rc = page_lock(s, tid, sv, addr)) != 0)
			return rc;
		if ((rc = read_page(s, tid, sv, addr, &pg)) != 0)
			return rc;
		if (pg.high != OS_KEY_INF && key >= pg.high && pg.sibling) {
			uint64_t zero = 0;
			rma_put(s, tid, sv, addr, &zero, 8);
			addr = pg.sibling;
			continue;
		}
		break;
	}
	cache_drop(s, tid, sv, addr);
	unsigned pos;
	if (level == 0) {
		int i = leaf_search(&pg, key);
		if (i >= 0) {
			uint64_t zero = 0;
			rma_put(s, tid, sv, addr, &zero, 8);
			return LOTUS_EEXISTS;
		}
		pos = (unsigned)(-i - 1);
	} else {
		pos = child_index(&pg, key) + 1;
	}
	if (pg.count < OS_PAGE_ENTRIES) {
		page_insert_at(&pg, pos, key, ptr);
		return page_write_unlock(s, tid, sv, addr, &pg);
	}
	/* split: the right half goes to a new page, written before the left one */
	struct os_page right;
	uint64_t raddr;
	if ((rc = region_alloc(s, tid, sv, OS_PAGE_SIZE, &raddr)) != 0)
		return rc;
	unsigned half = pg.count / 2;
	memset(&right, 0, sizeof(right));
	right.level = pg.level;
	right.count = (uint16_t)(pg.count - half);
	memcpy(right.e, &pg.e[half], right.count * sizeof(right.e[0]));
	right.low = right.e[0].key;
	right.high = pg.high;
	right.sibling = pg.sibling;
	pg.count = (uint16_t)half;
	pg.high = right.low;
	pg.sibling = raddr;
	if (key >= right.low)
		page_insert_at(&right, pos - half, key, ptr);
	else
		page_insert_at(&pg, pos, key, ptr);
	if ((rc = rma_put(s, tid, sv, raddr, &right, sizeof(right))) != 0)
		return rc;
	rma_fence(s, sv);
	if ((rc = page_write_unlock(s, tid, sv, addr, &pg)) != 0)
		return rc;
	s->cnt.splits++;
	/* the separator into the parent; a new root if this page was the root */
	uint64_t parent = path && level + 1 < OS_MAX_DEPTH ? path[level + 1] : 0;
	if (parent)
		return level_insert(t, tid, sv, level + 1, right.low, raddr, parent, path);
	uint64_t root;
	if ((rc = read_root(s, tid, sv, &root)) != 0)
		return rc;
	if (root == addr) {
		struct os_page nr;
		uint64_t naddr;
		if ((rc = region_alloc(s, tid, sv, OS_PAGE_SIZE, &naddr)) != 0)
			return rc;
		memset(&nr, 0, sizeof(nr));
		nr.level = (uint16_t)(level + 1);
		nr.high = OS_KEY_INF;
		nr.count = 2;
		nr.e[0].key = 0;
		nr.e[0].ptr = addr;
		nr.e[1].key = right.low;
		nr.e[1].ptr = raddr;
		if ((rc = rma_put(s, tid, sv, naddr, &nr, sizeof(nr))) != 0)
			return rc;
		rma_fence(s, sv);
		struct os_srv_table *st = &s->tabs[tid].sv[sv];
		rc = rma_cas(s, tid, sv, st->base + offsetof(struct os_region_hdr, root), addr,
			     naddr, &old);
		if (rc)
			return rc;
		if (old == addr) {
			st->root = naddr;
			return 0;
		}
		st->root = old;   /* someone else grew the tree: insert below theirs */
	}
	return level_insert(t, tid, sv, level + 1, right.low, raddr, 0, NULL);
}

static int tree_insert(os_txn_t *t, struct os_op *op)
{
	os_session_t *s = t->s;
	uint64_t rec, path[OS_MAX_DEPTH];
	uint32_t vmax = s->tabs[op->tid].value_max;
	int rc = region_alloc(s, op->tid, op->sv, os_rec_size(vmax), &rec);
	if (rc)
		return rc;
	size_t n = sizeof(struct os_rec_hdr) + op->vlen;
	unsigned char *buf = calloc(1, n);
	if (!buf)
		return -ENOMEM;
	((struct os_rec_hdr *)buf)->len = op->vlen;
	memcpy(buf + sizeof(struct os_rec_hdr), op->val, op->vlen);
	rc = rma_put(s, op->tid, op->sv, rec, buf, n);
	free(buf);
	rma_fence(s, op->sv);   /* the record is whole before the leaf names it */
	struct os_page leaf;
	uint64_t laddr;
	if (rc == 0)
		rc = find_level(s, op->tid, op->sv, op->key, 0, &laddr, &leaf, path);
	if (rc == 0)
		rc = level_insert(t, op->tid, op->sv, 0, op->key, rec, laddr, path);
	return rc;
}

/* ---- steps as coroutines: several transactions' operations outstanding ------- */

static void step_main(unsigned hi, unsigned lo)
{
	os_txn_t *t = (os_txn_t *)(uintptr_t)((uint64_t)hi << 32 | lo);
	switch (t->step) {
	case OS_STEP_EXECUTE:
		t->step_rc = txn_execute(t);
		break;
	case OS_STEP_COMMIT:
		t->step_rc = txn_commit(t);
		break;
	default:
		t->step_rc = os_txn_finished(t) ? 0 : txn_abort(t);
		break;
	}
	t->step_done = 1;   /* returns to s->sched through uc_link */
}

/* Run t's coroutine until it waits or ends; an ended step calls back. */
static void step_resume(os_session_t *s, os_txn_t *t)
{
	struct os_tally *cur = s->cur;
	s->running = t;
	s->cur = &t->tally;
	swapcontext(&s->sched, &t->ctx);
	s->running = NULL;
	s->cur = cur;
	if (!t->step_done)
		return;
	for (os_txn_t **pp = &s->active; *pp; pp = &(*pp)->next_active)
		if (*pp == t) {
			*pp = t->next_active;
			break;
		}
	s->nactive--;
	t->stepping = 0;
	t->cb(t, t->step_rc, t->cb_arg);
}

int os_txn_step(os_txn_t *t, enum os_step step, os_step_cb cb, void *arg)
{
	os_session_t *s = t->s;
	if (t->stepping || s->running)
		return LOTUS_ESTATE;
	if (!t->stack && !(t->stack = malloc(OS_STACK)))
		return -ENOMEM;
	claim(s);
	getcontext(&t->ctx);
	t->ctx.uc_stack.ss_sp = t->stack;
	t->ctx.uc_stack.ss_size = OS_STACK;
	t->ctx.uc_link = &s->sched;
	uint64_t p = (uint64_t)(uintptr_t)t;
	makecontext(&t->ctx, (void (*)(void))step_main, 2, (unsigned)(p >> 32), (unsigned)p);
	t->step = step;
	t->step_done = 0;
	t->stepping = 1;
	t->cb = cb;
	t->cb_arg = arg;
	t->next_active = s->active;
	s->active = t;
	s->nactive++;
	step_resume(s, t);    /* runs until its first wait (or to its end) */
	unclaim(s);
	return 0;
}

int os_session_run(os_session_t *s)
{
	unsigned n = 0, max = s->nactive;
	claim(s);
	if (!max) {
		ucp_worker_progress(s->uw);
		unclaim(s);
		return 0;
	}
	os_txn_t *list[max];   /* the steps running now; those they start wait */
	ucp_worker_progress(s->uw);
	for (os_txn_t *t = s->active; t && n < max; t = t->next_active)
		list[n++] = t;
	for (unsigned i = 0; i < n; i++)
		step_resume(s, list[i]);
	unclaim(s);
	return (int)n;
}

unsigned os_session_active(const os_session_t *s)
{
	return s->nactive;
}
