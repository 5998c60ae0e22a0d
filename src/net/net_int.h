/*
 * net_int.h - internals shared by the files of src/net/ (not a public header).
 *
 * Ownership: everything in a net_worker except its mailbox belongs to the
 * worker's thread.  The mailbox (mail_head/mail_tail/mail_count) is protected
 * by mail_lock and is the only state other threads touch (net_post, and the
 * listener handing a connection request to a target worker).
 */
#ifndef LOTUS_NET_INT_H
#define LOTUS_NET_INT_H
#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <ucp/api/ucp.h>
#include "net/door.h"
#include "net/net.h"
#include "net/ucx_addr.h"

#define NET_AM_ID        0x1c     /* the one AM id lotus uses */
#define NET_HASH_BUCKETS 256      /* ep -> conn lookup, per worker */
#define NET_DISPATCH_MAX 512      /* messages handed out per net_progress */
#define NET_F_BYE        0x8000   /* wire_hdr.flags on a PONG: sender is closing */
/* With a limit set (net_worker_set_limit): received bytes of one connection
 * held at a time (rendezvous data is fetched within it), and twice that for
 * eager messages, which cannot wait at the sender (over it: closed). */
#define NET_RX_HELD_MAX  (4 * (size_t)WIRE_MAX_MSG)
/* With a limit set: items (wire_hdr.count) one connection may have handed
 * out per net_dispatch round, at least one message, so that a client that
 * floods does not get the worker's whole round while others wait behind it. */
#define NET_BURST_ITEMS  64

/* Fault injection config (net_fault.c); read-only after net_ctx_create. */
struct net_fault {
	unsigned drop_every, corrupt_every;
	int oversize;             /* do not refuse sends over WIRE_MAX_MSG */
};

struct net_ctx {
	ucp_context_h ucp;
	char transport[16];       /* "tcp", "sm", "rc", "ud", "dc" */
	int peer_errors;          /* 1: UCP_ERR_HANDLING_MODE_PEER (UCX also reports
				     lost peers), 0: shared memory, the lease only */
	unsigned spin_us, lease_ms;
	atomic_uint leaked_workers; /* workers left to UCX (still closing): no ucp_cleanup */
	struct net_fault fault;
	atomic_uint_fast64_t fault_seq;
	struct door_key key;      /* the cluster secret (door.h) */
	int insecure;             /* may listen off loopback without a secret */
	unsigned max_clients;     /* per listener's server; 0: no limit */
	atomic_uint nclients;     /* connections the doors let in, still open */
	_Atomic uint64_t cluster_id; /* net_opts.cluster_id, or learnt (net_connect) */
};

enum conn_state {
	CONN_CONNECTING,   /* client ep created, nothing heard yet */
	CONN_OPEN,
	CONN_LOST,         /* UCX error or lease expiry; on_close pending */
	CONN_CLOSED,       /* closed locally or on_close delivered; waits for refs */
};

struct net_conn {
	net_worker_t *w;
	ucp_ep_h ep;
	void *user;
	enum conn_state state;
	int lost_reason;
	unsigned refs;              /* 1 while listed + queued rx + closing ep */
	int door_slot;              /* counts in ctx->nclients until closed */
	uint64_t last_rx_ns, last_ping_ns;
	/* bytes in flight (net_worker_set_limit): received messages held in
	 * memory (eager copies and held UCX buffers, rendezvous buffers from the
	 * start of their receive) and sends not yet completed */
	size_t rx_bytes, tx_bytes;
	uint64_t blocked_gen;           /* net_dispatch round that found it blocked */
	uint64_t burst_gen;             /* the round burst_items counts for */
	unsigned burst_items;
	uint64_t last_tx_ns;        /* last message handed to UCX (the peer's lease) */
	struct net_conn *next, *prev;   /* w->conns */
	struct net_conn *hnext;         /* hash chain */
	char peer[64];
};

enum rx_kind { RX_COPY, RX_HELD, RX_RNDV_WAIT, RX_RNDV_BUSY, RX_RNDV_DONE, RX_RNDV_FAIL };

/* One received message, queued in arrival order until net_progress hands it
 * out.  From the worker's cache (struct net_cache). */
struct net_rx {
	struct net_rx *next;
	net_conn_t *conn;
	enum rx_kind kind;
	void *data;      /* RX_COPY/RNDV_DONE: a heap buffer (net_cache_buf);
			    RX_HELD: UCX's; RNDV_WAIT: desc */
	size_t len;
	net_worker_t *w;
	uint8_t counted;   /* len is in conn->rx_bytes */
	uint8_t deferred;  /* counted once in rndv_deferred / dispatch_deferred */
};

/* A send in flight: who to credit when it completes.  From the worker's cache. */
struct net_tx {
	struct net_tx *next;  /* in the cache's free list */
	void *buf;
	net_conn_t *conn;   /* holds a reference */
	size_t len;
};

enum mail_kind { MAIL_USER, MAIL_CONN_REQ };
struct net_mail {
	struct net_mail *next;
	enum mail_kind kind;
	void *item;                 /* MAIL_CONN_REQ: the client's worker address */
	size_t len;
	char peer[64];
};

struct net_listener {
	net_worker_t *w;
	struct door *door;
	net_worker_t **targets;
	unsigned ntargets;
	uint16_t port;
	struct ucx_addr_shape shape;             /* of the targets' addresses */
};

