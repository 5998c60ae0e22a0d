/*
 * ms_int.h - memory-server internals: the structs every layer shares, and the
 * hook table through which a lower layer calls an upper one.  It declares no
 * function; each layer's header declares what the layers above it may call.
 *
 * Layers, bottom to top.  A file includes only headers below its own layer
 * (tests/integration/memserver_layers.sh checks the includes and the object
 * files' symbols), so an upward call does not compile:
 *
 *   memserver.c    start-up, worker threads, wiring   (may include every header)
 *   termination.c  the 2PC resolver                     termination.h
 *   replica.c      replication: the log shipped to the  replica.h
 *                  backups, followed, failover (layer 5 too)
 *   durable.c      redo log, checkpoints, recovery,     durable.h
 *                  the prepared table, replies that
 *                  wait for the log
 *   backup.c       `lotus backup`: the decision hold,   backup.h
 *                  the copy over the wire (layer 4 too)
 *   outcomes.c     the decisions remembered for 2PC     outcomes.h
 *   handlers.c     request handlers, applying writes    handlers.h
 *   conn.c         connections, messages, lost clients  conn.h
 *   misses.c       misses that do not block: parked     misses.h
 *                  requests, the worker's miss ring
 *   ms_int.h       shared structs and struct ms_hooks
 *   identity.c     the data directory's IDENTITY file   identity.h
 *                  (a leaf: it knows no server struct)
 *
 * Upward calls go through srv->hooks (struct ms_hooks below): each upper
 * layer fills its fields in its ms_*_register(), which memserver.c calls at
 * start-up before any worker runs.
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
#include <time.h>
#include "lock/lock.h"
#include "net/net.h"
#include "net/wire.h"
#include "store/ckpt.h"
#include "store/redo.h"
#include "store/store.h"

struct ms_server;

/* Items posted to a worker (net_post) start with their kind. */
enum ms_post_kind { MS_POST_PENDING = 1, MS_POST_DURABLE = 2 };

/* One request of a message going through the lookup phases (handlers.c):
 * AMAC_HASHED (its bucket prefetched), AMAC_GUESSED (the record its bucket
 * names prefetched: guess, checked like a hint before use), then handled.
 * Kept per request so that a request can later park between phases. */
enum { AMAC_NONE, AMAC_HASHED, AMAC_GUESSED };
struct ms_amac {
	const struct wire_req *r;
	const unsigned char *k, *v;   /* r's key and value in the message */
	uint64_t token;            /* store_lookup_prefetch's */
	store_loc_t guess;         /* 0: none */
	struct store_pf pf;        /* a READ's value lines, prefetched MS_VALUE_AHEAD
				    * requests before it is handled */
	uint8_t stage;
};
#define MS_VALUE_AHEAD 2
#define MS_AMAC_MAX 64

