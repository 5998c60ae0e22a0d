/*
 * memserver.c - the memory server process: start-up, worker threads,
 * connections and message dispatch.
 *
 * Threads: the caller's thread waits for SIGINT/SIGTERM (or memserver_stop())
 * and then stops the W workers.  Worker 0 also owns the listener, which hands
 * each new connection to a worker round-robin, so clients spread over all W
 * threads; every worker serves any key.  A worker only touches its own
 * connections; grants for requests parked on another worker's connection
 * arrive through net_post() (see ms_int.h).
 *
 * A message that fails wire_msg_check() is answered with a WIRE_ERROR message
 * and dropped: a bad client never takes the server down or changes data.
 *
 * With a data directory, start-up first recovers the store from it and opens
 * the log and the page writer (durable.c), all before the listener exists; a
 * clean stop (SIGINT/SIGTERM) joins the workers, takes a final checkpoint and
 * closes the log.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "memserver/memserver.h"
#include "memserver/ms_int.h"
#include "onesided/os_region.h"

static _Atomic int ms_stop_flag;
static int ms_wake_item;   /* posted to wake a worker; carries nothing */

void memserver_stop(void)
{
	atomic_store(&ms_stop_flag, 1);
}

void ms_conn_unref(struct ms_conn *c)
{
	if (--c->refs == 0)
		free(c);
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
	return ms_prepared_hold(arg, txn_id);
}

static void ms_conn_release(struct ms_worker *wk, struct ms_conn *c, int reason)
{
	c->closed = 1;
	int n = lock_release_owner(wk->srv->locks, c);
	/* COMMITTING ones: a prepared txn waits for its decision (the resolver
	 * takes it now); any other (the WOUND_WAIT round, a one-phase commit that
	 * never came) has nothing to apply here, so it is released too */
	n += lock_release_owner_committing(wk->srv->locks, c, ms_keep_prepared, wk->srv);
	if (n)
		log_info("client %u lost (%s): released %d transactions", c->compute_id,
			 lotus_strerror(reason), n);
	ms_conn_drop_pending(c);
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
	net_conn_set_user(nc, c);
	log_debug("worker %u: connection from %s", wk->idx, net_conn_peer(nc));
}

