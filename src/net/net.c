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
 * Connection states (struct net_conn.state):
 *
 *   CONNECTING --(any message from the peer; net_am_cb)--> OPEN
 *   CONNECTING/OPEN --(UCX error cb, lease expiry, BYE)--> LOST
 *   LOST --(net_progress: on_close, ep closed FORCE)--> CLOSED
 *   OPEN/CONNECTING --(net_conn_close: BYE + ep close FLUSH)--> CLOSED
 *   CLOSED: freed when refs (queued rx, ep close in flight) drop to zero.
 *
 * UCX callbacks never call lotus handlers and never progress the worker: the
 * error callback only marks the connection, the AM callback only queues.
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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ifaddrs.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "net/net_int.h"
#include <ucs/debug/log_def.h>
#include <sodium.h>

/* ---- the fd guard (UCX 1.13's missed-event abort) -------------------------------
 *
 * UCX hands socket events to its async thread.  When that thread finds the
 * owning worker's async context busy (the worker's own thread is inside UCX),
 * it queues the handler's id - which for a socket is its fd number - on that
 * context's "missed" queue, to be run by the worker's next progress.  UCX 1.13
 * does not purge that queue when it removes the handler and closes the fd
 * (fixed upstream in 2024, UCX PR 9942).  If another worker in the process
 * gets the same fd number for a new socket before the first worker drains its
 * queue, the drain finds the new handler, which belongs to another context,
 * and asserts: `async.c: handler->async == async`, aborting the process.
 * Connection churn with several workers in a process (memory servers: one
 * per thread; compute servers: one per session thread) hits it within
 * seconds (tests/stress/async_churn.c).
 *
 * So no UCX call that may create a socket (ucp_ep_create, worker and listener
 * create/destroy) runs while any worker is inside a call that may close one
 * and then drain (ucp_worker_progress, ucp_ep_close_nbx + progress): the
 * former take this lock exclusively, the latter share it.  A closed fd's
 * stale entry is therefore drained (harmlessly: no handler has that id) by
 * the same progress call, before a socket made by lotus's threads can reuse
 * its number.  Writers are preferred so that busy pollers cannot starve a
 * connect.  Not covered: sockets UCX's async thread accepts on a listener
 * (they belong to the listener's worker), and a socket of the listener's
 * worker closed through another worker's endpoint; the stress program shows
 * no abort left in either process kind (docs/net.md has the counts). */
static pthread_rwlock_t net_fd_lock;
static pthread_once_t net_fd_once = PTHREAD_ONCE_INIT;

static void net_fd_lock_init(void)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&net_fd_lock, &a);
	pthread_rwlockattr_destroy(&a);
}

static void net_fd_shared(void)
{
	pthread_once(&net_fd_once, net_fd_lock_init);
	pthread_rwlock_rdlock(&net_fd_lock);
}

static void net_fd_exclusive(void)
{
	pthread_once(&net_fd_once, net_fd_lock_init);
	pthread_rwlock_wrlock(&net_fd_lock);
}

static void net_fd_unlock(void)
{
	pthread_rwlock_unlock(&net_fd_lock);
}

static unsigned net_ucp_progress(ucp_worker_h w)
{
	net_fd_shared();
	unsigned n = ucp_worker_progress(w);
	net_fd_unlock();
	return n;
}

/* ---- UCX configuration and logging ------------------------------------------------ */

/* Set UCX option key in lotus's config object unless the user set the
 * environment variable env (UCX_<key> for a UCP option; a transport's option
 * is named without the transport in the config, e.g. CM_REUSEADDR for
 * UCX_TCP_CM_REUSEADDR - with the full name UCX warns "invalid configuration"
 * and ignores it). */
static void net_ucx_default(ucp_config_t *cfg, const char *env, const char *key,
			    const char *value)
{
	if (getenv(env))
		return;
	ucs_status_t st = ucp_config_modify(cfg, key, value);
	if (st != UCS_OK)
		log_warn("net: UCX option %s=%s: %s", key, value, ucs_status_string(st));
}

/* UCX writes its log to stdout unless UCX_LOG_FILE says otherwise; stdout is
 * for results (--json), so send UCX's messages to stderr instead.  A peer can
 * make UCX complain once per connection (an address that fits the shape but
 * reaches nothing), so at most NET_UCX_LOG_LINES lines a second are printed,
 * and the count of the rest with the next one. */
#define NET_UCX_LOG_LINES 20
static pthread_mutex_t net_ucx_log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct log_throttle net_ucx_log_lt;