struct ms_worker {
	struct ms_server *srv;
	unsigned idx;
	pthread_t thread;
	net_worker_t *net;
	struct wire_buf rep;       /* reply being built for the current message */
	struct ms_conn *conns;     /* every ms_conn of this worker not yet freed */
	struct ms_durwait *durwaits; /* not yet resumed: freed at shutdown if still there */
	struct ms_conn *out_conn;  /* whom the reply being built goes to, and */
	uint64_t out_seq;          /* its sequence (a full one is sent, then more) */
	uint64_t bad_msgs, reqs, hint_hits, hint_stale;
	uint64_t guess_hits, index_finds; /* ms_find: the lookup phases' guess held / the index asked */
	size_t rep_per_req;        /* reply bytes per request lately (decaying max), to size the next */
	/* this thread's CPU clock (pthread_getcpuclockid), set by the thread
	 * itself once it runs; cpu_clock_ok says it is valid */
	clockid_t cpu_clock;
	_Atomic int cpu_clock_ok;
	/* durable.c: replies of the current message that wait for the log */
	struct wire_buf dur_rep;
	uint64_t dur_lsn;          /* they go out once the log is durable here */
	struct wire_buf scratch;   /* log payload of a writeback */
	uint64_t dur_waits, dur_immediate;
	/* freed struct ms_pending kept for reuse (every lock request takes one,
	 * most give it back at once): at most MS_PEND_CACHE, this thread only */
	struct ms_pending *pend_free;
	unsigned npend_free;
	/* requests refused with LOTUS_ELIMIT: parked limit / bytes in flight */
	uint64_t parked_refused, bytes_refused;
	/* clients whose connection this server closed for a lapsed lease */
	uint64_t leases_lost;
	/* handlers.c: the per-request state of the message being handled
	 * (lookups in phases, AMAC), amac[0..amac_n); amac_i the next to
	 * handle; amac_cur the one being handled (NULL: none, e.g. a resume).
	 * A message of more than MS_AMAC_MAX requests goes through the phases
	 * a window at a time: amac_it is where the next window starts,
	 * amac_more says there may be one */
	struct ms_amac amac[MS_AMAC_MAX];
	unsigned amac_n, amac_i;
	struct wire_iter amac_it;
	int amac_more;
	const struct ms_amac *amac_cur;
	unsigned msg_left;         /* requests of the message after the current one */
	/* handlers.c: the txn the last lock request of this message named, with
	 * a reference of its own (lockop_txn); dropped after the message's
	 * last request, when a message begins (so a message cut short keeps
	 * it until the next one), and before any other op (one that may end a
	 * txn) */
	lock_txn_t *tc_txn;
	uint64_t tc_id;
	struct ms_conn *tc_conn;
	/* misses.c: the pages this worker is reading for parked requests
	 * (NULL until its first miss; a tiered store only) */
	struct ms_misses *misses;
	/* handlers.c: connections with gathered miss replies (miss_resumed) */
	struct ms_conn *resumed;
	uint64_t miss_reply_msgs;  /* messages that carried them */
	uint64_t miss_sleeps;      /* waits with reads in flight (on their eventfd) */
};
#define MS_PEND_CACHE 256

struct ms_pending;

struct ms_conn {
	struct ms_worker *wk;
	net_conn_t *nc;
	uint32_t compute_id;       /* from the client's WIRE_HELLO (hello_seen) */
	int hello_seen;            /* 0: it named no compute id yet, owns no txn */
	int closed;
	int broken;                /* a reply was lost: close at the next settle */
	int refs;                  /* the conn itself + each parked request */
	struct ms_pending *pending; /* parked requests (doubly linked) */
	unsigned nparked;          /* how many (srv->max_parked bounds it) */
	struct ms_conn *wk_prev, *wk_next;  /* wk->conns: freed at shutdown if still there */
	/* handlers.c: replies to requests resumed by one miss poll, sent as one
	 * message per connection when the poll ends (miss_resumed) */
	struct wire_buf resumed;
	struct ms_conn *resumed_next; /* wk->resumed list; the list holds a ref */
	int resumed_on;
};

/* PEND_MISS: parked on a page's wait list (misses.c): the lock is held, the
 * page is being read; only the read's completion resumes it (a lost
 * connection does not free it: the resume sees it closed). */
enum { PEND_PARKED, PEND_NOTIFIED, PEND_DEAD, PEND_MISS };

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
	struct ms_pending *miss_next; /* PEND_MISS: the next waiter on the same page */
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
	struct ms_durwait *wk_prev, *wk_next;  /* wk->durwaits (owner thread) */
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
/* An on-disk format (a log written by one build is replayed by the next):
 * a change that trips one of these needs a new record type, not a silent
 * reinterpretation of old logs.  REDO_COMMIT's wire_write is pinned in wire.h. */
