/*
 * session.h - the session layer (above cluster.h): a compute thread's
 * session and its sending group, which own the UCX worker, one connection
 * per memory server and the per-server outgoing message buffers (the
 * batching point), and deliver every reply to the transaction slot whose tag
 * it carries, through that slot's callbacks.  It knows nothing of
 * transactions beyond a slot.
 *
 * Batching (per session; lotus_options.batch):
 *   NONE   every request is flushed as a message of its own
 *   INTRA  session_step_end() flushes after each step: one message per memory server
 *          per step
 *   INTER  requests wait in per-server buffers until the poll flushes them,
 *          so the ready requests of every transaction in flight on the
 *          thread (and its group) share one message per server
 *
 * Groups (--batch inter, --group-size G): sessions idx/G share one struct
 * sgroup.  Whichever member holds the group lock sends and receives for all
 * of them (flat combining); every reply goes to its slot's callbacks, whose
 * owner may be another member.  Outside inter batching every session is a
 * group of one and the lock is never contended.
 *
 * Locking: the group lock (session_lock) is a plain mutex, taken once.  The
 * functions marked "locked" below expect it held; the others take it.  Slot
 * callbacks and posted items run inside the network dispatch, lock held, on
 * whichever member's thread progresses the group; they must not call back
 * into functions that take the lock.
 *
 * Reply matching: a request's tag is (slot << 16 | op index); the slot's
 * owner checks the reply's txn id (a reply that outlives its attempt is
 * dropped).  Tag slot TAG_ADMIN_SLOT is for synchronous administrative
 * calls (session_admin).
 */
#ifndef LOTUS_SESSION_H
#define LOTUS_SESSION_H
#include <pthread.h>
#include "compute/cluster.h"
#include "net/wire.h"

#define TAG_ADMIN_SLOT 0xffffu
#define TAG_TXN_OP     0xffffu  /* op index of COMMIT/ABORT replies */

struct sess_slot;

/* What a slot's owner is told; all run with the group lock held. */
struct sess_slot_ops {
	/* A reply with this slot's tag; bytes: what it occupied on the wire
	 * (the message header is charged to a message's first reply). */
	void (*on_reply)(struct sess_slot *sl, unsigned sv, const struct wire_rep *r,
			 const unsigned char *key, const unsigned char *value, size_t bytes);
	/* The connection to server sv is gone. */
	void (*on_lost)(struct sess_slot *sl, unsigned sv, int reason);
	/* deadline_ns passed (checked at most once a millisecond). */
	void (*on_expire)(struct sess_slot *sl);
	/* Its session closes with it still in flight (session_slots_drop;
	 * group lock not held): free what it owns, send nothing. */
	void (*on_drop)(struct sess_slot *sl);
};

struct sess_slot {
	const struct sess_slot_ops *ops;
	lotus_session_t *owner;          /* the session that added it */
	unsigned idx;                    /* the tag's slot number */
	uint64_t deadline_ns;            /* 0: no deadline */
};

/* An item another thread hands to a session's thread (session_post); fn runs
 * inside the network dispatch of its group, lock held. */
struct sess_post {
	void (*fn)(struct sess_post *p);
};

/*
 * A sending group: the network side shared by the sessions of a group (one
 * session alone outside --batch inter).  mu guards everything here and, for
 * the layers above, every transaction field a reply touches.
 */
struct sgroup {
	pthread_mutex_t mu;
	lotus_session_t *holder;         /* the member holding mu */
	_Atomic unsigned members;        /* sessions attached (changed under the cluster's
					    groups_mu, read by polls without it) */
	net_worker_t *net;
	net_conn_t *conns[LOTUS_MAX_SERVERS];
	struct wire_buf out[LOTUS_MAX_SERVERS];
	/* the largest message to each server lately (decaying): its next one
	 * starts in a buffer of this size from the worker's cache (net_wire_buf) */
	uint32_t out_size[LOTUS_MAX_SERVERS];
	uint64_t dirty;                  /* bit per server with a buffered message */
	uint64_t msg_seq;
	struct sess_slot **slots;        /* tag slot -> owner */
	unsigned nslots, cap_slots;
	unsigned *free_slots, nfree;
	int lost;                        /* a server connection was lost */
	_Atomic unsigned lost_seq;       /* connections lost so far */
	uint64_t lost_ns[LOTUS_MAX_SERVERS];   /* when (replicas > 1: the failover window) */
	uint64_t failover_next_ns[LOTUS_MAX_SERVERS];   /* next look at the coordinator */
	unsigned failover_said[LOTUS_MAX_SERVERS];
	int lost_reason[LOTUS_MAX_SERVERS]; /* why conns[sv] is gone (requests fail so) */
	uint64_t conn_at[LOTUS_MAX_SERVERS];  /* replicas > 1: the address conns[sv] went to */
	uint8_t recheck[LOTUS_MAX_SERVERS];   /* it answered LOTUS_EFAILOVER: look again */
	uint8_t rechecks;                /* some recheck[] is set */
	struct keeper_item kept;         /* on the cluster's lease keeper */
	uint64_t next_expiry_ns;         /* when the poll next looks for expired slots */
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
	void *eng;                       /* the engine's per-session state */
};

