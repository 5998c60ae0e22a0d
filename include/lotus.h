/*
 * lotus.h - the lotus client library (liblotus).
 *
 * lotus is a transactional key-value database for disaggregated memory: compute
 * servers (your program, linked with liblotus) run transactions; memory servers
 * (`lotus memserver`) own the tables, indexes and locks and are reached only by
 * two-sided messages.  Transactions use strict two-phase locking at the memory
 * servers under NO_WAIT, WAIT_DIE or WOUND_WAIT.
 *
 * Objects and threads:
 *   lotus_cluster_t  one per process: routing, configuration, local servers.
 *                    Create and destroy from one thread; otherwise shared.
 *   lotus_session_t  one per thread: owns that thread's endpoints.  Only the
 *                    thread that opened it may use it or its transactions.
 *   lotus_txn_t      a transaction; many may be open at once on one session
 *                    (their requests are batched together).
 *
 * Return codes: 0 (or a non-negative count/index) on success, -errno for a
 * system failure (-EINVAL: a bad argument, such as a NULL or empty key or
 * name, or a NULL handle or out pointer: getters then return 0 or NULL and
 * calls without a result do nothing), or one of the LOTUS_E* codes below.
 * lotus_strerror() names any of them.
 *
 * Guarantees of a transaction:
 *   Serializable  strict two-phase locking at the memory servers: every key
 *                 read is S-locked, every key written X-locked, until the
 *                 commit or abort.  A scan locks the rows it returns, not the
 *                 gaps between them: a row another transaction inserts into
 *                 a scanned range is not kept out (no phantom protection).
 *   Atomic        a commit applies all of its writes or none (README,
 *                 "Guarantees", for what each commit mode promises when a
 *                 client or server fails).
 *   Read-your-writes  a read of a key the transaction wrote, inserted or
 *                 deleted returns that write (LOTUS_ENOTFOUND after a
 *                 delete), from the client, without a message; a scan shows
 *                 the transaction's writes staged before it in its range.
 *                 An insert sees them too: LOTUS_EEXISTS after an own write
 *                 or insert of the key, success after an own delete.
 *   Sticky errors after a failed staging call or step, every call but
 *                 lotus_txn_abort() returns the error (a commit applies
 *                 nothing); then lotus_txn_restart() or lotus_txn_free().
 *   Durable       with durability sync, a commit that returned 0 survives a
 *                 crash of the memory servers.
 *   Deadlines     every wait for a memory server ends once timeout_ms
 *                 (lotus_options) has passed, with LOTUS_ETIMEOUT.  That is
 *                 also how a request ends that waited on a key held by a
 *                 prepared transaction whose decision is late (every
 *                 protocol, NO_WAIT included, waits for a prepared owner),
 *                 so LOTUS_ETIMEOUT does not always mean a lost server: a
 *                 hot key can cause it; retry it as an abort.  From execute: the
 *                 transaction failed (sticky); abort it, which does not wait
 *                 for the server that missed the deadline.  From commit, see
 *                 "Outcomes".  Late replies are dropped.
 *   Outcomes      a failed commit says which: LOTUS_EINDOUBT means the
 *                 OUTCOME IS UNKNOWN (the writes may have landed on every,
 *                 some or no server), so read the keys back before deciding;
 *                 any other error means nothing was applied, nor will be.
 *                 A two-phase commit that loses a writer's vote asks the
 *                 writers it still reaches what became of the transaction
 *                 (for up to timeout_ms more) before it reports a doubt.
 *   Leases        every connection keeps a lease (lotus_options.lease_ms):
 *                 a memory server that hears nothing from this process for
 *                 a lease (killed, cut off, paused) releases its unprepared
 *                 transactions there; this process then gets LOTUS_ELEASE
 *                 from its next request to that server, whose connection is
 *                 gone for the session (open a new session to use it).  A
 *                 server silent for a lease is lost (LOTUS_ETIMEOUT).
 *   Limits        a memory server bounds what one connection makes it hold
 *                 (parked lock requests, bytes in flight); a request over
 *                 them gets LOTUS_ELIMIT, which fails only its transaction:
 *                 abort and retry (lotus_err_retryable() says 1).
 *   Authentication  every connection proves the cluster secret
 *                 (secret_file); the traffic is NOT encrypted, so keep it on
 *                 a trusted network.  Whoever has the secret may read and
 *                 write every table.
 * Co-partitioning: every write is also applied on its memory server at
 * commit (the owner's cache is a clean copy), so scans see committed writes.
 * Only a key's owner may write it (the owner's cache and local locks would
 * miss another process's write); any process may read or scan any key.
 */