static_assert(sizeof(struct ms_redo_table) == 8, "ms_redo_table size");
static_assert(offsetof(struct ms_redo_table, name_len) == 2, "ms_redo_table.name_len");
static_assert(offsetof(struct ms_redo_table, max_value) == 4, "ms_redo_table.max_value");
static_assert(sizeof(struct ms_redo_prepare) == 8, "ms_redo_prepare size");
static_assert(offsetof(struct ms_redo_prepare, reserved) == 4, "ms_redo_prepare.reserved");
static_assert(sizeof(struct ms_redo_decide) == 8, "ms_redo_decide size");
static_assert(offsetof(struct ms_redo_decide, commit) == 0, "ms_redo_decide.commit");
static_assert(REDO_COMMIT == 1 && REDO_PREPARE == 2 && REDO_DECIDE == 3 && REDO_REFUSE == 4 &&
	      REDO_TABLE == 5 && REDO_OUTCOMES == 6, "redo record types are numbers in the log");

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

/* What this server remembers about a txn (outcomes.c, prep_mu held). */
enum ms_outcome { MS_OUT_NONE = 0, MS_OUT_COMMIT, MS_OUT_ABORT, MS_OUT_REFUSED };

/* How a lower layer calls an upper one.  Field X is the upper layer's
 * ms_X(); the comment names the layer that sets it (its ms_*_register()) and
 * the callers.  Every field is set before any worker runs. */
struct ms_hooks {
	/* --- called by conn.c --- */
	/* handlers.c: a REQ message of len bytes (checked) is about to be
	 * handled, request by request: the lookups' first phases (AMAC) */
	void (*msg_begin)(struct ms_worker *wk, const void *data, size_t len);
	/* handlers.c: the next request of the message msg_begin began (1), or
	 * its end (0): the lookup phases parsed it already, so the loop does
	 * not parse it again */
	int (*next_req)(struct ms_worker *wk, const struct wire_req **r, const unsigned char **key,
			const unsigned char **val);
	/* handlers.c: handle one request of a REQ message; appends its reply to
	 * wk->rep unless the request parks (then the reply is sent on grant). */
	void (*handle_req)(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
			   const struct wire_req *r, const unsigned char *key,
			   const unsigned char *val);
	/* handlers.c: a parked request (MS_POST_PENDING) was granted or refused. */
	void (*resume)(struct ms_worker *wk, struct ms_pending *p);
	/* handlers.c: the page a request parked on (PEND_MISS) was read in
	 * (res 0) or its read failed (res < 0: the request fails with it). */
	void (*miss_resume)(struct ms_worker *wk, struct ms_pending *p, int res);
	/* handlers.c: the miss poll resumed what it had: send the replies that
	 * miss_resume gathered, one message per connection. */
	void (*miss_resumed)(struct ms_worker *wk);
	/* handlers.c: the connection is lost; free its requests still parked. */
	void (*conn_drop_pending)(struct ms_conn *c);
	/* durable.c: end of an incoming message: hand its waiting replies to the log. */
	void (*durable_flush)(struct ms_worker *wk, struct ms_conn *c);
	/* durable.c: the log reported on a durwait (MS_POST_DURABLE); send, free. */
	void (*durable_resume)(struct ms_worker *wk, struct ms_durwait *dw);
	/* durable.c, for the resolver: a lost client's COMMITTING txn: 1 if it is
	 * prepared here (keep its locks; the resolver takes it at once), else 0. */
	int (*prepared_hold)(struct ms_server *srv, uint64_t txn_id);

