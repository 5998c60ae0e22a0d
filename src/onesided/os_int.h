/*
 * os_int.h - what the one-sided engine's files share (os_engine.c,
 * os_index.c, os_txn.c, os_insert.c): the engine, session and transaction
 * structs, the RMA primitives, the index walk, and the session claim.
 *
 * Threads: a session and its transactions belong to one thread at a time
 * (the user's, inside a public call, which holds the claim; or the lease
 * keeper's, between calls, for a short progress).  Everything declared here
 * runs on that thread with the claim held, or inside a step's coroutine.
 */
#ifndef LOTUS_OS_INT_H
#define LOTUS_OS_INT_H
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <ucontext.h>
#include <ucp/api/ucp.h>
#include "compute/keeper.h"
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
	struct lease_keeper keeper;   /* keeps the open sessions' leases */
};

struct os_chunk_ref {
	ucp_rkey_h rkey;
	uint64_t base, size;
};

/* A table's region at one server: its chunks as far as this session knows
 * them (ch[0] holds the header; the last is the one allocated from). */
struct os_srv_table {
	struct os_chunk_ref ch[OS_MAX_CHUNKS];
	unsigned nch;
	uint64_t base, root;      /* base: chunk 0's, the region header */
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
	struct keeper_item kept;  /* on the engine's lease keeper */
};

enum { HELD_NONE, HELD_S, HELD_X };
enum { K_READ, K_READ_X, K_WRITE, K_INSERT, K_DELETE, K_SCAN };

struct os_op {
	uint8_t kind, held, has_val, located, missing, upsert;
	uint8_t dead;             /* delete: the leaf entry is marked; release leaves
				     OS_LOCK_DEAD in the record's lock word */
	unsigned tid, sv;
	uint64_t key, rec;
	unsigned char kb[8];
	unsigned char *val;       /* write/insert: the value; read: the result */
	size_t vlen;
	int found;                /* read: a result is there */
	unsigned char *res;
	size_t rlen;
	/* scan: at most count rows (K_READ ops of their own, S-locked), in key order */
	unsigned count, nrows;
	struct os_op *rows;
};

enum { TX_IDLE, TX_EXECUTED, TX_FAILED, TX_DONE };

struct os_txn {
	os_session_t *s;
	int state;
	uint64_t prio;
	struct os_op *ops;
	unsigned n;
	size_t cap;
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

/* ---- the session claim ---------------------------------------------------------- */

/* The user's claim on its session, for one public call (nests). */
static inline void claim(os_session_t *s)
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

static inline void unclaim(os_session_t *s)
{
	atomic_fetch_sub_explicit(&s->claim, 1, memory_order_release);
}

/* Inside a step's coroutine: let the session's other steps run (a lock
 * being polled may be held by one of them). */
static inline void os_step_yield(os_session_t *s)
{
	os_txn_t *t = s->running;
	if (!t)
		return;
	swapcontext(&t->ctx, &s->sched);
	s->cur = &t->tally;
}

/* os_engine.c: answer the liveness pings when the last poll is OS_POLL_NS old. */
void os_maybe_poll(os_session_t *s);

/* os_index.c: one RMA operation on table tid's region at server sv, waited
 * for (0, LOTUS_EUNAVAIL: the session is broken, LOTUS_ETIMEOUT). */
int os_rma_get(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, void *buf, size_t len);
int os_rma_put(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, const void *buf,
	       size_t len);
/* *old gets the word's value before the CAS (== expect: it was swapped). */
int os_rma_cas(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, uint64_t expect,
	       uint64_t swap, uint64_t *old);
int os_rma_faa(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, uint64_t add,
	       uint64_t *old);
/* Order the puts before it before those after it. */
void os_rma_fence(os_session_t *s, unsigned sv);

/* os_engine.c: ask server sv for table tid's chunk table again and learn
 * the chunks added since; grow: ask it to add one if the last one known is
 * the last (it is full).  0, LOTUS_ENOSPACE, LOTUS_ETIMEOUT, ... */
int os_chunks_refresh(os_session_t *s, unsigned tid, unsigned sv, int grow);
/* os_insert.c: allocate bytes in table tid's region at sv (FAA on the last
 * chunk's cursor; a full chunk brings the next one). */
int os_region_alloc(os_session_t *s, unsigned tid, unsigned sv, uint64_t bytes, uint64_t *addr);

/* os_index.c: the page cache and the walk. */
void os_cache_drop(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr);
/* Read a page, again while its two versions differ (a torn read). */
int os_read_page(os_session_t *s, unsigned tid, unsigned sv, uint64_t addr, struct os_page *pg);
/* Read the root's address from the region header (and remember it). */
int os_read_root(os_session_t *s, unsigned tid, unsigned sv, uint64_t *root);
/* Index of the child of internal page pg that covers key. */
unsigned os_child_index(const struct os_page *pg, uint64_t key);
/* Position of key in leaf pg, or -(insertion point) - 1. */
int os_leaf_search(const struct os_page *pg, uint64_t key);
/* Descend to the page of `level` that holds key: *addr and a validated copy
 * in *out.  path (may be NULL, else OS_MAX_DEPTH entries) gets the address of
 * each internal page passed at its level (0 where the descent passed none). */
int os_find_level(os_session_t *s, unsigned tid, unsigned sv, uint64_t key, unsigned level,
		  uint64_t *addr_out, struct os_page *out, uint64_t *path);

/* os_insert.c: insert op's record (allocated and written here) into the
 * index; LOTUS_EEXISTS when the key is there. */
int os_tree_insert(os_txn_t *t, struct os_op *op);
/* os_insert.c: mark the leaf entry of op's record (X-locked by the caller)
 * deleted, under the leaf's page lock. */
int os_tree_delete(os_txn_t *t, struct os_op *op);

#endif
