/*
 * os_engine.h - the one-sided baseline engine (Sherman/Deft-style
 * transactions over UCX RMA; docs/onesided.md).
 *
 * Objects and threads:
 *   os_engine_t   one per process: the UCX context (RMA + atomics) and the
 *                 server list.  Create/destroy on one thread.
 *   os_session_t  one per thread: a worker, one endpoint per memory server,
 *                 the attached tables (rkeys), the cache of upper-level
 *                 index pages and the counters.  Only its thread uses it.
 *   os_txn_t      a transaction of one session.
 *
 * A transaction stages operations, executes them (finds every record
 * through the index, takes every lock, and only then reads the data), then
 * commits (writes the data, inserts, then releases every lock) or aborts
 * (releases).  Every step is synchronous: one RMA operation at a time, each
 * waited for (one round trip), as the authors' baseline does.
 *
 *   IDLE --stage--> IDLE --execute--> EXECUTED --commit--> DONE
 *     \                   \--conflict/error (locks released)--> FAILED
 *      \--abort (any state but DONE) --> DONE       FAILED --abort--> DONE
 *
 * Errors: 0, LOTUS_EABORTED (a lock conflict: the transaction released what
 * it held and must be retried), LOTUS_ENOTFOUND, LOTUS_EEXISTS,
 * LOTUS_EUNSUPPORTED (a key that is not 8 bytes), LOTUS_ETIMEOUT or
 * LOTUS_EUNAVAIL (a memory server stopped answering: the session is broken),
 * LOTUS_ESTATE, -ENOMEM.
 */
#ifndef LOTUS_OS_ENGINE_H
#define LOTUS_OS_ENGINE_H
#include <stddef.h>
#include <stdint.h>

typedef struct os_engine os_engine_t;
typedef struct os_session os_session_t;
typedef struct os_txn os_txn_t;

struct os_engine_opts {
	const char *transport;    /* "tcp", "sm", ... (NULL: $UCX_TLS or tcp) */
	unsigned nservers;
	const char *const *hosts; /* nservers entries */
	const uint16_t *ports;
	const char *secret_file;  /* the cluster secret for the front door; NULL: none */
	int cc;                   /* LOTUS_NO_WAIT or LOTUS_WAIT_DIE */
	uint64_t cache_bytes;     /* cache of upper index pages; 0: 16 MiB */
	unsigned timeout_ms;      /* any wait for a server; 0: 10000 */
	unsigned wait_ms;         /* WAIT_DIE: how long an older transaction polls
				     a lock before it gives up (an abort, which
				     also breaks a wait cycle that a ts word read
				     before its owner wrote it can cause); 0: 1000 */
	unsigned lease_ms;        /* connections' lease; a keeper thread progresses
				     sessions idle for lease/8; 0: the default */
};

enum os_op_type { OS_READ, OS_WRITE, OS_CAS, OS_FAA, OS_NTYPES };

/* One-sided traffic: operations and payload bytes sent/received by type,
 * and round trips (waits for a network completion). */
struct os_tally {
	uint64_t ops[OS_NTYPES], out[OS_NTYPES], in[OS_NTYPES];
	uint64_t round_trips;
};
struct os_counters {
	struct os_tally committed;   /* attempts that committed */
	struct os_tally aborted;     /* attempts that aborted */
	struct os_tally other;       /* outside transactions (attach) */
	uint64_t commits, aborts, torn_reads, wait_rereads, cache_hits, cache_misses;
	uint64_t splits;
	uint64_t chunks_asked;       /* full chunks reported to a server (growth) */
};
const char *os_op_type_name(enum os_op_type t);
void os_tally_add(struct os_tally *dst, const struct os_tally *src);
void os_counters_add(struct os_counters *dst, const struct os_counters *src);

int os_engine_create(const struct os_engine_opts *o, os_engine_t **out);
void os_engine_destroy(os_engine_t *e);
const char *os_engine_transport(const os_engine_t *e);

int os_session_open(os_engine_t *e, os_session_t **out);
void os_session_close(os_session_t *s);
/* Attach table `name` on every server (builds its regions on first use);
 * *tid names it in os_txn_*.  0, LOTUS_ENOTABLE, LOTUS_EUNSUPPORTED, ... */
int os_session_attach(os_session_t *s, const char *name, unsigned *tid);
uint32_t os_session_value_max(const os_session_t *s, unsigned tid);
void os_session_counters(const os_session_t *s, struct os_counters *out);
/* Answer the servers' liveness pings (sm); call now and then when idle. */
void os_session_poll(os_session_t *s);

int os_txn_begin(os_session_t *s, os_txn_t **out);
void os_txn_free(os_txn_t *t);
/* Start a new transaction on t with a new priority (recycle) or with the
 * priority of the attempt before (restart, for a retry). */
int os_txn_recycle(os_txn_t *t);
int os_txn_restart(os_txn_t *t);
uint64_t os_txn_priority(const os_txn_t *t);
/* Set the priority (smaller = older) before executing; tests. */
void os_txn_set_priority(os_txn_t *t, uint64_t prio);

/* Stage: read (S lock), read for update (X lock + value), write (X lock,
 * value written at commit; a key the transaction already read for update
 * keeps its lock), insert (at commit), delete (X lock; the leaf entry is
 * marked at commit; a key not there is LOTUS_ENOTFOUND in its result),
 * scan (at most count rows with key >= start in key order, S-locked, read
 * at execute; os_txn_scan_rows/row).  Returns the op index >= 0. */
int os_txn_read(os_txn_t *t, unsigned tid, const void *key, size_t klen);
int os_txn_read_for_update(os_txn_t *t, unsigned tid, const void *key, size_t klen);
int os_txn_write(os_txn_t *t, unsigned tid, const void *key, size_t klen, const void *val,
		 size_t vlen);
int os_txn_insert(os_txn_t *t, unsigned tid, const void *key, size_t klen, const void *val,
		  size_t vlen);
int os_txn_delete(os_txn_t *t, unsigned tid, const void *key, size_t klen);
int os_txn_scan(os_txn_t *t, unsigned tid, const void *start, size_t slen, unsigned count);
int os_txn_execute(os_txn_t *t);
/* 1 once a commit or abort ended it (it holds no lock). */
int os_txn_finished(const os_txn_t *t);
int os_txn_result(const os_txn_t *t, int op, const void **val, size_t *vlen);
/* A scan's rows after execute (or -EINVAL, LOTUS_ESTATE), and row i. */
int os_txn_scan_rows(const os_txn_t *t, int op);
int os_txn_scan_row(const os_txn_t *t, int op, unsigned i, const void **key, size_t *klen,
		    const void **val, size_t *vlen);
int os_txn_commit(os_txn_t *t);
int os_txn_abort(os_txn_t *t);

/* Asynchronous steps: the step runs as a coroutine of t, on the calling
 * thread, until its first RMA op that is not complete at once; then the
 * call returns 0 and os_session_run() carries on every running step,
 * overlapping the operations of several transactions of the session.  cb
 * runs when the step ended, from os_txn_step itself (a step that never
 * waits) or from os_session_run.  Not from inside a step. */
enum os_step { OS_STEP_EXECUTE, OS_STEP_COMMIT, OS_STEP_ABORT };
typedef void (*os_step_cb)(os_txn_t *t, int rc, void *arg);
int os_txn_step(os_txn_t *t, enum os_step step, os_step_cb cb, void *arg);
/* Progress the network and resume the running steps; returns how many ran. */
int os_session_run(os_session_t *s);
unsigned os_session_active(const os_session_t *s);

#endif
