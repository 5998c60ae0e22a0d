/*
 * memserver.c - the memory server process: start-up, worker threads, and the
 * wiring of the layers (ms_int.h draws them: conn, handlers, outcomes,
 * durable, termination).  It is the top: it may call every layer, and at
 * start-up it has each upper layer register its hooks (srv->hooks) before
 * anything runs.
 *
 * Threads: the caller's thread waits for SIGINT/SIGTERM (or memserver_stop())
 * and then stops the W workers.  Worker 0 also owns the listener, which hands
 * each new connection to a worker round-robin, so clients spread over all W
 * threads; every worker serves any key.  A worker only touches its own
 * connections; grants for requests parked on another worker's connection
 * arrive through net_post() (see ms_int.h).
 *
 * With a data directory, start-up first recovers the store from it and opens
 * the log and the page writer (durable.c), all before the listener exists; a
 * clean stop (SIGINT/SIGTERM) joins the workers, takes a final checkpoint and
 * closes the log.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "common/clock.h"
#include "coord/coord.h"
#include "memserver/memserver.h"
#include "memserver/ms_int.h"
#include "memserver/conn.h"
#include "memserver/handlers.h"
#include "memserver/misses.h"
#include "memserver/durable.h"
#include "memserver/backup.h"
#include "memserver/termination.h"
#include "memserver/replica.h"
#include "store/tierback.h"
#include "onesided/os_region.h"

static _Atomic int ms_stop_flag;

void memserver_stop(void)
{
	atomic_store(&ms_stop_flag, 1);
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
	if (pthread_getcpuclockid(pthread_self(), &wk->cpu_clock) == 0)
		atomic_store(&wk->cpu_clock_ok, 1);
	uint64_t quiet_since = 0;   /* reads in flight and nothing happened since */
	while (!atomic_load(&ms_stop_flag)) {
		/* Reads in flight: poll the network and the miss ring until both
		 * were quiet for miss_spin_ns (a completion that comes soon is
		 * seen at once: a sleeping vCPU wakes late), then sleep on the
		 * network and the ring's completion fd together; without that
		 * fd, poll both for good. */
		int busy = ms_miss_busy(wk), fd = busy ? ms_miss_wake_fd(wk) : -1, n;
		uint64_t now = busy && fd >= 0 ? clock_now_ns() : 0;
		if (!busy || fd < 0 || !quiet_since)
			quiet_since = now;
		if (busy && (fd < 0 || now - quiet_since < wk->srv->miss_spin_ns)) {
			net_worker_wake_fd(wk->net, -1);
			n = net_progress(wk->net);
		} else {
			net_worker_wake_fd(wk->net, fd);
			wk->miss_sleeps += busy;
			n = net_wait(wk->net, 200);
		}
		n += ms_miss_poll(wk);
		if (n)
			quiet_since = 0;
		ms_conn_log_flush(wk);
	}
	ms_miss_drain(wk);
	return NULL;
}

/* The record store: all in the pool, or (capacity > memory) a tiered store
 * whose pages live on the data directory (tierback.c) when not resident. */
static int ms_store_create(struct ms_server *srv, const struct memserver_opts *o)
{
	if (!o->capacity || o->capacity <= o->memory)
		return store_create(o->memory, 0, &srv->store);
	struct tierback_opts to = { .capacity = o->capacity, .page_writers = o->page_writers };
	struct store_tier_opts so;
	int rc = tierback_create(&to, &srv->tier);
	if (rc)
		return rc;
	tierback_store_opts(srv->tier, &so);
	so.reserve_frames = srv->miss_depth * srv->nworkers;   /* their reads in flight */
	rc = store_create_tiered(o->memory, 0, &so, &srv->store);
	if (rc)
		log_error("memory server %u: cannot create a store of %llu bytes in %llu of memory: "
			  "%s", o->id, (unsigned long long)o->capacity,
			  (unsigned long long)o->memory, lotus_strerror(rc));
	return rc;
}

