/*
 * net_conn.c - connections and their liveness: the connection table, the
 * client's connect, the listener and its door, accepting a client the door
 * let in, closing, and handing out lost connections.
 *
 * Connection states (struct net_conn.state):
 *
 *   CONNECTING --(any message from the peer; net_am_cb)--> OPEN
 *   CONNECTING/OPEN --(UCX error cb, lease expiry, BYE)--> LOST
 *   LOST --(net_progress: on_close, ep closed FORCE)--> CLOSED
 *   OPEN/CONNECTING --(net_conn_close: BYE + ep close FLUSH)--> CLOSED
 *   CLOSED: freed when refs (queued rx, ep close in flight) drop to zero.
 *
 * The UCX error callback (net_err_cb) only marks a connection lost; on_close
 * is delivered by net_progress (net_reap_lost).  Leases, which find the
 * peers that went silent, are net_liveness.c's.
 *
 * Connecting (door.h): net_connect passes the door's handshake, gets the
 * address of the server worker chosen for it, and creates its endpoint by
 * worker address; the door mails the client's address to that worker, which
 * creates the other endpoint (net_accept).  UCX pairs the two by the order in
 * which each worker creates endpoints to the other (its connection sequence
 * numbers), which holds because one client worker connects to one server
 * at a time.  Neither side hands UCX an address it has not checked
 * (ucx_addr.h): the door refuses a client whose address does not fit the
 * shape of the server's own, and net_connect refuses a server's that does not
 * fit the shape of the client worker's.  The client's first PING may arrive before the server's endpoint
 * exists; UCX then reports it on an endpoint lotus does not know, which is
 * dropped, so net_connect pings again (after 1, 2, 4 .. 20 ms) until it
 * hears back.  A message on
 * an endpoint that no handshake produced is always dropped.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "net/net_int.h"

/* ---- connection table ---------------------------------------------------------- */

/* (the lookup and the put, per message, are inline in net_int.h) */

static void net_conn_link(net_worker_t *w, net_conn_t *c)
{
	unsigned b = net_hash_ep(c->ep);
	c->hnext = w->hash[b];
	w->hash[b] = c;
	c->prev = NULL;
	c->next = w->conns;
	if (w->conns)
		w->conns->prev = c;
	w->conns = c;
}

static void net_conn_unlink(net_worker_t *w, net_conn_t *c)
{
	for (net_conn_t **pp = &w->hash[net_hash_ep(c->ep)]; *pp; pp = &(*pp)->hnext)
		if (*pp == c) {
			*pp = c->hnext;
			break;
		}
	if (c->prev)
		c->prev->next = c->next;
	else
		w->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

/* ---- lost peers ------------------------------------------------------------------ */

/* arg is the worker, not the conn: UCX may report an error on an endpoint we
 * already closed (and whose conn is freed), so look the ep up instead. */
static void net_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	net_conn_t *c = net_conn_lookup(arg, ep);
	if (!c)
		return;
	log_debug("net: connection to %s failed: %s", c->peer, ucs_status_string(status));
	net_conn_mark_lost(c, LOTUS_EUNAVAIL);
}

void net_conn_mark_lost(net_conn_t *c, int reason)
{
	if (c->state != CONN_OPEN && c->state != CONN_CONNECTING)
		return;
	c->state = CONN_LOST;
	c->lost_reason = reason;
	c->w->nlost++;
}

static void net_close_cb(void *req, ucs_status_t status, void *user)
{
	net_conn_t *c = user;
	(void)status;
	c->w->nclosing--;
	net_conn_put(c);
	ucp_request_free(req);
}

