/*
 * net_liveness.c - leases for transports without peer error handling.
 *
 * UCX refuses shared memory under UCP_ERR_HANDLING_MODE_PEER, so over sm a dead
 * peer is invisible to UCX.  Each side therefore watches the time since it last
 * heard anything on a connection (net_am_cb stamps last_rx_ns):
 *
 *   idle >= lease/4   send a PING (at most one per lease/4); the peer's net
 *                     answers with a PONG, which counts as traffic
 *   idle >= lease     the peer is lost: on_close(LOTUS_EUNAVAIL)
 *
 * Busy connections never ping.  A sleeping worker wakes every lease/4 while it
 * has connections (net_lease_sleep_ms caps the poll timeout), which costs
 * nothing measurable.  Runs in the worker's thread only.
 */
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "net/net_int.h"

void net_lease_check(net_worker_t *w, uint64_t now)
{
	uint64_t lease = (uint64_t)w->ctx->lease_ms * 1000000ULL;
	uint64_t quarter = lease / 4;

	w->next_lease_check_ns = now + quarter;
	for (net_conn_t *c = w->conns; c; c = c->next) {
		if (c->state != CONN_OPEN)
			continue;   /* CONNECTING is bounded by net_connect's timeout */
		uint64_t idle = now > c->last_rx_ns ? now - c->last_rx_ns : 0;
		if (idle >= lease) {
			log_info("net: %s silent for %llu ms, declaring it lost", c->peer,
				 (unsigned long long)(idle / 1000000));
			net_conn_mark_lost(c, LOTUS_EUNAVAIL);
		} else if (idle >= quarter && now - c->last_ping_ns >= quarter) {
			c->last_ping_ns = now;
			net_send_ping(c, WIRE_PING, 0);
		}
	}
}

int net_lease_sleep_ms(net_worker_t *w, int timeout_ms)
{
	if (w->ctx->peer_errors || !w->conns)
		return timeout_ms;
	uint64_t now = clock_now_ns();
	int cap = now >= w->next_lease_check_ns
			  ? 0
			  : (int)((w->next_lease_check_ns - now) / 1000000) + 1;
	return timeout_ms < 0 ? cap : MIN(timeout_ms, cap);
}