static int ms_start(struct ms_server *srv, const struct memserver_opts *o)
{
	const char *hosts[] = { o->host };
	struct net_opts no = { .transport = o->transport, .lease_ms = o->lease_ms,
			       .secret_file = o->secret_file, .insecure = o->insecure,
			       .max_clients = o->max_clients, .hosts = hosts, .nhosts = 1 };
	/* the upward calls of the layers below (ms_int.h), before anything runs */
	ms_handlers_register(srv);
	ms_durable_register(srv);
	ms_term_register(srv);
	ms_repl_register(srv);
	int rc = ms_backup_register(srv);
	if (rc == 0)
		rc = ms_store_create(srv, o);
	if (rc == 0)  /* before recovery: it re-takes the locks of prepared txns */
		rc = lock_table_create(16, ms_notify, srv, &srv->locks);
	if (rc == 0) { /* LOTUS_LOCK_FAST=0: every read takes a lock entry (comparisons) */
		const char *f = getenv("LOTUS_LOCK_FAST");
		lock_table_set_fast_reads(srv->locks, !(f && !strcmp(f, "0")));
	}
	if (rc == 0)  /* a txn's slot reservation goes back with the txn */
		lock_table_set_user_hook(srv->locks, ms_resv_drop, srv);
	if (rc == 0)  /* the prepared table of 2PC, in memory or durable */
		rc = ms_prep_open(srv);
	if (rc == 0 && o->durability != LOTUS_DUR_NONE)
		rc = ms_durable_open(srv, o);
	if (rc == 0)  /* the resolver of prepared transactions (termination.c) */
		ms_term_start(srv);
	no.cluster_id = srv->cluster_id ? srv->cluster_id : o->cluster_id;
	if (rc == 0)
		rc = net_ctx_create(&no, &srv->net);
	if (rc == 0)
		rc = os_regions_create(srv->net, srv->store, o->memory, &srv->onesided);
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
		if (rc == 0)
			net_worker_set_limit(wk->net, (size_t)srv->max_conn_bytes);
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
	ms_repl_closing(srv);
	if (srv->log)   /* a primary ships its last batches on the way */
		ms_durable_close(srv, clean && !ms_repl_deposed(srv));
	ms_repl_stop(srv);   /* the shipper, then the session: the znode goes */
	if (srv->listener)
		net_listener_destroy(srv->listener);
	for (unsigned i = 0; srv->workers && i < srv->nworkers; i++) {
		if (srv->workers[i].net)
			net_worker_destroy(srv->workers[i].net);
		ms_conns_free(&srv->workers[i]);
		wire_buf_free(&srv->workers[i].rep);
		wire_buf_free(&srv->workers[i].dur_rep);
		wire_buf_free(&srv->workers[i].scratch);
		if (srv->workers[i].tc_txn)   /* a message cut short: its cached txn */
			lock_txn_put(srv->locks, srv->workers[i].tc_txn);
		for (struct ms_pending *p = srv->workers[i].pend_free, *next; p; p = next) {
			next = p->next;
			free(p);
		}
	}
	free(srv->workers);
	os_regions_free(srv->onesided);   /* before its UCX context goes */
	if (srv->net)
		net_ctx_destroy(srv->net);
	if (srv->locks)
		lock_table_destroy(srv->locks);
	tierback_stop(srv->tier);   /* ms_durable_close did, unless start failed early */
	ms_prep_close(srv);         /* before the store: it gives back their reservations */
	ms_backup_free(srv);
	if (srv->store)
		store_destroy(srv->store);
	tierback_destroy(srv->tier);
	srv->tier = NULL;
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
	char cid[40] = "";
	if (srv->cluster_id)
		snprintf(cid, sizeof(cid), ",\"cluster\":\"%016" PRIx64 "\"", srv->cluster_id);
	printf("{\"ready\":true,\"id\":%u,\"port\":%u%s%s}\n", o->id,
	       net_listener_port(srv->listener), cid, rec);
	fflush(stdout);
}