/* Start closing c's endpoint; c is off every list afterwards. */
void net_conn_close_ep(net_conn_t *c, int force)
{
	net_worker_t *w = c->w;
	if (c->state == CONN_LOST)
		w->nlost--;
	c->state = CONN_CLOSED;
	if (c->door_slot) {
		c->door_slot = 0;
		atomic_fetch_sub(&w->ctx->nclients, 1);
	}
	net_conn_unlink(w, c);
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
				UCP_OP_ATTR_FIELD_FLAGS,
		.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0,
		.cb.send = net_close_cb,
		.user_data = c,
	};
	net_fd_shared();
	ucs_status_ptr_t r = ucp_ep_close_nbx(c->ep, &p);
	if (r && !UCS_PTR_IS_ERR(r))
		w->nclosing++;   /* net_close_cb drops the list's ref */
	else
		net_conn_put(c);
	ucp_worker_progress(w->ucp);   /* drain what the close left missed */
	net_fd_unlock();
}

/* Deliver on_close for lost connections and close their endpoints. */
int net_reap_lost(net_worker_t *w)
{
	int n = 0;
	/* on_close may close other connections: rescan from the head each time. */
	while (w->nlost) {
		net_conn_t *c = w->conns;
		while (c && c->state != CONN_LOST)
			c = c->next;
		if (!c)
			break;
		int reason = c->lost_reason;
		w->st.conns_lost += reason != 0;
		c->refs++;   /* keep c valid through on_close */
		if (w->h.on_close)
			w->h.on_close(w->arg, c, reason);
		if (c->state == CONN_LOST && (reason == LOTUS_ETOOBIG || reason == LOTUS_ELIMIT)) {
			/* closed by our own limit, the peer is alive: say goodbye, or
			 * an endpoint made from a worker address never learns it */
			c->state = CONN_OPEN;
			w->nlost--;
			net_conn_close(c);
		} else if (c->state == CONN_LOST) {
			net_conn_close_ep(c, 1);
		}
		net_conn_put(c);
		n++;
	}
	return n;
}

/* ---- accepting ------------------------------------------------------------------- */

static net_conn_t *net_conn_new(net_worker_t *w, const char *peer)
{
	net_conn_t *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->w = w;
	c->refs = 1;
	c->last_rx_ns = c->last_tx_ns = clock_now_ns();
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	return c;
}

static ucp_err_handling_mode_t net_err_mode(const net_worker_t *w)
{
	return w->ctx->peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
}

/* The door admitted a client to this worker: connect to its worker address
 * (UCX pairs this endpoint with the one the client creates to ours). */
void net_accept(net_worker_t *w, struct net_mail *m)
{
	net_conn_t *c = net_conn_new(w, m->peer);
	if (!c) {
		log_warn("net: out of memory accepting %s", m->peer);
		atomic_fetch_sub(&w->ctx->nclients, 1);
		free(m->item);
		return;
	}
	ucp_ep_params_t ep = {
		.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
			      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
		.address = m->item,
		.err_mode = net_err_mode(w),
		.err_handler = { .cb = net_err_cb, .arg = w },
	};
	net_fd_exclusive();
	ucs_status_t st = ucp_ep_create(w->ucp, &ep, &c->ep);
	net_fd_unlock();
	free(m->item);
	if (st != UCS_OK) {
		/* the client's address fit the shape but reaches nothing */
		static __thread struct log_throttle lt;
		uint64_t missed;
		if (log_throttle_pass(&lt, 5, 1000000000ULL, &missed))
			log_warn("net: accepting %s: %s%s", m->peer, ucs_status_string(st),
				 missed ? " (and more not logged)" : "");
		atomic_fetch_sub(&w->ctx->nclients, 1);
		free(c);
		return;
	}
	c->door_slot = 1;
	c->state = CONN_OPEN;
	net_conn_link(w, c);
	if (w->h.on_accept)
		w->h.on_accept(w->arg, c);
}

/* ---- connecting ------------------------------------------------------------------- */

static int net_sockaddr(const char *host, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (!host || !*host || strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0) {
		sa->sin_addr.s_addr = htonl(INADDR_ANY);
		return 0;
	}
	if (strcmp(host, "localhost") == 0)
		host = "127.0.0.1";
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -EINVAL;
}