#ifndef LOTUS_H
#define LOTUS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* liblotus is built with hidden visibility; what this header declares is its
 * whole exported interface. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* lotus's own errors: a reserved range below every -errno. */
#define LOTUS_EBASE        (-5000)
#define LOTUS_EABORTED     (-5001) /* lock conflict: the transaction must abort */
#define LOTUS_EPREEMPTED   (-5002) /* wounded by an older transaction */
#define LOTUS_ENOTFOUND    (-5003) /* no such key */
#define LOTUS_EEXISTS      (-5004) /* key (or table) already exists */
#define LOTUS_EPROTO       (-5005) /* malformed message */
#define LOTUS_EVERSION     (-5006) /* peer speaks another protocol version */
#define LOTUS_ECONFIG      (-5007) /* bad configuration */
#define LOTUS_ENOTABLE     (-5008) /* no such table */
#define LOTUS_ETOOBIG      (-5009) /* key or value too large */
#define LOTUS_ESTATE       (-5010) /* call not valid in the current state */
#define LOTUS_EUNAVAIL     (-5011) /* memory server unreachable or lost */
#define LOTUS_ETIMEOUT     (-5012) /* deadline passed */
#define LOTUS_ENOSPACE     (-5013) /* memory server out of memory */
#define LOTUS_EUNSUPPORTED (-5014) /* feature or transport not available here */
#define LOTUS_EREADONLY    (-5015) /* server refuses writes (e.g. after log I/O error) */
#define LOTUS_EDURABLE     (-5016) /* commit could not be made durable */
#define LOTUS_ELIMIT       (-5017) /* a per-connection limit of the memory server
				      (parked requests, bytes in flight) was hit:
				      abort and retry */
#define LOTUS_ELEASE       (-5018) /* this process's lease with a memory server
				      expired (it was paused or cut off for
				      lease_ms): the server released its
				      transactions there and the connection is gone */
#define LOTUS_EINDOUBT     (-5019) /* commit outcome in doubt: a memory server was lost
				      or silent after the writes went out, and the
				      servers still reached could not say within
				      timeout_ms whether it committed.  It may have
				      been applied (in whole, or with ONE_PHASE in
				      part): read the keys back before retrying */
#define LOTUS_EFAILOVER    (-5020) /* replicas > 1: a partition's primary was lost
				      before the transaction committed there
				      (nothing was applied); its backup takes
				      over and the session reconnects to it:
				      retry (lotus_err_retryable says so) */
#define LOTUS_ELAST        (-5020)

const char *lotus_strerror(int err);
/* 1 if err means "abort and retry the transaction" (conflicts, preemption, a
 * memory server's per-connection limit, a primary lost and replaced). */
int lotus_err_retryable(int err);

typedef struct lotus_cluster lotus_cluster_t;
typedef struct lotus_session lotus_session_t;
typedef struct lotus_txn lotus_txn_t;
typedef uint32_t lotus_table_t;

enum lotus_cc { LOTUS_NO_WAIT = 0, LOTUS_WAIT_DIE = 1, LOTUS_WOUND_WAIT = 2 };
enum lotus_batch { LOTUS_BATCH_NONE = 0, LOTUS_BATCH_INTRA = 1, LOTUS_BATCH_INTER = 2 };
/* Compute partitioning: NONE, any compute server touches any key; CO, compute
 * server c owns the keys with hash(key) % compute_count == c, caches their
 * data and runs their concurrency control locally (see the README). */
enum lotus_partitioning { LOTUS_PART_NONE = 0, LOTUS_PART_CO = 1 };
/* How a transaction that writes on two or more memory servers commits.
 * TWO_PHASE: a PREPARE round first; every writer holds the writes and the
 * writer list (durably on durable servers, in memory otherwise) before the
 * COMMIT, and the servers settle a transaction whose client or a server
 * failed among themselves, so it is applied on all of them or on none.
 * ONE_PHASE: the paper's single COMMIT round, one round trip cheaper; it is
 * atomic only if no client or server fails (a client killed between its
 * COMMIT messages leaves the transaction applied on some servers only).
 * Durable clusters always commit in two phases. */
