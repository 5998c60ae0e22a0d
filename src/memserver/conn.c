/*
 * conn.c - the bottom layer of the memory server: its connections.  It
 * accepts a client (one struct ms_conn per connection, owned by the worker
 * the listener handed it to), checks each incoming message, sends reply
 * messages, hands items posted from other threads to their owner, and
 * releases what a lost client held.  Handshake, lease and limits belong here.
 *
 * This layer knows no request op and no log: a REQ message's requests, the
 * end of a message, a posted item and a lost client's parked requests and
 * prepared transactions go up through srv->hooks (ms_int.h), which the upper
 * layers fill at start-up.  Nothing here includes an upper layer's header.
 *
 * A message that fails wire_msg_check() is answered with a WIRE_ERROR message
 * and dropped: a bad client never takes the server down or changes data.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "common/common.h"
#include "common/log.h"
#include "memserver/ms_int.h"
#include "memserver/conn.h"

int ms_wake_item;   /* posted to wake a worker; carries nothing */

static void ms_conn_unlink(struct ms_conn *c)
{
	if (c->wk_prev)
		c->wk_prev->wk_next = c->wk_next;
	else
		c->wk->conns = c->wk_next;
	if (c->wk_next)
		c->wk_next->wk_prev = c->wk_prev;
}

void ms_conn_unref(struct ms_conn *c)
{
	if (--c->refs == 0) {
		ms_conn_unlink(c);
		free(c);
	}
}

/* At shutdown, after the worker's thread and its net worker are gone: the
 * connections still open then (net_worker_destroy closes them without
 * on_close). */
void ms_conns_free(struct ms_worker *wk)
{
	while (wk->conns) {
		struct ms_conn *c = wk->conns;
		wk->conns = c->wk_next;
		free(c);
	}
}

int ms_send_reply_msg(struct ms_worker *wk, struct ms_conn *c, struct wire_buf *b)
{
	size_t len;
	wire_buf_end(b);
	unsigned char *data = wire_buf_detach(b, &len);
	if (c->closed) {
		net_buf_free(data);
		return 0;
	}
	int rc = net_send(c->nc, data, len);
	if (rc && !c->broken) {
		log_error("worker %u: a reply message to %s (%zu bytes) could not be sent: %s; "
			  "closing the connection", wk->idx, net_conn_peer(c->nc), len,
			  lotus_strerror(rc));
		c->broken = 1;
	}
	return rc;
}

/* Release what a lost client held (its connection is gone or going). */
static int ms_keep_prepared(void *arg, uint64_t txn_id)
{
	struct ms_server *srv = arg;
	return srv->hooks.prepared_hold(srv, txn_id);
}

static void ms_conn_release(struct ms_worker *wk, struct ms_conn *c, int reason)
{
	c->closed = 1;
	if (reason == LOTUS_ETIMEOUT || reason == LOTUS_ELEASE)
		wk->leases_lost++;   /* the stats' lease_losses */
	int n = lock_release_owner(wk->srv->locks, c);
	/* COMMITTING ones: a prepared txn waits for its decision (the resolver
	 * takes it now); any other (the WOUND_WAIT round, a one-phase commit that
	 * never came) has nothing to apply here, so it is released too */
	n += lock_release_owner_committing(wk->srv->locks, c, ms_keep_prepared, wk->srv);
	if (n)
		log_info("client %u lost (%s): released %d transactions", c->compute_id,
			 lotus_strerror(reason), n);
	wk->srv->hooks.conn_drop_pending(c);
}

void ms_conn_settle(struct ms_worker *wk, struct ms_conn *c)
{
	if (!c->broken || c->closed)
		return;
	ms_conn_release(wk, c, LOTUS_EUNAVAIL);
	net_conn_set_user(c->nc, NULL);
	net_conn_close(c->nc);   /* no on_close for a local close */
	ms_conn_unref(c);        /* the connection's own reference */
}

static void ms_send_error(struct ms_worker *wk, struct ms_conn *c, uint64_t seq, int status)
{
	struct wire_buf b;
	wire_buf_init(&b);
	if (wire_buf_begin(&b, WIRE_ERROR, wk->srv->id, seq) == 0) {
		((struct wire_hdr *)b.data)->aux = status;
		ms_send_reply_msg(wk, c, &b);
	} else {
		c->broken = 1;     /* the client must not wait for an answer */
	}
	wire_buf_free(&b);
	ms_conn_settle(wk, c);
}

static void ms_on_accept(void *arg, net_conn_t *nc)
{
	struct ms_worker *wk = arg;
	struct ms_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		net_conn_close(nc);
		return;
	}
	c->wk = wk;
	c->nc = nc;
	c->refs = 1;
	c->wk_next = wk->conns;
	if (wk->conns)
		wk->conns->wk_prev = c;
	wk->conns = c;
	net_conn_set_user(nc, c);
	log_debug("worker %u: connection from %s", wk->idx, net_conn_peer(nc));
}

