/*
 * compute_int.h - internals of the compute side (liblotus): the cluster
 * handle, per-thread sessions and transactions.
 *
 * Ownership: a session and all of its transactions belong to the thread that
 * opened it; nothing here is shared between sessions except the cluster's
 * read-mostly routing and table registry (table creation takes a mutex).
 *
 * Request routing: hash partitioning, server = fnv1a64(key) % nservers.
 * Scans go to every server and their rows are merged in key order.
 *
 * Batching (per session; lotus_options.batch):
 *   NONE   every request is flushed as a message of its own
 *   INTRA  a transaction step's requests are flushed together: one message
 *          per memory server per step
 *   INTER  requests wait in per-server buffers until lotus_session_poll()
 *          flushes them, so the ready requests of every transaction in flight
 *          on the thread share one message per server
 *
 * Transaction states (lotus_txn_*):
 *
 *   IDLE --stage ops--> IDLE --execute--> EXEC --all replies--> IDLE
 *     |                                     \--error--> FAILED (sticky)
 *     +--commit--> [PREPARE -->] COMMIT --replies--> DONE
 *     +--abort / FAILED--abort--> ABORT --replies--> DONE --restart--> IDLE
 *
 * PREPARE exists only for WOUND_WAIT transactions with two or more
 * participants: every participant first moves the transaction to COMMITTING
 * (after which it cannot be wounded), so no participant applies writes of a
 * transaction that another participant has already preempted.
 */
#ifndef LOTUS_COMPUTE_INT_H
#define LOTUS_COMPUTE_INT_H
#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include "lotus.h"
#include "common/config.h"
#include "net/net.h"
#include "net/wire.h"

#define LOTUS_MAX_TABLES 64
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
	char transport[16];
	unsigned nservers;
	struct server_ent servers[LOTUS_MAX_SERVERS];
	net_ctx_t *net;
	_Atomic unsigned next_session;
	pthread_mutex_t tables_mu;
	unsigned ntables;
	struct table_ent tables[LOTUS_MAX_TABLES];
};

struct txn_op {
	uint8_t op;          /* wire op of the lock request */
	uint8_t write;       /* 0, or OP_LOCK_X (update) / OP_INSERT / OP_DELETE at commit */
	uint8_t sent;
	uint16_t table;      /* index in cluster->tables */
	uint16_t klen;
	uint16_t server;
	uint16_t replies_due;
	unsigned count;      /* SCAN: rows wanted */
	int status;
	uint64_t loc;
	unsigned char key[128];
	unsigned char *wval; /* value to write at commit */
	uint32_t wlen, wcap;
	unsigned char *rval; /* read value, or SCAN rows as wire_row items */
	uint32_t rlen, rcap;
	unsigned rows;
	const unsigned char **row_ptrs; /* SCAN: merged, sorted */
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
	int abort_result;            /* what the abort step reports */
};

struct lotus_session {
	lotus_cluster_t *cl;
	net_worker_t *net;
	net_conn_t *conns[LOTUS_MAX_SERVERS];
	struct wire_buf out[LOTUS_MAX_SERVERS];
	uint64_t dirty;              /* bit per server with a buffered message */
	unsigned idx;
	uint32_t txn_seq;
	uint64_t msg_seq, last_prio;
	lotus_txn_t **slots;
	unsigned nslots, cap_slots;
	unsigned *free_slots, nfree;
	int lost;                    /* a server connection was lost */
	struct lotus_net_counters ctr;
	/* a synchronous administrative call in flight */
	int admin_due, admin_status;
	uint64_t admin_arg[LOTUS_MAX_SERVERS];
	char *admin_value;
	size_t admin_vlen;
};

/* session.c */
int session_queue(lotus_session_t *s, unsigned server, const struct wire_req *r,
		  const void *key, const void *value);
void session_flush(lotus_session_t *s);
void session_flush_server(lotus_session_t *s, unsigned server);
int session_admin(lotus_session_t *s, unsigned server, struct wire_req *r, const void *key,
		  const void *value, int timeout_ms);
/* txn.c */
void txn_on_reply(lotus_txn_t *t, unsigned server, const struct wire_rep *r,
		  const unsigned char *value);
void txn_on_server_lost(lotus_txn_t *t, unsigned server);
/* cluster.c */
int cluster_start_local(lotus_cluster_t *c);
void cluster_stop_local(lotus_cluster_t *c);
unsigned cluster_route(const lotus_cluster_t *c, const void *key, size_t klen);

#endif