enum lotus_commit {
	LOTUS_COMMIT_DEFAULT = 0,     /* the config file's `commit`, else TWO_PHASE */
	LOTUS_COMMIT_TWO_PHASE = 1,
	LOTUS_COMMIT_ONE_PHASE = 2,
};

/* How transactions reach the memory servers.  TWOSIDED: lotus's requests
 * to the servers' lock managers (the Lotus paper).  ONESIDED: the
 * Sherman/Deft-style baseline over RMA (reads, writes, CAS, FAA on the
 * servers' memory); LOTUS_EUNSUPPORTED from lotus_connect() in a build
 * without it. */
/* DEX: DEX (Lu et al., VLDB'24) over the same RMA regions, with compute-side
 * partitioning: compute server c (compute_id, of compute_count) owns the keys
 * whose 8-byte big-endian value v has (v / LOTUS_DEX_BLOCK) % compute_count
 * == c, ranges of LOTUS_DEX_BLOCK consecutive keys.  It caches index pages
 * (inner and leaf) in cache_bytes without coherence traffic, runs the
 * concurrency control of its keys locally (no_wait or wait_die), and sends a
 * lookup whose path misses the cache twice to the memory server's CPU.
 * Writes and read-for-update of a key another compute server owns fail with
 * LOTUS_EUNSUPPORTED; reads of one are unlocked (docs/dex.md). */
enum lotus_engine { LOTUS_ENGINE_TWOSIDED = 0, LOTUS_ENGINE_ONESIDED = 1, LOTUS_ENGINE_DEX = 2 };
#define LOTUS_DEX_BLOCK 1024

/* The levels of lotus's log lines (lotus_options.log_fn). */
enum lotus_log_level {
	LOTUS_LOG_DEBUG = 0, LOTUS_LOG_INFO = 1, LOTUS_LOG_WARN = 2, LOTUS_LOG_ERROR = 3
};

