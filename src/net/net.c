/*
 * net.c - the UCX transport behind net.h.
 *
 * Every message is one UCX active message (AM id NET_AM_ID) whose payload is a
 * lotus wire message; the AM header is empty (header_length 0), so nothing but
 * the payload has to outlive net_send(), and the payload is owned by net until
 * its send completes.
 *
 * Receive path (all in the worker's thread):
 *
 *   ucp_worker_progress()
 *     -> net_am_cb()          eager, persistent data: keep UCX's buffer (RX_HELD)
 *                             eager, transient: copy (RX_COPY)
 *                             rendezvous: queue the descriptor (RX_RNDV_WAIT)
 *   net_progress()
 *     -> net_rx_start()       RX_RNDV_WAIT -> ucp_am_recv_data_nbx -> RX_RNDV_BUSY
 *                             -> (net_rndv_done_cb) RX_RNDV_DONE
 *     -> net_dispatch()       pops the queue head while it is ready; PING/PONG
 *                             are answered here, everything else goes to on_msg
 *
 * The queue is FIFO per worker, so a message waiting for its rendezvous data
 * holds back later ones (arrival order is kept, at the cost of head-of-line
 * blocking behind large messages).
 *
 * UCX callbacks never call lotus handlers and never progress the worker: the
 * error callback only marks the connection, the AM callback only queues.
 *
 * No allocation per message: the net_rx and net_tx objects and the buffers
 * of copied and rendezvous messages come from the worker's cache (struct
 * net_cache in net_int.h) and go back to it, and so do the buffers of sent
 * messages once UCX is done with them, for the next message the worker's
 * thread builds (net_worker_buf, net_wire_buf).
 *
 * The files of src/net/ (the shared structs and the per-message helpers are
 * in net_int.h):
 *   net.c          the data path: AM callbacks, worker, mailbox, sending,
 *                  progress and dispatch
 *   net_setup.c    UCX setup: the fd guard, UCX's config and log, transports,
 *                  the context
 *   net_conn.c     connections: table, connecting, listening, accepting,
 *                  closing, lost peers (connection states are drawn there)
 *   net_liveness.c leases;  net_fault.c fault injection;  door.c the
 *                  handshake;  ucx_addr.c worker address checks;  wire.c the
 *                  wire format
 */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "net/net_int.h"

/* ---- the worker's cache (owner thread, or inside its progress) ---------------- */

static struct net_rx *net_rx_get(net_worker_t *w)
{
	struct net_cache *k = &w->cache;
	struct net_rx *rx = k->rx;
	if (rx) {
		k->rx = rx->next;
		k->nrx--;
		k->hits++;
		return rx;
	}
	k->misses++;
	return malloc(sizeof(*rx));
}

static void net_rx_put(net_worker_t *w, struct net_rx *rx)
{
	struct net_cache *k = &w->cache;
	if (k->nrx >= NET_CACHE_OBJS) {
		free(rx);
		return;
	}
	rx->next = k->rx;
	k->rx = rx;
	k->nrx++;
}

static struct net_tx *net_tx_get(net_worker_t *w)
{
	struct net_cache *k = &w->cache;
	struct net_tx *tx = k->tx;
	if (tx) {
		k->tx = tx->next;
		k->ntx--;
		k->hits++;
		return tx;
	}
	k->misses++;
	return malloc(sizeof(*tx));
}

static void net_tx_put(net_worker_t *w, struct net_tx *tx)
{
	struct net_cache *k = &w->cache;
	if (k->ntx >= NET_CACHE_OBJS) {
		free(tx);
		return;
	}
	tx->next = k->tx;
	k->tx = tx;
	k->ntx++;
}

/* A heap buffer of at least len bytes (*cap: how many), the most recently
 * returned one that fits, else a new one. */