	/* --- called by handlers.c; all set by durable.c except txn_status --- */
	/* 0 if writes are accepted; LOTUS_EREADONLY after a log error (logs
	 * once).  Only with srv->log. */
	int (*durable_refuses)(struct ms_server *srv);
	/* Log-then-apply steps (srv->log set).  *lsn gets the LSN the reply must
	 * wait for (0: none).  0, LOTUS_EREADONLY (nothing applied), or a store
	 * error.  dep: the txn's commit dependency (lock_txn_dep), what a
	 * read-only COMMIT (r->arg 0) waits for; a writer's own record lies
	 * above it. */
	int (*commit_logged)(struct ms_server *srv, const struct wire_req *r,
			     const unsigned char *val, store_resv_t **rp, uint64_t dep,
			     uint64_t *lsn);
	/* Commit dependencies (srv->log set): the LSN a read of (table, key)
	 * depends on - the highest commit record that wrote a key of its hash
	 * slot - or 0 if that is durable (or not sync).  key NULL (a scan): the
	 * log's tail. */
	uint64_t (*read_dep)(struct ms_server *srv, uint16_t table, const unsigned char *key,
			     uint16_t klen);
	int (*writeback_logged)(struct ms_worker *wk, const struct wire_write *w, uint64_t txn_id,
				const unsigned char *key, const unsigned char *val, uint64_t *lsn);
	int (*table_create_logged)(struct ms_server *srv, const char *name, uint32_t max_value,
				   uint16_t *id, uint64_t *lsn);
	/* 2PC, every server ("log" steps only with srv->log).  prepare_logged:
	 * log the PREPARE of r (writes in val, participant bitmask in r->hint)
	 * without applying it, keep the writes until the decision; *lsn is what
	 * the reply must wait for (0 in memory).  prepared_decide: if txn_id is
	 * prepared here, log its DECIDE (no wait), apply its writes (commit) or
	 * drop them, return 1 with *rc set; 0 if it is not prepared here. */
	int (*prepare_logged)(struct ms_server *srv, const struct wire_req *r,
			      const unsigned char *val, store_resv_t **rp, uint64_t *lsn);
	int (*prepared_decide)(struct ms_server *srv, uint64_t txn_id, int commit, int *rc);
	/* ... on behalf of the txn's client: an ABORT of a txn this server
	 * answered PREPARED for (or recovered) is left to the resolver: 1 with
	 * *rc = LOTUS_ESTATE, locks kept.  prepared_outcome: what was decided
	 * here about txn_id (MS_OUT_NONE if still prepared or never). */
	enum ms_outcome (*prepared_outcome)(struct ms_server *srv, uint64_t txn_id);
	/* Reply to r with (status, arg) once the log is durable up to lsn (lsn 0
	 * or already durable: at once, in wk->rep). */
	void (*reply_durable)(struct ms_worker *wk, uint64_t seq, const struct wire_req *r,
			      int status, uint64_t arg, uint64_t lsn);
	/* ',"durability":{...}' (log counters) for the STATS reply (snprintf
	 * rules).  Only with srv->log. */
	int (*durable_stats_json)(struct ms_server *srv, char *buf, size_t len);
	/* termination.c: OP_TXN_STATUS: the enum wire_txn_status answer; *lsn: a
	 * REFUSE record the answer must wait for (0: none). */
	int (*txn_status)(struct ms_server *srv, uint64_t txn_id, uint64_t *lsn);
	/* replica.c: OP_REPL_HELLO/SHIP from this partition's primary. */
	void (*repl_req)(struct ms_worker *wk, uint64_t seq, const struct wire_req *r,
			 const unsigned char *val);
	/* replica.c: ',"replication":{...}' for the STATS reply (snprintf rules). */
	int (*repl_stats_json)(struct ms_server *srv, char *buf, size_t len);
	/* backup.c: the OP_BACKUP_* requests (`lotus backup`); replies in wk->rep. */
	void (*backup_req)(struct ms_worker *wk, uint64_t seq, const struct wire_req *r,
			   const unsigned char *key);
};

/* The decision hold of `lotus backup` (backup.c; docs/operations.md): from
 * start_ns to until_ns no prepared txn is decided here (prepared_decide in
 * durable.c waits on cv); the first thread that sees it expired records the
 * cut, redo_next_lsn() at that moment, and ends it.  Under prep_mu. */
struct ms_hold {
	pthread_cond_t cv;          /* CLOCK_MONOTONIC */
	uint64_t id;                /* of the latest hold */
	uint64_t start_ns, until_ns; /* until_ns 0: no hold in effect */
	uint64_t cut, held_ns;      /* of the latest ended hold */
	int ended;
};