struct lotus_options {
	const char *config_path;  /* cluster INI file; NULL with local_servers > 0 */
	int local_servers;        /* start N memory servers on loopback (children) */
	const char *transport;    /* "tcp" (default), "sm", "rc", "ud", "dc" */
	enum lotus_cc cc;         /* protocol of this process's transactions */
	enum lotus_batch batch;   /* default LOTUS_BATCH_INTRA */
	unsigned compute_id;      /* unique per compute process (0..4095) */
	unsigned compute_count;   /* compute processes in the cluster (CO partitioning);
	                             1 (default): the config's compute_servers */
	enum lotus_partitioning partitioning;
	uint64_t cache_bytes;     /* record cache capacity; 0 = no cache */
	double cache_admit;       /* admission probability of a miss (default 1) */
	unsigned group_size;      /* INTER batching: sessions per sending group (default 8) */
	unsigned timeout_ms;      /* deadline of every wait for a memory server, ms; 0:
				     the config's [cluster] timeout_ms, else 10000 */
	enum lotus_commit commit; /* multi-server commits (default: two-phase, see above) */
	/* for local clusters: */
	unsigned server_threads;  /* 0: follow the core count */
	uint64_t server_memory;   /* bytes per server; 0: 1 GiB */
	const char *lotus_bin;    /* lotus binary for local servers; NULL: $LOTUS_BIN, the
	                           * installed one, else `lotus` on PATH */
	const char *durability;   /* "none" (NULL: the same), "async" or "sync" (local);
				     async and sync need data_dir */
	const char *data_dir;     /* base directory (local): server i keeps its redo log and
				     checkpoints in DATA_DIR/ms<i> and recovers from it at
				     start; created if missing */
	unsigned lease_ms;        /* liveness lease of every connection, ms; 0: the
				     config's [cluster] lease_ms, else 3000.  A memory
				     server that hears nothing from this process for a
				     lease releases its transactions (LOTUS_ELEASE here);
				     local servers get the same lease (a keeper thread
				     renews it for idle sessions). */
	/* Every connection proves knowledge of the cluster's shared secret (an
	 * HMAC handshake; docs/net.md).  NULL: the config's [cluster] secret_file,
	 * else none (only servers on loopback without a secret admit that); a
	 * local cluster makes a random one.  lotus_connect fails with
	 * LOTUS_ECONFIG on an unreadable or empty file; lotus_session_open
	 * (which connects) with -EACCES (the secrets differ) or -EUSERS (a
	 * server is at its max_clients: each session is one connection). */
	const char *secret_file;
	enum lotus_engine engine; /* transaction engine (default LOTUS_ENGINE_TWOSIDED) */
	/* for local clusters with data_dir: data each server may hold (bytes;
	 * 0: = server_memory, no tiering) and its page-writer threads (0: the
	 * server's default).  More than server_memory evicts cold pages to the
	 * server's data directory (memserver --capacity). */
	uint64_t server_capacity;
	unsigned server_page_writers;
	/* Where lotus's own log lines go (NULL: stderr, one line each).  With
	 * log_fn set, lotus_connect makes it the process's log sink: every line
	 * lotus logs from then on (LOTUS_LOG=debug|info|warn|error sets which)
	 * is passed to log_fn instead, without its newline, e.g.
	 * "2026-12-02T00:50:24.123Z lotus: error: cannot reach memory server 0
	 * at ..." (UTC timestamp with milliseconds, process tag, level: the
	 * fields of every lotus log line), with its level and log_arg.  lotus_disconnect of that cluster puts stderr back.
	 * Threads: log_fn is called from any thread of the process (the
	 * caller's, sessions', the lease keeper's, the network's), possibly from
	 * several at once, so it must be thread-safe; it must not call lotus.
	 * The line is valid only during the call.  One sink per process: a
	 * second lotus_connect with its own log_fn replaces the first.  Local
	 * memory servers are child processes: their lines stay on stderr. */
	void (*log_fn)(enum lotus_log_level level, const char *line, void *log_arg);
	void *log_arg;
	/* Placement: which memory server holds each key (two-sided engine;
	 * LOTUS_EUNSUPPORTED from lotus_connect with the one-sided one).
	 * nplacement 0 (default): hash partitioning, every key on server
	 * hash(key) % servers.  Otherwise the keys of a table that one of the
	 * rules names go by the rule (see struct lotus_placement); the first
	 * rule that names a table wins.  The rules are copied at connect, and
	 * bad ones (NULL or empty table, key_bytes outside 1..8, a field
	 * past 128 bytes, over 64 rules) fail it with LOTUS_ECONFIG. */
	const struct lotus_placement *placement;
	unsigned nplacement;
	/* for local clusters with server_capacity: reads in flight per worker
	 * for requests parked on a page miss (memserver --miss-depth; 0: the
	 * server's default, UINT32_MAX: none, every miss blocks). */
	unsigned server_miss_depth;
};

/* A placement rule: the keys of table `table` (or, if it ends in '*', of
 * every table whose name starts with what comes before the '*') are placed
 * by the big-endian unsigned number N in their bytes [key_offset,
 * key_offset + key_bytes): on server N % servers.  Keys that share that
 * field share a server, so a transaction that keeps to one value of it
 * (TPC-C's warehouse) runs on one server and commits there in one phase.
 * A key shorter than key_offset + key_bytes is hashed.  A scan asks every
 * server (rows of its range may be anywhere), unless the rule has
 * LOTUS_PLACE_SCAN_LOCAL and the scan's start key holds the field: then
 * it asks only that field's server, and returns every row with the
 * start key's field value (>= start, in order) but, after them, only
 * that server's rows of other values: stop at the first row whose field
 * differs.
 * The memory servers neither know nor check placement: every client of a
 * table must use the same rule, and a durable cluster must be opened
 * with the rule its data was written with, on the same number of servers
 * (a key the rule routes elsewhere is not found there, and a write of it
 * lands on a second server).  Keep the rule with the data, as `lotus tpcc`
 * keeps its own in its meta row and refuses a run with another. */
#define LOTUS_PLACE_SCAN_LOCAL 1u
struct lotus_placement {
	const char *table;
	unsigned key_offset;
	unsigned key_bytes;       /* 1..8 */
	unsigned flags;           /* 0 or LOTUS_PLACE_SCAN_LOCAL */
};
/* Defaults: NO_WAIT, INTRA batching, one compute server, no cache. */
void lotus_options_init(struct lotus_options *o);