static void *net_cache_buf(net_worker_t *w, size_t len, size_t *cap)
{
	struct net_cache *k = &w->cache;
	unsigned lo = k->nbufs > NET_CACHE_SCAN ? k->nbufs - NET_CACHE_SCAN : 0;
	for (unsigned i = k->nbufs; i-- > lo;) {
		if (k->bufs[i].cap < len)
			continue;
		void *p = k->bufs[i].p;
		*cap = k->bufs[i].cap;
		k->bytes -= k->bufs[i].cap;
		k->bufs[i] = k->bufs[--k->nbufs];
		k->hits++;
		return p;
	}
	k->misses++;
	/* round up, so that messages of similar size can share buffers (a
	 * large one, which the cache will not keep, gets its size) */
	size_t want = NET_CACHE_BUF_MIN;
	while (want < len && want < NET_CACHE_BUF_MAX)
		want *= 2;
	want = MAX(want, len);
	void *p = malloc(want);
	if (!p && want > len)
		p = malloc(want = len);
	*cap = want;
	return p;
}

/* Take back a heap buffer (NULL: nothing); a large one, or one over the
 * count, is freed. */
static void net_cache_unbuf(net_worker_t *w, void *p)
{
	struct net_cache *k = &w->cache;
	if (!p)
		return;
	size_t cap = malloc_usable_size(p);
	if (cap > NET_CACHE_BUF_MAX || cap < NET_CACHE_BUF_MIN) {
		free(p);
		return;
	}
	while (k->nbufs && (k->nbufs == NET_CACHE_BUFS || k->bytes + cap > NET_CACHE_BYTES)) {
		/* the oldest (bottom) go: the stack keeps the warm ones */
		free(k->bufs[0].p);
		k->bytes -= k->bufs[0].cap;
		k->nbufs--;
		memmove(&k->bufs[0], &k->bufs[1], k->nbufs * sizeof(k->bufs[0]));
	}
	k->bufs[k->nbufs].p = p;
	k->bufs[k->nbufs].cap = cap;
	k->nbufs++;
	k->bytes += cap;
}

static void net_cache_drain(net_worker_t *w)
{
	struct net_cache *k = &w->cache;
	while (k->rx) {
		struct net_rx *rx = k->rx;
		k->rx = rx->next;
		free(rx);
	}
	while (k->tx) {
		struct net_tx *tx = k->tx;
		k->tx = tx->next;
		free(tx);
	}
	for (unsigned i = 0; i < k->nbufs; i++)
		free(k->bufs[i].p);
	k->nrx = k->ntx = k->nbufs = 0;
	k->bytes = 0;
}

void *net_worker_buf(net_worker_t *w, size_t len, size_t *cap)
{
	size_t c;
	void *p = net_cache_buf(w, len ? len : 1, &c);
	if (p && cap)
		*cap = c;
	return p;
}

int net_wire_buf(net_worker_t *w, struct wire_buf *b, size_t want)
{
	want = MIN(MAX(want, (size_t)4096), (size_t)WIRE_MAX_MSG);
	if (b->cap >= want)
		return 0;
	size_t cap;
	void *p = net_cache_buf(w, want, &cap);
	if (!p)
		return -ENOMEM;
	if (b->len)
		memcpy(p, b->data, b->len);
	net_cache_unbuf(w, b->data);
	b->data = p;
	b->cap = cap;
	return 0;
}

/* ---- UCX callbacks (no lotus code, no progress) ------------------------------ */

static void net_rx_queue(net_worker_t *w, struct net_rx *rx)
{
	rx->next = NULL;
	if (w->rx_tail)
		w->rx_tail->next = rx;
	else
		w->rx_head = rx;
	w->rx_tail = rx;
}

