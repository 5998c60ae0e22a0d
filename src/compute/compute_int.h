/*
 * compute_int.h - internals of the compute side (liblotus): the cluster
 * handle, per-thread sessions and transactions.
 *
 * Ownership: a session and all of its transactions belong to the thread that
 * opened it; nothing here is shared between sessions except the cluster's
 * read-mostly routing and table registry (table creation takes a mutex).
 *
 * Request routing: hash partitioning, server = fnv1a64(key) % nservers.
 * Scans go to every server and their rows are merged in key order, in as
 * many round trips as the servers' reply caps need (txn_view.c).
 *
 * Batching (per session; lotus_options.batch):
 *   NONE   every request is flushed as a message of its own
 *   INTRA  a transaction step's requests are flushed together: one message
 *          per memory server per step
 *   INTER  requests wait in per-server buffers until lotus_session_poll()
 *          flushes them, so the ready requests of every transaction in flight
 *          on the thread share one message per server
 *
 * Completion: a reply that finishes a step only marks its transaction ready;
 * lotus_session_poll() completes ready transactions (cache work, the next
 * step, user callbacks) after the network dispatch has returned, so no user
 * code and no synchronous call (a cache write-back) runs inside a message
 * handler.
 *
 * Transaction states (lotus_txn_*):
 *
 *   IDLE --stage ops--> IDLE --execute--> EXEC --all replies--> IDLE
 *     |      \--staging error: sticky      |  \--error / deadline--> FAILED (sticky)
 *     |                                    \--scan continuation, waiting read
 *     |                                        (txn_view_followups): EXEC again
 *     +--commit--> [PREPARE -->] COMMIT --replies--> DONE
 *     +--abort / FAILED--abort--> ABORT --replies--> DONE --restart--> IDLE
 *
 * PREPARE exists for WOUND_WAIT transactions with two or more participants:
 * every participant first moves the transaction to COMMITTING (after which it
 * cannot be wounded), so no participant applies writes of a transaction that
 * another participant has already preempted.
 *
 * With two-phase commit (cluster->two_phase: the default, and always on
 * durable servers) a transaction that writes on two or more servers commits in
 * two phases (docs/design.md, "Commit and durability"): PREPARE carries each
 * writer's writes and the writer list, and is held by the server (durably,
 * on a durable one) before it is answered; read-only participants get a
 * plain COMMIT in the same round (they just release).  Once every writer prepared, COMMIT
 * without writes goes to the writers (t->writers); a failed PREPARE aborts
 * everywhere.
 */
#ifndef LOTUS_COMPUTE_INT_H
#define LOTUS_COMPUTE_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "lotus.h"
#include "common/config.h"
#include "compute/cache.h"
#include "lock/lock.h"
#include "net/net.h"
#include "net/wire.h"

#define LOTUS_MAX_TABLES 64
#define LOTUS_DEFAULT_TIMEOUT_MS 10000
#define TAG_ADMIN_SLOT 0xffffu
#define TAG_TXN_OP     0xffffu  /* op index of COMMIT/ABORT replies */

struct table_ent {
	char name[65];
	uint32_t max_value;
	uint16_t ids[LOTUS_MAX_SERVERS];
};

struct server_ent {
	char host[256];
	uint16_t port;
	pid_t pid;            /* local clusters: the child process */
};

struct lotus_cluster {
	struct lotus_options opts;
	pthread_mutex_t groups_mu;
	struct sgroup *groups[256];      /* --batch inter: sessions idx/group_size */
	char transport[16];
	unsigned nservers;
	struct server_ent servers[LOTUS_MAX_SERVERS];
	net_ctx_t *net;
	_Atomic unsigned next_session;
	pthread_mutex_t tables_mu;
	unsigned ntables;
	struct table_ent tables[LOTUS_MAX_TABLES];
	rcache_t *cache;                /* NULL without --cache */
	lock_table_t *local_locks;      /* CO partitioning: locks of owned keys */
	_Atomic uint64_t stale_hints;
	int durable;                    /* the servers log (durability async|sync) */
	int two_phase;                  /* multi-writer commits prepare with their
					   writes: durable, or commit != ONE_PHASE */
	int peers_fd;                   /* local: the memfd the servers read to find
					   each other (-1 if none) */
	char peers_path[32];            /* "/proc/self/fd/N" in the children */
	char secret_path[4096];         /* the cluster secret ("" if none) */
	int secret_fd;                  /* local: the memfd holding a random one */
	uint64_t timeout_ns;            /* deadline of every wait (opts.timeout_ms) */
};

/* How a read is answered (txn_view.c). */
enum { RYW_NONE = 0,     /* by its memory server */
       RYW_SERVED = 1,   /* by the client: from the write set (or a scan of 0 rows) */
       RYW_WAIT = 2 };   /* by the outcome of an own insert not yet executed */

