/*
 * ckpt.h - checkpoints (the page writer) and page recovery for the memory
 * server (docs/design.md, "Storage engine").
 *
 * A fuzzy checkpoint:
 *   1. begin = redo_next_lsn(): every change made before it is in the log.
 *   2. Collect dirty pages (store_dirty_collect) and write them to the page
 *      file DIR/pages.dat at offset page * page_size, in large batches (up
 *      to max_inflight I/Os in flight) through the hybrid I/O layer, using
 *      the buffer pool registered with io_uring where possible.
 *      Write-ahead rule without page LSNs: a batch is first copied out of the
 *      pool, then the log is made durable up to redo_next_lsn(), then the
 *      copies are written.  Workers append a change's log record before they
 *      apply it, so every change in a copy is durable before the copy is.
 *      (Implementation: two images, DIR/pages-a.dat and pages-b.dat, alternate
 *      so that a crash or a damaged page falls back to the previous one; see
 *      ckpt.c (the run), ckpt_files.c (the files), ckpt_recover.c and
 *      docs/durability.md.)
 *   3. Per-page CRC32Cs go to DIR/pages.crc; then the manifest
 *      DIR/MANIFEST (begin LSN, pages used, tables) is written atomically:
 *      write a temporary file, fsync it, rename it, fsync the directory.
 *   4. Log segments are deleted wholly below what a recovery from either
 *      image needs: its begin LSN, or the oldest PREPARE that was still
 *      undecided when it began (keep_lsn at that moment), if older.
 *
 * Recovery: read the manifest, read the page file with large batched direct
 * reads (1 MiB each, up to 256 outstanding), check every page's CRC (a
 * damaged page is reported by number and file, and recovery fails with
 * -EIO rather than load bad data), re-create the tables, store_rebuild(),
 * and return the LSN the log must be replayed from.
 *
 * Tiered stores (store_create_tiered): a stale page that is not resident is
 * pinned with store_page_get (read in) before the gate closes, copied with it
 * closed, then unpinned.  With ckpt_opts.writers the copies are written by
 * the page writers (pwriter.h; WRITE_FIXED from the staging buffer they
 * registered with the pool), else through this module's own ring.
 * Recovery is lazy (ckpt_recover_home): the image is streamed through a
 * staging buffer, checked, then handed to store_rebuild_page page by page.
 *
 * Threads: one page writer thread (ckpt_start) or explicit ckpt_run calls
 * from one thread at a time.  Recovery runs before any other use.
 */
#ifndef LOTUS_CKPT_H
#define LOTUS_CKPT_H
#include <stdint.h>
#include "io/io.h"
#include "store/redo.h"
#include "store/store.h"

struct ckpt_opts {
	const char *dir;
	unsigned max_inflight;     /* default 4096 */
	enum io_backend backend;   /* AUTO */
	uint64_t log_trigger;      /* checkpoint when the log grew this much (default 256 MiB) */
	unsigned interval_ms;      /* and at least this often (0: no timer) */
	/* 1 = ckpt_close() takes a final checkpoint first (clean shutdown). */
	int checkpoint_on_close;
	/* The checkpoint ckpt_recover loaded (ckpt_recover_stats.seq; 0: the
	 * newest).  After a fallback the next checkpoint overwrites the damaged
	 * image, never the one the store came from. */
	uint64_t recovered_seq;
	/* Called by each checkpoint right after it took its begin LSN (gate
	 * open, on the thread running the checkpoint); records it appends are
	 * above begin, so a recovery from this checkpoint replays them. */
	void (*on_begin)(void *arg);
	void *on_begin_arg;
	/* The page writers the checkpoints are written through (pwriter.h;
	 * NULL: this module's own ring), from staging (staging_bytes >=
	 * max_inflight pages; NULL: mmap'ed here) - the writers register it
	 * with the pool, so the writes are WRITE_FIXED.  The writers must
	 * outlive the ckpt. */
	struct pwriter *writers;
	void *staging;
	size_t staging_bytes;
};