static ucs_status_t net_am_cb(void *arg, const void *header, size_t header_length, void *data,
			      size_t length, const ucp_am_recv_param_t *param)
{
	net_worker_t *w = arg;
	net_conn_t *c = NULL;
	(void)header;
	(void)header_length;

	if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
		c = net_conn_lookup(w, param->reply_ep);
	if (!c || c->state == CONN_CLOSED || c->state == CONN_LOST)
		return UCS_OK;   /* dropped: a rendezvous send completes on its own */
	if (c->state == CONN_CONNECTING)
		c->state = CONN_OPEN;
	c->last_rx_ns = clock_now_ns();
	if (length > WIRE_MAX_MSG) {
		/* refused before its data is fetched: nothing legitimate is this big */
		log_warn("net: a message of %zu bytes from %s is over the limit of %u: closing "
			 "the connection", length, c->peer, WIRE_MAX_MSG);
		w->st.too_big_closed++;
		net_conn_mark_lost(c, LOTUS_ETOOBIG);
		return UCS_OK;
	}
	int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
	if (!rndv && w->conn_bytes_max && c->rx_bytes + length > 2 * NET_RX_HELD_MAX) {
		/* eager data cannot wait at the sender; the client sends on while
		 * its earlier messages (or their replies) are still held */
		log_warn("net: %s has %zu bytes of messages held (limit %zu): closing the "
			 "connection", c->peer, c->rx_bytes + length, 2 * NET_RX_HELD_MAX);
		w->st.bytes_closed++;
		net_conn_mark_lost(c, LOTUS_ELIMIT);
		return UCS_OK;
	}

	struct net_rx *rx = net_rx_get(w);
	if (!rx)
		return UCS_OK;
	rx->conn = c;
	rx->w = w;
	rx->len = length;
	rx->counted = !rndv;   /* a rendezvous buffer counts once its receive starts */
	rx->deferred = 0;
	ucs_status_t ret = UCS_OK;
	if (rndv) {
		rx->kind = RX_RNDV_WAIT;
		rx->data = data;
		ret = UCS_INPROGRESS;
	} else if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) && ((uintptr_t)data & 7) == 0) {
		/* Held only when 8-aligned: handlers read wire structs in place. */
		rx->kind = RX_HELD;
		rx->data = data;
		ret = UCS_INPROGRESS;
	} else {
		size_t cap;
		rx->kind = RX_COPY;
		rx->data = net_cache_buf(w, length ? length : 1, &cap);
		if (!rx->data) {
			net_rx_put(w, rx);
			return UCS_OK;
		}
		memcpy(rx->data, data, length);
	}
	c->refs++;
	if (rx->counted)
		c->rx_bytes += length;
	net_rx_queue(w, rx);
	return ret;
}

static void net_rndv_done_cb(void *req, ucs_status_t status, size_t length, void *user)
{
	struct net_rx *rx = user;
	(void)length;
	rx->kind = status == UCS_OK ? RX_RNDV_DONE : RX_RNDV_FAIL;
	ucp_request_free(req);
}

static void net_send_cb(void *req, ucs_status_t status, void *user)
{
	struct net_tx *tx = user;
	net_worker_t *w = tx->conn->w;   /* its progress is running this */
	(void)status;
	tx->conn->tx_bytes -= tx->len;
	net_conn_put(tx->conn);
	net_cache_unbuf(w, tx->buf);
	net_tx_put(w, tx);
	ucp_request_free(req);
}

/* ---- worker --------------------------------------------------------------------- */

static int net_worker_create_mode(net_ctx_t *ctx, const struct net_handlers *h, void *arg,
				  net_worker_t **out, ucs_thread_mode_t mode)
{
	net_worker_t *w = calloc(1, sizeof(*w));
	ucs_status_t st;
	int rc = 0;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	w->ctx = ctx;
	w->h = *h;
	w->arg = arg;
	w->efd = -1;
	w->wake_fd = -1;
	pthread_mutex_init(&w->mail_lock, NULL);
	ucp_worker_params_t wp = {
		.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
		.thread_mode = mode,
	};
	net_fd_exclusive();
	st = ucp_worker_create(ctx->ucp, &wp, &w->ucp);
	net_fd_unlock();
	if (st != UCS_OK) {
		log_error("net: ucp_worker_create: %s", ucs_status_string(st));
		w->ucp = NULL;
		rc = LOTUS_EUNSUPPORTED;
		goto out;
	}
	st = ucp_worker_get_address(w->ucp, &w->addr, &w->addr_len);
	if (st != UCS_OK) {
		log_error("net: ucp_worker_get_address: %s", ucs_status_string(st));
		w->addr = NULL;
		rc = LOTUS_EUNSUPPORTED;
		goto out;
	}
	st = ucp_worker_get_efd(w->ucp, &w->efd);
	if (st != UCS_OK) {
		log_error("net: ucp_worker_get_efd: %s", ucs_status_string(st));
		rc = LOTUS_EUNSUPPORTED;
		goto out;
	}
	ucp_am_handler_param_t ap = {
		.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
			      UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
		.id = NET_AM_ID,
		.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA,
		.cb = net_am_cb,
		.arg = w,
	};
	st = ucp_worker_set_am_recv_handler(w->ucp, &ap);
	if (st != UCS_OK) {
		log_error("net: set_am_recv_handler: %s", ucs_status_string(st));
		rc = LOTUS_EUNSUPPORTED;
		goto out;
	}
out:
	if (rc) {
		net_worker_destroy(w);
		return rc;
	}
	*out = w;
	return 0;
}

