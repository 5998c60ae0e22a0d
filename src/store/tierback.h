/*
 * tierback.h - the backing files of a tiered store (store_create_tiered) on a
 * memory server's data directory: where each logical page's latest copy
 * lives, the miss read (read_page), and the page writers that evict.
 *
 *   DIR/pages.swap        evicted dirty pages, page p at p * page_size;
 *                         created empty at every start, never read by recovery
 *   DIR/pages-a.dat, -b   the checkpoint images (ckpt.c); a page recovery
 *                         loaded lazily is read from its image until changed
 *
 * Use (main thread, in this order):
 *   tierback_create -> tierback_store_opts -> store_create_tiered ->
 *   (data directory locked) tierback_start -> ckpt_recover with
 *   tierback_set_home as its page-home hook -> ... -> tierback_stop ->
 *   store_destroy -> tierback_destroy.
 * read_page and want_frames run on any thread (the store calls them).
 *
 * Every page read back (a miss or a scan prefetch) is checked against the
 * CRC32C its home's copy had when it was put there (a DRAM table, see
 * tierback.c): a mismatch fails the request with -EIO, never gives it the
 * bytes, and is counted in the stats (swap_crc_errors, image_crc_errors).
 *
 * Fault seam for tests, LOTUS_TIER_FAULT="miss:N[:ERRNO[:COUNT]],evict:N[:ERRNO[:COUNT]]":
 * from the Nth miss read / evicted dirty page on, COUNT of them (default 1,
 * 0 = all) fail with ERRNO (EIO, ENOSPC or a number; default EIO).  A failed
 * eviction is reported after the write, so the page stays and nothing is lost.
 */
#ifndef LOTUS_TIERBACK_H
#define LOTUS_TIERBACK_H
#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

typedef struct tierback tierback_t;

enum tier_home { TIER_HOME_ZERO = 0, TIER_HOME_IMAGE_A = 1, TIER_HOME_IMAGE_B = 2,
		 TIER_HOME_SWAP = 3 };

struct tierback_opts {
	uint64_t capacity;        /* logical page space, bytes */
	uint32_t page_size;       /* 0: STORE_DEFAULT_PAGE */
	unsigned page_writers;    /* 0: min(2, cores) */
};

int tierback_create(const struct tierback_opts *o, tierback_t **out);
/* Fill the store's tiering options (capacity, read_page, want_frames). */
void tierback_store_opts(tierback_t *tb, struct store_tier_opts *so);
/* Create DIR/pages.swap (empty), open the images that exist, start the page
 * writers on st's frame region.  0 or -errno (logged). */
int tierback_start(tierback_t *tb, store_t *st, const char *dir);
/* After tierback_start: the page writers and the staging buffer registered
 * with them, for checkpoints (ckpt_opts.writers / staging). */
struct pwriter;
struct pwriter *tierback_writers(tierback_t *tb, void **staging, size_t *staging_bytes);
/* Recovery: pages first..last have their latest copy in image (0 = a, 1 = b),
 * whose CRC32C is crc[p] (indexed by page number; recovery checked them):
 * every later read of such a page from the image is checked against it. */
void tierback_set_home(void *tb, uint64_t first, uint64_t last, unsigned image,
		       const uint32_t *crc);
/* Stop the page writers (before the store goes). */
void tierback_stop(tierback_t *tb);
void tierback_destroy(tierback_t *tb);

/* A thread's own ring for miss reads that do not block (the memory
 * server's workers; docs/store.md "Misses that do not block"): io_uring
 * (libaio where it cannot be made, or with LOTUS_IO=aio) with the backing
 * files registered and the pool's registration cloned from the page
 * writers' donor (fixed-buffer reads; plain buffers if there is none).  At
 * most depth reads in flight.  Open, use and close it on one thread. */
typedef struct tb_ring tb_ring_t;
int tierback_ring_open(tierback_t *tb, unsigned depth, tb_ring_t **out);
void tierback_ring_close(tb_ring_t *r);
/* Prepare the read of logical page `page` (LOCKED for its miss by the
 * caller) into buf, a frame of the pool: 0 prepared (its completion comes
 * from tierback_ring_reap with tag), 1 no backing copy (zero-fill, nothing
 * to read), -EAGAIN depth reads in flight, other <0 it fails now (an
 * injected fault, no file).  tierback_ring_submit issues what is prepared. */
int tierback_ring_prep(tb_ring_t *r, uint64_t page, void *buf, uint64_t tag);
int tierback_ring_submit(tb_ring_t *r);
/* Completions, at most max, waiting for at least min (0: never blocks):
 * tags[i] and res[i] (0 the page's bytes are in its buffer and match its
 * checksum, <0 -errno: short read, I/O error, checksum mismatch, injected
 * fault).  Returns how many, or <0 when the ring failed (every read in
 * flight is then reported failed). */
int tierback_ring_reap(tb_ring_t *r, uint64_t *tags, int *res, unsigned max, unsigned min);
unsigned tierback_ring_inflight(const tb_ring_t *r);   /* prepared or in flight */
unsigned tierback_ring_unsubmitted(const tb_ring_t *r); /* prepared, not submitted */
/* An fd that turns readable when a read of r completes (io_ctx_notify_fd),
 * or -errno; clear it before reaping. */
int tierback_ring_notify_fd(tb_ring_t *r);
void tierback_ring_notify_clear(tb_ring_t *r);
/* The memory server: n requests parked on misses (for the figures). */
void tierback_note_parked(tierback_t *tb, uint64_t n);

/* ,"tier":{...} (leading comma) into buf, snprintf rules; any thread. */
int tierback_stats_json(tierback_t *tb, char *buf, size_t len);
/* One log line with the main figures (at exit). */
void tierback_log_summary(tierback_t *tb);

#endif
