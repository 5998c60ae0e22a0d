/*
 * netbench.c - see netbench.h.
 *
 * Client loop: slot i of `outstanding` holds the send time of the request in
 * flight; a reply names its slot in hdr.seq, so its round-trip time is known
 * and the slot is refilled at once.  Replies during the warm-up are not
 * counted.  Latencies go into a struct hist (1% buckets).
 *
 * Server: one worker, echoes every message (a fresh buffer per reply, as the
 * memory server does).  Both sides use net_wait(), so an idle server sleeps.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "bench/netbench.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/hist.h"
#include "common/log.h"
#include "net/net.h"

/* ---- server -------------------------------------------------------------------- */

static void srv_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	(void)arg;
	void *b = net_buf_alloc(len);
	if (!b)
		return;
	memcpy(b, data, len);
	if (len >= sizeof(struct wire_hdr))
		((struct wire_hdr *)b)->type = WIRE_REP;
	net_send(c, b, len);
}

int netbench_serve(const char *transport, const char *host, uint16_t port, unsigned spin_us,
		   const char *secret_file, int insecure, volatile int *stop,
		   void (*ready)(uint16_t port))
{
	static const struct net_handlers h = { .on_msg = srv_on_msg };
	const char *hosts[] = { host };
	struct net_opts no = { .transport = transport, .spin_us = spin_us,
			       .secret_file = secret_file, .insecure = insecure,
			       .hosts = hosts, .nhosts = 1 };
	net_ctx_t *ctx = NULL;
	net_worker_t *w = NULL;
	net_listener_t *l = NULL;
	int rc = net_ctx_create(&no, &ctx);
	if (rc)
		goto out;
	if ((rc = net_worker_create(ctx, &h, NULL, &w)))
		goto out;
	if ((rc = net_listen(w, host, port, &w, 1, &l)))
		goto out;
	if (ready)
		ready(net_listener_port(l));
	while (!*stop)
		net_wait(w, 200);
out:
	net_listener_destroy(l);
	net_worker_destroy(w);
	net_ctx_destroy(ctx);
	return rc;
}

/* ---- client -------------------------------------------------------------------- */

struct nb_client {
	const struct netbench_opts *o;
	net_conn_t *c;
	uint64_t *sent_ns;       /* per slot */
	uint64_t measure_from_ns;
	uint64_t round_trips, bad;
	struct hist *lat;
	int lost;
};

static int nb_send(struct nb_client *cl, unsigned slot)
{
	size_t len = cl->o->size;
	unsigned char *b = net_buf_alloc(len);
	if (!b)
		return -ENOMEM;
	memset(b, 0, len);
	struct wire_hdr *hd = (struct wire_hdr *)b;
	hd->magic = WIRE_MAGIC;
	hd->version = WIRE_VERSION;
	hd->type = WIRE_REQ;
	hd->length = (uint32_t)len;
	hd->seq = slot;
	cl->sent_ns[slot] = clock_now_ns();
	return net_send(cl->c, b, len);
}

static void cl_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct nb_client *cl = arg;
	const struct wire_hdr *hd = data;
	(void)c;
	if (len < sizeof(*hd) || hd->seq >= cl->o->outstanding) {
		cl->bad++;
		return;
	}
	unsigned slot = (unsigned)hd->seq;
	if (len != cl->o->size) {
		/* not an echo (a memory server's error reply, say): counted, and
		 * the slot goes on so the run keeps its requests in flight */
		cl->bad++;
		nb_send(cl, slot);
		return;
	}
	uint64_t now = clock_now_ns();
	if (cl->sent_ns[slot] >= cl->measure_from_ns) {
		cl->round_trips++;
		hist_record(cl->lat, now - cl->sent_ns[slot]);
	}
	nb_send(cl, slot);
}

static void cl_on_close(void *arg, net_conn_t *c, int reason)
{
	struct nb_client *cl = arg;
	(void)c;
	cl->lost = reason ? reason : LOTUS_EUNAVAIL;
}

int netbench_run(const struct netbench_opts *o, struct netbench_result *r)
{
	static const struct net_handlers h = { .on_msg = cl_on_msg, .on_close = cl_on_close };
	const char *hosts[] = { o->host };
	struct net_opts no = { .transport = o->transport, .spin_us = o->spin_us,
			       .secret_file = o->secret_file, .hosts = hosts, .nhosts = 1 };
	struct nb_client cl = { .o = o };
	net_ctx_t *ctx = NULL;
	net_worker_t *w = NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	cl.sent_ns = calloc(o->outstanding, sizeof(*cl.sent_ns));
	cl.lat = malloc(sizeof(*cl.lat));
	if (!cl.sent_ns || !cl.lat) {
		rc = -ENOMEM;
		goto out;
	}
	hist_init(cl.lat);
	if ((rc = net_ctx_create(&no, &ctx)))
		goto out;
	if ((rc = net_worker_create(ctx, &h, &cl, &w)))
		goto out;
	if ((rc = net_connect(w, o->host, o->port, 5000, &cl.c))) {
		log_error("netbench: connect to %s:%u: %s", o->host, o->port, lotus_strerror(rc));
		goto out;
	}
	uint64_t start = clock_now_ns();
	cl.measure_from_ns = start + (uint64_t)(o->warmup * 1e9);
	uint64_t end = cl.measure_from_ns + (uint64_t)(o->seconds * 1e9);
	for (unsigned i = 0; i < o->outstanding && rc == 0; i++)
		rc = nb_send(&cl, i);
	while (rc == 0 && !cl.lost && clock_now_ns() < end && !(o->stop && *o->stop))
		net_wait(w, 100);
	uint64_t stop = clock_now_ns();
	if (rc == 0 && cl.lost)
		rc = cl.lost;
	if (rc == 0 && cl.bad)
		log_warn("netbench: %llu malformed replies", (unsigned long long)cl.bad);

	r->transport = o->transport;
	r->outstanding = o->outstanding;
	r->size = o->size;
	r->seconds = (double)(stop - cl.measure_from_ns) / 1e9;
	r->round_trips = cl.round_trips;
	r->rtt_per_s = r->seconds > 0 ? (double)cl.round_trips / r->seconds : 0;
	if (cl.lat->count) {
		r->lat_mean_us = hist_mean(cl.lat) / 1e3;
		r->lat_p50_us = (double)hist_percentile(cl.lat, 50) / 1e3;
		r->lat_p99_us = (double)hist_percentile(cl.lat, 99) / 1e3;
	}
	if (cl.c && !cl.lost)
		net_conn_close(cl.c);
out:
	net_worker_destroy(w);
	net_ctx_destroy(ctx);
	free(cl.sent_ns);
	free(cl.lat);
	return rc;
}