static void net_rx_release(net_worker_t *w, struct net_rx *rx)
{
	switch (rx->kind) {
	case RX_HELD:
	case RX_RNDV_WAIT:
		ucp_am_data_release(w->ucp, rx->data);
		break;
	case RX_COPY:
	case RX_RNDV_DONE:
	case RX_RNDV_FAIL:
		net_cache_unbuf(w, rx->data);
		break;
	case RX_RNDV_BUSY:
		assert(0);
		break;
	}
	if (rx->counted)
		rx->conn->rx_bytes -= rx->len;
	net_conn_put(rx->conn);
	net_rx_put(w, rx);
}

int net_worker_create(net_ctx_t *ctx, const struct net_handlers *h, void *arg,
		      net_worker_t **out)
{
	return net_worker_create_mode(ctx, h, arg, out, UCS_THREAD_MODE_SINGLE);
}

int net_worker_create_shared(net_ctx_t *ctx, const struct net_handlers *h, void *arg,
			     net_worker_t **out)
{
	return net_worker_create_mode(ctx, h, arg, out, UCS_THREAD_MODE_SERIALIZED);
}

/* Teardown, with peer error handling: PING every open connection and give the
 * peers NET_PROBE_MS to answer (net_am_cb stamps last_rx_ns).  Returns the
 * time of the probe (0 without peer error handling: no probe). */
#define NET_PROBE_MS 200
static uint64_t net_teardown_probe(net_worker_t *w)
{
	if (!w->ctx->peer_errors || !w->conns)
		return 0;
	uint64_t t0 = clock_now_ns(), deadline = t0 + NET_PROBE_MS * 1000000ULL;
	for (net_conn_t *c = w->conns; c; c = c->next)
		if (c->state == CONN_OPEN)
			net_send_ping(c, WIRE_PING, 0);
	for (;;) {
		int silent = 0;
		for (net_conn_t *c = w->conns; c; c = c->next)
			silent |= c->state == CONN_OPEN && c->last_rx_ns < t0;
		uint64_t now = clock_now_ns();
		if (!silent || now >= deadline)
			return t0;
		net_ucx_wait(w, (int)MIN((deadline - now) / 1000000 + 1, 10));
	}
}

