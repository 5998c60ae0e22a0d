/*
 * ms_int.h - memory-server internals shared by memserver.c (threads,
 * connections, message dispatch) and handlers.c (one function per request op).
 *
 * Ownership: a struct ms_worker and every struct ms_conn on it belong to one
 * thread.  The store and the lock table are shared and thread-safe.  A parked
 * request (struct ms_pending) is touched by its owner thread, except that the
 * lock manager's notify callback, on any thread, flips its state PARKED ->
 * NOTIFIED and posts it to the owner thread.
 *
 *   pending:  PARKED --notify (any thread)--> NOTIFIED --on_post--> completed
 *                \--conn lost (owner thread)--> DEAD (freed at once)
 *
 * Durable replies (durable.c, only with a data directory): replies that may
 * go out only once the redo log is durable up to some LSN are gathered per
 * incoming message in wk->dur_rep; at the end of the message they move to a
 * struct ms_durwait that holds a reference on the connection:
 *
 *   durwait: ms_durable_flush --redo_notify cb (log writer)--> posted
 *              --on_post (owner thread): ms_durable_resume--> sent (or, on
 *              LOTUS_EDURABLE, every reply rewritten to that status), freed
 *
 * A durwait is never freed while its callback is outstanding, even if the
 * connection closes; the reference keeps the struct ms_conn alive until then.
 */
#ifndef LOTUS_MS_INT_H
#define LOTUS_MS_INT_H
#include <stdatomic.h>
#include <pthread.h>
#include "lock/lock.h"
#include "net/net.h"
#include "net/wire.h"
#include "store/ckpt.h"
#include "store/redo.h"
#include "store/store.h"

struct ms_server;

/* Items posted to a worker (net_post) start with their kind. */
enum ms_post_kind { MS_POST_PENDING = 1, MS_POST_DURABLE = 2 };

struct ms_worker {
	struct ms_server *srv;
	unsigned idx;
	pthread_t thread;
	net_worker_t *net;
	struct wire_buf rep;       /* reply being built for the current message */
	struct ms_conn *out_conn;  /* whom the reply being built goes to, and */
	uint64_t out_seq;          /* its sequence (a full one is sent, then more) */
	uint64_t bad_msgs, reqs, hint_hits, hint_stale;
	/* durable.c: replies of the current message that wait for the log */
	struct wire_buf dur_rep;
	uint64_t dur_lsn;          /* they go out once the log is durable here */
	struct wire_buf scratch;   /* log payload of a writeback */
	uint64_t dur_waits, dur_immediate;
};

struct ms_pending;

struct ms_conn {
	struct ms_worker *wk;
	net_conn_t *nc;
	uint32_t compute_id;
	int closed;
	int broken;                /* a reply was lost: close at the next settle */
	int refs;                  /* the conn itself + each parked request */
	struct ms_pending *pending; /* parked requests (doubly linked) */
};

enum { PEND_PARKED, PEND_NOTIFIED, PEND_DEAD };

struct ms_pending {
	int kind;                  /* MS_POST_PENDING */
	struct lock_waiter w;
	_Atomic int state;
	int result;
	struct ms_conn *conn;
	struct ms_pending *prev, *next;
	lock_txn_t *txn;
	uint32_t sender;
	uint64_t seq;
	struct wire_req req;
	unsigned char key[STORE_KEY_MAX];
	/* SCAN continuation: candidate keys, the next one to lock */
	unsigned scan_next, scan_n;
	int scan_capped;             /* SCAN: collection stopped at its limit: more may follow */
	struct scan_key *scan_keys;
};

struct scan_key {
	uint16_t klen;
	unsigned char key[STORE_KEY_MAX];
};

/* Replies that wait for the log to be durable up to lsn (see above). */
struct ms_durwait {
	int kind;                  /* MS_POST_DURABLE */
	int status;                /* from the redo_notify callback */
	uint64_t lsn;
	struct ms_conn *conn;      /* holds a reference */
	struct wire_buf rep;       /* the replies, one message */
};

/* Redo payloads of the memory server (types in store/redo.h):
 *  REDO_COMMIT   the COMMIT's wire_write list exactly as received (this
 *                server's table ids); the item count follows from the length.
 *                A writeback is logged as a one-write REDO_COMMIT.
 *  REDO_TABLE    struct ms_redo_table, then name_len bytes of name.
 *  REDO_PREPARE  struct ms_redo_prepare, nparts u32 participant ids padded to
 *                8 bytes, then a wire_write list (a durable PREPARE: the writes
 *                are applied only once its DECIDE(commit) comes).
 *  REDO_DECIDE   struct ms_redo_decide: the outcome of a PREPARE; logged lazily.
 */
struct ms_redo_table {
	uint16_t id;
	uint16_t name_len;
	uint32_t max_value;
};
struct ms_redo_prepare {
	uint32_t nparts;
	uint32_t reserved;
};
struct ms_redo_decide {
	uint8_t commit;            /* 1: commit, 0: abort */
	uint8_t pad[7];
};