static void ms_handle_reqs(struct ms_worker *wk, struct ms_conn *c, const void *data, size_t len)
{
	const struct wire_hdr *h = data;
	struct wire_iter it;
	const struct wire_req *r;
	const unsigned char *k, *v;
	if (wire_buf_begin(&wk->rep, WIRE_REP, wk->srv->id, h->seq) != 0) {
		log_error("worker %u: no memory for replies: closing the connection", wk->idx);
		c->broken = 1;
		return;
	}
	wk->out_conn = c;
	wk->out_seq = h->seq;
	wire_iter_init(&it, data, len);
	while (!c->broken && wire_next_req(&it, &r, &k, &v) == 1)
		ms_handle_req(wk, c, h->sender, h->seq, r, k, v);
	if (wk->rep.count)
		ms_send_reply_msg(wk, c, &wk->rep);
	wk->out_conn = NULL;
	if (wk->dur_rep.count)
		ms_durable_flush(wk, c);
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
		wk->bad_msgs++;
		log_warn("worker %u: bad message from %s: %s", wk->idx, net_conn_peer(nc),
			 lotus_strerror(rc));
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
		ms_durable_resume(wk, item);
	else
		ms_resume(wk, item);
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

/* Lock manager callback, any thread: hand the parked request to its owner. */
static void ms_notify(void *arg, struct lock_waiter *w, int result)
{
	struct ms_pending *p = w->owner;
	int exp = PEND_PARKED;
	p->result = result;
	if (atomic_compare_exchange_strong(&p->state, &exp, PEND_NOTIFIED))
		ms_post(p->conn->wk->net, p);
}

/* Lock table hook: a released txn's unused slot reservation. */
static void ms_resv_drop(void *arg, void *user)
{
	struct ms_server *srv = arg;
	store_resv_release(srv->store, user);
}

static void *ms_worker_main(void *arg)
{
	struct ms_worker *wk = arg;
	while (!atomic_load(&ms_stop_flag))
		net_wait(wk->net, 200);
	return NULL;
}

static const struct net_handlers ms_handlers = {
	.on_msg = ms_on_msg, .on_accept = ms_on_accept,
	.on_close = ms_on_close, .on_post = ms_on_post,
};

static int ms_start(struct ms_server *srv, const struct memserver_opts *o)
{
	struct net_opts no = { .transport = o->transport, .rma = 1 };
	int rc = store_create(o->memory, 0, &srv->store);
	if (rc == 0)  /* before recovery: it re-takes the locks of prepared txns */
		rc = lock_table_create(16, ms_notify, srv, &srv->locks);
	if (rc == 0)  /* a txn's slot reservation goes back with the txn */
		lock_table_set_user_hook(srv->locks, ms_resv_drop, srv);
	if (rc == 0)  /* the prepared table of 2PC, in memory or durable */
		rc = ms_prep_open(srv);
	if (rc == 0 && o->durability != LOTUS_DUR_NONE)
		rc = ms_durable_open(srv, o);
	if (rc == 0)  /* the resolver of prepared transactions (termination.c) */
		ms_term_start(srv);
	if (rc == 0)
		rc = net_ctx_create(&no, &srv->net);
	if (rc == 0)
		rc = os_regions_create(srv->net, srv->store, &srv->onesided);
	if (rc)
		return rc;
	srv->workers = calloc(srv->nworkers, sizeof(*srv->workers));
	net_worker_t **targets = calloc(srv->nworkers, sizeof(*targets));
	if (!srv->workers || !targets) {
		free(targets);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < srv->nworkers && rc == 0; i++) {
		struct ms_worker *wk = &srv->workers[i];
		wk->srv = srv;
		wk->idx = i;
		wire_buf_init(&wk->rep);
		wire_buf_init(&wk->dur_rep);
		wire_buf_init(&wk->scratch);
		rc = net_worker_create(srv->net, &ms_handlers, wk, &wk->net);
		targets[i] = wk->net;
	}
	if (rc == 0)
		rc = net_listen(srv->workers[0].net, o->host, o->port, targets, srv->nworkers,
				&srv->listener);
	free(targets);
	return rc;
}

/* clean: the workers stopped after a stop request (final checkpoint). */
static void ms_teardown(struct ms_server *srv, int clean)
{
	ms_term_stop(srv);
	if (srv->log)
		ms_durable_close(srv, clean);
	if (srv->listener)
		net_listener_destroy(srv->listener);
	for (unsigned i = 0; srv->workers && i < srv->nworkers; i++) {
		if (srv->workers[i].net)
			net_worker_destroy(srv->workers[i].net);
		wire_buf_free(&srv->workers[i].rep);
		wire_buf_free(&srv->workers[i].dur_rep);
		wire_buf_free(&srv->workers[i].scratch);
	}
	free(srv->workers);
	os_regions_free(srv->onesided);   /* before its UCX context goes */
	if (srv->net)
		net_ctx_destroy(srv->net);
	if (srv->locks)
		lock_table_destroy(srv->locks);
	if (srv->store)
		store_destroy(srv->store);
	ms_prep_close(srv);
	pthread_mutex_destroy(&srv->tables_mu);
}

/* The ready line: {"ready":true,"id":I,"port":P[,"durability":D,"recovered":{...}]} */
static void ms_print_ready(struct ms_server *srv, const struct memserver_opts *o)
{
	char rec[1024] = "";
	if (srv->log) {
		int n = snprintf(rec, sizeof(rec), ",\"durability\":\"%s\",\"recovered\":",
				 config_durability_name(srv->durability));
		ms_recovery_json(srv, rec + n, sizeof(rec) - (size_t)n);
	}
	printf("{\"ready\":true,\"id\":%u,\"port\":%u%s}\n", o->id,
	       net_listener_port(srv->listener), rec);
	fflush(stdout);
}

/* Block the stop signals in every thread; the main thread waits for them. */
static void ms_wait_for_stop(sigset_t *set)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000000 };
	while (!atomic_load(&ms_stop_flag)) {
		int sig = sigtimedwait(set, NULL, &ts);
		if (sig == SIGINT || sig == SIGTERM) {
			log_info("signal %d: shutting down", sig);
			atomic_store(&ms_stop_flag, 1);
		}
	}
}

int memserver_run(const struct memserver_opts *o)
{
	struct ms_server srv = { .id = o->id };
	sigset_t set, old;
	int rc, started = 0;

	if (o->durability != LOTUS_DUR_NONE && (!o->data_dir || !*o->data_dir)) {
		log_error("memory server %u: durability %s needs a data directory", o->id,
			  config_durability_name(o->durability));
		return LOTUS_ECONFIG;
	}
	pthread_mutex_init(&srv.tables_mu, NULL);
	srv.config_path = o->config_path ? o->config_path : o->peers_path;
	srv.nworkers = o->threads ? o->threads : (unsigned)cpu_count();
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	atomic_store(&ms_stop_flag, 0);

	rc = ms_start(&srv, o);
	if (rc) {
		log_error("memory server %u: start failed: %s", o->id, lotus_strerror(rc));
		goto out;
	}
	for (unsigned i = 0; i < srv.nworkers; i++, started++)
		if (pthread_create(&srv.workers[i].thread, NULL, ms_worker_main, &srv.workers[i])) {
			rc = -EAGAIN;
			atomic_store(&ms_stop_flag, 1);
			break;
		}
	if (rc == 0) {
		log_info("memory server %u listening on %s:%u (%u threads, %s, durability %s%s%s)",
			 o->id, o->host, net_listener_port(srv.listener), srv.nworkers,
			 net_ctx_transport(srv.net), config_durability_name(o->durability),
			 srv.log ? " in " : "", srv.log ? o->data_dir : "");
		if (o->json_ready)
			ms_print_ready(&srv, o);
		ms_wait_for_stop(&set);
	}
	ms_term_stop(&srv);   /* it may be talking to this server's workers */
	for (int i = 0; i < started; i++) {
		net_post(srv.workers[i].net, &ms_wake_item);
		pthread_join(srv.workers[i].thread, NULL);
	}
out:
	ms_teardown(&srv, rc == 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
