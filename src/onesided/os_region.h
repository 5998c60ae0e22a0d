/*
 * os_region.h - the memory server's side of the one-sided baseline: per
 * table, a UCX-allocated region holding a B+tree and records (os_layout.h)
 * that compute servers read and write by RMA without this server's CPU (on
 * shared memory and RDMA; over tcp UCX emulates RMA on the server's workers).
 *
 * The region of a table is built, once, at the first OP_OS_ATTACH for it:
 * from the table's records in the store as they are at that moment (a bulk
 * load, leaves 3/4 full, room for inserts).  From then on it lives apart
 * from the store: one-sided writes go to the region only, two-sided ones to
 * the store only.  It grows by chunks (os_layout.h) when clients ask.
 *
 * Threads: os_regions_attach may be called by any worker (a mutex guards the
 * build); create/free on the main thread, free after the workers stopped.
 */
#ifndef LOTUS_OS_REGION_H
#define LOTUS_OS_REGION_H
#include <stddef.h>
#include <stdint.h>
#include "net/net.h"
#include "onesided/os_layout.h"
#include "store/store.h"

typedef struct os_regions os_regions_t;

/* budget: the bytes all regions together may take (0: no bound). */
int os_regions_create(net_ctx_t *net, store_t *st, uint64_t budget, os_regions_t **out);
void os_regions_free(os_regions_t *r);
/* The attach answer for table (struct os_attach_info, then each chunk's
 * os_chunk_info and packed rkey) into a malloc'd *info of *len bytes.
 * Builds the region on first use; grow_from > 0 (the chunks the asker knows)
 * adds a chunk if that is all of them.  0, LOTUS_ENOTABLE,
 * LOTUS_EUNSUPPORTED (a key that is not 8 bytes), LOTUS_ENOSPACE (over the
 * budget, OS_MAX_CHUNKS, or UCX could not allocate), -ENOMEM. */
int os_regions_attach(os_regions_t *r, uint16_t table, uint32_t grow_from, void **info,
		      size_t *len);
/* For code on the memory server that walks a region in its own memory: the
 * region header (in chunk 0; built on first use) and the value room of its
 * records.  Errors as os_regions_attach. */
int os_regions_header(os_regions_t *r, uint16_t table, const struct os_region_hdr **hdr,
		      uint32_t *value_max);

#endif