struct ms_server {
	unsigned id, nworkers;
	unsigned max_parked;       /* per connection (memserver_opts) */
	unsigned miss_depth;       /* reads in flight per worker for parked misses; 0: none */
	uint64_t miss_spin_ns;     /* with reads in flight, poll this long before sleeping */
	uint64_t max_conn_bytes;
	store_t *store;
	struct tierback *tier;      /* tiered store's backing files (NULL: untiered) */
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
	uint64_t cluster_id;       /* announced at the door (identity.c; 0: none) */
	redo_t *log;
	ckpt_t *ckpt;
	pthread_mutex_t tables_mu; /* table creation: id order == log order */
	_Atomic int readonly_said; /* the "refusing writes" line was logged */
	struct ms_recovery rec;
	/* commit dependencies (durable.c, sync only): per hash of (table, key),
	 * the highest LSN of a commit that wrote such a key; MS_DEP_SLOTS */
	_Atomic uint64_t *deps;
	/* 2PC (every server; logged only with a data directory): transactions
	 * prepared here and not yet decided (durable.c), and the outcomes of
	 * recent ones (outcomes.c); all under prep_mu */
	pthread_mutex_t prep_mu;
	struct ms_prep_ent **prep;  /* MS_PREP_BUCKETS chains, keyed by txn id */
	_Atomic unsigned nprep;
	uint64_t prep_min_lsn;      /* lowest PREPARE LSN in the table (nprep > 0) */
	struct ms_outcomes *outcomes;
	struct ms_hold hold;        /* `lotus backup`'s cut (under prep_mu) */
	struct ms_backup *backup;   /* the copy in progress (backup.c) */
	const char *config_path;    /* the cluster (--config, else --peers), to ask
				       the other participants about undecided txns;
				       a --peers file may appear after the start */
	const char *secret_file;    /* the cluster secret (NULL: the file's, or none) */
	unsigned max_clients;       /* the door's limit (0: none), for the stats */
	pthread_t resolver;
	int resolver_running;
	_Atomic int resolver_stop;
	struct ms_hooks hooks;      /* upward calls (see struct ms_hooks) */
	struct os_regions *onesided;  /* the one-sided baseline's regions (src/onesided/) */
	/* replication (replica.c): enum ms_role; a BACKUP or DEPOSED server
	 * refuses every client request (LOTUS_EUNAVAIL: ask the coordinator) */
	_Atomic int role;
	struct ms_repl *repl;
	/* a primary serves clients only until then: the last answer it had from
	 * ZooKeeper plus half the session timeout, well before its session can
	 * expire and a backup take over (replica.c) */
	_Atomic uint64_t serve_until_ns;
};
enum ms_role { MS_ROLE_SOLO = 0, MS_ROLE_PRIMARY, MS_ROLE_BACKUP, MS_ROLE_DEPOSED };
#define MS_DEP_SLOTS (1u << 16)

/* prep_mu held: if the decision hold has run out, record its cut and end it.
 * Returns 1 while it is still in effect. */
static inline int ms_hold_check_locked(struct ms_server *srv, uint64_t now)
{
	struct ms_hold *h = &srv->hold;
	if (!h->until_ns)
		return 0;
	if (now < h->until_ns)
		return 1;
	h->cut = srv->log ? redo_next_lsn(srv->log) : 0;
	h->held_ns = now - h->start_ns;
	h->until_ns = 0;
	h->ended = 1;
	pthread_cond_broadcast(&h->cv);
	return 0;
}
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
	int promised;               /* answered PREPARED to a status query: the
				       client may no longer abort it (durable.c) */
	uint32_t len;
	unsigned char *payload;     /* the REDO_PREPARE payload */
	store_resv_t *resv;         /* the slots its writes need */
	struct ms_prep_ent *next;
};

#endif
