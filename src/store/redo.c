/*
 * redo.c - the redo log's writer: appends into a shared buffer, group commit
 * through one log writer thread, segment creation and watermarks, truncation.
 * The record and segment format is in redo_int.h, the segment files' names
 * and headers in redo_seg.c, and recovery (replay, torn-tail cutting) in
 * redo_replay.c.
 *
 * Buffer and invariants (all LSNs are stream offsets; B = ring size):
 *   floor <= durable <= tail,  floor = ALIGN_DOWN(durable, 4 KiB)
 *   ring[lsn % B] holds the stream for lsn in [floor, tail)
 *   tail + size - floor <= B  before an append may copy (else it waits)
 * Appends take r->mu, write header and payload into the ring and bump tail;
 * the payload CRC is computed before taking the lock.  The writer takes
 * r->mu only to read tail (and to sleep), never during I/O.
 *
 * The writer (one thread, owns its io_ctx):
 *
 *   idle --append signals work_cv--> write [floor, ALIGN_UP(tail, 4K)) as
 *     ^                              <= max_write pieces (split at ring wrap
 *     |                              and segment boundaries), RWF_DSYNC
 *     |                                   |                 |
 *     +--- durable = tail, callbacks <----+ ok              | error
 *          in LSN order (notify heap)                       v
 *                                   FAILED: pending callbacks get
 *                                   LOTUS_EDURABLE, appends LOTUS_EREADONLY
 *
 * The partial last block is rewritten by the next write (it starts at floor).
 * Nothing is acknowledged before the write that covers it completes: durable
 * only moves after a whole batch completed, and a failure is sticky.
 *
 * Threads: see redo.h.  r->mu guards the append state (tail, boundaries,
 * failed flag); r->nmu guards durable, the notify heap and waiters.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "store/redo.h"
#include "store/redo_int.h"

#define REDO_DEF_SEGMENT  (64ull << 20)
#define REDO_DEF_WRITE    (1u << 20)
#define REDO_MAX_BOUNDS   64
#define REDO_CTX_FILES    16           /* recreate the writer's ring after this many files */
#define ALIGN_DOWN_BLOCK(x) ((x) & ~(uint64_t)(REDO_BLOCK - 1))
#define REDO_DEF_MARK_MS  100u         /* a watermark at most this often */
#define REDO_LAZY_MS      2u             /* a lazy record waits at most this long */

/* ---- the log object ---- */

struct notify_ent {
	uint64_t lsn, seq;
	void (*cb)(void *arg, int status);
	void *arg;
};

struct seg_bound {
	uint64_t old_end;   /* LSN after the SEGEND record */
	uint64_t new_first; /* ALIGN_UP(old_end, 4 KiB) */
};

struct redo {
	unsigned delay_ms;          /* LOTUS_REDO_DELAY_MS (tests) */
	char dir[4096];
	uint64_t segment_bytes;
	uint32_t max_write;
	int use_odsync;
	enum io_backend backend;

	/* Preallocation (redo_opts.prealloc): a spare segment file, zero-filled
	 * to segment_bytes and durable, that the writer renames into place at
	 * the next roll; the spare thread makes the next one.  Under spare_mu. */
	int prealloc;
	pthread_mutex_t spare_mu;
	pthread_cond_t spare_cv;
	int spare_ready, spare_stop, spare_off;   /* spare_off: gave up (no room, an error) */
	int spare_want;           /* the writer asked for the next spare */
	int spare_asked;          /* writer only: asked during this segment */
	pthread_t spare_thread;
	int spare_started;
	int seg_zeroed;           /* set by seg_open: the segment it created was a spare */

	unsigned char *ring;
	size_t ring_bytes;

	/* append state, under mu */
	pthread_mutex_t mu;
	pthread_cond_t work_cv, space_cv;
	uint64_t tail;            /* next LSN to hand out (atomic reads elsewhere) */
	uint64_t seg_first;       /* first LSN of the segment the tail is in */
	uint64_t records_appended;
	uint64_t floor;           /* ALIGN_DOWN(durable, 4K), as appenders see it */
	struct seg_bound bounds[REDO_MAX_BOUNDS];
	unsigned nbounds;         /* boundaries the writer has not passed yet */
	unsigned space_waiters;
	int writer_idle, stop, failed;
	/* Lazy records (redo_append_lazy): the writer writes when a record is
	 * owed (urgent > durable: an eager append, a notify or a wait for an LSN
	 * not durable, an appender waiting for space), or when the oldest lazy
	 * record not yet taken has waited REDO_LAZY_NS (lazy_ns, 0: none) */
	uint64_t urgent;
	uint64_t lazy_ns;
	uint64_t lazy_wait_ns;    /* REDO_LAZY_MS, or LOTUS_REDO_LAZY_MS (tests) */

	/* durability, under nmu */
	pthread_mutex_t nmu;
	pthread_cond_t durable_cv;
	uint64_t durable;         /* atomic reads elsewhere */
	struct notify_ent *heap;
	size_t nheap, heap_cap;
	uint64_t notify_seq;
	unsigned waiters;
	int error;                /* 0 or LOTUS_EDURABLE */

	/* segment list, under seg_mu (writer adds, truncate removes) */
	pthread_mutex_t seg_mu;
	uint64_t *segs;
	size_t nsegs, segs_cap;

	/* writer thread */
	pthread_t thread;
	int thread_started;
	io_ctx_t *ctx;
	int open_rc, open_done;
	int cur_fd, cur_file;
	uint64_t cur_first;
	unsigned ctx_files;

	/* the current segment's header (writer thread; open_tail before it) */
	unsigned char *hblk;      /* SEG_HDR bytes, aligned for O_DIRECT */
	unsigned char *tblk;      /* a batch's partial last block (write_range) */
	int cur_v1;               /* 0: a format-0 segment, no header to mark */
	uint64_t hseq, hmark;
	uint32_t hflags;
	uint64_t mark_ns;         /* when the mark was last written */
	unsigned mark_ms;         /* 0: no marks (LOTUS_REDO_MARK_MS=0, tests) */

	/* stats (atomic) */
	uint64_t st_writes, st_batches, st_records, st_bytes, st_cpu_ns, st_notified;
	uint64_t st_seg_created, st_seg_deleted, st_syscalls_done, st_syscalls_now;
	uint64_t st_marks;
	const char *backend_name;