void net_worker_destroy(net_worker_t *w)
{
	if (!w)
		return;
	if (w->ucp) {
		/* Say goodbye so peers notice at once, then let closes and pending
		 * rendezvous receives finish (bounded) before destroying the worker. */
		uint64_t t0 = net_teardown_probe(w);
		while (w->conns) {
			net_conn_t *c = w->conns;
			/* a peer that did not answer the probe (stopped, cut off) would
			 * never complete a flush: close its endpoint at once where UCX
			 * can (with peer error handling; sm needs the flush) */
			if (w->ctx->peer_errors && c->state == CONN_OPEN && c->last_rx_ns < t0)
				net_conn_close_ep(c, 1);
			else
				net_conn_close(c);
		}
		uint64_t deadline = clock_now_ns() + 2000000000ULL;
		for (;;) {
			int busy = w->nclosing > 0;
			for (struct net_rx *rx = w->rx_head; rx; rx = rx->next)
				busy |= rx->kind == RX_RNDV_BUSY;
			if (!busy || clock_now_ns() > deadline)
				break;
			net_ucp_progress(w->ucp);
		}
		if (w->nclosing) {
			/* Destroying the worker now would abort inside UCX; leak it,
			 * and with it the context (net_ctx_destroy): the worker still
			 * holds memory registered with the context, and ucp_cleanup
			 * under it asserts (rcache.c: region->refcount == 0). */
			log_warn("net: %u connection(s) still closing after 2 s; leaking the "
				 "UCX worker", w->nclosing);
			atomic_fetch_add(&w->ctx->leaked_workers, 1);
			return;
		}
		while (w->rx_head) {
			struct net_rx *rx = w->rx_head;
			w->rx_head = rx->next;
			if (rx->kind == RX_RNDV_BUSY)
				continue;   /* still owned by UCX; leak rather than crash */
			net_rx_release(w, rx);
		}
		if (w->addr)
			ucp_worker_release_address(w->ucp, w->addr);
		net_fd_exclusive();
		ucp_worker_destroy(w->ucp);
		net_fd_unlock();
	}
	net_cache_drain(w);
	while (w->mail_head) {
		struct net_mail *m = w->mail_head;
		w->mail_head = m->next;
		if (m->kind == MAIL_CONN_REQ) {   /* admitted, never connected */
			atomic_fetch_sub(&w->ctx->nclients, 1);
			free(m->item);
		}
		free(m);
	}
	pthread_mutex_destroy(&w->mail_lock);
	free(w);
}

/* ---- mailbox ---------------------------------------------------------------------- */

int net_mail_push(net_worker_t *w, struct net_mail *m)
{
	m->next = NULL;
	pthread_mutex_lock(&w->mail_lock);
	if (w->mail_tail)
		w->mail_tail->next = m;
	else
		w->mail_head = m;
	w->mail_tail = m;
	atomic_fetch_add(&w->mail_count, 1);
	pthread_mutex_unlock(&w->mail_lock);
	ucs_status_t st = ucp_worker_signal(w->ucp);
	return st == UCS_OK ? 0 : -EIO;
}

int net_post(net_worker_t *w, void *item)
{
	struct net_mail *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->kind = MAIL_USER;
	m->item = item;
	return net_mail_push(w, m);
}

static int net_mail_drain(net_worker_t *w)
{
	if (atomic_load_explicit(&w->mail_count, memory_order_acquire) == 0)
		return 0;
	pthread_mutex_lock(&w->mail_lock);
	struct net_mail *m = w->mail_head;
	w->mail_head = w->mail_tail = NULL;
	atomic_store(&w->mail_count, 0);
	pthread_mutex_unlock(&w->mail_lock);
	int n = 0;
	while (m) {
		struct net_mail *next = m->next;
		if (m->kind == MAIL_CONN_REQ)
			net_accept(w, m);
		else if (w->h.on_post)
			w->h.on_post(w->arg, m->item);
		free(m);
		m = next;
		n++;
	}
	return n;
}

/* ---- sending ------------------------------------------------------------------------ */

void *net_buf_alloc(size_t len)
{
	return malloc(len ? len : 1);
}

void net_buf_free(void *buf)
{
	free(buf);
}

static void net_count(struct net_type_stats *s, const void *buf, size_t len)
{
	const struct wire_hdr *h = buf;
	unsigned type = 0, count = 0;
	if (len >= sizeof(*h) && h->type < WIRE_TYPE_MAX) {
		type = h->type;
		count = h->count;
	}
	s[type].msgs++;
	s[type].bytes += len;
	s[type].items += count;
}