/* Connect to the cluster the options name (starting local servers if asked).
 * Errors: LOTUS_ECONFIG (message on stderr names file and line),
 * LOTUS_EUNAVAIL, LOTUS_EUNSUPPORTED, -ENOMEM.  Any thread, once. */
int lotus_connect(const struct lotus_options *o, lotus_cluster_t **out);
/* Close every session first.  Stops local servers.  The thread that
 * connected, once. */
void lotus_disconnect(lotus_cluster_t *c);
/* Any thread. */
unsigned lotus_cluster_servers(const lotus_cluster_t *c);
const char *lotus_cluster_transport(const lotus_cluster_t *c);

/* Create (or open, if it exists with the same size) a table on every memory
 * server.  max_value 0 = 1 KiB; at most 64 KiB.  Errors: -EINVAL (NULL or
 * empty name), LOTUS_ETOOBIG (name over 64 bytes, max_value over 64 KiB),
 * LOTUS_EEXISTS (exists with another size), -ENOSPC (64 tables),
 * LOTUS_ETIMEOUT / LOTUS_EUNAVAIL.  Any thread, on its own session. */
int lotus_table_create(lotus_session_t *s, const char *name, uint32_t max_value,
		       lotus_table_t *out);
/* Open a table that exists on the memory servers (created by any client),
 * whatever its size.  Errors: LOTUS_ENOTABLE (no such table), -EINVAL (NULL
 * or empty name), LOTUS_ETOOBIG (name over 64 bytes), LOTUS_ETIMEOUT /
 * LOTUS_EUNAVAIL.  Any thread, on its own session. */
int lotus_table_open(lotus_session_t *s, const char *name, lotus_table_t *out);
/* The largest value table tb takes, in bytes (0: no such table). */
uint32_t lotus_table_max_value(lotus_session_t *s, lotus_table_t tb);

/* One session per thread: the opening thread alone uses it and its
 * transactions from then on; it connects to every memory server.  Errors:
 * LOTUS_EUNAVAIL, -EACCES (a server did not accept the cluster secret, see
 * lotus_options.secret_file), -EUSERS (a server is at max_clients), -ENOMEM.  Free every
 * transaction of a session before closing it. */
int lotus_session_open(lotus_cluster_t *c, lotus_session_t **out);
void lotus_session_close(lotus_session_t *s);
/* Drive the network: send what is ready, handle replies, end the steps whose
 * deadline passed (LOTUS_ETIMEOUT), run callbacks of asynchronous calls.
 * Waits up to timeout_ms if nothing is ready (0: poll).  Returns the number
 * of network events handled (>= 0).  The session's thread. */
int lotus_session_poll(lotus_session_t *s, int timeout_ms);
/* Has session s lost a memory server?  0 if it still reaches every one; else
 * why the first lost one is gone (LOTUS_EUNAVAIL: its connection failed,
 * LOTUS_ETIMEOUT: it was silent for a lease, LOTUS_ELEASE: this process's
 * lease there expired) and, if sv is not NULL, which one.  A lost server stays
 * lost for the session (open a new one to reach it again).  With replicas > 1
 * a lost primary is not counted while its backup may take over: until
 * timeout_ms after the loss the session looks for the successor itself (and
 * requests there fail with the retryable LOTUS_EFAILOVER); it counts once
 * none was reached by then.  Known as soon as
 * a poll saw the loss, before any transaction ends because of it: a commit
 * whose vote went with the server asks the others for up to timeout_ms
 * (lotus_txn_commit).  -EINVAL for a NULL session.  Under the onesided
 * engine only the session's message connections count, not its RMA ones.
 * The session's thread. */
int lotus_session_lost(lotus_session_t *s, unsigned *sv);

/* Begin a transaction (new priority).  lotus_txn_restart() reuses the txn
 * after an abort and KEEPS its priority (starvation freedom); LOTUS_ESTATE if
 * it still holds locks (abort first).  Errors: -ENOMEM.  The session's
 * thread, as for every lotus_txn_* call. */
int lotus_txn_begin(lotus_session_t *s, lotus_txn_t **out);
int lotus_txn_restart(lotus_txn_t *t);
/* Reuse a finished transaction object for a NEW transaction (new priority). */
int lotus_txn_recycle(lotus_txn_t *t);
/* Free a transaction that holds no locks (committed, aborted or new). */
void lotus_txn_free(lotus_txn_t *t);
uint64_t lotus_txn_id(const lotus_txn_t *t);
uint64_t lotus_txn_priority(const lotus_txn_t *t);

