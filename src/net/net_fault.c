/*
 * net_fault.c - fault injection for tests, behind LOTUS_NET_FAULT.
 *
 *   LOTUS_NET_FAULT="drop:N"      every Nth sent message is silently dropped
 *   LOTUS_NET_FAULT="corrupt:N"   every Nth sent message has one byte flipped
 *   LOTUS_NET_FAULT="oversize:1"  sends over WIRE_MAX_MSG are not refused (a
 *                                 hostile client, to test the receiver's check)
 *   both, comma separated:        "drop:100,corrupt:7"
 *
 * Messages are counted per process (an atomic counter in the ctx), across all
 * workers and message types, net's own PING/PONG included.  net_send_raw() is
 * the only caller; it checks the config first, so the cost when off is one
 * branch.
 */
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "net/net_int.h"

void net_fault_init(struct net_fault *f)
{
	memset(f, 0, sizeof(*f));
	const char *s = getenv("LOTUS_NET_FAULT");
	if (!s || !*s)
		return;
	char *copy = strdup(s), *save = NULL;
	if (!copy)
		return;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':');
		unsigned long n = colon ? strtoul(colon + 1, NULL, 10) : 0;
		if (colon && n > 0 && strncmp(tok, "drop", (size_t)(colon - tok)) == 0)
			f->drop_every = (unsigned)n;
		else if (colon && n > 0 && strncmp(tok, "corrupt", (size_t)(colon - tok)) == 0)
			f->corrupt_every = (unsigned)n;
		else if (colon && n > 0 && strncmp(tok, "oversize", (size_t)(colon - tok)) == 0)
			f->oversize = 1;
		else
			log_warn("net: ignoring LOTUS_NET_FAULT item '%s' (drop:N, corrupt:N or "
				 "oversize:1)", tok);
	}
	free(copy);
	if (f->drop_every || f->corrupt_every)
		log_info("net: fault injection on: drop every %u, corrupt every %u",
			 f->drop_every, f->corrupt_every);
}

int net_fault_apply(net_ctx_t *ctx, void *buf, size_t len)
{
	uint64_t n = atomic_fetch_add(&ctx->fault_seq, 1) + 1;
	if (ctx->fault.drop_every && n % ctx->fault.drop_every == 0)
		return 1;
	if (ctx->fault.corrupt_every && n % ctx->fault.corrupt_every == 0 && len) {
		/* Vary the position so headers and payloads both get hit. */
		size_t pos = (size_t)((n * 2654435761u) % len);
		((unsigned char *)buf)[pos] ^= 0x5a;
	}
	return 0;
}