/* What recovery found; reported in the log and the ready JSON line. */
struct ms_recovery {
	int ran;                   /* 0: no data directory */
	uint64_t ckpt_pages, ckpt_bytes, ckpt_records, ckpt_begin_lsn;
	uint64_t log_from, log_records, log_bytes, cut_bytes, next_lsn;
	uint64_t txns, writes, tables, undecided;
	uint64_t keep_lsn;         /* from ms_recovery_undecided() */
	uint64_t ckpt_seq;         /* after a fallback: the checkpoint loaded, else 0 */
	uint64_t elapsed_ns;
};

struct ms_server {
	unsigned id, nworkers;
	store_t *store;
	lock_table_t *locks;
	net_ctx_t *net;
	net_listener_t *listener;
	struct ms_worker *workers;
	_Atomic int stop;
	/* durability (durable.c); log == NULL: none, and no cost on any path */
	int durability;            /* enum lotus_durability */
	const char *data_dir;
	int recovery_mode;         /* enum redo_recovery, for ms_recover */
	int dir_lock_fd;           /* flock(LOCK_EX) on DATA_DIR/LOCK; -1: none */
	redo_t *log;
	ckpt_t *ckpt;
	pthread_mutex_t tables_mu; /* table creation: id order == log order */
	_Atomic int readonly_said; /* the "refusing writes" line was logged */
	struct ms_recovery rec;
	/* 2PC (every server; logged only with a data directory): transactions
	 * prepared here and not yet decided (durable.c), and the outcomes of
	 * recent ones (termination.c); all under prep_mu */
	pthread_mutex_t prep_mu;
	struct ms_prep_ent **prep;  /* MS_PREP_BUCKETS chains, keyed by txn id */
	_Atomic unsigned nprep;
	uint64_t prep_min_lsn;      /* lowest PREPARE LSN in the table (nprep > 0) */
	struct ms_outcomes *outcomes;
	const char *config_path;    /* the cluster (--config, else --peers), to ask
				       the other participants about undecided txns;
				       a --peers file may appear after the start */
	pthread_t resolver;
	int resolver_running;
	_Atomic int resolver_stop;
	struct os_regions *onesided;  /* the one-sided baseline's regions (src/onesided/) */
};
#define MS_PREP_BUCKETS 1024
static inline unsigned ms_prep_bucket(uint64_t txn_id)
{
	return (unsigned)((txn_id * 0x9e3779b97f4a7c15ULL) >> 54) & (MS_PREP_BUCKETS - 1);
}

/* A transaction prepared here and not decided yet. */
struct ms_prep_ent {
	uint64_t txn_id, lsn;
	uint64_t since_ns;          /* when it was prepared (or recovered) */
	uint64_t parts;             /* bitmask of the writing participants */
	int recovered;              /* found undecided by recovery */
	uint32_t len;
	unsigned char *payload;     /* the REDO_PREPARE payload */
	store_resv_t *resv;         /* the slots its writes need */
	struct ms_prep_ent *next;
};

/* What this server remembers about a txn (termination.c, prep_mu held). */
enum ms_outcome { MS_OUT_NONE = 0, MS_OUT_COMMIT, MS_OUT_ABORT, MS_OUT_REFUSED };

/* handlers.c: handle one request of a REQ message; appends its reply to
 * wk->rep unless the request parks (then the reply is sent on grant). */
void ms_handle_req(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		   const struct wire_req *r, const unsigned char *key, const unsigned char *val);
/* handlers.c: append a reply to b, the message being built for
 * wk->out_conn: a full message is sent first and the reply starts the next;
 * a reply that cannot be queued at all marks the connection broken. */
void ms_rep_add(struct ms_worker *wk, struct wire_buf *b, const struct wire_rep *rep,
		const void *value);
/* handlers.c: a parked request was granted or refused; reply now. */
void ms_resume(struct ms_worker *wk, struct ms_pending *p);
void ms_pending_free(struct ms_pending *p);
/* handlers.c: the connection is lost; free its requests that are still parked. */
void ms_conn_drop_pending(struct ms_conn *c);
/* handlers.c: upsert or delete one write (a COMMIT item, a writeback or a
 * replayed record).  hint may be 0.  rp (may be NULL): the slot reservation
 * inserts take from and deletes give to. */
int ms_write_apply(store_t *st, store_resv_t **rp, const struct wire_write *w,
		   const unsigned char *k, const unsigned char *v);
/* handlers.c: apply a checked and reserved COMMIT's writes; 0 or the first
 * store error (none once ms_writes_reserve() succeeded). */
int ms_commit_apply(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		    store_resv_t **rp);
/* handlers.c: make *rp hold a slot for every write of the list (len bytes,
 * at most count items) whose key does not exist yet, so that applying the
 * list cannot run out of space.  0, LOTUS_ENOSPACE or -ENOMEM (then *rp
 * holds what it held before, plus nothing). */
int ms_writes_reserve(store_t *st, const unsigned char *wl, size_t len, unsigned count,
		      store_resv_t **rp);

/* durable.c (threads: open/close from the main thread, before the workers
 * start and after they stopped; the rest from the worker that owns c). */
struct memserver_opts;
/* Recover the store from o->data_dir, open the log and start the page writer.
 * 0 or an error (logged). */