/* A scan's continuation state (txn_view.c). */
struct scan_cont {
	uint64_t more;                       /* servers whose last reply was capped */
	unsigned target;                     /* server rows wanted: count + own deletes */
	uint16_t klen[LOTUS_MAX_SERVERS];    /* the last key each capped server covered */
	unsigned char key[LOTUS_MAX_SERVERS][128];
};

struct txn_op {
	uint8_t op;          /* wire op of the lock request */
	uint8_t write;       /* 0, or OP_LOCK_X (update) / OP_INSERT / OP_DELETE at commit */
	uint8_t sent;
	uint16_t table;      /* index in cluster->tables */
	uint16_t klen;
	uint16_t server;
	uint16_t replies_due;
	uint8_t local;       /* CO: an owned key, locked in this process */
	uint8_t fill;        /* CO: fill the cache with the value read */
	uint8_t remote;      /* CO: the owned key was also locked at its memory
				server, so its write goes there in the COMMIT */
	uint8_t ryw;         /* RYW_*: reads and empty scans answered by the client */
	uint8_t observed;    /* a later read or scan saw this op's write: a later
				write of the key stages a new op, never rewrites it */
	uint8_t finished;    /* SCAN: rows merged into row_ptrs */
	unsigned ryw_src;    /* RYW_WAIT: index of the insert it waits for */
	struct scan_cont *scan;
	unsigned count;      /* SCAN: rows wanted */
	int status;
	uint64_t loc;
	uint64_t hint;       /* the cached location the request carried */
	unsigned char key[128];
	unsigned char *wval; /* value to write at commit */
	uint32_t wlen, wcap;
	unsigned char *rval; /* read value, or SCAN rows as wire_row items */
	uint32_t rlen, rcap;
	unsigned rows;
	const unsigned char **row_ptrs; /* SCAN: merged, sorted */
	struct lock_waiter lw;          /* CO: parked on a local lock */
	int local_rc;                   /* CO: the local lock's answer */
	struct txn_op *grant_next;      /* CO: on the session's grant list */
};

enum txn_state { TXN_IDLE, TXN_EXEC, TXN_PREPARE, TXN_COMMIT, TXN_ABORT, TXN_FAILED, TXN_DONE };

struct lotus_txn {
	lotus_session_t *s;
	unsigned slot;
	uint64_t id, prio;
	enum txn_state state;
	struct txn_op *ops;
	unsigned nops, cap, next_unsent;
	uint64_t participants;       /* bit per server that saw a request */
	unsigned outstanding;
	uint16_t due[LOTUS_MAX_SERVERS];
	int err;                     /* first error of the current step */
	int sticky;                  /* error that forces abort */
	int step_done;
	lotus_txn_cb cb;
	void *cb_arg;
	int commit_after_exec;       /* commit requested with unsent ops */
	int prepared;                /* PREPARE step done for this commit */
	uint64_t writers;            /* durable 2PC: bit per server that prepared writes */
	int abort_result;            /* what the abort step reports */
	lock_txn_t *local;           /* CO: this txn in the local lock table */
	uint64_t deadline_ns;        /* the step's requests expire then (0: none out) */
	uint64_t unresponsive;       /* servers that missed a deadline of this attempt:
					their late replies are dropped, ABORT is not awaited */
	int ready;                   /* on the session's ready list */
	lotus_txn_t *ready_next;
};

/*
 * A sending group: the network side shared by the sessions of a group (one
 * session alone outside --batch inter).  Whichever member holds mu sends and
 * receives for all of them (flat combining), so the ready requests of every
 * member's transactions share one message per memory server.  mu guards
 * everything here and every transaction field a reply touches.
 */
struct sgroup {
	pthread_mutex_t mu;              /* recursive: callbacks may re-enter */
	unsigned members;                /* sessions attached (cluster mutex) */
	net_worker_t *net;
	net_conn_t *conns[LOTUS_MAX_SERVERS];
	struct wire_buf out[LOTUS_MAX_SERVERS];
	uint64_t dirty;                  /* bit per server with a buffered message */
	uint64_t msg_seq;
	lotus_txn_t **slots;             /* tag slot -> transaction */
	unsigned nslots, cap_slots;
	unsigned *free_slots, nfree;
	int lost;                        /* a server connection was lost */
	uint64_t next_expiry_ns;         /* when poll next looks for expired steps */
	/* a synchronous administrative call in flight */
	int admin_due, admin_status;
	uint64_t admin_arg[LOTUS_MAX_SERVERS];
	char *admin_value;
	size_t admin_vlen;
};

