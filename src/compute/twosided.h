/*
 * twosided.h - internals of the two-sided engine (engine_twosided: txn.c,
 * txn_view.c), lotus's own: transactions as requests to the memory servers'
 * lock managers and stores, above the session layer (session.h), with the
 * record cache / co-partitioning policy (txn_cache.h) called through its hook
 * table.
 *
 * Ownership: a session and all of its transactions belong to the thread that
 * opened it; fields a reply touches are guarded by the session's group lock.
 *
 * Scans go to every server and their rows are merged in key order, in as
 * many round trips as the servers' reply caps need (txn_view.c).
 *
 * Completion: a reply that finishes a step only marks its transaction ready
 * (ts_step_ready, on the owning session's ready list); the poll (ts_poll)
 * completes ready transactions (cache work, the next step) after the
 * network dispatch has returned, and runs the user callbacks after it has
 * released the group lock, so no user code runs inside a message handler
 * or under the lock, and a callback may call any lotus_* function.
 *
 * Transaction states (lotus_txn_*):
 *
 *   IDLE --stage ops--> IDLE --execute--> EXEC --all replies--> IDLE
 *     |      \--staging error: sticky      |  \--error / deadline--> FAILED (sticky)
 *     |                                    \--scan continuation, waiting read
 *     |                                        (txn_view_followups): EXEC again
 *     +--commit--> [PREPARE -->] COMMIT --replies--> DONE
 *     |                 |--every writer voted yes--> DONE (COMMIT notices queued)
 *     |                 \--a writer's vote lost--> RESOLVE (txn_resolve_*)
 *     |                       --COMMITTED / all PREPARED--> DONE
 *     |                       --ABORTED / UNKNOWN--> ABORT
 *     |                       --no answer by the deadline--> DONE (in doubt)
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
 * plain COMMIT in the same round (they just release).  Once every writer
 * voted yes the transaction is committed and the application is told so; a
 * COMMIT notice without writes then rides on the next message to each writer
 * (t->writers), and is not awaited.  A failed PREPARE aborts everywhere.
 *
 * Commit dependencies (durable servers, early lock release): a read whose
 * reply carries WIRE_REP_F_DEP saw a change not durable yet on that server
 * (t->deps), and that server's read-only COMMIT is answered only once it is.
 * A transaction with one writing server commits there in one round, and that
 * commit is final on its own; so the read-only COMMITs of servers in t->deps
 * go first (t->ro_first), and the writer's COMMIT only after they answered:
 * a crash that loses what the transaction read then cannot leave its writes
 * behind.  (With two or more writers the PREPARE round already waits.)
 *
 * The outcome a failed commit reports (txn.c, "the outcome of a commit"):
 * nothing applied (the error itself) only when no write can have landed or
 * ever land; LOTUS_EINDOUBT when one may have.  Each commit step records, by
 * server, which requests got no answer (lost, past the deadline), which were
 * refused and which were never sent, and the commit decides from that.  A
 * two-phase commit that lost a writer's vote asks the writers it still
 * reaches for the transaction's status (OP_TXN_STATUS, the question the
 * servers' resolvers ask each other: termination.c) until they settle it or
 * timeout_ms has passed (RESOLVE).
 */
#ifndef LOTUS_TWOSIDED_H
#define LOTUS_TWOSIDED_H
#include "compute/engine.h"
#include "compute/session.h"
#include "compute/txn_cache.h"

typedef struct ts_txn ts_txn_t;

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
	uint64_t ver;        /* READ/READ_X: the record's version from its server */
	uint8_t has_ver;     /* ver came with a found record's reply */
	uint8_t replied;     /* READ/READ_X: its server's reply came */
	unsigned char key[128];
	unsigned char *wval; /* value to write at commit */
	uint32_t wlen, wcap;
	unsigned char *rval; /* read value, or SCAN rows as wire_row items */
	uint32_t rlen, rcap;
	unsigned rows;
	const unsigned char **row_ptrs; /* SCAN: merged, sorted */
	struct cache_waiter lw;         /* CO: parked on a local lock */
	ts_txn_t *owner;                /* CO: the op's transaction */
	struct txn_op *grant_next;      /* CO: on the session's grant list */
};

enum txn_state { TXN_IDLE, TXN_EXEC, TXN_PREPARE, TXN_COMMIT, TXN_RESOLVE, TXN_ABORT, TXN_FAILED,
		 TXN_DONE };