/* Block the stop signals in every thread; the main thread waits for them. */
static void ms_wait_for_stop(struct ms_server *srv, sigset_t *set)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000000 };
	while (!atomic_load(&ms_stop_flag)) {
		if (ms_repl_deposed(srv)) {   /* replica.c said why */
			atomic_store(&ms_stop_flag, 1);
			break;
		}
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

	if (o->capacity > o->memory && o->durability == LOTUS_DUR_NONE) {
		log_error("memory server %u: a capacity above the memory needs a data directory "
			  "(evicted pages live there)", o->id);
		return LOTUS_ECONFIG;
	}
	if (o->durability != LOTUS_DUR_NONE && (!o->data_dir || !*o->data_dir)) {
		log_error("memory server %u: durability %s needs a data directory", o->id,
			  config_durability_name(o->durability));
		return LOTUS_ECONFIG;
	}
	if (o->replicas > 1 && o->durability == LOTUS_DUR_NONE) {
		log_error("memory server %u: replicas = %u needs a data directory (durability sync "
			  "or async): a backup holds a copy of its primary's redo log", o->id,
			  o->replicas);
		return LOTUS_ECONFIG;
	}
	/* replicated: no client is served until the coordinator names the primary */
	atomic_store(&srv.role, o->replicas > 1 ? MS_ROLE_BACKUP : MS_ROLE_SOLO);
	pthread_mutex_init(&srv.tables_mu, NULL);
	srv.config_path = o->config_path ? o->config_path : o->peers_path;
	srv.secret_file = o->secret_file;
	srv.max_clients = o->max_clients;
	srv.nworkers = o->threads ? o->threads : (unsigned)cpu_count();
	srv.max_parked = o->max_parked ? o->max_parked : MS_DEFAULT_MAX_PARKED;
	srv.miss_depth = o->miss_depth == UINT32_MAX ? 0 : o->miss_depth ? o->miss_depth
			 : MS_DEFAULT_MISS_DEPTH;
	srv.max_conn_bytes = o->max_conn_bytes ? o->max_conn_bytes : MS_DEFAULT_MAX_CONN_BYTES;
	srv.miss_spin_ns = ms_miss_spin_ns();
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	atomic_store(&ms_stop_flag, 0);

	rc = ms_start(&srv, o);
	if (rc) {
		if (rc != LOTUS_ECONFIG)   /* that one was explained in one line already */
			log_error("memory server %u: start failed: %s", o->id, lotus_strerror(rc));
		goto out;
	}
	for (unsigned i = 0; i < srv.nworkers; i++, started++)
		if (pthread_create(&srv.workers[i].thread, NULL, ms_worker_main, &srv.workers[i])) {
			rc = -EAGAIN;
			atomic_store(&ms_stop_flag, 1);
			break;
		}
	if (rc == 0 && o->replicas > 1 && (rc = ms_repl_start(&srv, o)) != 0)
		atomic_store(&ms_stop_flag, 1);   /* the workers stop */
	if (rc == 0) {
		log_info("memory server %u listening on %s:%u (%u threads, %s, durability %s%s%s)",
			 o->id, o->host, net_listener_port(srv.listener), srv.nworkers,
			 net_ctx_transport(srv.net), config_durability_name(o->durability),
			 srv.log ? " in " : "", srv.log ? o->data_dir : "");
		if (o->json_ready)
			ms_print_ready(&srv, o);
		ms_wait_for_stop(&srv, &set);
	}
	ms_term_stop(&srv);   /* it may be talking to this server's workers */
	ms_repl_quiesce(&srv);   /* no takeover while it stops */
	ms_repl_closing(&srv);   /* a batch stuck on the coordinator fails: workers return */
	if (ms_repl_deposed(&srv) && rc == 0)
		rc = LOTUS_ESTATE;
	for (int i = 0; i < started; i++) {
		net_post(srv.workers[i].net, &ms_wake_item);
		pthread_join(srv.workers[i].thread, NULL);
	}
out:
	ms_teardown(&srv, rc == 0);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}