int ms_durable_open(struct ms_server *srv, const struct memserver_opts *o);
/* clean: take a final checkpoint first.  Then stop the page writer and the log. */
void ms_durable_close(struct ms_server *srv, int clean);
/* 0 if writes are accepted; LOTUS_EREADONLY after a log error (logs once).
 * Only with srv->log. */
int ms_durable_refuses(struct ms_server *srv);
/* Log-then-apply steps (worker threads, srv->log set).  *lsn gets the LSN the
 * reply must wait for (0: none).  0, LOTUS_EREADONLY (nothing applied), or a
 * store error. */
int ms_commit_logged(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		     store_resv_t **rp, uint64_t *lsn);
int ms_writeback_logged(struct ms_worker *wk, const struct wire_write *w, uint64_t txn_id,
			const unsigned char *key, const unsigned char *val, uint64_t *lsn);
int ms_table_create_logged(struct ms_server *srv, const char *name, uint32_t max_value,
			   uint16_t *id, uint64_t *lsn);
/* 2PC (worker threads, every server; "log" steps only with srv->log).
 * ms_prepare_logged: log the PREPARE of r (writes in val, participant bitmask
 * in r->hint) without applying it, and keep the writes until the decision;
 * *lsn is what the reply must wait for (in async mode too: a vote must be
 * durable; 0 in memory).  ms_prepared_decide: if txn_id is prepared here, log
 * its DECIDE (no wait), apply its writes (commit) or drop them, return 1 with
 * *rc set; 0 if it is not prepared here.  ms_prepared_hold: 1 if txn_id is
 * prepared here (its client is lost: the resolver takes it at once), else 0.
 * ms_prep_open/close: the table, main thread, before the workers start (and
 * before recovery) / after they stopped. */
int ms_prep_open(struct ms_server *srv);
void ms_prep_close(struct ms_server *srv);
int ms_prepared_hold(struct ms_server *srv, uint64_t txn_id);
int ms_prepare_logged(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		      store_resv_t **rp, uint64_t *lsn);
int ms_prepared_decide(struct ms_server *srv, uint64_t txn_id, int commit, int *rc);
/* termination.c: cooperative termination of prepared transactions.
 * open/free: main thread (open before recovery).  start/stop: main thread,
 * after the log is open / before it closes.  note/find: prep_mu held. */
int ms_term_open(struct ms_server *srv);
void ms_term_free(struct ms_server *srv);
void ms_term_start(struct ms_server *srv);
void ms_term_stop(struct ms_server *srv);
void ms_outcome_note(struct ms_server *srv, uint64_t txn_id, enum ms_outcome o);
/* termination.c: the checkpoint hook that logs the remembered COMMITs again
 * (page writer thread; arg = srv), and their replay at recovery. */
void ms_outcomes_relog(void *arg);
void ms_outcomes_replay(struct ms_server *srv, const void *payload, uint32_t len);
enum ms_outcome ms_outcome_find(struct ms_server *srv, uint64_t txn_id);
/* OP_TXN_STATUS (worker): the enum wire_txn_status answer; *lsn: a REFUSE
 * record the answer must wait for (0: none). */
int ms_txn_status(struct ms_server *srv, uint64_t txn_id, uint64_t *lsn);
/* durable.c: the participant bitmask of a REDO_PREPARE payload. */
uint64_t ms_prepare_parts(const unsigned char *payload, uint32_t len);
/* The hook for two-phase commit: see durable.c. */
struct ms_prepared;
uint64_t ms_recovery_undecided(struct ms_server *srv, const struct ms_prepared *list);
/* Reply to r with (status, arg) once the log is durable up to lsn (lsn 0 or
 * already durable: at once, in wk->rep). */
void ms_reply_durable(struct ms_worker *wk, uint64_t seq, const struct wire_req *r, int status,
		      uint64_t arg, uint64_t lsn);
/* End of an incoming message: hand its waiting replies to the log. */
void ms_durable_flush(struct ms_worker *wk, struct ms_conn *c);
/* Owner thread: the log reported on a durwait; send its replies, free it. */
void ms_durable_resume(struct ms_worker *wk, struct ms_durwait *dw);
/* ',"durability":{...}' (log counters) for the STATS reply (snprintf rules). */
int ms_durable_stats_json(struct ms_server *srv, char *buf, size_t len);
/* srv->rec as one JSON object into buf (snprintf rules). */
int ms_recovery_json(const struct ms_server *srv, char *buf, size_t len);

/* memserver.c */
void ms_conn_unref(struct ms_conn *c);
/* net_post from any thread, retried for a while if memory is short (a reply
 * waits on the item); 0 or -ENOMEM (logged). */
int ms_post(net_worker_t *w, void *item);
/* Send a reply message (nothing if c is closed).  A failed send marks c
 * broken: its replies are lost, so the client must see the connection go. */
int ms_send_reply_msg(struct ms_worker *wk, struct ms_conn *c, struct wire_buf *b);
/* Owner thread, where c is known to be alive: close a broken c (release its
 * transactions and parked requests as for a lost client). */
void ms_conn_settle(struct ms_worker *wk, struct ms_conn *c);

#endif