/* The one wrapper every send goes through (counters, fault injection). */
static int net_send_raw(net_conn_t *c, void *buf, size_t len)
{
	net_worker_t *w = c->w;
	if (c->state != CONN_OPEN && c->state != CONN_CONNECTING) {
		free(buf);
		return c->state == CONN_LOST && c->lost_reason ? c->lost_reason : LOTUS_EUNAVAIL;
	}
	uint64_t now = clock_now_ns();
	if (net_lease_stale(c, now)) {
		/* the peer may have expired our lease: this must not reach it */
		net_lease_fence(w, now);
		free(buf);
		return LOTUS_ELEASE;
	}
	c->last_tx_ns = now;
	if (len > WIRE_MAX_MSG && !w->ctx->fault.oversize) {
		free(buf);
		return -E2BIG;
	}
	net_count(w->st.sent, buf, len);
	if (unlikely(w->ctx->fault.drop_every | w->ctx->fault.corrupt_every) &&
	    net_fault_apply(w->ctx, buf, len)) {
		free(buf);
		return 0;
	}
	/* who to credit when the send completes (the buffer is ours until then) */
	struct net_tx *tx = net_tx_get(w);
	if (!tx) {
		free(buf);
		return -ENOMEM;
	}
	tx->buf = buf;
	tx->conn = c;
	tx->len = len;
	ucp_request_param_t p = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
				UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
		.flags = UCP_AM_SEND_FLAG_REPLY,
		.cb.send = net_send_cb,
		.user_data = tx,
		.memory_type = UCS_MEMORY_TYPE_HOST,
	};
	/* in flight until net_send_cb; counted first, whenever UCX calls back */
	c->tx_bytes += len;
	c->refs++;
	ucs_status_ptr_t r = ucp_am_send_nbx(c->ep, NET_AM_ID, NULL, 0, buf, len, &p);
	if (r == NULL || UCS_PTR_IS_ERR(r)) {
		c->tx_bytes -= len;
		c->refs--;   /* c is still listed: not the last reference */
	}
	if (r == NULL) {   /* completed at once: buffer and tx are ours again */
		net_tx_put(w, tx);
		net_cache_unbuf(w, buf);
		return 0;
	}
	if (UCS_PTR_IS_ERR(r)) {
		net_tx_put(w, tx);
		free(buf);
		log_debug("net: send to %s: %s", c->peer, ucs_status_string(UCS_PTR_STATUS(r)));
		return LOTUS_EUNAVAIL;
	}
	return 0;
}

int net_send(net_conn_t *c, void *buf, size_t len)
{
	return net_send_raw(c, buf, len);
}

int net_send_ping(net_conn_t *c, int type, uint16_t flags)
{
	size_t cap;
	struct wire_hdr *h = net_cache_buf(c->w, sizeof(*h), &cap);
	if (!h)
		return -ENOMEM;
	memset(h, 0, sizeof(*h));
	h->magic = WIRE_MAGIC;
	h->version = WIRE_VERSION;
	h->type = (uint8_t)type;
	h->flags = flags;
	h->length = sizeof(*h);
	return net_send_raw(c, h, sizeof(*h));
}

/* ---- progress and dispatch --------------------------------------------------------- */

/* Has rx's connection room for rx's rendezvous data: at most NET_RX_HELD_MAX
 * held, and in all at most the limit?  A connection with nothing in flight
 * always has (one message is at most WIRE_MAX_MSG). */
static int net_rndv_room(const net_worker_t *w, const struct net_rx *rx)
{
	const net_conn_t *c = rx->conn;
	size_t inflight = c->rx_bytes + c->tx_bytes;
	return !w->conn_bytes_max || !inflight ||
	       (c->rx_bytes + rx->len <= NET_RX_HELD_MAX &&
		inflight + rx->len <= w->conn_bytes_max);
}

