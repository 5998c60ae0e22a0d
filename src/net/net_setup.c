/*
 * net_setup.c - UCX setup: the fd guard every file of src/net/ takes around
 * UCX's socket calls, UCX's configuration and log, the transports lotus knows
 * (tcp, sm, rc, ud, dc) and the context (net_ctx_create).
 *
 * A context is made once per process and read-only afterwards; everything
 * lotus sets in UCX goes into its own config object, never into the
 * environment, and only where the user set nothing.  UCX's log goes to
 * stderr (stdout carries results), throttled.  An RDMA transport is checked
 * against the resources UCX found, since UCX starts fine without a device.
 */
#include <errno.h>
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
pthread_rwlock_t net_fd_lock;
pthread_once_t net_fd_once = PTHREAD_ONCE_INIT;

void net_fd_lock_init(void)
{
	pthread_rwlockattr_t a;
	pthread_rwlockattr_init(&a);
	pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&net_fd_lock, &a);
	pthread_rwlockattr_destroy(&a);
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
	 * 16 batched transactions of 16 reads of 1 KiB make a 270 KiB reply,
	 * which over 256 KiB went by rendezvous (on sm a process_vm_readv that
	 * pins the sender's pages): 1 MiB gave 1.2-1.35x the transactions per
	 * second on sm and tcp, and less CPU per request on both sides
	 * (docs/results.md).  Send messages up to 1 MiB eagerly unless the
	 * user chose otherwise. */
	net_ucx_default(cfg, "UCX_RNDV_THRESH", "RNDV_THRESH", "1m");
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