typedef struct ckpt ckpt_t;

int ckpt_open(store_t *st, redo_t *log, const struct ckpt_opts *o, ckpt_t **out);
void ckpt_close(ckpt_t *c);     /* stops the page writer thread if running */

/* The oldest LSN that must survive truncation (e.g. an undecided PREPARE);
 * UINT64_MAX for none.  Any thread. */
void ckpt_set_keep_lsn(ckpt_t *c, uint64_t lsn);

struct ckpt_stats {
	uint64_t begin_lsn, pages, bytes, ios, elapsed_ns, cpu_ns, syscalls;
	const char *backend;
};
/* The change gate.  A worker brackets "append a change's redo record,
 * then apply it to the store" with these two calls (any thread, no nesting,
 * nothing that waits on the log in between; c may be NULL: no-op).  The
 * checkpointer briefly closes the gate to take its begin LSN and to copy a
 * batch of pages, so that every change logged below begin is applied before
 * any page is copied and no copy holds half a change. */
unsigned ckpt_change_begin(ckpt_t *c);
void ckpt_change_end(ckpt_t *c, unsigned token);

/* The checkpoint in effect (for the stats; any thread): its seq (0: none),
 * begin LSN, and the wall clock when it was written (a recovered one: its
 * MANIFEST's mtime; 0: unknown). */
struct ckpt_last {
	uint64_t seq, begin_lsn, wall_ns;
};
void ckpt_last(ckpt_t *c, struct ckpt_last *out);

/* Take one checkpoint now; -EBUSY while a backup pins the files. */
int ckpt_run(ckpt_t *c, struct ckpt_stats *out);
/* `lotus backup`: no checkpoint runs (so no image, manifest or log segment
 * changes but by appends) until clock_now_ns() reaches until_ns; 0 lifts it.
 * Waits for a checkpoint under way to finish.  Returns how many checkpoints
 * have run so far: a copy is whole only while that number stays the same.
 * Any thread. */
uint64_t ckpt_backup_pin(ckpt_t *c, uint64_t until_ns);
/* Start the page writer thread (checkpoints on log growth and the timer). */
int ckpt_start(ckpt_t *c);

struct ckpt_recover_stats {
	uint64_t begin_lsn, pages, bytes, records, elapsed_ns;
	const char *backend;
	/* The LSN the log is kept from (min of the previous checkpoint's
	 * begin and the keep LSN at checkpoint time): scan from here for the
	 * PREPAREs of undecided transactions. */
	uint64_t log_from;
	uint64_t seq;        /* the checkpoint loaded (0: none) */
	int fell_back;       /* 1: the newest image was damaged, the previous one loaded */
};
/* On a fresh store: load the last checkpoint from dir (nothing there: a new
 * database, *replay_from = 0).  0, -EIO (damaged page or manifest, with a
 * log line), or another -errno. */
int ckpt_recover(store_t *st, const char *dir, enum io_backend backend, uint64_t *replay_from,
		 struct ckpt_recover_stats *out);
/* The same; for a tiered store (store_create_tiered) recovery is lazy: the
 * image is streamed twice (CRC check, then store_rebuild_page per page) and
 * home(arg, 1, pages_used, image, crc) names the image the pages stay on
 * until they are touched, with the CRC32C of each of its pages (crc[p], p in
 * first..last; called before any page is rebuilt; image 0 = a, 1 = b).
 * home may be NULL.
 * Both kinds: an image whose CRCs are right but whose pages cannot be rebuilt
 * (store_rebuild_check / store_rebuild_page_check) counts as damaged, so the
 * previous image is used when the log reaches back far enough. */
typedef void (*ckpt_home_fn)(void *arg, uint64_t first, uint64_t last, unsigned image,
			     const uint32_t *crc);
int ckpt_recover_home(store_t *st, const char *dir, enum io_backend backend, ckpt_home_fn home,
		      void *home_arg, uint64_t *replay_from, struct ckpt_recover_stats *out);

#endif