	/* replication (redo_set_ship): the writer ships each batch first */
	redo_ship_fn ship;
	void *ship_arg;
};

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v)   __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

/* ---- notify heap (min by lsn, then registration order), under nmu ---- */

static int ent_less(const struct notify_ent *a, const struct notify_ent *b)
{
	return a->lsn < b->lsn || (a->lsn == b->lsn && a->seq < b->seq);
}

static int heap_push(struct redo *r, struct notify_ent e)
{
	if (r->nheap == r->heap_cap) {
		size_t cap = r->heap_cap ? r->heap_cap * 2 : 256;
		struct notify_ent *h = realloc(r->heap, cap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		r->heap = h;
		r->heap_cap = cap;
	}
	size_t i = r->nheap++;
	while (i > 0 && ent_less(&e, &r->heap[(i - 1) / 2])) {
		r->heap[i] = r->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	r->heap[i] = e;
	return 0;
}

static struct notify_ent heap_pop(struct redo *r)
{
	struct notify_ent top = r->heap[0], last = r->heap[--r->nheap];
	size_t i = 0, n = r->nheap;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && ent_less(&r->heap[c + 1], &r->heap[c]))
			c++;
		if (!ent_less(&r->heap[c], &last))
			break;
		r->heap[i] = r->heap[c];
		i = c;
	}
	if (n)
		r->heap[i] = last;
	return top;
}

/* Run callbacks for everything <= upto (status 0), or everything (status < 0). */
static void notify_run(struct redo *r, uint64_t upto, int status)
{
	struct notify_ent batch[64];
	for (;;) {
		size_t n = 0;
		pthread_mutex_lock(&r->nmu);
		while (n < ARRAY_SIZE(batch) && r->nheap && (status || r->heap[0].lsn <= upto))
			batch[n++] = heap_pop(r);
		pthread_mutex_unlock(&r->nmu);
		for (size_t i = 0; i < n; i++)
			batch[i].cb(batch[i].arg, status);
		ADD(&r->st_notified, n);
		if (n < ARRAY_SIZE(batch))
			return;
	}
}

/* ---- appends ---- */

static void ring_copy(struct redo *r, uint64_t lsn, const void *src, size_t len)
{
	size_t off = lsn % r->ring_bytes, first = MIN(len, r->ring_bytes - off);
	memcpy(r->ring + off, src, first);
	if (first < len)
		memcpy(r->ring, (const char *)src + first, len - first);
}

/* Wait (mu held) until [floor, tail + need) fits in the ring.  0 or EREADONLY. */
static int wait_space(struct redo *r, uint64_t need)
{
	while (!r->failed && r->tail + need - r->floor > r->ring_bytes) {
		if (r->writer_idle)
			pthread_cond_signal(&r->work_cv);
		r->space_waiters++;
		pthread_cond_wait(&r->space_cv, &r->mu);
		r->space_waiters--;
	}
	return r->failed ? LOTUS_EREADONLY : 0;
}

/* Copy one record at the tail (mu held, space checked). */
static uint64_t put_record(struct redo *r, uint8_t type, uint64_t txn_id, const void *payload,
			   uint32_t len, uint32_t pcrc)
{
	struct redo_hdr h = { .len = len, .lsn = r->tail + rec_size(len), .txn_id = txn_id,
			      .type = type, .magic = REDO_MAGIC };
	h.crc = crc32c(pcrc, &h, sizeof(h));
	ring_copy(r, r->tail, &h, sizeof(h));
	if (len)
		ring_copy(r, r->tail + sizeof(h), payload, len);
	uint64_t pad = rec_size(len) - sizeof(h) - len;
	if (pad) {
		static const unsigned char zero[8];
		ring_copy(r, r->tail + sizeof(h) + len, zero, pad);
	}
	STORE(&r->tail, h.lsn);
	return h.lsn;
}

/* The current segment is full: end it with SEGEND and start the next one at
 * the next 4 KiB boundary (mu held). */
static int roll_segment(struct redo *r)
{
	uint64_t need = rec_size(0) + REDO_BLOCK + SEG_HDR;
	while (r->nbounds == REDO_MAX_BOUNDS && !r->failed) {
		r->space_waiters++;
		pthread_cond_wait(&r->space_cv, &r->mu);
		r->space_waiters--;
	}
	int rc = wait_space(r, need);
	if (rc)
		return rc;
	uint64_t end = put_record(r, REDO_SEGEND, 0, NULL, 0, 0);
	struct seg_bound b = { end, ALIGN_UP(end, REDO_BLOCK) };
	r->bounds[r->nbounds++] = b;
	STORE(&r->tail, b.new_first + SEG_HDR);   /* past the new segment's header */
	r->seg_first = b.new_first;
	return 0;
}

/* lazy: 1 for redo_append_lazy; at (a backup's redo_append_raw): the LSN
 * the record must get, and no segment roll of this log's own. */