/* Start the rendezvous receives of queued descriptors. */
static void net_rx_start(net_worker_t *w)
{
	for (struct net_rx *rx = w->rx_head; rx; rx = rx->next) {
		if (rx->kind != RX_RNDV_WAIT)
			continue;
		if (!net_rndv_room(w, rx)) {
			/* backpressure: the data waits at the sender */
			if (!rx->deferred) {
				rx->deferred = 1;
				w->st.rndv_deferred++;
			}
			continue;
		}
		void *desc = rx->data;
		size_t cap;
		rx->data = net_cache_buf(w, rx->len ? rx->len : 1, &cap);
		if (!rx->data) {
			rx->data = desc;
			return;   /* retry on the next progress */
		}
		ucp_request_param_t p = {
			.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
					UCP_OP_ATTR_FIELD_MEMORY_TYPE,
			.cb.recv_am = net_rndv_done_cb,
			.user_data = rx,
			.memory_type = UCS_MEMORY_TYPE_HOST,
		};
		rx->kind = RX_RNDV_BUSY;
		rx->counted = 1;
		rx->conn->rx_bytes += rx->len;
		ucs_status_ptr_t r = ucp_am_recv_data_nbx(w->ucp, desc, rx->data, rx->len, &p);
		if (r == NULL)
			rx->kind = RX_RNDV_DONE;
		else if (UCS_PTR_IS_ERR(r))
			rx->kind = RX_RNDV_FAIL;
	}
}

/* net's own messages: PING is answered, PONG (and BYE) only refresh the lease. */
static int net_rx_internal(net_conn_t *c, const void *data, size_t len)
{
	const struct wire_hdr *h = data;
	if (len != sizeof(*h) || h->magic != WIRE_MAGIC ||
	    (h->type != WIRE_PING && h->type != WIRE_PONG))
		return 0;
	if (h->type == WIRE_PING)
		net_send_ping(c, WIRE_PONG, 0);
	else if (h->flags & NET_F_BYE)
		net_conn_mark_lost(c, 0);
	return 1;
}

/* May rx be handed out now?  Order is kept per connection: once one of c's
 * messages must wait (its rendezvous data is not in, or c's replies are
 * queued over the limit), c's later messages wait behind it in this round,
 * while other connections' messages go ahead. */
static int net_rx_ready(net_worker_t *w, struct net_rx *rx, uint64_t gen)
{
	net_conn_t *c = rx->conn;
	if (c->blocked_gen == gen)
		return 0;
	if (w->conn_bytes_max && c->burst_gen == gen && c->burst_items >= NET_BURST_ITEMS) {
		c->blocked_gen = gen;   /* its turn in this round is over */
		return 0;
	}
	if (rx->kind == RX_RNDV_BUSY || rx->kind == RX_RNDV_WAIT) {
		c->blocked_gen = gen;
		return 0;
	}
	if (w->conn_bytes_max && c->state == CONN_OPEN && c->tx_bytes > w->conn_bytes_max) {
		if (!rx->deferred) {
			rx->deferred = 1;
			w->st.dispatch_deferred++;
		}
		c->blocked_gen = gen;
		return 0;
	}
	return 1;
}

static int net_dispatch(net_worker_t *w)
{
	int n = 0;
	uint64_t gen = ++w->dispatch_gen;
	struct net_rx **pp = &w->rx_head, *prev = NULL;
	while (*pp && n < NET_DISPATCH_MAX) {
		struct net_rx *rx = *pp;
		if (!net_rx_ready(w, rx, gen)) {
			prev = rx;
			pp = &rx->next;
			continue;
		}
		*pp = rx->next;   /* on_msg may append (net_connect): pp stays valid */
		if (w->rx_tail == rx)
			w->rx_tail = prev;
		net_conn_t *c = rx->conn;
		if (c->burst_gen != gen) {
			c->burst_gen = gen;
			c->burst_items = 0;
		}
		c->burst_items += rx->len >= sizeof(struct wire_hdr)
				  ? MAX(((const struct wire_hdr *)rx->data)->count, 1) : 1;
		if (c->state == CONN_OPEN && rx->kind != RX_RNDV_FAIL) {
			net_count(w->st.recv, rx->data, rx->len);
			if (!net_rx_internal(c, rx->data, rx->len) && w->h.on_msg)
				w->h.on_msg(w->arg, c, rx->data, rx->len);
			n++;
		}
		net_rx_release(w, rx);
	}
	return n;
}