/* Progress only UCX (no handlers) for at most ms milliseconds, sleeping on the fd. */
void net_ucx_wait(net_worker_t *w, int ms)
{
	if (net_ucp_progress(w->ucp))
		return;
	if (ucp_worker_arm(w->ucp) == UCS_ERR_BUSY)
		return;
	struct pollfd pfd = { .fd = w->efd, .events = POLLIN };
	poll(&pfd, 1, ms);
}

/* Is the server at peer, announcing cluster cid, one of ours (net_opts.
 * cluster_id)?  The first announced id is learnt when none was given.
 * door_dial stopped already if it knew ours (LOTUS_ECONFIG); this check
 * also covers a dial that raced with the learning of another. */
static int net_cluster_check(net_ctx_t *ctx, const char *peer, uint64_t cid)
{
	uint64_t want = 0;
	if (cid == 0 || atomic_compare_exchange_strong(&ctx->cluster_id, &want, cid) ||
	    want == cid)
		return 0;
	log_error("memory server %s belongs to cluster %016" PRIx64 ", not to this one (%016"
		  PRIx64 "): is it the right address, or its data directory another cluster's? "
		  "Not connected", peer, cid, want);
	return LOTUS_ECONFIG;
}

int net_connect(net_worker_t *w, const char *host, uint16_t port, int timeout_ms,
		net_conn_t **out)
{
	struct sockaddr_in sa;
	char peer[64];

	*out = NULL;
	if (net_sockaddr(host, port, &sa) || sa.sin_addr.s_addr == htonl(INADDR_ANY))
		return -EINVAL;
	snprintf(peer, sizeof(peer), "%s:%u", host, port);
	/* The door first: prove the secret, swap worker addresses. */
	uint64_t deadline = clock_now_ns() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms) * 1000000ULL;
	void *raddr = NULL;
	size_t rlen = 0;
	uint64_t cid = atomic_load(&w->ctx->cluster_id);
	int rc = door_dial(host, port, timeout_ms < 0 ? 3600 * 1000 : timeout_ms, &w->ctx->key,
			   w->addr, w->addr_len, &raddr, &rlen, &cid);
	if (rc == 0 || rc == LOTUS_ECONFIG)
		rc = net_cluster_check(w->ctx, peer, cid);
	if (rc) {
		free(raddr);
		log_debug("net: connect %s: %s", peer, lotus_strerror(rc));
		return rc;
	}
	struct ucx_addr_shape shape = { .nuuid = 0 };
	char why[160];
	if (ucx_addr_learn(&shape, w->addr, w->addr_len, why, sizeof(why)) != 0 ||
	    ucx_addr_check(&shape, raddr, rlen, why, sizeof(why)) != 0) {
		log_error("memory server %s sent a worker address this client cannot use: %s "
			  "(do both run the same UCX version and UCX_ options?)", peer, why);
		free(raddr);
		return LOTUS_EPROTO;
	}
	net_conn_t *c = net_conn_new(w, peer);
	if (!c) {
		free(raddr);
		return -ENOMEM;
	}
	ucp_ep_params_t ep = {
		.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLER |
			      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
		.address = raddr,
		.err_mode = net_err_mode(w),
		.err_handler = { .cb = net_err_cb, .arg = w },
	};
	net_fd_exclusive();
	ucs_status_t st = ucp_ep_create(w->ucp, &ep, &c->ep);
	net_fd_unlock();
	free(raddr);
	if (st == UCS_ERR_UNSUPPORTED || st == UCS_ERR_UNREACHABLE || st == UCS_ERR_INVALID_ADDR ||
	    st == UCS_ERR_INVALID_PARAM) {
		/* an address of the right shape that names no transport this
		 * worker shares (garbage that passed the check, or other UCX_
		 * settings): the same refusal as a bad shape */
		log_error("memory server %s sent a worker address this client cannot use: UCX: %s "
			  "(do both run the same UCX version and UCX_ options?)", peer,
			  ucs_status_string(st));
		free(c);
		return LOTUS_EPROTO;
	}
	if (st != UCS_OK) {
		log_debug("net: connect %s: %s", peer, ucs_status_string(st));
		free(c);
		return LOTUS_EUNAVAIL;
	}
	c->state = CONN_CONNECTING;
	net_conn_link(w, c);

	/* The peer answers a PING with a PONG; any message proves the path works.
	 * The server's endpoint may not exist yet when the first PING lands (its
	 * worker creates it when the door's mail arrives), and a message on an
	 * endpoint the server does not know is dropped: ping again until heard. */
	rc = net_send_ping(c, WIRE_PING, 0);
	uint64_t gap = 1000000ULL, next_ping = clock_now_ns() + gap;   /* 1, 2, 4 .. 20 ms */
	while (rc == 0 && c->state == CONN_CONNECTING) {
		uint64_t now = clock_now_ns();
		if (timeout_ms >= 0 && now >= deadline) {
			rc = LOTUS_ETIMEOUT;
			break;
		}
		if (now >= next_ping) {
			rc = net_send_ping(c, WIRE_PING, 0);
			gap = MIN(gap * 2, 20000000ULL);
			next_ping = now + gap;
		}
		int ms = timeout_ms < 0 ? 1 : (int)MIN((deadline - now) / 1000000 + 1, 1);
		net_ucx_wait(w, ms);
	}
	if (rc == 0 && c->state != CONN_OPEN)
		rc = LOTUS_EUNAVAIL;
	if (rc) {
		log_debug("net: connect %s: %s", peer, lotus_strerror(rc));
		net_conn_close_ep(c, 1);
		return rc;
	}
	if (log_enabled(LOG_DEBUG))
		ucp_ep_print_info(c->ep, stderr);   /* the lanes UCX picked */
	*out = c;
	return 0;
}

