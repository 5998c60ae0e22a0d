/*
 * net.h - the message transport: UCX active messages between per-thread
 * workers (docs/design.md, "Processes and threads" and "Wire protocol").
 *
 * Objects and their threads:
 *   net_ctx_t     one per process (the ucp_context).  Create/destroy on one thread.
 *   net_worker_t  one per thread; owns a UCX worker and every connection on it.
 *                 Only its owning thread calls anything on it or its conns,
 *                 except net_post(), which any thread may call.
 *   net_conn_t    one endpoint; lives on one worker.
 *
 * Delivery: UCX AM callbacks never call into lotus code and never progress the
 * worker; they queue the message (eager data is held, rendezvous data is
 * received into a buffer).  net_progress() then hands each message to
 * on_msg() in arrival order, outside any UCX callback, where the handler may
 * send.  The message bytes are valid only during on_msg().
 *
 * Sending: net_send() takes ownership of a buffer from net_buf_alloc() or
 * net_worker_buf() (or the detached data of a wire_buf, which is a heap
 * block) and, when UCX is done with it, keeps it in the worker's cache for
 * the next message (or frees it), so no header or payload dies before its
 * send completes and a busy worker allocates nothing per message.
 *
 * Connecting: a server listens on a TCP socket of lotus's own (door.h); a
 * client proves the cluster secret there, the two swap UCX worker addresses,
 * and both create endpoints by address.  Nothing reaches UCX's connection
 * manager, and a message on an endpoint no handshake made is dropped.
 *
 * Liveness (net_liveness.c): every connection, on every transport, keeps a
 * lease.  Each side pings an idle connection; a peer silent for lease_ms is
 * lost (on_close with LOTUS_ETIMEOUT), and a connection this process sent
 * nothing on for lease_ms (it was paused) is lost too (LOTUS_ELEASE: the
 * peer may have expired it), before anything more is sent or received on
 * it.  Over tcp/rc/ud/dc UCX's peer error handling also reports a peer
 * whose connection failed (LOTUS_EUNAVAIL).
 *
 * Idle: net_wait() spins for spin_us, then sleeps on the worker's wakeup fd,
 * so an idle process uses no CPU.
 *
 * Returns 0 or -errno, or LOTUS_EUNAVAIL (peer unreachable/lost),
 * LOTUS_EUNSUPPORTED (transport not available here, with a log line naming
 * what is missing), LOTUS_ETIMEOUT.
 */
#ifndef LOTUS_NET_H
#define LOTUS_NET_H
#include <stddef.h>
#include <stdint.h>
#include "net/door.h"
#include "net/wire.h"

typedef struct net_ctx net_ctx_t;
typedef struct net_worker net_worker_t;
typedef struct net_conn net_conn_t;
typedef struct net_listener net_listener_t;

struct net_opts {
	const char *transport;   /* "tcp", "sm", "rc", "ud", "dc"; NULL: $UCX_TLS, else tcp */
	unsigned spin_us;        /* busy-poll budget before sleeping (default 100) */
	unsigned lease_ms;       /* liveness lease of every connection (default 3000) */
	/* The front door (door.h, docs/net.md "Who may connect"). */
	const char *secret_file; /* the cluster secret; NULL: none (loopback only) */
	int insecure;            /* allow net_listen off loopback without a secret */
	unsigned max_clients;    /* connections a listener of this ctx admits; 0: any */
	/* The cluster (door.h): a listener announces it; net_connect refuses a
	 * server that announces another (LOTUS_ECONFIG, logged).  0: a server
	 * announces none; a client takes the first id a server announces and
	 * holds every later server to it.  A server announcing 0 is taken. */
	uint64_t cluster_id;
	/* Where the peers are: UCX's network transports are restricted to the
	 * interfaces that reach these addresses (a server: its listen address;
	 * a client: its servers).  NULL/0 or a wildcard: every interface. */
	const char *const *hosts;
	unsigned nhosts;
};