/* What every message used to malloc and free, kept per worker for the next
 * one (docs/net.md, "Buffers and pools"): the net_rx and net_tx objects and
 * message buffers.  The buffers are ordinary heap blocks (free() is always
 * right for one that leaves the cache), kept as a stack so that the last
 * freed, still warm in cache, goes out first.  Only the worker's thread
 * touches it: every UCX callback that returns something (net_am_cb,
 * net_send_cb, net_rndv_done_cb) runs inside ucp_worker_progress() of this
 * worker, which only its owner calls (a shared worker's: under the
 * caller's lock); UCX's async thread handles socket events only, never a
 * message or a send completion. */
#define NET_CACHE_OBJS      256            /* net_rx and net_tx kept, each */
#define NET_CACHE_BUFS      64             /* buffers kept */
#define NET_CACHE_BUF_MAX   (256u << 10)   /* larger ones go back to malloc */
#define NET_CACHE_BYTES     (4u << 20)     /* bytes of buffers kept in all */
#define NET_CACHE_BUF_MIN   256            /* smallest buffer handed out */
#define NET_CACHE_SCAN      8              /* buffers looked at for one that fits */
struct net_cache {
	struct net_rx *rx;          /* free lists, linked by next */
	struct net_tx *tx;
	unsigned nrx, ntx, nbufs;
	size_t bytes;               /* in bufs */
	struct { void *p; size_t cap; } bufs[NET_CACHE_BUFS];
	uint64_t hits, misses;      /* buffer and object requests served / malloc'd */
};

struct net_worker {
	net_ctx_t *ctx;
	ucp_worker_h ucp;
	ucp_address_t *addr;                     /* its worker address (door handshake) */
	size_t addr_len;
	int efd;
	int wake_fd;                /* net_worker_wake_fd: net_wait returns on it too, or -1 */
	struct net_handlers h;
	void *arg;
	net_conn_t *conns;                       /* open/connecting/lost conns */
	net_conn_t *hash[NET_HASH_BUCKETS];
	struct net_rx *rx_head, *rx_tail;
	unsigned nlost;                          /* conns in CONN_LOST */
	unsigned nclosing;                       /* ep closes in flight */
	uint64_t next_lease_check_ns;
	size_t conn_bytes_max;                   /* 0: no limit */
	uint64_t dispatch_gen;
	struct net_stats st;
	struct net_cache cache;
	/* mailbox: any thread */
	pthread_mutex_t mail_lock;
	struct net_mail *mail_head, *mail_tail;
	atomic_uint mail_count;
};

/* net_fault.c */
void net_fault_init(struct net_fault *f);
/* 1: drop this message (caller frees it); may corrupt buf in place. */
int net_fault_apply(net_ctx_t *ctx, void *buf, size_t len);

/* net_setup.c: the fd guard (its essay is there); inline, as every
 * progress call takes it */
extern pthread_rwlock_t net_fd_lock;
extern pthread_once_t net_fd_once;
void net_fd_lock_init(void);

static inline void net_fd_shared(void)
{
	pthread_once(&net_fd_once, net_fd_lock_init);
	pthread_rwlock_rdlock(&net_fd_lock);
}

static inline void net_fd_exclusive(void)
{
	pthread_once(&net_fd_once, net_fd_lock_init);
	pthread_rwlock_wrlock(&net_fd_lock);
}

static inline void net_fd_unlock(void)
{
	pthread_rwlock_unlock(&net_fd_lock);
}

static inline unsigned net_ucp_progress(ucp_worker_h w)
{
	net_fd_shared();
	unsigned n = ucp_worker_progress(w);
	net_fd_unlock();
	return n;
}

/* net_conn.c: the connection table (lookup and put are inline: they run
 * per message), closing and lost peers */
static inline unsigned net_hash_ep(ucp_ep_h ep)
{
	uintptr_t v = (uintptr_t)ep;
	v ^= v >> 17;
	v *= 0x9e3779b97f4a7c15ULL;
	return (unsigned)(v >> 40) % NET_HASH_BUCKETS;
}

static inline net_conn_t *net_conn_lookup(net_worker_t *w, ucp_ep_h ep)
{
	for (net_conn_t *c = w->hash[net_hash_ep(ep)]; c; c = c->hnext)
		if (c->ep == ep)
			return c;
	return NULL;
}

static inline void net_conn_put(net_conn_t *c)
{
	assert(c->refs > 0);
	if (--c->refs == 0) {
		assert(c->state == CONN_CLOSED);
		free(c);
	}
}

void net_conn_mark_lost(net_conn_t *c, int reason);
/* Start closing c's endpoint; c is off every list afterwards. */
void net_conn_close_ep(net_conn_t *c, int force);
/* A MAIL_CONN_REQ: the door admitted a client to w. */
void net_accept(net_worker_t *w, struct net_mail *m);
/* Deliver on_close for lost connections and close their endpoints. */
int net_reap_lost(net_worker_t *w);
/* Progress only UCX (no handlers) for at most ms milliseconds. */
void net_ucx_wait(net_worker_t *w, int ms);

/* net.c */
int net_send_ping(net_conn_t *c, int type, uint16_t flags);
int net_mail_push(net_worker_t *w, struct net_mail *m);
/* net_liveness.c */
void net_lease_check(net_worker_t *w, uint64_t now);
/* Before anything is received or sent after a pause: conns this process has
 * not sent to for a whole lease are lost (LOTUS_ELEASE). */
void net_lease_fence(net_worker_t *w, uint64_t now);
/* 1 if c's peer may already have expired our lease (nothing sent for lease_ms). */
int net_lease_stale(const net_conn_t *c, uint64_t now);
int net_lease_sleep_ms(net_worker_t *w, int timeout_ms);

#endif