void net_conn_close(net_conn_t *c)
{
	if (c->state == CONN_OPEN) {
		/* FLUSH, also on sm: a forced close with rendezvous sends in flight
		 * makes ucp_worker_destroy assert on sm.  (Rendezvous sends the peer
		 * drops after our BYE may still be reported by UCX at teardown as
		 * "not returned to mpool": harmless.) */
		net_send_ping(c, WIRE_PONG, NET_F_BYE);
		net_conn_close_ep(c, 0);
	} else {
		net_conn_close_ep(c, 1);
	}
}

void net_conn_set_user(net_conn_t *c, void *user)
{
	c->user = user;
}

void *net_conn_user(const net_conn_t *c)
{
	return c->user;
}

const char *net_conn_peer(const net_conn_t *c)
{
	return c->peer;
}

net_worker_t *net_conn_worker(const net_conn_t *c)
{
	return c->w;
}

/* ---- listening ---------------------------------------------------------------------- */

/* door thread: an authenticated client for target t. */
static void net_door_client(void *arg, unsigned t, void *addr, size_t len, const char *peer)
{
	net_listener_t *l = arg;
	struct net_mail *m = calloc(1, sizeof(*m));
	if (!m) {
		atomic_fetch_sub(&l->w->ctx->nclients, 1);
		free(addr);
		return;
	}
	m->kind = MAIL_CONN_REQ;
	m->item = addr;
	m->len = len;
	snprintf(m->peer, sizeof(m->peer), "%s", peer);
	net_mail_push(l->targets[t], m);
}

/* door thread: may an authenticated client's worker address be used? */
static int net_door_check(void *arg, const void *addr, size_t len, char *why, size_t whylen)
{
	net_listener_t *l = arg;
	return ucx_addr_check(&l->shape, addr, len, why, whylen);
}

/* The shape of the targets' own addresses, against which clients' are
 * checked; a UCX whose addresses lotus cannot walk is refused here. */