/* A two-sided transaction: pub (engine.h) is what the API sees. */
struct ts_txn {
	struct lotus_txn pub;        /* eng, s, id, prio */
	lotus_session_t *s;          /* == pub.s */
	struct sess_slot sl;         /* its tag slot; sl.deadline_ns: the step's
					requests expire then (0: none out) */
	enum txn_state state;
	struct txn_op *ops;
	unsigned nops, cap, next_unsent;
	int has_writes;              /* an op of this attempt writes (ryw_lookup's
					shortcut: a read-only txn has nothing to read back) */
	uint64_t participants;       /* bit per server that saw a request */
	unsigned outstanding;
	uint16_t due[LOTUS_MAX_SERVERS];
	int err;                     /* first error of the current step */
	int sticky;                  /* error that forces abort */
	unsigned lost_seq0;          /* the group's lost_seq when it began */
	int step_done;
	lotus_txn_cb cb;
	void *cb_arg;
	int fin_result;              /* the step's result, for its callback */
	lotus_txn_cb fin_cb;         /* run by the poll after the lock is released */
	void *fin_arg;
	ts_txn_t *fin_next;
	struct engine_attempt att;   /* this attempt's network work */
	int commit_after_exec;       /* commit requested with unsent ops */
	int prepared;                /* PREPARE step done for this commit */
	uint64_t writers;            /* durable 2PC: bit per server that prepared writes */
	uint64_t deps;               /* servers whose replies said WIRE_REP_F_DEP */
	uint64_t ro_first;           /* this commit round: those readers, ahead of the writer */
	uint64_t ro_done;            /* readers committed ahead (left out of the next round) */
	int abort_result;            /* what the abort step reports */
	lock_txn_t *local;           /* CO: this txn in the local lock table */
	uint64_t unresponsive;       /* servers that missed a deadline of this attempt:
					their late replies are dropped, ABORT is not awaited */
	/* the outcome of a commit: what each server did with this step */
	uint64_t noanswer;           /* its requests got no answer (lost, past the deadline) */
	uint64_t lostconn;           /* ...because its connection was lost (the session
					may have reached a successor since) */
	uint64_t refused;            /* it answered with an error */
	uint64_t unsent;             /* commit round: its request was never sent */
	uint64_t round_writes;       /* commit round: its request carried writes */
	uint64_t acked;              /* ABORT round: it answered the ABORT */
	int abort_after_yes;         /* this abort follows every writer's yes vote: it
					holds only if a writer took it (acked) */
	/* RESOLVE: asking the writers what became of the transaction */
	int doubt;                   /* the error that lost a writer's vote */
	int resolve_pause;           /* between two rounds of questions */
	uint64_t resolve_until_ns;   /* the last round ends then: in doubt */
	uint64_t said_commit, said_abort, said_prepared; /* this round's answers */
	int ready;                   /* on the session's ready list */
	ts_txn_t *ready_next;
};

/* The engine's per-session state (session->eng). */
struct ts_sess {
	/* transactions whose step finished, to complete from the poll */
	ts_txn_t *ready_head, *ready_tail;
	/* steps completed in this poll, their callbacks to run after it */
	ts_txn_t *fin_head, *fin_tail;
	/* CO: local lock grants posted by other threads, handled from the poll */
	struct txn_op *grants;
	struct lotus_txn_counters ctr;
	/* freed transactions kept for the next lotus_txn_begin, with their ops
	 * arrays and value buffers (linked by fin_next): begin/free per
	 * transaction allocates nothing in the steady state */
	ts_txn_t *spare;
	unsigned nspare;
	int notices;    /* COMMIT notices queued in this poll (crash point client_acked) */
};
#define TS_SPARE_MAX 32

static inline struct ts_sess *ts_sess(const lotus_session_t *s)
{
	return s->eng;
}

static inline ts_txn_t *ts_of(lotus_txn_t *t)
{
	return container_of(t, ts_txn_t, pub);
}

static inline const ts_txn_t *ts_of_const(const lotus_txn_t *t)
{
	return container_of(t, const ts_txn_t, pub);
}

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

/* txn.c */
int txn_send(ts_txn_t *t, unsigned sv, struct wire_req *r, const void *key, const void *val);
int txn_op_send(ts_txn_t *t, unsigned idx);
int txn_op_send_remote(ts_txn_t *t, unsigned idx);
void txn_op_result(ts_txn_t *t, struct txn_op *o, int status);
void txn_step_ready(ts_txn_t *t);
/* txn_spare.c: the session's spare transactions (lotus_txn_free keeps them) */
ts_txn_t *txn_spare_get(lotus_session_t *s);
void txn_spare_put(lotus_session_t *s, ts_txn_t *t);
void txn_spare_release(ts_txn_t *t);
void txn_spare_drain(lotus_session_t *s);
/* txn_local.c: co-partitioning, ops on owned keys (local locks, cached data) */
int txn_op_local(ts_txn_t *t, unsigned idx);
void txn_drain_grants(lotus_session_t *s);
void txn_local_release(ts_txn_t *t);
void txn_cache_settle(ts_txn_t *t, int err);
/* txn_view.c: read-your-writes and scan continuation */
void txn_view_stage_read(ts_txn_t *t, struct txn_op *o);
/* How an insert of (table, key) staged now is answered. */
enum { INSERT_REMOTE, INSERT_EXISTS, INSERT_UPSERT };
int txn_view_stage_insert(ts_txn_t *t, uint16_t table, const void *key, uint16_t klen);
int txn_view_stage_scan(ts_txn_t *t, struct txn_op *o);
void txn_view_scan_reply(ts_txn_t *t, unsigned sv, struct txn_op *o, const struct wire_rep *r,
			 const unsigned char *key);
/* At the end of an execute step's replies: send what the step still needs
 * (waiting reads, scan continuations); returns the requests sent. */
int txn_view_followups(ts_txn_t *t);
/* Then merge every scan of the step with the transaction's own writes. */
void txn_view_finish(ts_txn_t *t);

#endif