static ucs_log_func_rc_t net_ucx_log(const char *file, unsigned line, const char *function,
				     ucs_log_level_t level,
				     const ucs_log_component_config_t *comp, const char *message,
				     va_list ap)
{
	(void)function;
	if (level > comp->log_level && level != UCS_LOG_LEVEL_PRINT)
		return UCS_LOG_FUNC_RC_STOP;
	uint64_t missed = 0;
	pthread_mutex_lock(&net_ucx_log_lock);
	int pass = level == UCS_LOG_LEVEL_FATAL || level > UCS_LOG_LEVEL_WARN ||
		   log_throttle_pass(&net_ucx_log_lt, NET_UCX_LOG_LINES, 1000000000ULL, &missed);
	pthread_mutex_unlock(&net_ucx_log_lock);
	if (!pass)
		return UCS_LOG_FUNC_RC_STOP;
	const char *base = strrchr(file, '/');
	char buf[1024];
	vsnprintf(buf, sizeof(buf), message, ap);
	if (missed)
		fprintf(stderr, "UCX (%llu more lines not printed)\n", (unsigned long long)missed);
	fprintf(stderr, "UCX %s %s:%u %s\n", ucs_log_level_names[level], base ? base + 1 : file,
		line, buf);
	return UCS_LOG_FUNC_RC_STOP;
}

static void net_ucx_log_push(void)
{
	if (!getenv("UCX_LOG_FILE"))
		ucs_log_push_handler(net_ucx_log);
}

static void net_ucx_log_to_stderr(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, net_ucx_log_push);
}

/* ---- transports -------------------------------------------------------------- */

struct net_tl {
	const char *name;
	const char *tls;      /* UCX_TLS we set */
	const char *needs;    /* substring ucp_context_print_info must show, or NULL */
	int peer_errors;
};

static const struct net_tl net_tls[] = {
	{ "tcp", "tcp", NULL, 1 },
	{ "sm", "shm,self,tcp", NULL, 0 },
	{ "rc", "rc_verbs,rc_mlx5,self", "rc_", 1 },
	{ "ud", "ud_verbs,ud_mlx5,self", "ud_", 1 },
	{ "dc", "dc_mlx5,self", "dc_", 1 },
};

static const struct net_tl *net_tl_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(net_tls); i++)
		if (strcmp(net_tls[i].name, name) == 0)
			return &net_tls[i];
	return NULL;
}

/* Which lotus transport a user-written UCX_TLS amounts to. */
static const struct net_tl *net_tl_classify(const char *tls)
{
	if (strstr(tls, "dc"))
		return net_tl_find("dc");
	if (strstr(tls, "rc"))
		return net_tl_find("rc");
	if (strstr(tls, "ud"))
		return net_tl_find("ud");
	if (strstr(tls, "tcp") || strcmp(tls, "all") == 0)
		return net_tl_find("tcp");
	return net_tl_find("sm");
}

/* RDMA transports: UCX starts fine without a device, so look at the resource
 * list it reports and refuse to run on a transport it did not find. */
static int net_check_resources(net_ctx_t *ctx, const struct net_tl *tl)
{
	if (!tl->needs)
		return 0;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return -ENOMEM;
	ucp_context_print_info(ctx->ucp, f);
	fclose(f);
	/* Only the "resource N : md M dev D flags -- rc_verbs/mlx5_0:1" lines count. */
	int found = 0;
	for (char *line = text; line && *line && !found;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		found = strstr(line, "resource") && strstr(line, tl->needs);
		line = nl ? nl + 1 : NULL;
	}
	free(text);
	if (found)
		return 0;
	log_error("net: transport %s needs an RDMA device with UCX %s* transports; none found "
		  "(check ibv_devices and that the rdma-core provider is installed)",
		  tl->name, tl->needs);
	return LOTUS_EUNSUPPORTED;
}

/* The interface that reaches host (the one a packet to it leaves by), or ""
 * for a wildcard or unknown address.  Loopback addresses map to lo. */
static void net_host_ifname(const char *host, char *out, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(9) };
	out[0] = 0;
	if (!host || !*host || strcmp(host, "*") == 0)
		return;
	if (strcmp(host, "localhost") == 0)
		host = "127.0.0.1";
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || sa.sin_addr.s_addr == htonl(INADDR_ANY))
		return;
	if ((ntohl(sa.sin_addr.s_addr) >> 24) == 127) {
		snprintf(out, len, "lo");
		return;
	}
	/* The source address the kernel picks for host, then its interface. */
	struct sockaddr_in src;
	socklen_t sl = sizeof(src);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		 getsockname(fd, (struct sockaddr *)&src, &sl) == 0;
	close(fd);
	struct ifaddrs *ifs = NULL;
	if (!ok || getifaddrs(&ifs) != 0)
		return;
	for (struct ifaddrs *i = ifs; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == src.sin_addr.s_addr) {
			snprintf(out, len, "%s", i->ifa_name);
			break;
		}
	freeifaddrs(ifs);
}