int net_progress(net_worker_t *w)
{
	int n = 0;
	uint64_t now = 0;
	if (w->conns) {
		/* before anything queued during a pause is received or answered */
		now = clock_now_ns();
		if (now >= w->next_lease_check_ns)
			net_lease_fence(w, now);
	}
	while (net_ucp_progress(w->ucp))
		;
	n += net_mail_drain(w);
	if (w->rx_head) {
		net_rx_start(w);
		n += net_dispatch(w);
	}
	if (w->nlost)
		n += net_reap_lost(w);
	if (w->conns && now >= w->next_lease_check_ns)
		net_lease_check(w, now);
	if (w->nlost)
		n += net_reap_lost(w);
	return n;
}

static int net_has_work(net_worker_t *w)
{
	if (w->nlost || atomic_load_explicit(&w->mail_count, memory_order_acquire))
		return 1;
	/* a receive to start, or a message to hand out (see net_rx_ready) */
	uint64_t gen = ++w->dispatch_gen;
	for (struct net_rx *rx = w->rx_head; rx; rx = rx->next) {
		if (rx->kind == RX_RNDV_WAIT && net_rndv_room(w, rx))
			return 1;
		if (net_rx_ready(w, rx, gen))
			return 1;
	}
	return 0;
}

int net_wait(net_worker_t *w, int timeout_ms)
{
	int n = net_progress(w);
	if (n)
		return n;
	uint64_t start = clock_now_ns();
	/* With a wake fd (reads in flight) sleep at once: a spin would not see
	 * their completions. */
	uint64_t spin_end = w->wake_fd >= 0 ? start : start + (uint64_t)w->ctx->spin_us * 1000;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : start + (uint64_t)timeout_ms * 1000000;
	while (clock_now_ns() < MIN(spin_end, deadline)) {
		if ((n = net_progress(w)))
			return n;
	}
	for (;;) {
		uint64_t now = clock_now_ns();
		if (now >= deadline)
			return 0;
		if (net_has_work(w) || ucp_worker_arm(w->ucp) == UCS_ERR_BUSY) {
			if ((n = net_progress(w)))
				return n;
			continue;
		}
		/* A post that raced with arm may have been drained by it: look again. */
		if (atomic_load_explicit(&w->mail_count, memory_order_acquire))
			continue;
		int ms = deadline == UINT64_MAX ? -1 : (int)((deadline - now + 999999) / 1000000);
		ms = net_lease_sleep_ms(w, ms);
		struct pollfd pfd[2] = { { .fd = w->efd, .events = POLLIN },
					 { .fd = w->wake_fd, .events = POLLIN } };
		w->st.sleeps++;
		if (poll(pfd, w->wake_fd >= 0 ? 2 : 1, ms) > 0)
			w->st.wakeups++;
		if ((n = net_progress(w)))
			return n;
		if (pfd[1].revents)
			return 0;
	}
}

void net_worker_wake_fd(net_worker_t *w, int fd)
{
	w->wake_fd = fd;
}

void net_worker_stats(const net_worker_t *w, struct net_stats *out)
{
	*out = w->st;
}

void net_stats_add(struct net_stats *dst, const struct net_stats *src)
{
	for (int t = 0; t < WIRE_TYPE_MAX; t++) {
		dst->sent[t].msgs += src->sent[t].msgs;
		dst->sent[t].bytes += src->sent[t].bytes;
		dst->sent[t].items += src->sent[t].items;
		dst->recv[t].msgs += src->recv[t].msgs;
		dst->recv[t].bytes += src->recv[t].bytes;
		dst->recv[t].items += src->recv[t].items;
	}
	dst->sleeps += src->sleeps;
	dst->wakeups += src->wakeups;
	dst->conns_lost += src->conns_lost;
	dst->too_big_closed += src->too_big_closed;
	dst->bytes_closed += src->bytes_closed;
	dst->rndv_deferred += src->rndv_deferred;
	dst->dispatch_deferred += src->dispatch_deferred;
}

void net_worker_set_limit(net_worker_t *w, size_t conn_bytes)
{
	w->conn_bytes_max = conn_bytes;
}

size_t net_conn_inflight(const net_conn_t *c)
{
	return c->rx_bytes + c->tx_bytes;
}
