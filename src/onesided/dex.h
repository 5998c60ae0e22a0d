/*
 * dex.h - `--engine dex`, DEX (Lu et al., VLDB'24) in lotus: what the
 * compute side (dex_engine.c) and the memory server (dex_server.c) share.
 * docs/dex.md says what is and is not reproduced.
 *
 * Offloading: a compute server may send a lookup to the memory server
 * instead of walking the index itself (OP_DEX_LOOKUP, a lotus message; the
 * server's worker walks the table's one-sided region in its own memory, with
 * the same version checks as a remote reader).  Request: key = the table's
 * name, arg = the key (os_key_u64 of its 8 bytes).  Reply: status 0 and
 * value = struct dex_lookup_rep then the record's value, or LOTUS_ENOTFOUND.
 */
#ifndef LOTUS_DEX_H
#define LOTUS_DEX_H
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include "onesided/os_region.h"

struct dex_lookup_rep {
	uint64_t rec;             /* the record's address in the region */
	uint64_t len;             /* value bytes that follow */
};
static_assert(sizeof(struct dex_lookup_rep) == 16, "dex_lookup_rep size");

/* The memory server's side: find key in table's region (built on first use,
 * as an attach does) and copy its record into a malloc'd *out of *len bytes.
 * 0, LOTUS_ENOTFOUND, LOTUS_ENOTABLE, LOTUS_EUNSUPPORTED, LOTUS_ETIMEOUT
 * (a page kept changing under the walk), -ENOMEM. */
int dex_region_lookup(os_regions_t *r, uint16_t table, uint64_t key, void **out, size_t *len);

#endif