struct net_handlers {
	/* A whole message arrived on c.  Runs in the worker's thread. */
	void (*on_msg)(void *arg, net_conn_t *c, const void *data, size_t len);
	/* A server-side connection was established on this worker. */
	void (*on_accept)(void *arg, net_conn_t *c);
	/* c is closed or its peer is lost (reason: 0 or -errno/LOTUS_E*).  c is
	 * freed after this returns.  reason 0: the peer closed it (net_conn_close
	 * or net_worker_destroy on its side); LOTUS_EUNAVAIL: the peer was lost;
	 * LOTUS_ETIMEOUT: it was silent for a lease; LOTUS_ELEASE: this side sent
	 * nothing for a lease (it was paused), so the peer may have expired it.
	 * Not called for a local net_conn_close() or net_worker_destroy(). */
	void (*on_close)(void *arg, net_conn_t *c, int reason);
	/* An item passed to net_post() by another thread. */
	void (*on_post)(void *arg, void *item);
};

int net_ctx_create(const struct net_opts *opts, net_ctx_t **out);
void net_ctx_destroy(net_ctx_t *ctx);
/* The transport in use, as the user named it ("tcp", "sm", ...). */
const char *net_ctx_transport(const net_ctx_t *ctx);
/* Largest message the configured transports carry (UCX-derived; at least
 * 64 KiB + headers on every transport lotus supports). */
size_t net_ctx_max_msg(const net_ctx_t *ctx);

int net_worker_create(net_ctx_t *ctx, const struct net_handlers *h, void *arg,
		      net_worker_t **out);
void net_worker_destroy(net_worker_t *w);   /* closes its conns (no on_close) */
/* Like net_worker_create, for a worker that several threads use one at a time
 * under the caller's lock (UCS_THREAD_MODE_SERIALIZED). */
int net_worker_create_shared(net_ctx_t *ctx, const struct net_handlers *h, void *arg,
			     net_worker_t **out);

/* Listen on host:port (a TCP socket of lotus's own, door.h).  Each client
 * that passes the handshake is handed round-robin to one of
 * targets[0..ntargets) (w itself may be one), which creates the endpoint in its
 * own thread.  port 0 picks a free port.  Call before the targets' threads
 * run.  Off loopback without a secret: LOTUS_ECONFIG unless opts->insecure. */
int net_listen(net_worker_t *w, const char *host, uint16_t port, net_worker_t **targets,
	       unsigned ntargets, net_listener_t **out);
uint16_t net_listener_port(const net_listener_t *l);
/* The door's counters; *clients: connections admitted and still open. */
void net_listener_stats(const net_listener_t *l, struct door_stats *out, unsigned *clients);
void net_listener_destroy(net_listener_t *l);

/* Connect from worker w; returns when the connection is usable or after
 * timeout_ms (LOTUS_ETIMEOUT / LOTUS_EUNAVAIL; -EACCES: the handshake failed,
 * -EUSERS: the server is full, both logged).  "Usable" means the peer's net
 * answered a PING, so its on_accept has run.  Progresses only UCX (no handlers
 * run; messages for other connections stay queued), so it may be called from
 * a handler, though it blocks that worker meanwhile. */
int net_connect(net_worker_t *w, const char *host, uint16_t port, int timeout_ms,
		net_conn_t **out);
/* Close c (the peer sees on_close with reason 0); queued messages from c are
 * dropped and c must not be used afterwards. */
void net_conn_close(net_conn_t *c);
void net_conn_set_user(net_conn_t *c, void *user);
void *net_conn_user(const net_conn_t *c);
const char *net_conn_peer(const net_conn_t *c);
net_worker_t *net_conn_worker(const net_conn_t *c);

/* The UCX handles under lotus's objects (ucp_context_h, ucp_worker_h,
 * ucp_ep_h), for the one-sided engine's RMA (every context has RMA and
 * 64-bit atomics).
 * Same thread rules as the objects themselves. */
void *net_ctx_ucp(net_ctx_t *ctx);
void *net_worker_ucp(net_worker_t *w);
void *net_conn_ep(net_conn_t *c);