static void ms_handle_reqs(struct ms_worker *wk, struct ms_conn *c, const void *data, size_t len)
{
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_req *r;
	const unsigned char *k, *v;
	/* the reply buffer went out with the last reply: the next one is a
	 * buffer of the worker's net cache (a reply sent earlier, no malloc),
	 * sized for this message's requests at the recent bytes per request
	 * (+1/8), rather than 4 KiB doubled (and copied) up to it; the reply is
	 * built in it in place */
	size_t want = (size_t)h->count * wk->rep_per_req;
	if (net_wire_buf(wk->net, &wk->rep, want + want / 8 + sizeof(struct wire_hdr)) != 0 ||
	    wire_buf_begin(&wk->rep, WIRE_REP, wk->srv->id, h->seq) != 0) {
		log_error("worker %u: no memory for replies: closing the connection", wk->idx);
		c->broken = 1;
		return;
	}
	wk->out_conn = c;
	wk->out_seq = h->seq;
	if (wk->srv->hooks.msg_begin)
		wk->srv->hooks.msg_begin(wk, data, len);
	wire_iter_init(&it, data, len);
	while (!c->broken && (wk->srv->hooks.next_req ? wk->srv->hooks.next_req(wk, &r, &k, &v)
						    : wire_next_req(&it, &r, &k, &v)) == 1)
		wk->srv->hooks.handle_req(wk, c, h->sender, h->seq, r, k, v);
	if (wk->rep.count) {   /* the largest lately: messages of reads and of commits alternate */
		size_t per = wk->rep.len / wk->rep.count;
		wk->rep_per_req = MAX(per, wk->rep_per_req - wk->rep_per_req / 16);
		ms_send_reply_msg(wk, c, &wk->rep);
	}
	wk->out_conn = NULL;
	if (wk->dur_rep.count)
		wk->srv->hooks.durable_flush(wk, c);
}

/* A client can send malformed messages as fast as it likes: a few lines a
 * second per worker thread, the rest counted in one line (bad_msgs in the
 * stats has them all). */
#define MS_BAD_LOG_LINES 5
static __thread struct log_throttle ms_bad_log;

void ms_conn_log_flush(struct ms_worker *wk)
{
	uint64_t n = log_throttle_flush(&ms_bad_log, 1000000000ULL);
	if (n)
		log_warn("worker %u: %llu more bad messages not logged in the last second",
			 wk->idx, (unsigned long long)n);
}

static void ms_on_msg(void *arg, net_conn_t *nc, const void *data, size_t len)
{
	struct ms_worker *wk = arg;
	struct ms_conn *c = net_conn_user(nc);
	const struct wire_hdr *h = data;
	if (!c)
		return;
	int rc = wire_msg_check(data, len);
	if (rc != 0) {
		uint64_t missed;
		wk->bad_msgs++;
		if (log_throttle_pass(&ms_bad_log, MS_BAD_LOG_LINES, 1000000000ULL, &missed)) {
			if (missed)
				log_warn("worker %u: %llu more bad messages not logged", wk->idx,
					 (unsigned long long)missed);
			log_warn("worker %u: bad message from %s: %s", wk->idx, net_conn_peer(nc),
				 lotus_strerror(rc));
		}
		ms_send_error(wk, c, len >= sizeof(*h) ? h->seq : 0, rc);
		return;
	}
	switch (h->type) {
	case WIRE_REQ:
		ms_handle_reqs(wk, c, data, len);
		ms_conn_settle(wk, c);
		break;
	case WIRE_HELLO:
		c->compute_id = h->sender;
		c->hello_seen = 1;
		break;
	default:
		wk->bad_msgs++;
		ms_send_error(wk, c, h->seq, LOTUS_EPROTO);
		break;
	}
}

/* A client is gone: release its transactions' locks and its parked requests.
 * A parked request already NOTIFIED by another thread is freed by its post. */
static void ms_on_close(void *arg, net_conn_t *nc, int reason)
{
	struct ms_worker *wk = arg;
	struct ms_conn *c = net_conn_user(nc);
	if (!c)
		return;
	ms_conn_release(wk, c, reason);
	ms_conn_unref(c);
}

static void ms_on_post(void *arg, void *item)
{
	struct ms_worker *wk = arg;
	if (item == &ms_wake_item)
		return;
	if (*(const int *)item == MS_POST_DURABLE)
		wk->srv->hooks.durable_resume(wk, item);
	else
		wk->srv->hooks.resume(wk, item);
}

int ms_post(net_worker_t *w, void *item)
{
	int rc;
	for (int i = 0; (rc = net_post(w, item)) != 0 && i < 1000; i++)
		usleep(1000);   /* out of memory for the mail: a reply depends on it */
	if (rc)
		log_error("out of memory: a reply could not be handed to its worker");
	return rc;
}

const struct net_handlers ms_handlers = {
	.on_msg = ms_on_msg, .on_accept = ms_on_accept,
	.on_close = ms_on_close, .on_post = ms_on_post,
};