struct lotus_session {
	lotus_cluster_t *cl;
	struct sgroup *g;
	unsigned idx;
	uint32_t txn_seq;
	uint64_t last_prio;
	struct lotus_net_counters ctr;
	/* transactions whose step finished, to complete from lotus_session_poll */
	lotus_txn_t *ready_head, *ready_tail;
	/* CO: local lock grants posted by other threads, handled from the poll */
	struct txn_op *grants;
};

/* Does o's write take effect at commit?  Its own INSERT / DELETE only if the
 * lock request found the key as it needs (status 0).  A write staged later
 * onto an earlier op's X lock (o->write != o->op: an update after a
 * read-for-update, insert or delete of the key) applies whatever that op
 * found: the X lock is held either way. */
static inline int txn_write_applies(const struct txn_op *o)
{
	if (!o->write)
		return 0;
	return o->status == 0 ||
	       (o->write != o->op && (o->status == LOTUS_ENOTFOUND || o->status == LOTUS_EEXISTS));
}

/* session.c */
void group_lock(struct sgroup *g);
void group_unlock(struct sgroup *g);
int session_queue(lotus_session_t *s, unsigned server, const struct wire_req *r,
		  const void *key, const void *value);
void session_flush(lotus_session_t *s);
void session_flush_server(lotus_session_t *s, unsigned server);
/* timeout_ms 0: the cluster's timeout (lotus_options.timeout_ms). */
int session_admin(lotus_session_t *s, unsigned server, struct wire_req *r, const void *key,
		  const void *value, int timeout_ms);
/* Write key=value to its memory server outside any transaction (OP_WRITEBACK)
 * and wait for the answer. */
int session_writeback(lotus_session_t *s, unsigned server, uint16_t table, const void *key,
		      uint16_t klen, const void *value, uint32_t vlen);
/* txn.c */
int txn_send(lotus_txn_t *t, unsigned sv, struct wire_req *r, const void *key, const void *val);
int txn_op_send_remote(lotus_txn_t *t, unsigned idx);
int txn_op_send(lotus_txn_t *t, unsigned idx);
void txn_op_result(lotus_txn_t *t, struct txn_op *o, int status);
void txn_step_ready(lotus_txn_t *t);
void txn_drain_ready(lotus_session_t *s);
/* txn_cache.c: the record cache and CO partitioning on the transaction path */
uint64_t txn_cache_hint(lotus_txn_t *t, const struct txn_op *o);
void txn_cache_on_reply(lotus_txn_t *t, struct txn_op *o, const struct wire_rep *r);
void txn_cache_after_commit(lotus_txn_t *t, int err);
int txn_op_local(lotus_txn_t *t, unsigned idx);
void txn_local_release(lotus_txn_t *t);
int cluster_cache_create(lotus_cluster_t *c);
void cluster_cache_destroy(lotus_cluster_t *c);
void txn_on_local_grant(lotus_session_t *s, struct lock_waiter *w);
void txn_drain_grants(lotus_session_t *s);
void txn_on_reply(lotus_txn_t *t, unsigned server, const struct wire_rep *r,
		  const unsigned char *key, const unsigned char *value);
/* txn_view.c: read-your-writes and scan continuation */
void txn_view_stage_read(lotus_txn_t *t, struct txn_op *o);
/* How an insert of (table, key) staged now is answered. */
enum { INSERT_REMOTE, INSERT_EXISTS, INSERT_UPSERT };
int txn_view_stage_insert(lotus_txn_t *t, uint16_t table, const void *key, uint16_t klen);
int txn_view_stage_scan(lotus_txn_t *t, struct txn_op *o);
void txn_view_scan_reply(lotus_txn_t *t, unsigned sv, struct txn_op *o, const struct wire_rep *r,
			 const unsigned char *key);
/* At the end of an execute step's replies: send what the step still needs
 * (waiting reads, scan continuations); returns the requests sent. */
int txn_view_followups(lotus_txn_t *t);
/* Then merge every scan of the step with the transaction's own writes. */
void txn_view_finish(lotus_txn_t *t);
void txn_on_server_lost(lotus_txn_t *t, unsigned server);
/* The step's deadline passed: give up on its replies (LOTUS_ETIMEOUT). */
void txn_on_timeout(lotus_txn_t *t);
/* cluster.c */
int cluster_start_local(lotus_cluster_t *c);
void cluster_stop_local(lotus_cluster_t *c);
unsigned cluster_route(const lotus_cluster_t *c, const void *key, size_t klen);
/* CO partitioning: does this compute server own the key? */
int cluster_owns(const lotus_cluster_t *c, const void *key, size_t klen);
/* The session of the calling thread while it is inside a lotus call. */
extern __thread lotus_session_t *session_current;

#endif
