/*
 * dex_server.c - the memory server's half of DEX's offloading (dex.h): a
 * lookup a compute server pushed down to this server's CPU.
 *
 * The worker walks the table's one-sided region (os_layout.h) in its own
 * memory, as a remote reader would over RMA: from the root in the region
 * header to the leaf, accepting a page only when its two version words
 * agree (a page being written by some client's put is read again), and
 * moving right along B-link siblings when a split moved the key.  The
 * record it finds is copied out whole: under DEX the record's owner is the
 * one compute server that writes it, and it waits for its own writes before
 * it sends a lookup, so no write of that owner is in flight over the copy.
 *
 * Any worker thread may run it at any time, beside clients' RMA on the same
 * memory: nothing here writes the region.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lotus.h"
#include "onesided/dex.h"
#include "onesided/os_int.h"   /* os_child_index, os_leaf_search */

#define DEX_SRV_DEPTH 64
#define DEX_SRV_TORN  100000

/* A validated copy of the page at addr. */
static int page_copy(uint64_t addr, struct os_page *out)
{
	const struct os_page *pg = (const struct os_page *)(uintptr_t)addr;
	for (unsigned i = 0; i < DEX_SRV_TORN; i++) {
		memcpy(out, pg, sizeof(*out));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (out->front == out->rear && out->count <= OS_PAGE_ENTRIES)
			return 0;
	}
	return LOTUS_ETIMEOUT;
}

int dex_region_lookup(os_regions_t *r, uint16_t table, uint64_t key, void **out, size_t *len)
{
	struct os_page pg;
	const struct os_region_hdr *hdr;
	uint32_t vmax;
	int rc = os_regions_header(r, table, &hdr, &vmax);
	if (rc)
		return rc;
	uint64_t addr = __atomic_load_n(&hdr->root, __ATOMIC_ACQUIRE);
	for (unsigned depth = 0; addr && depth < DEX_SRV_DEPTH * 4; depth++) {
		if ((rc = page_copy(addr, &pg)) != 0)
			return rc;
		if (pg.high != OS_KEY_INF && key >= pg.high && pg.sibling) {
			addr = pg.sibling;      /* a split moved the key right */
			continue;
		}
		if (pg.count == 0)
			return LOTUS_ENOTFOUND;
		if (pg.level > 0) {
			addr = pg.e[os_child_index(&pg, key)].ptr;
			continue;
		}
		int i = os_leaf_search(&pg, key);
		if (i < 0 || !pg.e[i].ptr)      /* none, or a deleted key's mark */
			return LOTUS_ENOTFOUND;
		uint64_t rec = pg.e[i].ptr;
		const unsigned char *data = (const unsigned char *)(uintptr_t)(rec + OS_REC_DATA);
		uint64_t vlen;
		memcpy(&vlen, data, 8);
		if (vlen > vmax)
			vlen = vmax;
		struct dex_lookup_rep *rep = malloc(sizeof(*rep) + vlen);
		if (!rep)
			return -ENOMEM;
		rep->rec = rec;
		rep->len = vlen;
		memcpy(rep + 1, data + 8, vlen);
		*out = rep;
		*len = sizeof(*rep) + vlen;
		return 0;
	}
	return LOTUS_ETIMEOUT;
}