/* Stage operations; nothing is sent until execute/commit.  Each returns an op
 * index >= 0 to fetch its result with, or an error that dooms the
 * transaction (sticky): -EINVAL (NULL or empty key, NULL value with vlen >
 * 0), LOTUS_ETOOBIG (key over 128 bytes, value over the table's max),
 * LOTUS_ENOTABLE, LOTUS_ESTATE (a step is in flight, or the txn is done),
 * -ENOMEM, or the transaction's earlier error.  Keys and values are copied.
 * A read of a key this transaction wrote is answered from its writes (see
 * "Read-your-writes" above). */
int lotus_txn_read(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen);
int lotus_txn_read_for_update(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen);
/* Write: takes an X lock at execute time (unless already held), applies at commit. */
int lotus_txn_write(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen,
		    const void *value, size_t vlen);
int lotus_txn_insert(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen,
		     const void *value, size_t vlen);
int lotus_txn_delete(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen);
/* Exactly min(count, rows that exist) rows with key >= start, in key order,
 * S-locked, merged from every memory server (in as many round trips of the
 * step as the servers' per-reply caps need), with this transaction's own
 * writes staged before the scan applied.  start: 1..128 bytes (-EINVAL if
 * empty).  count 0 sends nothing. */
int lotus_txn_scan(lotus_txn_t *t, lotus_table_t tb, const void *start, size_t slen,
		   unsigned count);

/* Send every staged operation (one message per memory server) and wait for the
 * replies.  0, or the first error, which is sticky: LOTUS_EABORTED,
 * LOTUS_EPREEMPTED, LOTUS_ELIMIT (abort and retry), LOTUS_ETIMEOUT, LOTUS_EUNAVAIL,
 * LOTUS_EREADONLY, -ENOMEM.  LOTUS_ENOTFOUND / LOTUS_EEXISTS are reported per
 * op and do not fail execute. */
int lotus_txn_execute(lotus_txn_t *t);
/* Result of op: 0 and the value (valid until the txn is restarted/freed), or
 * LOTUS_ENOTFOUND / LOTUS_EEXISTS / a lock error; -EINVAL for a bad op. */
int lotus_txn_result(const lotus_txn_t *t, int op, const void **value, size_t *vlen);
/* Version of the record a read op (lotus_txn_read / _read_for_update) found,
 * as its memory server holds it under this transaction's lock: 0 and
 * *version, or the op's result if it found nothing (LOTUS_ENOTFOUND, a lock
 * error).  Every committed update of the record gives it a new version, also
 * one that writes the same value back, and a record deleted and inserted
 * again never gets a version it had before; so an unchanged version means
 * the record was not written in between (only equality means anything: the
 * number is opaque, not ordered).  The versions a memory server hands out
 * start anew when it restarts: every version read after a restart differs
 * from every one read before it (a reader sees a change, never misses one).
 * A counter wraps after 2^32 updates of one record, or 2^32 inserts on one
 * memory server in one run.  LOTUS_EUNSUPPORTED: the read was answered
 * without its memory server (from this transaction's own writes, see
 * "Read-your-writes", or a compute-owned cache entry), or the engine has no
 * versions (--engine onesided, dex); LOTUS_ESTATE: not executed yet;
 * -EINVAL: a bad op, not a read, or NULL version. */
int lotus_txn_result_version(const lotus_txn_t *t, int op, uint64_t *version);
/* Scan results: number of rows (or the scan's error), then each row (0, or
 * -EINVAL for a bad op or row). */
int lotus_txn_scan_rows(const lotus_txn_t *t, int op);
int lotus_txn_scan_row(const lotus_txn_t *t, int op, unsigned i, const void **key,
		       size_t *klen, const void **value, size_t *vlen);