static int append_at(redo_t *r, uint8_t type, uint64_t txn_id, const void *payload, uint32_t len,
		     uint64_t *lsn, int lazy, uint64_t at)
{
	if (len > REDO_MAX_PAYLOAD)
		return -E2BIG;
	if (type == 0 || type == REDO_SEGEND || (len && !payload))
		return -EINVAL;
	uint32_t pcrc = len ? crc32c(0, payload, len) : 0;
	uint64_t size = rec_size(len);
	pthread_mutex_lock(&r->mu);
	int rc = r->failed ? LOTUS_EREADONLY : 0;
	if (!rc && at && r->tail + size != at)
		rc = -ESPIPE;   /* not the next record of this stream */
	else if (!rc && !at && r->tail - r->seg_first >= r->segment_bytes)
		rc = roll_segment(r);
	if (!rc)
		rc = wait_space(r, size);
	if (!rc) {
		uint64_t end = put_record(r, type, txn_id, payload, len, pcrc);
		r->records_appended++;
		if (lsn)
			*lsn = end;
		if (lazy) {
			/* the first one wakes an idle writer only to start its clock */
			if (!r->lazy_ns) {
				r->lazy_ns = clock_now_ns();
				if (r->writer_idle) {
					r->writer_idle = 0;
					pthread_cond_signal(&r->work_cv);
				}
			}
		} else {
			r->urgent = end;
			if (r->writer_idle) {
				r->writer_idle = 0;
				pthread_cond_signal(&r->work_cv);
			}
		}
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

int redo_append(redo_t *r, uint8_t type, uint64_t txn_id, const void *payload, uint32_t len,
		uint64_t *lsn)
{
	return append_at(r, type, txn_id, payload, len, lsn, 0, 0);
}

int redo_append_lazy(redo_t *r, uint8_t type, uint64_t txn_id, const void *payload,
		     uint32_t len, uint64_t *lsn)
{
	return append_at(r, type, txn_id, payload, len, lsn, 1, 0);
}

int redo_append_raw(redo_t *r, const void *rec, size_t len, uint64_t *lsn)
{
	struct redo_hdr h;
	if (len < sizeof(h))
		return -EINVAL;
	memcpy(&h, rec, sizeof(h));
	if (len != rec_size(h.len))
		return -EINVAL;
	if (h.type != REDO_SEGEND)
		return append_at(r, h.type, h.txn_id, (const unsigned char *)rec + sizeof(h),
				 h.len, lsn, 0, h.lsn);
	/* the primary ended its segment here: so does this log */
	pthread_mutex_lock(&r->mu);
	int rc = r->failed ? LOTUS_EREADONLY : r->tail + len != h.lsn || h.len ? -ESPIPE
		 : roll_segment(r);
	if (rc == 0) {
		*lsn = r->tail;
		r->urgent = r->tail;
		if (r->writer_idle) {
			r->writer_idle = 0;
			pthread_cond_signal(&r->work_cv);
		}
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void redo_set_ship(redo_t *r, redo_ship_fn fn, void *arg)
{
	pthread_mutex_lock(&r->mu);
	r->ship = fn;
	r->ship_arg = arg;
	pthread_mutex_unlock(&r->mu);
}

/* Somebody waits for lsn: the writer owes it now, lazy or not.  Only what
 * is appended already: a wait for a later LSN (the checkpointer's trigger,
 * far ahead) must not make every lazy record urgent until the log gets
 * there; the appends that reach it urge (or wait out the clock) themselves. */
static void urge(redo_t *r, uint64_t lsn)
{
	pthread_mutex_lock(&r->mu);
	if (lsn > r->tail)
		lsn = r->tail;
	if (lsn > r->urgent) {
		r->urgent = lsn;
		if (r->writer_idle) {
			r->writer_idle = 0;
			pthread_cond_signal(&r->work_cv);
		}
	}
	pthread_mutex_unlock(&r->mu);
}

int redo_notify(redo_t *r, uint64_t lsn, void (*cb)(void *arg, int status), void *arg)
{
	pthread_mutex_lock(&r->nmu);
	int status = lsn <= r->durable ? 0 : r->error;
	if (lsn <= r->durable || r->error) {
		pthread_mutex_unlock(&r->nmu);
		cb(arg, status);
		ADD(&r->st_notified, 1);
		return 0;
	}
	struct notify_ent e = { lsn, r->notify_seq++, cb, arg };
	int rc = heap_push(r, e);
	pthread_mutex_unlock(&r->nmu);
	if (rc == 0)
		urge(r, lsn);
	return rc;
}

int redo_wait(redo_t *r, uint64_t lsn)
{
	if (LOAD(&r->durable) < lsn)
		urge(r, lsn);
	pthread_mutex_lock(&r->nmu);
	while (r->durable < lsn && !r->error) {
		r->waiters++;
		pthread_cond_wait(&r->durable_cv, &r->nmu);
		r->waiters--;
	}
	int rc = r->durable >= lsn ? 0 : r->error;
	pthread_mutex_unlock(&r->nmu);
	return rc;
}

uint64_t redo_durable_lsn(redo_t *r) { return LOAD(&r->durable); }
uint64_t redo_next_lsn(redo_t *r) { return LOAD(&r->tail); }

int redo_status(redo_t *r)
{
	return LOAD(&r->failed) ? LOTUS_EREADONLY : 0;
}

/* ---- the writer ---- */

static int writer_ctx_create(struct redo *r)
{
	struct io_opts o = { .backend = r->backend, .depth = 64, .flags = IO_F_NO_CPU_STATS };
	int rc = io_ctx_create(&o, &r->ctx);
	if (rc < 0) {
		log_error("redo: cannot create the log writer's I/O context: %s", strerror(-rc));
		return rc;
	}
	io_ctx_register_buffer(r->ctx, r->ring, r->ring_bytes); /* level 3 on failure */
	r->backend_name = io_backend_name(io_ctx_backend(r->ctx));
	r->ctx_files = 0;
	return 0;
}

static int writer_add_file(struct redo *r, int fd)
{
	int idx = io_ctx_add_file(r->ctx, fd);
	if (idx >= 0)
		r->ctx_files++;
	return idx;
}

static void seg_list_add(struct redo *r, uint64_t first)
{
	pthread_mutex_lock(&r->seg_mu);
	if (r->nsegs == r->segs_cap) {
		size_t cap = r->segs_cap ? r->segs_cap * 2 : 16;
		uint64_t *v = realloc(r->segs, cap * sizeof(*v));
		if (v) {
			r->segs = v;
			r->segs_cap = cap;
		}
	}
	if (r->nsegs < r->segs_cap)
		r->segs[r->nsegs++] = first;
	pthread_mutex_unlock(&r->seg_mu);
}

/* ---- preallocated segments ----
 *
 * An O_DIRECT+O_DSYNC write that extends its file also has the file system
 * log the new size and blocks: on this project's test VM (ext4 on virtio)
 * a 4 KiB write then took 162-168 us and 100 us of system CPU, against
 * 95-103 us and 37 us when it overwrites zeros already on disk.  So the
 * writer does not extend: each new segment is a spare made ahead of time
 * (DIR/redo-spare, zero-filled and fdatasync'ed by the spare thread,
 * renamed into place at the roll, header flag SEG_F_PREALLOC), and the
 * writer overwrites its zeros.  Without a spare ready (the thread is
 * behind, or gave up: less than 4 segments plus 256 MiB free on the file
 * system, or an error), a segment is created empty as before. */
#define SPARE_NAME "redo-spare"
#define SPARE_TMP  "redo-spare.tmp"
#define SPARE_CHUNK (1u << 20)

static int spare_room(const struct redo *r)
{
	struct statvfs v;
	return statvfs(r->dir, &v) == 0 &&
	       (uint64_t)v.f_bavail * v.f_frsize >= 4 * r->segment_bytes + (256ull << 20);
}

/* Make DIR/redo-spare: 0, or an error (the spare thread then stops). */
static int spare_make(struct redo *r)
{
	char tmp[4200], path[4200];
	snprintf(tmp, sizeof(tmp), "%s/" SPARE_TMP, r->dir);
	snprintf(path, sizeof(path), "%s/" SPARE_NAME, r->dir);
	/* one left by an earlier run is not trusted to be zeros: made anew */
	unlink(path);
	unlink(tmp);
	if (!spare_room(r))
		return -ENOSPC;
	int fd = io_open_direct(tmp, O_RDWR | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return fd;
	unsigned char *z = NULL;
	int rc = posix_memalign((void **)&z, REDO_BLOCK, SPARE_CHUNK) ? -ENOMEM : 0;
	if (!rc)
		memset(z, 0, SPARE_CHUNK);
	for (uint64_t off = 0; !rc && off < r->segment_bytes; off += SPARE_CHUNK) {
		size_t n = (size_t)MIN((uint64_t)SPARE_CHUNK, r->segment_bytes - off);
		ssize_t w = pwrite(fd, z, n, (off_t)off);
		if (w != (ssize_t)n)
			rc = w < 0 ? -errno : -ENOSPC;
		pthread_mutex_lock(&r->spare_mu);
		if (r->spare_stop)
			rc = rc ? rc : -ECANCELED;
		pthread_mutex_unlock(&r->spare_mu);
	}
	free(z);
	if (!rc && fdatasync(fd))
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (!rc)
		rc = fsync_dir(r->dir);
	if (rc)
		unlink(tmp);
	return rc;
}

static void *spare_main(void *arg)
{
	struct redo *r = arg;
	pthread_mutex_lock(&r->spare_mu);
	while (!r->spare_stop) {
		if (r->spare_ready || r->spare_off || !r->spare_want) {
			pthread_cond_wait(&r->spare_cv, &r->spare_mu);
			continue;
		}
		pthread_mutex_unlock(&r->spare_mu);
		int rc = spare_make(r);
		pthread_mutex_lock(&r->spare_mu);
		if (rc == 0) {
			r->spare_ready = 1;
			r->spare_want = 0;
		}
		else if (rc != -ECANCELED) {
			r->spare_off = 1;
			log_warn("redo: no preallocated segment in %s (%s): new segments grow as "
				 "they are written", r->dir, rc == -ENOSPC ? "too little free space"
				 : strerror(-rc));
		}
	}
	pthread_mutex_unlock(&r->spare_mu);
	return NULL;
}

/* The writer, half way through a segment: make the spare for the next
 * one now (not earlier: its 64 MiB of zeros compete with the log's own
 * writes for the disk). */
static void spare_ask(struct redo *r)
{
	r->spare_asked = 1;
	pthread_mutex_lock(&r->spare_mu);
	r->spare_want = 1;
	pthread_cond_signal(&r->spare_cv);
	pthread_mutex_unlock(&r->spare_mu);
}

/* Rename the spare to path (which must not exist): 1 if done. */
static int spare_take(struct redo *r, const char *path)
{
	char sp[4200];
	int took = 0;
	snprintf(sp, sizeof(sp), "%s/" SPARE_NAME, r->dir);
	pthread_mutex_lock(&r->spare_mu);
	if (r->spare_ready) {
		took = renameat2(AT_FDCWD, sp, AT_FDCWD, path, RENAME_NOREPLACE) == 0;
		r->spare_ready = 0;   /* taken, or unusable: the next when asked */
	}
	pthread_mutex_unlock(&r->spare_mu);
	return took;
}

/* Open the segment starting at first; create: a new one, its header (mark)
 * durable before its name is (a spare's rename is made durable with it). */
static int seg_open(struct redo *r, uint64_t first, int create, uint64_t mark)
{
	char path[4200];
	seg_path(path, sizeof(path), r->dir, first);
	int zeroed = create && r->prealloc && spare_take(r, path);
	r->seg_zeroed = zeroed;
	int flags = O_RDWR | (create && !zeroed ? O_CREAT | O_EXCL : 0) |
		    (r->use_odsync ? O_DSYNC : 0);
	int fd = io_open_direct(path, flags, 0644);
	if (fd < 0) {
		if (zeroed)
			unlink(path);
		return fd;
	}
	if (create) {
		unsigned char *blk = NULL;
		int rc = posix_memalign((void **)&blk, REDO_BLOCK, SEG_HDR) ? -ENOMEM : 0;
		if (!rc) {
			seghdr_init_flags(blk, first, mark, zeroed ? SEG_F_PREALLOC : 0);
			rc = seghdr_write(fd, blk, r->use_odsync);
			if (rc)
				log_error("redo: writing the header of %s: %s", path, strerror(-rc));
			free(blk);
		}
		if (!rc && (rc = fsync_dir(r->dir)) != 0)
			log_error("redo: fsync of directory %s: %s", r->dir, strerror(-rc));
		if (rc) {
			close(fd);
			unlink(path);
			return rc;
		}
		ADD(&r->st_seg_created, 1);
		seg_list_add(r, first);
	}
	return fd;
}

static void writer_publish_stats(struct redo *r);

/* Write the current segment's header with a new mark and flags, into the
 * copy not holding the last one (a torn write leaves that one). */
static int writer_mark(struct redo *r, uint64_t mark, uint32_t flags)
{
	if (!r->cur_v1)
		return 0;
	uint64_t seq = r->hseq + 1;
	seghdr_put(r->hblk, (unsigned)(seq & 1), r->cur_first, seq, mark, flags);
	int rc = seghdr_write(r->cur_fd, r->hblk, r->use_odsync);
	r->mark_ns = clock_now_ns();
	if (rc)
		return rc;
	r->hseq = seq;
	r->hmark = mark;
	r->hflags = flags;
	ADD(&r->st_marks, 1);
	return 0;
}

/* Is a mark due after a batch that made the log durable up to end? */
static int mark_due(const struct redo *r, uint64_t end, uint64_t now)
{
	return r->cur_v1 && r->mark_ms && r->hmark < end &&
	       now - r->mark_ns >= (uint64_t)r->mark_ms * 1000000u;
}

/* Move the writer to the segment starting at first (creating it); the
 * current one ends with the SEGEND record ending at old_end, durable. */
static int writer_next_segment(struct redo *r, uint64_t first, uint64_t old_end)
{
	int fd = seg_open(r, first, 1, old_end);
	if (fd < 0)
		return fd;
	/* the new segment exists: say so in the old one, so that recovery
	 * knows a missing newest segment from one never created */
	int rc = writer_mark(r, old_end, r->hflags | SEG_F_NEXT);
	if (rc) {
		close(fd);
		return rc;
	}
	if (r->ctx_files >= REDO_CTX_FILES) {
		/* The ring keeps old segments' files registered (and their blocks
		 * allocated after truncation): start a fresh ring now and then. */
		writer_publish_stats(r);
		ADD(&r->st_syscalls_done, LOAD(&r->st_syscalls_now));
		STORE(&r->st_syscalls_now, 0);
		io_ctx_destroy(r->ctx);
		r->ctx = NULL;
		int rc = writer_ctx_create(r);
		if (rc) {
			close(fd);
			return rc;
		}
	}
	int idx = writer_add_file(r, fd);
	if (idx < 0) {
		close(fd);
		return idx;
	}
	close(r->cur_fd);
	r->cur_fd = fd;
	r->cur_file = idx;
	r->cur_first = first;
	r->hflags = r->seg_zeroed ? SEG_F_PREALLOC : 0;
	r->spare_asked = 0;
	seghdr_init_flags(r->hblk, first, old_end, r->hflags);
	r->cur_v1 = 1;
	r->hseq = 1;
	r->hmark = old_end;
	return 0;
}

/* Write the stream range [start, ALIGN_UP(data_end)) (start 4K aligned) as
 * <= max_write pieces, moving to the next segment at a boundary.  0 or -errno.
 *
 * The last block, when data_end falls inside it, is written from a copy
 * (tblk): its bytes up to data_end, zeroes after.  Appenders go on copying
 * records into the ring at the tail while the write is in flight, and the
 * ring's bytes past data_end are theirs: written straight from the ring, a
 * record caught half copied would reach the disk whole-looking (a header, a
 * payload partly there) and, if no later write replaced that block (the log
 * failed, or a crash), replay would take it for a complete record failing
 * its checksum (damage) instead of a clean end. */
static int write_range(struct redo *r, uint64_t start, uint64_t data_end,
		       const struct seg_bound *bounds, unsigned nb)
{
	struct io_cqe cqes[64];
	uint64_t pos = start, end = ALIGN_UP(data_end, (uint64_t)REDO_BLOCK);
	uint64_t last = data_end % REDO_BLOCK ? ALIGN_DOWN_BLOCK(data_end) : UINT64_MAX;
	unsigned b = 0;
	while (pos < end) {
		unsigned n = 0;
		while (pos < end && n < 32) {
			while (b < nb && pos >= bounds[b].new_first) {
				if (r->cur_first < bounds[b].new_first) {
					int rc = writer_next_segment(r, bounds[b].new_first,
								     bounds[b].old_end);
					if (rc)
						return rc;
				}
				/* the header block: written by seg_open */
				pos = MAX(pos, bounds[b].new_first + SEG_HDR);
				b++;
			}
			if (pos >= end)
				break;
			uint64_t stop = end;
			if (b < nb && bounds[b].new_first < stop)
				stop = bounds[b].new_first;
			size_t roff = pos % r->ring_bytes;
			uint64_t len = MIN(stop - pos, (uint64_t)r->max_write);
			len = MIN(len, (uint64_t)(r->ring_bytes - roff));
			const unsigned char *src = r->ring + roff;
			if (pos == last) {   /* blocks never straddle the ring's end */
				size_t have = (size_t)(data_end - last);
				memcpy(r->tblk, src, have);
				memset(r->tblk + have, 0, REDO_BLOCK - have);
				src = r->tblk;
				len = REDO_BLOCK;
			} else if (pos < last && pos + len > last) {
				len = last - pos;
			}
			off_t foff = (off_t)(pos - r->cur_first);
			int rc = r->use_odsync
				? io_prep_write(r->ctx, r->cur_file, src, len, foff, len)
				: io_prep_write_dsync(r->ctx, r->cur_file, src, len, foff, len);
			if (rc < 0)
				return rc;
			pos += len;
			n++;
			if (b < nb && pos >= bounds[b].new_first)
				break; /* switch files only with nothing in flight */
		}
		if (!n)
			break;   /* only a header block was left */
		/* one system call per batch where the backend allows it */
		int rc = io_submit_and_reap(r->ctx, cqes, ARRAY_SIZE(cqes), n);
		if (rc < 0)
			return rc;
		unsigned done = 0;
		int err = 0;
		for (int first = 1; done < n; first = 0) {
			if (!first)
				rc = io_reap(r->ctx, cqes, ARRAY_SIZE(cqes), 1);
			if (rc < 0)
				return rc;
			for (int i = 0; i < rc; i++) {
				if (cqes[i].res < 0 && !err)
					err = (int)cqes[i].res;
				else if ((uint64_t)cqes[i].res != cqes[i].user_data && !err)
					err = -ENOSPC; /* short write: the device is full */
			}
			done += (unsigned)rc;
		}
		if (err)
			return err;
		ADD(&r->st_writes, n);
		if (r->prealloc && !r->spare_asked && pos - r->cur_first >= r->segment_bytes / 2)
			spare_ask(r);
	}
	/* A write that ends exactly at a boundary still moves to the next file:
	 * the next write starts there. */
	for (; b < nb && pos >= bounds[b].new_first; b++) {
		if (r->cur_first < bounds[b].new_first) {
			int rc = writer_next_segment(r, bounds[b].new_first, bounds[b].old_end);
			if (rc)
				return rc;
		}
	}
	return 0;
}

static void writer_fail(struct redo *r, int err, uint64_t start, uint64_t end)
{
	if (err == -ESTALE)   /* the ship hook said why */
		log_error("redo: LSN %" PRIu64 "..%" PRIu64 " in %s could not be replicated; the "
			  "log is read-only from now on (commits waiting for it fail with "
			  "LOTUS_EDURABLE)", start, end, r->dir);
	else
		log_error("redo: log write of LSN %" PRIu64 "..%" PRIu64 " in %s failed: %s; the "
			  "log is read-only from now on (commits waiting for it fail with "
			  "LOTUS_EDURABLE)", start, end, r->dir, strerror(-err));
	pthread_mutex_lock(&r->mu);
	STORE(&r->failed, 1);
	pthread_cond_broadcast(&r->space_cv);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_lock(&r->nmu);
	r->error = LOTUS_EDURABLE;
	pthread_cond_broadcast(&r->durable_cv);
	pthread_mutex_unlock(&r->nmu);
	notify_run(r, 0, LOTUS_EDURABLE);
}

/* Zero the ring bytes of [from, to) (whole blocks now below the floor), so
 * that the bytes past the tail of a later write are zero: a clean log end on
 * disk is a run of zeroes, and a torn tail is anything else.  Appenders cannot
 * touch these bytes until the new floor is published. */
static void ring_zero(struct redo *r, uint64_t from, uint64_t to)
{
	while (from < to) {
		size_t off = from % r->ring_bytes;
		size_t n = (size_t)MIN(to - from, (uint64_t)(r->ring_bytes - off));
		memset(r->ring + off, 0, n);
		from += n;
	}
}

static void writer_done(struct redo *r, uint64_t start, uint64_t end, uint64_t records,
			unsigned nb)
{
	ring_zero(r, start, ALIGN_DOWN_BLOCK(end));
	ADD(&r->st_records, records);
	pthread_mutex_lock(&r->mu);
	r->floor = ALIGN_DOWN_BLOCK(end);
	memmove(r->bounds, r->bounds + nb, (r->nbounds - nb) * sizeof(r->bounds[0]));
	r->nbounds -= nb;
	if (r->space_waiters)
		pthread_cond_broadcast(&r->space_cv);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_lock(&r->nmu);
	STORE(&r->durable, end);
	if (r->waiters)
		pthread_cond_broadcast(&r->durable_cv);
	pthread_mutex_unlock(&r->nmu);
	notify_run(r, end, 0);
}

static void writer_publish_stats(struct redo *r)
{
	struct io_stats io;
	io_ctx_stats(r->ctx, &io);
	uint64_t sys = io.sys_enter + io.sys_submit + io.sys_getevents + io.sys_pwrite;
	STORE(&r->st_syscalls_now, sys);
}

static void *writer_main(void *arg)
{
	struct redo *r = arg;
	int rc = writer_ctx_create(r);
	if (rc == 0) {
		r->cur_file = writer_add_file(r, r->cur_fd);
		if (r->cur_file < 0)
			rc = r->cur_file;
	}
	pthread_mutex_lock(&r->mu);
	r->open_rc = rc;
	r->open_done = 1;
	uint64_t recs_done = r->records_appended;   /* appends may start once open_done */
	pthread_cond_broadcast(&r->work_cv);
	pthread_mutex_unlock(&r->mu);
	if (rc)
		return NULL;
	for (;;) {
		struct seg_bound bounds[REDO_MAX_BOUNDS];
		pthread_mutex_lock(&r->mu);
		uint64_t durable = r->durable;
		int mark_now = 0;
		while (!r->failed && !r->stop) {
			if (r->tail != durable) {
				/* only lazy records: they wait for company, or their time */
				if (r->urgent > durable || r->space_waiters || !r->lazy_ns)
					break;
				uint64_t now = clock_now_ns(), due = r->lazy_ns + r->lazy_wait_ns;
				if (now >= due)
					break;
				struct timespec ts;
				clock_deadline_in(CLOCK_REALTIME, &ts,
						  (unsigned)((due - now + 999999) / 1000000));
				r->writer_idle = 1;
				pthread_cond_timedwait(&r->work_cv, &r->mu, &ts);
				continue;
			}
			r->writer_idle = 1;
			if (!r->cur_v1 || !r->mark_ms || r->hmark >= durable) {
				pthread_cond_wait(&r->work_cv, &r->mu);
				continue;
			}
			/* idle with the mark behind: write it when it is due */
			uint64_t now = clock_now_ns(), due = r->mark_ns + r->mark_ms * 1000000ull;
			if (now >= due) {
				mark_now = 1;
				break;
			}
			struct timespec ts;
			clock_deadline_in(CLOCK_REALTIME, &ts,
					  (unsigned)((due - now + 999999) / 1000000));
			pthread_cond_timedwait(&r->work_cv, &r->mu, &ts);
		}
		r->writer_idle = 0;
		if (mark_now) {
			pthread_mutex_unlock(&r->mu);
			rc = writer_mark(r, durable, r->hflags);
			if (rc) {
				writer_fail(r, rc, durable, durable);
				break;
			}
			continue;
		}
		if (r->failed || r->tail == durable) { /* stopped with nothing left */
			pthread_mutex_unlock(&r->mu);
			/* a clean close: the mark covers the whole log */
			if (!r->failed && r->mark_ms && r->hmark < durable &&
			    (rc = writer_mark(r, durable, r->hflags)) != 0)
				log_warn("redo: writing the last mark of the log in %s: %s", r->dir,
					 strerror(-rc));
			break;
		}
		uint64_t end = r->tail, recs = r->records_appended - recs_done;
		r->lazy_ns = 0;   /* this write takes every lazy record so far */
		unsigned nb = r->nbounds;
		memcpy(bounds, r->bounds, nb * sizeof(bounds[0]));
		recs_done = r->records_appended;
		redo_ship_fn ship = r->ship;
		pthread_mutex_unlock(&r->mu);

		/* Replication: the backups get the batch before this disk does,
		 * so this log never holds what they lack (docs/replication.md) */
		if (ship) {
			size_t off = durable % r->ring_bytes;
			size_t n1 = (size_t)MIN(end - durable, (uint64_t)(r->ring_bytes - off));
			rc = ship(r->ship_arg, durable, end, r->ring + off, n1, r->ring,
				  (size_t)(end - durable) - n1);
			if (rc) {
				writer_fail(r, rc, durable, end);
				break;
			}
		}

		if (r->delay_ms) {
			struct timespec ts = { r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
		uint64_t cpu0 = clock_thread_cpu_ns();
		uint64_t start = ALIGN_DOWN_BLOCK(durable);
		rc = write_range(r, start, end, bounds, nb);
		if (rc) {
			writer_fail(r, rc, durable, end);
			break;
		}
		ADD(&r->st_batches, 1);
		ADD(&r->st_bytes, end - durable);
		writer_done(r, start, end, recs, nb);
		/* the watermark: at most one header write every mark_ms, after
		 * the batch was acknowledged, so no commit waits for it */
		if (mark_due(r, end, clock_now_ns()) && (rc = writer_mark(r, end, r->hflags)) != 0) {
			writer_fail(r, rc, end, end);
			break;
		}
		writer_publish_stats(r);
		ADD(&r->st_cpu_ns, clock_thread_cpu_ns() - cpu0);
	}
	writer_publish_stats(r);
	return NULL;
}

/* ---- open / close ---- */

static size_t ring_size(uint32_t max_write)
{
	return ALIGN_UP((size_t)rec_size(REDO_MAX_PAYLOAD) + 2 * REDO_BLOCK, (size_t)1 << 20) +
	       4 * (size_t)max_write;
}

/* Load the header of the segment the log continues in (fd, starting at
 * first): format 1 (marks go on), format 0 (no marks), or none yet (a file
 * whose header write never completed: written now). */
static int open_header(struct redo *r, int fd, uint64_t first)
{
	struct seg_hdr h = { 0 };
	struct stat stt;
	ssize_t got = pread(fd, r->hblk, SEG_HDR, 0);
	if (got < 0 || fstat(fd, &stt)) {
		int rc = -errno;
		log_error("redo: reading the header of segment %016" PRIx64 " in %s: %s", first,
			  r->dir, strerror(errno));
		return rc;
	}
	int v = seghdr_get(r->hblk, (size_t)got, first, &h);
	if (v == SEG_V1) {
		r->cur_v1 = 1;
		r->hseq = h.seq;
		r->hmark = h.mark;
		r->hflags = h.flags;
		return 0;
	}
	if (v == SEG_V0) {
		r->cur_v1 = 0;
		return 0;
	}
	if (stt.st_size != 0) {
		log_error("redo: segment %016" PRIx64 " in %s has no valid header (run redo_replay "
			  "first)", first, r->dir);
		return -EIO;
	}
	seghdr_init(r->hblk, first, first);
	int rc = seghdr_write(fd, r->hblk, r->use_odsync);
	if (rc) {
		log_error("redo: writing the header of segment %016" PRIx64 " in %s: %s", first,
			  r->dir, strerror(-rc));
		return rc;
	}
	r->cur_v1 = 1;
	r->hseq = 1;
	r->hmark = first;
	r->hflags = 0;
	return 0;
}

/* Find the segment holding next_lsn, open it and load its partial last block
 * into the ring; or create a new segment.  Sets tail, durable, floor. */
static int open_tail(struct redo *r, uint64_t next_lsn)
{
	uint64_t *segs = NULL;
	size_t n = 0;
	int rc = seg_list(r->dir, &segs, &n);
	if (rc) {
		log_error("redo: cannot list %s: %s", r->dir, strerror(-rc));
		return rc;
	}
	r->segs = segs;
	r->nsegs = r->segs_cap = n;
	if (n && segs[n - 1] > next_lsn) {
		log_error("redo: %s has a segment starting at LSN %" PRIu64 " past the append "
			  "point %" PRIu64 " (run redo_replay first)", r->dir, segs[n - 1], next_lsn);
		return -EINVAL;
	}
	if (n == 0) {
		uint64_t first = ALIGN_UP(next_lsn, (uint64_t)REDO_BLOCK);
		if (r->prealloc) {   /* the first segment too: make a spare now */
			int src = spare_make(r);
			pthread_mutex_lock(&r->spare_mu);
			r->spare_ready = src == 0;
			pthread_mutex_unlock(&r->spare_mu);
		}
		int fd = seg_open(r, first, 1, next_lsn);
		if (fd < 0)
			return fd;
		r->cur_fd = fd;
		r->cur_first = r->seg_first = first;
		r->tail = r->durable = r->floor = first + SEG_HDR;
		r->hflags = r->seg_zeroed ? SEG_F_PREALLOC : 0;
		seghdr_init_flags(r->hblk, first, next_lsn, r->hflags);
		r->cur_v1 = 1;
		r->hseq = 1;
		r->hmark = next_lsn;
		return 0;
	}
	uint64_t first = segs[n - 1];
	if (first % REDO_BLOCK) {
		log_error("redo: segment %016" PRIx64 " in %s does not start on a 4 KiB boundary",
			  first, r->dir);
		return -EINVAL;
	}
	int fd = seg_open(r, first, 0, 0);
	if (fd < 0)
		return fd;
	r->cur_fd = fd;
	r->cur_first = r->seg_first = first;
	rc = open_header(r, fd, first);
	if (rc)
		return rc;
	if (r->cur_v1)
		next_lsn = MAX(next_lsn, first + SEG_HDR);
	r->tail = r->durable = next_lsn;
	r->floor = ALIGN_DOWN_BLOCK(next_lsn);
	if (next_lsn % REDO_BLOCK) {
		unsigned char *blk = r->ring + r->floor % r->ring_bytes;
		ssize_t got = pread(fd, blk, REDO_BLOCK, (off_t)(r->floor - first));
		if (got < 0) {
			rc = -errno;
			log_error("redo: reading the last block of segment %016" PRIx64 ": %s",
				  first, strerror(-rc));
			return rc;
		}
		if ((size_t)got < REDO_BLOCK)
			memset(blk + got, 0, REDO_BLOCK - (size_t)got);
		/* bytes past the append point must read as a clean end */
		memset(blk + next_lsn % REDO_BLOCK, 0, REDO_BLOCK - next_lsn % REDO_BLOCK);
	}
	return 0;
}

int redo_open(const struct redo_opts *o, uint64_t next_lsn, redo_t **out)
{
	if (!o || !o->dir || !out || strlen(o->dir) >= sizeof(((struct redo *)0)->dir))
		return -EINVAL;
	*out = NULL;
	struct redo *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	snprintf(r->dir, sizeof(r->dir), "%s", o->dir);
	r->segment_bytes = o->segment_bytes ? o->segment_bytes : REDO_DEF_SEGMENT;
	/* tests: LOTUS_REDO_SEGMENT_BYTES=N rolls segments every N bytes, so
	 * that checkpoints delete old segments within a short run */
	const char *sb = getenv("LOTUS_REDO_SEGMENT_BYTES");
	if (!o->segment_bytes && sb && strtoull(sb, NULL, 10))
		r->segment_bytes = strtoull(sb, NULL, 10);
	r->max_write = o->max_write ? ALIGN_UP(o->max_write, REDO_BLOCK) : REDO_DEF_WRITE;
	r->segment_bytes = MAX(r->segment_bytes, (uint64_t)REDO_BLOCK);
	r->use_odsync = o->use_odsync;
	r->backend = o->backend;
	const char *pa = getenv("LOTUS_REDO_PREALLOC");
	r->prealloc = pa && *pa ? strcmp(pa, "0") != 0 : o->prealloc;
	/* tests: LOTUS_REDO_DELAY_MS=N holds every log write back N ms, so that
	 * records stay in the buffer (not durable) for a while */
	const char *dl = getenv("LOTUS_REDO_DELAY_MS");
	r->delay_ms = dl ? (unsigned)strtoul(dl, NULL, 10) : 0;
	if (r->delay_ms)
		log_warn("redo: LOTUS_REDO_DELAY_MS: every log write waits %u ms (tests only)",
			 r->delay_ms);
	/* tests: LOTUS_REDO_MARK_MS=N writes the watermark at most every N ms
	 * (0: never, so that a test can fake a torn tail after a clean stop) */
	const char *mk = getenv("LOTUS_REDO_MARK_MS");
	r->mark_ms = mk ? (unsigned)strtoul(mk, NULL, 10) : REDO_DEF_MARK_MS;
	const char *lz = getenv("LOTUS_REDO_LAZY_MS");
	r->lazy_wait_ns = (lz ? strtoull(lz, NULL, 10) : REDO_LAZY_MS) * 1000000ull;
	r->cur_fd = -1;
	pthread_mutex_init(&r->spare_mu, NULL);
	pthread_cond_init(&r->spare_cv, NULL);
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->nmu, NULL);
	pthread_mutex_init(&r->seg_mu, NULL);
	pthread_cond_init(&r->work_cv, NULL);
	pthread_cond_init(&r->space_cv, NULL);
	pthread_cond_init(&r->durable_cv, NULL);
	int rc = 0;
	if (posix_memalign((void **)&r->hblk, REDO_BLOCK, SEG_HDR)) {
		r->hblk = NULL;
		rc = -ENOMEM;
		goto out;
	}
	if (posix_memalign((void **)&r->tblk, REDO_BLOCK, REDO_BLOCK)) {
		r->tblk = NULL;
		rc = -ENOMEM;
		goto out;
	}
	r->ring_bytes = ring_size(r->max_write);
	r->ring = mmap(NULL, r->ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);
	if (r->ring == MAP_FAILED) {
		r->ring = NULL;
		rc = -ENOMEM;
		goto out;
	}
	if (mkdir(r->dir, 0755) && errno != EEXIST) {
		rc = -errno;
		log_error("redo: mkdir %s: %s", r->dir, strerror(errno));
		goto out;
	}
	rc = open_tail(r, next_lsn);
	if (rc)
		goto out;
	if (r->prealloc) {
		if (pthread_create(&r->spare_thread, NULL, spare_main, r) == 0)
			r->spare_started = 1;
		else
			log_warn("redo: no spare thread: new segments grow as they are written");
	}
	rc = -pthread_create(&r->thread, NULL, writer_main, r);
	if (rc)
		goto out;
	r->thread_started = 1;
	pthread_mutex_lock(&r->mu);
	while (!r->open_done)
		pthread_cond_wait(&r->work_cv, &r->mu);
	rc = r->open_rc;
	pthread_mutex_unlock(&r->mu);
out:
	if (rc) {
		redo_close(r);
		return rc;
	}
	*out = r;
	return 0;
}

void redo_close(redo_t *r)
{
	if (!r)
		return;
	if (r->thread_started) {
		pthread_mutex_lock(&r->mu);
		r->stop = 1;
		pthread_cond_signal(&r->work_cv);
		pthread_mutex_unlock(&r->mu);
		pthread_join(r->thread, NULL);
	}
	if (r->spare_started) {
		pthread_mutex_lock(&r->spare_mu);
		r->spare_stop = 1;
		pthread_cond_signal(&r->spare_cv);
		pthread_mutex_unlock(&r->spare_mu);
		pthread_join(r->spare_thread, NULL);
	}
	notify_run(r, 0, LOTUS_EDURABLE); /* only if the writer could not start */
	if (r->ctx)
		io_ctx_destroy(r->ctx);
	if (r->cur_fd >= 0)
		close(r->cur_fd);
	if (r->ring)
		munmap(r->ring, r->ring_bytes);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->nmu);
	pthread_mutex_destroy(&r->seg_mu);
	pthread_mutex_destroy(&r->spare_mu);
	pthread_cond_destroy(&r->spare_cv);
	pthread_cond_destroy(&r->work_cv);
	pthread_cond_destroy(&r->space_cv);
	pthread_cond_destroy(&r->durable_cv);
	free(r->heap);
	free(r->segs);
	free(r->hblk);
	free(r->tblk);
	free(r);
}

int redo_truncate(redo_t *r, uint64_t lsn)
{
	lsn = MIN(lsn, redo_durable_lsn(r));
	int rc = 0;
	pthread_mutex_lock(&r->seg_mu);
	size_t keep = 0;
	while (keep + 1 < r->nsegs && r->segs[keep + 1] <= lsn)
		keep++;
	for (size_t i = 0; i < keep; i++) {
		char path[4200];
		seg_path(path, sizeof(path), r->dir, r->segs[i]);
		if (unlink(path) && errno != ENOENT) {
			rc = -errno;
			log_warn("redo: cannot delete %s: %s", path, strerror(errno));
		}
	}
	memmove(r->segs, r->segs + keep, (r->nsegs - keep) * sizeof(r->segs[0]));
	r->nsegs -= keep;
	pthread_mutex_unlock(&r->seg_mu);
	ADD(&r->st_seg_deleted, keep);
	return rc;
}

void redo_stats(redo_t *r, struct redo_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->writes = LOAD(&r->st_batches);
	out->ios = LOAD(&r->st_writes);
	out->records = LOAD(&r->st_records);
	out->bytes = LOAD(&r->st_bytes);
	out->syscalls = LOAD(&r->st_syscalls_done) + LOAD(&r->st_syscalls_now);
	out->cpu_ns = LOAD(&r->st_cpu_ns);
	out->notified = LOAD(&r->st_notified);
	out->segments_created = LOAD(&r->st_seg_created);
	out->segments_deleted = LOAD(&r->st_seg_deleted);
	out->marks = LOAD(&r->st_marks);
	out->backend = r->backend_name ? r->backend_name : "none";
}
