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
 */
#ifndef LOTUS_MS_INT_H
#define LOTUS_MS_INT_H
#include <stdatomic.h>
#include <pthread.h>
#include "lock/lock.h"
#include "net/net.h"
#include "net/wire.h"
#include "store/store.h"

struct ms_server;

struct ms_worker {
	struct ms_server *srv;
	unsigned idx;
	pthread_t thread;
	net_worker_t *net;
	struct wire_buf rep;       /* reply being built for the current message */
	uint64_t bad_msgs, reqs, hint_hits, hint_stale;
};

struct ms_pending;

struct ms_conn {
	struct ms_worker *wk;
	net_conn_t *nc;
	uint32_t compute_id;
	int closed;
	int refs;                  /* the conn itself + each parked request */
	struct ms_pending *pending; /* parked requests (doubly linked) */
};

enum { PEND_PARKED, PEND_NOTIFIED, PEND_DEAD };

struct ms_pending {
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
	struct scan_key *scan_keys;
};

struct scan_key {
	uint16_t klen;
	unsigned char key[STORE_KEY_MAX];
};

struct ms_server {
	unsigned id, nworkers;
	store_t *store;
	lock_table_t *locks;
	net_ctx_t *net;
	net_listener_t *listener;
	struct ms_worker *workers;
	_Atomic int stop;
};

/* handlers.c: handle one request of a REQ message; appends its reply to
 * wk->rep unless the request parks (then the reply is sent on grant). */
void ms_handle_req(struct ms_worker *wk, struct ms_conn *c, uint32_t sender, uint64_t seq,
		   const struct wire_req *r, const unsigned char *key, const unsigned char *val);
/* handlers.c: a parked request was granted or refused; reply now. */
void ms_resume(struct ms_worker *wk, struct ms_pending *p);
void ms_pending_free(struct ms_pending *p);
/* handlers.c: the connection is lost; free its requests that are still parked. */
void ms_conn_drop_pending(struct ms_conn *c);
/* memserver.c */
void ms_conn_unref(struct ms_conn *c);
int ms_send_reply_msg(struct ms_worker *wk, struct ms_conn *c, struct wire_buf *b);

#endif
