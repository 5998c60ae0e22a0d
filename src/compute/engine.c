/*
 * engine.c - the engines this build has, and the counting helpers every
 * engine shares (engine.h).
 */
#include <string.h>
#include "compute/engine.h"

const struct engine *engine_find(enum lotus_engine kind)
{
	switch (kind) {
	case LOTUS_ENGINE_TWOSIDED:
		return &engine_twosided;
	case LOTUS_ENGINE_ONESIDED:
		return NULL;   /* not built yet (issue 13) */
	}
	return NULL;
}

const char *engine_kind_name(enum lotus_engine kind)
{
	return kind == LOTUS_ENGINE_TWOSIDED ? "twosided"
	       : kind == LOTUS_ENGINE_ONESIDED ? "onesided" : "unknown";
}

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
	for (unsigned i = 0; i < LOTUS_OP_TYPES; i++) {
		c->type[i].ops += a->type[i].ops;
		c->type[i].bytes_sent += a->type[i].bytes_sent;
		c->type[i].bytes_recv += a->type[i].bytes_recv;
	}
	memset(a, 0, sizeof(*a));
}