/* Commit: execute what is still staged, then commit.
 * 0: committed: every writer voted yes (durably under durability sync), or
 * the one-phase COMMIT landed.  The servers apply the writes and release the
 * locks when the COMMIT notices reach them: the notices ride on this
 * session's next message (sent at the latest by its next poll, after the
 * callbacks of this poll ran), so a transaction that touches the same keys
 * from another session of this thread, inside such a callback, waits for
 * them.  A read-only transaction commits with no round trip.  A server lost
 * after the votes applies the rest when it is back (its keys stay locked
 * until then).
 * LOTUS_EINDOUBT: the OUTCOME IS UNKNOWN: a server was lost or missed the
 * deadline after the writes went out (a one-phase COMMIT, or a PREPARE whose
 * vote was lost) and the writers still reached could not settle it within
 * timeout_ms; the servers settle it later.  Read the keys back before
 * retrying.
 * Any other error: NOTHING WAS APPLIED, nor will be, and the transaction is
 * aborted: LOTUS_EUNAVAIL, LOTUS_ETIMEOUT or LOTUS_ELEASE (a server was lost
 * before a write could land: in execute, before its PREPARE, or the
 * transaction was settled as aborted), a refusal (LOTUS_EREADONLY,
 * LOTUS_EDURABLE, ...), a conflict (retryable), or the sticky error of an
 * earlier failure. */
int lotus_txn_commit(lotus_txn_t *t);
/* Abort: release the locks.  Always leaves the txn ready to restart or free;
 * returns 0 or the error that ended the transaction.  LOTUS_ESTATE while an
 * asynchronous step is in flight. */
int lotus_txn_abort(lotus_txn_t *t);

/* Asynchronous forms: start the step and return 0 (or an error, and then cb
 * never runs); cb runs from lotus_session_poll() with the same result the
 * synchronous call returns, by the deadline at the latest (LOTUS_ETIMEOUT).
 * After a failed commit_async, call lotus_txn_abort_async.  Several
 * transactions of one session may be in flight at once; their requests to a
 * memory server share messages (inter-transaction batching). */
typedef void (*lotus_txn_cb)(lotus_txn_t *t, int result, void *arg);
int lotus_txn_execute_async(lotus_txn_t *t, lotus_txn_cb cb, void *arg);
int lotus_txn_commit_async(lotus_txn_t *t, lotus_txn_cb cb, void *arg);
int lotus_txn_abort_async(lotus_txn_t *t, lotus_txn_cb cb, void *arg);

/* Network counters of a session (messages, bytes, requests by type).  The
 * session's thread. */
struct lotus_net_counters {
	uint64_t msgs_sent, bytes_sent, msgs_recv, bytes_recv, reqs_sent;
	uint64_t hint_stale;      /* replies saying a cached location was stale */
	uint64_t local_hits;      /* operations served by the co-partitioned cache */
};
void lotus_session_counters(const lotus_session_t *s, struct lotus_net_counters *out);

/* The engine's work per transaction attempt, by how the attempt ended
 * (committed, or aborted: an abort or a failed commit).  round_trips: waits
 * for a network completion; ops: operations on the wire (two-sided:
 * requests; one-sided: reads, writes, CAS, FAA), with the bytes each sent
 * and the bytes of its answer (two-sided: each message's header is charged
 * to the first request or reply in it, so the sums are every byte on the
 * wire); type[i] splits them by the engine's type_names[i].  The session's
 * thread. */
#define LOTUS_OP_TYPES 16
struct lotus_op_counters {
	uint64_t ops, bytes_sent, bytes_recv;
};
struct lotus_attempt_counters {
	uint64_t attempts, round_trips, ops, bytes_sent, bytes_recv;
	struct lotus_op_counters type[LOTUS_OP_TYPES];
	uint64_t servers;         /* memory servers each attempt sent to, summed
				     (two-sided engine; 0 from the one-sided) */
};
struct lotus_txn_counters {
	const char *engine;                         /* "twosided", "onesided", "dex" */
	unsigned ntypes;
	const char *type_names[LOTUS_OP_TYPES];
	struct lotus_attempt_counters committed, aborted;
};
void lotus_session_txn_counters(const lotus_session_t *s, struct lotus_txn_counters *out);

/* Counters of memory server sv (locks, store, requests) as one JSON object;
 * the text is owned by the session and valid until the next call.  NULL if
 * the server does not answer. */
const char *lotus_server_stats(lotus_session_t *s, unsigned sv);

/* Record-cache counters of the whole compute process (zeros without a cache).
 * Any thread. */
struct lotus_cache_counters {
	uint64_t hits, misses, stale_hints, evictions, writebacks, entries, bytes;
};
void lotus_cluster_cache_counters(lotus_cluster_t *c, struct lotus_cache_counters *out);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
