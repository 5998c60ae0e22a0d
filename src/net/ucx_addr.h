/*
 * ucx_addr.h - a check of a peer's packed UCX worker address before UCX sees
 * it.
 *
 * UCX 1.13 has no call that validates a remote worker address: ucp_ep_create
 * walks the blob by the lengths and flags inside it, without its length, and
 * asserts (aborting the process) on a version it does not know.  A door client
 * hands the server such a blob (door.h), so the server walks it first, with
 * every length checked against the bytes received, and compares it with the
 * shape of its own workers' addresses (ucp_worker_get_address): the same
 * address version and header flags, for each transport both sides have the
 * same length of interface address, capability flags the server's own
 * devices have for it
 * and a device address length the server's own devices use for it; transport
 * figures (overhead, bandwidth, latency) UCX can compute with (finite, in
 * range: a negative one makes its lane selection assert); no endpoint
 * addresses, no worker id of the server's own.  The format rules are UCX 1.13's (src/ucp/wireup/address.c, address
 * versions 1 and 2, non-unified mode); docs/net.md names the versions.
 *
 * A shape is learned once from the server's own address (which must pass the
 * walk exactly: if it does not, this UCX packs addresses in a way lotus cannot
 * check and the server refuses to listen) and is then read-only, so any thread
 * may check against it.
 */
#ifndef LOTUS_UCX_ADDR_H
#define LOTUS_UCX_ADDR_H
#include <stddef.h>
#include <stdint.h>

#define UCX_ADDR_MAX_TL   32    /* transports remembered per shape */
#define UCX_ADDR_MAX_UUID 64    /* own worker ids remembered */

struct ucx_addr_shape {
	uint8_t hdr[2];           /* header: version nibble, flags */
	unsigned hdr_len;         /* 1 (version 1) or 2 (version 2) */
	unsigned attr_len;        /* bytes of packed interface attributes */
	unsigned ntl;
	struct {
		uint16_t csum;    /* transport name checksum */
		uint8_t iface_len;
		uint8_t ndev;
		uint8_t dev_len[8];   /* device address lengths seen with it */
		uint8_t nflags;
		uint8_t flags[4][3];  /* capability flags seen with it */
	} tl[UCX_ADDR_MAX_TL];
	uint64_t sysdev[4];       /* system device ids seen (bitmap of 256) */
	unsigned nuuid;
	uint64_t uuid[UCX_ADDR_MAX_UUID];
};

/* Learn (into a zeroed shape, or widen a learned one by another own
 * worker's address) the shape of addr.  0, or LOTUS_EUNSUPPORTED with why filled in. */
int ucx_addr_learn(struct ucx_addr_shape *s, const void *addr, size_t len, char *why,
		   size_t whylen);

/* Does a peer's address addr (len bytes as received) fit shape s?  0, or
 * LOTUS_EPROTO with why filled in (one short phrase, no peer bytes). */
int ucx_addr_check(const struct ucx_addr_shape *s, const void *addr, size_t len, char *why,
		   size_t whylen);

#endif