/* UCX_NET_DEVICES for opts->hosts: the interfaces that reach them, or NULL
 * (every interface) if any host is a wildcard or maps to none. */
static int net_devices(const struct net_opts *opts, char *out, size_t len)
{
	size_t n = 0;
	out[0] = 0;
	if (!opts || !opts->nhosts)
		return 0;
	for (unsigned i = 0; i < opts->nhosts; i++) {
		char ifn[IF_NAMESIZE + 1];
		net_host_ifname(opts->hosts[i], ifn, sizeof(ifn));
		if (!ifn[0]) {
			out[0] = 0;
			return 0;
		}
		char pat[IF_NAMESIZE + 3];
		snprintf(pat, sizeof(pat), ",%s,", ifn);
		char have[1024];
		snprintf(have, sizeof(have), ",%s,", out);
		if (strstr(have, pat))
			continue;
		int w = snprintf(out + n, len - n, "%s%s", n ? "," : "", ifn);
		if (w < 0 || (size_t)w >= len - n) {
			out[0] = 0;
			return 0;
		}
		n += (size_t)w;
	}
	return n > 0;
}

int net_ctx_create(const struct net_opts *opts, net_ctx_t **out)
{
	const char *env = getenv("UCX_TLS");
	const char *want = opts ? opts->transport : NULL;
	const struct net_tl *tl;
	const char *tls = NULL;     /* NULL: leave UCX_TLS as the user set it */
	ucp_config_t *cfg = NULL;
	int rc = 0;

	*out = NULL;
	if (want) {
		tl = net_tl_find(want);
		if (!tl) {
			log_error("net: unknown transport '%s' (tcp, sm, rc, ud, dc)", want);
			return LOTUS_EUNSUPPORTED;
		}
		if (!env || net_tl_classify(env) != tl) {
			if (env)
				log_info("net: transport %s overrides UCX_TLS=%s", tl->name, env);
			tls = tl->tls;
		}
	} else {
		tl = env ? net_tl_classify(env) : net_tl_find("tcp");
		tls = env ? NULL : tl->tls;
	}

	net_ctx_t *ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	snprintf(ctx->transport, sizeof(ctx->transport), "%s", tl->name);
	ctx->peer_errors = tl->peer_errors;
	ctx->spin_us = opts && opts->spin_us ? opts->spin_us : 100;
	const char *spin = getenv("LOTUS_NET_SPIN_US");   /* tuning knob for benchmarks */
	if (spin && *spin)
		ctx->spin_us = (unsigned)strtoul(spin, NULL, 10);
	ctx->lease_ms = opts && opts->lease_ms ? opts->lease_ms : 3000;
	net_fault_init(&ctx->fault);
	ctx->insecure = opts && opts->insecure;
	ctx->max_clients = opts ? opts->max_clients : 0;
	atomic_init(&ctx->nclients, 0);
	atomic_init(&ctx->cluster_id, opts ? opts->cluster_id : 0);
	if (opts && opts->secret_file && (rc = door_key_load(opts->secret_file, &ctx->key))) {
		free(ctx);
		return rc;
	}

	net_ucx_log_to_stderr();
	if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK) {
		rc = LOTUS_ECONFIG;
		goto out;
	}
	/* lotus's defaults go into its own UCX config object, never into the
	 * process environment, and only where the user set nothing. */
	/* A batched reply (e.g. 8 records of 1 KiB) is well above UCX's default
	 * rendezvous threshold, and rendezvous costs an extra round trip per
	 * message: measured 1.9x fewer YCSB-C transactions per second over tcp.
	 * Send messages up to 256 KiB eagerly unless the user chose otherwise. */
	net_ucx_default(cfg, "UCX_RNDV_THRESH", "RNDV_THRESH", "256k");
	/* UCX's network transports listen on every device they use (the tcp
	 * transport: one data port per interface).  Keep them to the interfaces
	 * lotus talks on.  RDMA device names are not interface names: left alone. */
	char devs[512];
	if (!tl->needs && net_devices(opts, devs, sizeof(devs))) {
		net_ucx_default(cfg, "UCX_NET_DEVICES", "NET_DEVICES", devs);
		log_debug("net: UCX network devices %s", devs);
	}
	if (tls && ucp_config_modify(cfg, "TLS", tls) != UCS_OK) {
		rc = LOTUS_ECONFIG;
		goto out;
	}
	ucp_params_t p = {
		.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
		.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP,
		.mt_workers_shared = 1,
	};
	/* RMA and atomics for the one-sided engine (src/onesided/), in every
	 * context: endpoints made from worker addresses must agree on their
	 * lanes, and UCX 1.13 aborts the peer whose features differ ("endpoint
	 * reconfiguration not supported yet", seen on sm). */
	p.features |= UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
	ucs_status_t st = ucp_init(&p, cfg, &ctx->ucp);
	if (st != UCS_OK) {
		log_error("net: UCX init for transport %s (UCX_TLS=%s) failed: %s", tl->name,
			  tls ? tls : env, ucs_status_string(st));
		ctx->ucp = NULL;
		rc = LOTUS_EUNSUPPORTED;
		goto out;
	}
	rc = net_check_resources(ctx, tl);