void *net_buf_alloc(size_t len);
void net_buf_free(void *buf);
/* A buffer of at least len bytes (*cap: how many, if cap) for a message the
 * owner thread of w builds, from w's cache of sent and received messages'
 * buffers (net_int.h, struct net_cache), so that a worker in its steady
 * state allocates nothing per message.  An ordinary heap block: net_send
 * takes it, free() releases it.  NULL: out of memory.  Owner thread. */
void *net_worker_buf(net_worker_t *w, size_t len, size_t *cap);
/* Give b room for want bytes in all (at least 4 KiB, at most WIRE_MAX_MSG)
 * from w's cache, keeping what b holds: for a wire_buf that is detached and
 * sent per message (its next message then starts in a recycled buffer, not
 * a fresh 4 KiB doubled by realloc).  0 or -ENOMEM.  Owner thread. */
int net_wire_buf(net_worker_t *w, struct wire_buf *b, size_t want);
/* Send len bytes of buf (ownership passes to the transport, even on error). */
int net_send(net_conn_t *c, void *buf, size_t len);

/* Bytes in flight per connection on w (0: no limit; the default).  Counted:
 * received messages held in memory until on_msg has returned, and sends not
 * yet completed by the transport.  Over the limit, w applies backpressure: a
 * large (rendezvous) message's data stays with its sender until the
 * connection is below the limit again, and a connection whose unsent bytes
 * exceed the limit gets no more messages dispatched until they drain; and
 * at most 64 MiB (4 messages of the largest size) of a connection's messages
 * are held at a time.  Small (eager) messages cannot be held back by the
 * transport: a connection whose held messages exceed twice that is closed
 * (on_close with LOTUS_ELIMIT).  A message over WIRE_MAX_MSG closes its connection on any
 * worker (LOTUS_ETOOBIG) before its data is fetched.  Owner thread. */
void net_worker_set_limit(net_worker_t *w, size_t conn_bytes);
/* c's bytes in flight as counted above (owner thread). */
size_t net_conn_inflight(const net_conn_t *c);

/* Progress and dispatch; returns the number of messages/events handled. */
int net_progress(net_worker_t *w);
/* Progress; if nothing happened, spin up to spin_us then sleep until an event
 * or timeout_ms (-1 = forever).  Returns events handled. */
int net_wait(net_worker_t *w, int timeout_ms);
/* Owner thread: net_wait also ends, returning 0, when fd turns readable (the
 * memory server's miss ring: its completion eventfd, io.h io_ctx_notify_fd),
 * and skips its spin while fd is set.  The caller clears fd; -1 stops
 * watching. */
void net_worker_wake_fd(net_worker_t *w, int fd);
/* Any thread: queue item for w's on_post() and wake w. */
int net_post(net_worker_t *w, void *item);

/* Counters by wire message type, per worker (only its thread reads them while
 * it runs; sum them after the threads stop). */
struct net_type_stats { uint64_t msgs, bytes, items; };
struct net_stats {
	struct net_type_stats sent[WIRE_TYPE_MAX], recv[WIRE_TYPE_MAX];
	uint64_t sleeps, wakeups, conns_lost;
	/* limits (net_worker_set_limit, WIRE_MAX_MSG) */
	uint64_t too_big_closed;      /* connections closed for a message over WIRE_MAX_MSG */
	uint64_t bytes_closed;        /* connections closed for bytes in flight over 2x the limit */
	uint64_t rndv_deferred;       /* large messages whose fetch waited for room */
	uint64_t dispatch_deferred;   /* messages held back while replies were queued over the limit */
};
void net_worker_stats(const net_worker_t *w, struct net_stats *out);
void net_stats_add(struct net_stats *dst, const struct net_stats *src);

/* Environment (read by net_ctx_create):
 *   UCX_TLS             kept if it names the same kind of transport as
 *                       opts->transport (docs/net.md has the mapping)
 *   LOTUS_NET_SPIN_US   overrides opts->spin_us (benchmark tuning)
 *
 * Fault injection for tests (the thin wrapper every send goes through):
 * LOTUS_NET_FAULT="drop:N" drops every Nth sent message, "corrupt:N" flips a
 * byte in every Nth. */

#endif
