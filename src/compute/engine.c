/*
 * engine.c - what every engine shares below the interface (engine.h): the
 * counting of attempts.  Which engines exist is api.c's business.
 */
#include <string.h>
#include "compute/engine.h"

void engine_attempt_end(struct engine_attempt *a, bool committed, struct lotus_txn_counters *out)
{
	struct lotus_attempt_counters *c = committed ? &out->committed : &out->aborted;
	if (!a->open)
		return;
	c->attempts++;
	c->round_trips += a->round_trips;
	c->ops += a->ops;
	c->bytes_sent += a->bytes_sent;
	c->bytes_recv += a->bytes_recv;
	c->servers += (uint64_t)__builtin_popcountll(a->servers);
	for (unsigned i = 0; i < LOTUS_OP_TYPES; i++) {
		c->type[i].ops += a->type[i].ops;
		c->type[i].bytes_sent += a->type[i].bytes_sent;
		c->type[i].bytes_recv += a->type[i].bytes_recv;
	}
	memset(a, 0, sizeof(*a));
}