out:
	if (cfg)
		ucp_config_release(cfg);
	if (rc) {
		net_ctx_destroy(ctx);
		return rc;
	}
	log_debug("net: transport %s, UCX_TLS=%s", ctx->transport, tls ? tls : env);
	*out = ctx;
	return 0;
}

void net_ctx_destroy(net_ctx_t *ctx)
{
	if (!ctx)
		return;
	if (atomic_load(&ctx->leaked_workers)) {
		log_debug("net: %u UCX worker(s) leaked: not cleaning up the UCX context",
			  (unsigned)atomic_load(&ctx->leaked_workers));
		return;   /* ctx stays allocated: a leaked worker points at it */
	}
	if (ctx->ucp)
		ucp_cleanup(ctx->ucp);
	sodium_memzero(&ctx->key, sizeof(ctx->key));
	free(ctx);
}

void *net_ctx_ucp(net_ctx_t *ctx)
{
	return ctx->ucp;
}

void *net_worker_ucp(net_worker_t *w)
{
	return w->ucp;
}

void *net_conn_ep(net_conn_t *c)
{
	return c->ep;
}

const char *net_ctx_transport(const net_ctx_t *ctx)
{
	return ctx->transport;
}

/* UCX AM rendezvous carries any size on every transport; the limit is lotus's. */
size_t net_ctx_max_msg(const net_ctx_t *ctx)
{
	(void)ctx;
	return WIRE_MAX_MSG;
}

/* ---- connection table ---------------------------------------------------------- */

static unsigned net_hash_ep(ucp_ep_h ep)
{
	uintptr_t v = (uintptr_t)ep;
	v ^= v >> 17;
	v *= 0x9e3779b97f4a7c15ULL;
	return (unsigned)(v >> 40) % NET_HASH_BUCKETS;
}

static net_conn_t *net_conn_lookup(net_worker_t *w, ucp_ep_h ep)
{
	for (net_conn_t *c = w->hash[net_hash_ep(ep)]; c; c = c->hnext)
		if (c->ep == ep)
			return c;
	return NULL;
}

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

static void net_conn_put(net_conn_t *c)
{
	assert(c->refs > 0);
	if (--c->refs == 0) {
		assert(c->state == CONN_CLOSED);
		free(c);
	}
}

/* ---- UCX callbacks (no lotus code, no progress) ------------------------------ */

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

	struct net_rx *rx = malloc(sizeof(*rx));
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
		rx->kind = RX_COPY;
		rx->data = malloc(length ? length : 1);
		if (!rx->data) {
			free(rx);
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
	(void)status;
	tx->conn->tx_bytes -= tx->len;
	net_conn_put(tx->conn);
	free(tx->buf);
	free(tx);
	ucp_request_free(req);
}

static void net_close_cb(void *req, ucs_status_t status, void *user)
{
	net_conn_t *c = user;
	(void)status;
	c->w->nclosing--;
	net_conn_put(c);
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
		free(rx->data);
		break;
	case RX_RNDV_BUSY:
		assert(0);
		break;
	}
	if (rx->counted)
		rx->conn->rx_bytes -= rx->len;
	net_conn_put(rx->conn);
	free(rx);
}

/* Start closing c's endpoint; c is off every list afterwards. */
static void net_conn_close_ep(net_conn_t *c, int force)
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

static void net_ucx_wait(net_worker_t *w, int ms);

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

static int net_mail_push(net_worker_t *w, struct net_mail *m)
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
static void net_accept(net_worker_t *w, struct net_mail *m)
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
	struct net_tx *tx = malloc(sizeof(*tx));
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
	if (r == NULL) {
		free(tx);
		free(buf);
		return 0;
	}
	if (UCS_PTR_IS_ERR(r)) {
		free(tx);
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
	struct wire_hdr *h = malloc(sizeof(*h));
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
static void net_ucx_wait(net_worker_t *w, int ms)
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
		rx->data = malloc(rx->len ? rx->len : 1);
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

/* Deliver on_close for lost connections and close their endpoints. */
static int net_reap_lost(net_worker_t *w)
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
	uint64_t spin_end = start + (uint64_t)w->ctx->spin_us * 1000;
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
		struct pollfd pfd = { .fd = w->efd, .events = POLLIN };
		w->st.sleeps++;
		if (poll(&pfd, 1, ms) > 0)
			w->st.wakeups++;
		if ((n = net_progress(w)))
			return n;
	}
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