static int net_listen_shape(net_listener_t *l)
{
	unsigned maj, min, rel;
	char why[160];
	ucp_get_version(&maj, &min, &rel);
	for (unsigned i = 0; i < l->ntargets; i++)
		if (ucx_addr_learn(&l->shape, l->targets[i]->addr, l->targets[i]->addr_len, why,
				   sizeof(why)) != 0) {
			log_error("net: UCX %u.%u.%u packs worker addresses in a way lotus cannot "
				  "check (%s); supported: UCX 1.13 without UCX_UNIFIED_MODE "
				  "(docs/net.md)", maj, min, rel, why);
			return LOTUS_EUNSUPPORTED;
		}
	if (maj != 1 || min != 13) {
		static atomic_int warned;
		if (!atomic_exchange(&warned, 1))
			log_warn("net: UCX %u.%u.%u is untested: clients' worker addresses are "
				 "checked by UCX 1.13's format (docs/net.md)", maj, min, rel);
	}
	return 0;
}

static int net_host_loopback(const char *host)
{
	struct in_addr a;
	if (host && strcmp(host, "localhost") == 0)
		return 1;
	return host && inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int net_listen(net_worker_t *w, const char *host, uint16_t port, net_worker_t **targets,
	       unsigned ntargets, net_listener_t **out)
{
	struct sockaddr_in sa;
	net_ctx_t *ctx = w->ctx;
	*out = NULL;
	if (net_sockaddr(host, port, &sa))
		return -EINVAL;
	if (!ctx->key.set && !net_host_loopback(host)) {
		if (!ctx->insecure) {
			log_error("refusing to listen on %s:%u without a cluster secret: anyone who "
				  "reaches the port could read and write everything; set secret_file "
				  "in [cluster] or --secret-file (or --insecure on a trusted network)",
				  host && *host ? host : "*", port);
			return LOTUS_ECONFIG;
		}
		log_warn("listening on %s:%u WITHOUT authentication (--insecure): anyone who "
			 "reaches the port can read and write everything", host && *host ? host : "*",
			 port);
	}
	net_listener_t *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->w = w;
	l->ntargets = ntargets ? ntargets : 1;
	l->targets = calloc(l->ntargets, sizeof(*l->targets));
	const void **ta = calloc(l->ntargets, sizeof(*ta));
	size_t *tl = calloc(l->ntargets, sizeof(*tl));
	if (!l->targets || !ta || !tl) {
		free(ta);
		free(tl);
		free(l->targets);
		free(l);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < l->ntargets; i++) {
		l->targets[i] = ntargets ? targets[i] : w;
		ta[i] = l->targets[i]->addr;
		tl[i] = l->targets[i]->addr_len;
	}
	int rc = net_listen_shape(l);
	if (rc) {
		free(ta);
		free(tl);
		free(l->targets);
		free(l);
		return rc;
	}
	struct door_opts d = {
		.host = host, .port = port, .key = &ctx->key, .max_clients = ctx->max_clients,
		.cluster_id = atomic_load(&ctx->cluster_id),
		.nclients = &ctx->nclients, .ntargets = l->ntargets, .taddr = ta, .tlen = tl,
		.on_client = net_door_client, .check_addr = net_door_check, .arg = l,
	};
	rc = door_open(&d, &l->door);
	free(ta);
	free(tl);
	if (rc) {
		free(l->targets);
		free(l);
		return rc;
	}
	l->port = door_port(l->door);
	*out = l;
	return 0;
}

uint16_t net_listener_port(const net_listener_t *l)
{
	return l->port;
}

void net_listener_stats(const net_listener_t *l, struct door_stats *out, unsigned *clients)
{
	door_stats(l->door, out);
	if (clients)
		*clients = atomic_load(&l->w->ctx->nclients);
}

void net_listener_destroy(net_listener_t *l)
{
	if (!l)
		return;
	door_close(l->door);
	free(l->targets);
	free(l);
}
