/*
 * net_liveness.c - a lease on every connection, whatever the transport.
 *
 * A peer that vanishes without a FIN or RST (a partition, a stopped process)
 * is invisible to UCX's tcp transport for as long as the kernel keeps the
 * socket, and shared memory has no peer error handling at all.  So liveness
 * does not rely on the transport: each side of a connection watches the
 * time since it last heard anything on it (net_am_cb stamps last_rx_ns) and
 * since it last sent anything (net_send_raw stamps last_tx_ns):
 *
 *   rx or tx idle >= lease/4   send a PING (at most one per lease/4); the
 *                              peer's net answers with a PONG, which is
 *                              traffic both ways
 *   rx idle >= lease           the peer is lost: on_close(LOTUS_ETIMEOUT)
 *   tx idle >= lease           our own lease is gone: the peer has heard
 *                              nothing from us for a lease, so it may have
 *                              declared us lost (a memory server then
 *                              released our transactions).  The connection
 *                              is lost with LOTUS_ELEASE, and nothing more
 *                              is sent on it (net_send_raw checks too).
 *
 * The tx rule is what a process that was paused (SIGSTOP, a long GC, a
 * starved thread) meets when it runs again: net_lease_fence() runs before
 * the first receive after the pause and net_send_raw() refuses to send on a
 * stale connection, so a paused client never sends a COMMIT on a connection
 * whose lease its server may have expired; the request fails instead.  A
 * healthy process never trips it: it answers the peer's PINGs (and pings
 * itself) at least every lease/2.  Its sessions must be progressed though:
 * a client that calls no lotus function for a whole lease loses it.
 *
 * Busy connections never ping.  A sleeping worker wakes every lease/8 while it
 * has connections (net_lease_sleep_ms caps the poll timeout), which costs
 * nothing measurable.  Runs in the worker's thread only.
 */
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "net/net_int.h"

static uint64_t lease_ns(const net_worker_t *w)
{
	return (uint64_t)w->ctx->lease_ms * 1000000ULL;
}

int net_lease_stale(const net_conn_t *c, uint64_t now)
{
	return c->state == CONN_OPEN && now > c->last_tx_ns &&
	       now - c->last_tx_ns >= lease_ns(c->w);
}

static void lease_lost(net_conn_t *c, uint64_t now)
{
	log_warn("net: nothing sent to %s for %llu ms (lease %u ms; was this process paused?): "
		 "its lease may have expired there; giving the connection up", c->peer,
		 (unsigned long long)((now - c->last_tx_ns) / 1000000), c->w->ctx->lease_ms);
	net_conn_mark_lost(c, LOTUS_ELEASE);
}

void net_lease_fence(net_worker_t *w, uint64_t now)
{
	for (net_conn_t *c = w->conns; c; c = c->next)
		if (net_lease_stale(c, now))
			lease_lost(c, now);
}

void net_lease_check(net_worker_t *w, uint64_t now)
{
	uint64_t lease = lease_ns(w);
	uint64_t quarter = lease / 4;

	w->next_lease_check_ns = now + lease / 8;   /* a loss is seen within lease + 1/8 */
	for (net_conn_t *c = w->conns; c; c = c->next) {
		if (c->state != CONN_OPEN)
			continue;   /* CONNECTING is bounded by net_connect's timeout */
		uint64_t idle = now > c->last_rx_ns ? now - c->last_rx_ns : 0;
		uint64_t tx_idle = now > c->last_tx_ns ? now - c->last_tx_ns : 0;
		if (tx_idle >= lease) {
			lease_lost(c, now);
		} else if (idle >= lease) {
			log_warn("net: %s silent for %llu ms (lease %u ms), declaring it lost",
				 c->peer, (unsigned long long)(idle / 1000000), w->ctx->lease_ms);
			net_conn_mark_lost(c, LOTUS_ETIMEOUT);
		} else if ((idle >= quarter || tx_idle >= quarter) &&
			   now - c->last_ping_ns >= quarter) {
			c->last_ping_ns = now;
			net_send_ping(c, WIRE_PING, 0);
		}
	}
}

int net_lease_sleep_ms(net_worker_t *w, int timeout_ms)
{
	if (!w->conns)
		return timeout_ms;
	uint64_t now = clock_now_ns();
	int cap = now >= w->next_lease_check_ns
			  ? 0
			  : (int)((w->next_lease_check_ns - now) / 1000000) + 1;
	return timeout_ms < 0 ? cap : MIN(timeout_ms, cap);
}