/* Open a session: its own group, or (--batch inter) the shared group of
 * sessions idx / group_size; own_group: always its own (serialized worker,
 * for use by any thread under the caller's mutex). */
/* The lease keeper: one thread per cluster progresses idle groups, so a
 * session whose thread is busy elsewhere keeps its leases (session.c). */
int keeper_init(lotus_cluster_t *c);
void keeper_stop(lotus_cluster_t *c);
int session_open(lotus_cluster_t *c, int own_group, lotus_session_t **out);
void session_close(lotus_session_t *s);

void session_lock(lotus_session_t *s);
void session_unlock(lotus_session_t *s);

/* Fresh transaction ids (unique across sessions, processes and runs) and
 * priorities (wall-clock based, increasing per session). */
uint64_t session_new_txn_id(lotus_session_t *s);
uint64_t session_new_priority(lotus_session_t *s);

/* Tag slots (take the lock). */
int session_slot_add(lotus_session_t *s, struct sess_slot *sl);
void session_slot_remove(lotus_session_t *s, struct sess_slot *sl);
/* The session closes with slots still in flight (transactions left
 * unfinished, e.g. a commit still asking what became of a lost server's
 * vote): each is taken off the group, so that no reply, loss or deadline
 * reaches it from now on, whoever progresses the group (the lease keeper,
 * another member), and then told (on_drop).  Their indexes are not reused. */
void session_slots_drop(lotus_session_t *s);

/* Locked: append a request for server sv to its message (flushed at once
 * under NONE batching).  *bytes (if not NULL) gets what it adds to the wire:
 * the request, plus the message header if it began a message. */
int session_queue(lotus_session_t *s, unsigned sv, const struct wire_req *r, const void *key,
		  const void *value, size_t *bytes);
/* Locked: a transaction step has queued its requests.  The batching policy
 * (lotus_options.batch), in one place:
 *   NONE   nothing to do: session_queue sent each request as it came
 *   INTRA  send what is buffered: one message per server per step
 *   INTER  nothing to do: the requests wait for the poll (session_progress),
 *          which sends those of every transaction of the group together */
void session_step_end(lotus_session_t *s);
/* Locked: send the buffered messages (of server sv / of every server). */
void session_flush_server(lotus_session_t *s, unsigned sv);
void session_flush(lotus_session_t *s);
/* Locked: send what is buffered, progress the network (waiting up to
 * timeout_ms if nothing happened and !busy), and tell the slots whose
 * deadline passed.  Returns the network events handled. */
int session_progress(lotus_session_t *s, int timeout_ms, int busy);
/* Unlocked, after session_unlock(): let the other members of a shared group
 * have their turn. */
void session_yield(lotus_session_t *s);
/* Locked: is the connection to server sv up? */
int session_connected(const lotus_session_t *s, unsigned sv);
/* replicas > 1: server sv (a partition) is lost; connect to the primary the
 * coordinator names now.  0; LOTUS_EFAILOVER while no successor answers yet
 * (for up to the cluster's timeout after the loss: retry); after that, or
 * unreplicated, why sv is lost.  One coordinator read and one short connect
 * at most every 50 ms.  Group lock held. */
int session_failover(lotus_session_t *s, unsigned sv);
/* Any thread: run p->fn on s's group (from its next network dispatch). */
int session_post(lotus_session_t *s, struct sess_post *p);

/* Synchronous requests outside any transaction (take the lock; they only
 * progress the network, so no transaction completes inside them).  n
 * requests to server sv, answered in full or LOTUS_ETIMEOUT; the answer's
 * status is the first error of the replies.  timeout_ms 0: the cluster's. */
int session_admin_many(lotus_session_t *s, unsigned sv, struct wire_req *r, unsigned n,
		       int timeout_ms);
int session_admin(lotus_session_t *s, unsigned sv, struct wire_req *r, const void *key,
		  const void *value, int timeout_ms);
/* The last admin reply's arg from server sv, and value (NUL-terminated). */
uint64_t session_admin_arg(const lotus_session_t *s, unsigned sv);
const char *session_admin_value(const lotus_session_t *s);
/* Write key=value to its memory server outside any transaction (OP_WRITEBACK)
 * and wait for the answer. */
int session_writeback(lotus_session_t *s, unsigned sv, uint16_t table, const void *key,
		      uint16_t klen, const void *value, uint32_t vlen);

#endif
