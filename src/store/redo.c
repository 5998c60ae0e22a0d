/*
 * redo.c - the redo log: group commit through one log writer thread, segment
 * files, CRC32C-checked records, replay with torn-tail cutting.
 *
 * The stream.  An LSN is a byte offset in the log stream; a record's LSN is
 * the offset just past its (8-byte aligned) end.  Every record is
 *
 *   | len u32 | crc u32 | lsn u64 | txn_id u64 | type u8 | 0 0 0 | magic u32 | payload | pad |
 *
 * crc = crc32c(crc32c(0, payload), header with crc = 0).  A record is valid at
 * stream position pos iff magic matches, type != 0, len <= REDO_MAX_PAYLOAD,
 * lsn == pos + size and the CRC matches; so zeroes, stale bytes of an older
 * lap of the buffer and half-copied records are all invalid.
 *
 * Segments.  DIR/redo-<first lsn, 16 hex>.log holds the stream from its first
 * LSN (always a multiple of 4 KiB) on; file offset = lsn - first.  Records
 * never span segments.  When the current segment has grown past
 * segment_bytes, the next append first appends a SEGEND record (internal
 * type) and moves the tail to ALIGN_UP(that record's LSN, 4 KiB) + SEG_HDR;
 * ALIGN_UP(...) is the next segment's first LSN, the bytes in between belong
 * to no segment.  Replay follows SEGEND to the next file; a stream that ends
 * without SEGEND ends the log.
 *
 * Segment header (format 1; format 0 had none and is still read).  The LSNs
 * [first, first + 4 KiB) of a segment are its header block: two copies of
 * struct seg_hdr, at file offsets 0 and 512, the one with the higher seq and a
 * good CRC counting.  Its mark is an LSN the log was durable up to; the writer
 * rewrites it (alternating copies, so a torn write leaves the other) at most
 * every mark_ms after an acknowledged batch and when idle, and at a clean
 * close; never in a commit's path.  When it moves to a new segment it creates
 * it (header written, directory fsynced) and then sets SEG_F_NEXT in the old
 * header, before any record of the new one is written.  So, after a crash:
 *   - the log reaches at least the highest mark, and past a segment with
 *     SEG_F_NEXT there is a next segment;
 *   - a segment file is a whole number of 4 KiB blocks (the writer writes
 *     whole blocks; replay_cut keeps it so).
 * A log that breaks one of these was cut, not torn: strict recovery refuses.
 *
 * Torn tail or damage (replay_damage, tail_damage).  Where replay finds no
 * valid record it scans ahead for valid records with higher LSNs.  Only a
 * write that never completed may be cut silently, and it can leave only
 * whole 512-byte sectors unwritten (zero) at the end of the stream, with the
 * file size not moved past it; valid records after the damage, or an end that
 * does not look like that, is damage: refused unless --recovery-mode says
 * otherwise (see redo.h).
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "store/redo.h"

#define REDO_BLOCK        4096u
#define REDO_MAX_PAYLOAD  (16u << 20)
#define REDO_MAGIC        0x4f44524cu  /* "LRDO" */
#define REDO_SEGEND       0xfe         /* internal: the segment ends here */
#define REDO_DEF_SEGMENT  (64ull << 20)
#define REDO_DEF_WRITE    (1u << 20)
#define REDO_MAX_BOUNDS   64
#define REDO_CTX_FILES    16           /* recreate the writer's ring after this many files */
#define ALIGN_DOWN_BLOCK(x) ((x) & ~(uint64_t)(REDO_BLOCK - 1))
#define SEG_MAGIC         0x4753524cu  /* "LRSG" */
#define SEG_VERSION       1
#define SEG_HDR           REDO_BLOCK   /* LSNs [first, first + SEG_HDR): the header block */
#define SEG_SLOT          512u         /* two header copies, one per sector */
#define SEG_F_NEXT        1u           /* the next segment was created */
#define REDO_DEF_MARK_MS  100u         /* a watermark at most this often */

struct redo_hdr {
	uint32_t len;
	uint32_t crc;
	uint64_t lsn;
	uint64_t txn_id;
	uint8_t type;
	uint8_t zero[3];
	uint32_t magic;
};
_Static_assert(sizeof(struct redo_hdr) == 32, "record header is 32 bytes");
_Static_assert(offsetof(struct redo_hdr, lsn) == 8, "lsn at 8");
_Static_assert(offsetof(struct redo_hdr, magic) == 28, "magic at 28");

/* A segment's header (format 1), one copy in each of the first two sectors of
 * the file; the copy with the higher seq and a good CRC counts.  mark: the log
 * was durable at least up to this LSN when the copy was written. */
struct seg_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t hdr_bytes;   /* SEG_HDR */
	uint64_t first;
	uint64_t seq;
	uint64_t mark;
	uint32_t flags;       /* SEG_F_* */
	uint32_t crc;         /* crc32c of this struct with crc = 0 */
};
_Static_assert(sizeof(struct seg_hdr) == 40, "segment header is 40 bytes");
_Static_assert(offsetof(struct seg_hdr, mark) == 24, "mark at 24");

static inline uint64_t rec_size(uint32_t len)
{
	return ALIGN_UP((uint64_t)sizeof(struct redo_hdr) + len, 8);
}

/* ---- segment names ---- */

static void seg_path(char *out, size_t n, const char *dir, uint64_t first)
{
	snprintf(out, n, "%s/redo-%016" PRIx64 ".log", dir, first);
}

static int seg_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The first LSNs of the segments in dir, sorted.  *out is malloc'ed. */
static int seg_list(const char *dir, uint64_t **out, size_t *n)
{
	DIR *d = opendir(dir);
	size_t cap = 16, cnt = 0;
	uint64_t *v = malloc(cap * sizeof(*v));
	if (!d || !v) {
		int err = d ? -ENOMEM : -errno;
		if (d)
			closedir(d);
		free(v);
		return err;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		char hex[17];
		if (strlen(e->d_name) != 25 || strncmp(e->d_name, "redo-", 5) ||
		    strcmp(e->d_name + 21, ".log"))
			continue;
		memcpy(hex, e->d_name + 5, 16);
		hex[16] = '\0';
		char *end;
		uint64_t first = strtoull(hex, &end, 16);
		if (*end)
			continue;
		if (cnt == cap) {
			uint64_t *nv = realloc(v, (cap *= 2) * sizeof(*v));
			if (!nv) {
				closedir(d);
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[cnt++] = first;
	}
	closedir(d);
	qsort(v, cnt, sizeof(*v), seg_cmp);
	*out = v;
	*n = cnt;
	return 0;
}

/* ---- segment headers ---- */

/* Fill copy slot (0 or 1) of the header block blk. */
static void seghdr_put(unsigned char *blk, unsigned slot, uint64_t first, uint64_t seq,
		       uint64_t mark, uint32_t flags)
{
	struct seg_hdr h = { .magic = SEG_MAGIC, .version = SEG_VERSION, .hdr_bytes = SEG_HDR,
			     .first = first, .seq = seq, .mark = mark, .flags = flags };
	h.crc = crc32c(0, &h, sizeof(h));
	memset(blk + slot * SEG_SLOT, 0, SEG_SLOT);
	memcpy(blk + slot * SEG_SLOT, &h, sizeof(h));
}

/* A new segment's header block: both copies alike. */
static void seghdr_init(unsigned char *blk, uint64_t first, uint64_t mark)
{
	memset(blk, 0, SEG_HDR);
	seghdr_put(blk, 0, first, 1, mark, 0);
	seghdr_put(blk, 1, first, 1, mark, 0);
}

enum { SEG_V1 = 1, SEG_V0 = 0, SEG_BAD = -1, SEG_NEWER = -2 };

/* What the first size bytes p of the segment starting at first hold: SEG_V1
 * (*out: the newest good copy), SEG_V0 (the format before headers: a record
 * at offset 0), SEG_NEWER (a header of a later format), or SEG_BAD. */
static int seghdr_get(const unsigned char *p, size_t size, uint64_t first, struct seg_hdr *out)
{
	int found = 0, newer = 0;
	for (unsigned slot = 0; slot < 2 && (slot + 1) * SEG_SLOT <= size; slot++) {
		struct seg_hdr h;
		memcpy(&h, p + slot * SEG_SLOT, sizeof(h));
		uint32_t want = h.crc;
		h.crc = 0;
		if (h.magic != SEG_MAGIC || crc32c(0, &h, sizeof(h)) != want)
			continue;
		h.crc = want;
		if (h.version != SEG_VERSION) {
			newer |= h.version > SEG_VERSION;
			continue;
		}
		if (h.first != first || h.hdr_bytes != SEG_HDR)
			continue;
		if (!found || h.seq > out->seq)
			*out = h;
		found = 1;
	}
	if (found)
		return SEG_V1;
	if (newer)
		return SEG_NEWER;
	struct redo_hdr r;
	if (size >= sizeof(r)) {
		memcpy(&r, p, sizeof(r));
		if (r.magic == REDO_MAGIC && r.type && r.len <= REDO_MAX_PAYLOAD &&
		    r.lsn == first + rec_size(r.len))
			return SEG_V0;
	}
	return SEG_BAD;
}

/* Write the header block blk at offset 0 of fd and make it durable. */
static int seghdr_write(int fd, const unsigned char *blk, int odsync)
{
	ssize_t n = pwrite(fd, blk, SEG_HDR, 0);
	if (n != (ssize_t)SEG_HDR)
		return n < 0 ? -errno : -ENOSPC;
	if (!odsync && fdatasync(fd))
		return -errno;
	return 0;
}

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

int redo_append(redo_t *r, uint8_t type, uint64_t txn_id, const void *payload, uint32_t len,
		uint64_t *lsn)
{
	if (len > REDO_MAX_PAYLOAD)
		return -E2BIG;
	if (type == 0 || type == REDO_SEGEND || (len && !payload))
		return -EINVAL;
	uint32_t pcrc = len ? crc32c(0, payload, len) : 0;
	uint64_t size = rec_size(len);
	pthread_mutex_lock(&r->mu);
	int rc = r->failed ? LOTUS_EREADONLY : 0;
	if (!rc && r->tail - r->seg_first >= r->segment_bytes)
		rc = roll_segment(r);
	if (!rc)
		rc = wait_space(r, size);
	if (!rc) {
		uint64_t end = put_record(r, type, txn_id, payload, len, pcrc);
		r->records_appended++;
		if (lsn)
			*lsn = end;
		if (r->writer_idle) {
			r->writer_idle = 0;
			pthread_cond_signal(&r->work_cv);
		}
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
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
	return rc;
}

int redo_wait(redo_t *r, uint64_t lsn)
{
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

/* Open the segment starting at first; create: a new one, its header (mark)
 * durable before its name is. */
static int seg_open(struct redo *r, uint64_t first, int create, uint64_t mark)
{
	char path[4200];
	seg_path(path, sizeof(path), r->dir, first);
	int flags = O_RDWR | (create ? O_CREAT | O_EXCL : 0) | (r->use_odsync ? O_DSYNC : 0);
	int fd = io_open_direct(path, flags, 0644);
	if (fd < 0)
		return fd;
	if (create) {
		unsigned char *blk = NULL;
		int rc = posix_memalign((void **)&blk, REDO_BLOCK, SEG_HDR) ? -ENOMEM : 0;
		if (!rc) {
			seghdr_init(blk, first, mark);
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
	seghdr_init(r->hblk, first, old_end);
	r->cur_v1 = 1;
	r->hseq = 1;
	r->hmark = old_end;
	r->hflags = 0;
	return 0;
}

/* Write the stream range [start, end) (4K aligned) as <= max_write pieces,
 * moving to the next segment at a boundary.  0 or -errno. */
static int write_range(struct redo *r, uint64_t start, uint64_t end,
		       const struct seg_bound *bounds, unsigned nb)
{
	struct io_cqe cqes[64];
	uint64_t pos = start;
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
			off_t foff = (off_t)(pos - r->cur_first);
			int rc = r->use_odsync
				? io_prep_write(r->ctx, r->cur_file, r->ring + roff, len, foff, len)
				: io_prep_write_dsync(r->ctx, r->cur_file, r->ring + roff, len, foff,
						      len);
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
	log_error("redo: log write of LSN %" PRIu64 "..%" PRIu64 " in %s failed: %s; the log is "
		  "read-only from now on (commits waiting for it fail with LOTUS_EDURABLE)",
		  start, end, r->dir, strerror(-err));
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
		while (!r->failed && !r->stop && r->tail == durable) {
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
		unsigned nb = r->nbounds;
		memcpy(bounds, r->bounds, nb * sizeof(bounds[0]));
		recs_done = r->records_appended;
		pthread_mutex_unlock(&r->mu);

		if (r->delay_ms) {
			struct timespec ts = { r->delay_ms / 1000, (long)(r->delay_ms % 1000) * 1000000L };
			nanosleep(&ts, NULL);
		}
		uint64_t cpu0 = clock_thread_cpu_ns();
		uint64_t start = ALIGN_DOWN_BLOCK(durable);
		rc = write_range(r, start, ALIGN_UP(end, (uint64_t)REDO_BLOCK), bounds, nb);
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
		int fd = seg_open(r, first, 1, next_lsn);
		if (fd < 0)
			return fd;
		r->cur_fd = fd;
		r->cur_first = r->seg_first = first;
		r->tail = r->durable = r->floor = first + SEG_HDR;
		seghdr_init(r->hblk, first, next_lsn);
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
	r->cur_fd = -1;
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
	pthread_cond_destroy(&r->work_cv);
	pthread_cond_destroy(&r->space_cv);
	pthread_cond_destroy(&r->durable_cv);
	free(r->heap);
	free(r->segs);
	free(r->hblk);
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

/* ---- replay ---- */

struct replay_seg {
	uint64_t first;
	int fd;
	const unsigned char *map;
	size_t size;
	int format;           /* SEG_V1, SEG_V0, SEG_NEWER, SEG_BAD (seghdr_get) */
	struct seg_hdr hdr;   /* SEG_V1: its newest good copy */
};

static int replay_map(const char *dir, uint64_t first, struct replay_seg *sg)
{
	char path[4200];
	seg_path(path, sizeof(path), dir, first);
	sg->first = first;
	sg->map = NULL;
	sg->size = 0;
	sg->fd = open(path, O_RDWR | O_CLOEXEC);
	if (sg->fd < 0) {
		int err = -errno;
		log_error("redo: open %s: %s", path, strerror(errno));
		return err;
	}
	struct stat stt;
	if (fstat(sg->fd, &stt)) {
		int err = -errno;
		close(sg->fd);
		return err;
	}
	sg->size = (size_t)stt.st_size;
	if (sg->size) {
		void *m = mmap(NULL, sg->size, PROT_READ, MAP_PRIVATE, sg->fd, 0);
		if (m == MAP_FAILED) {
			int err = -errno;
			close(sg->fd);
			return err;
		}
		madvise(m, sg->size, MADV_SEQUENTIAL);
		sg->map = m;
	}
	memset(&sg->hdr, 0, sizeof(sg->hdr));
	sg->format = seghdr_get(sg->map, sg->size, first, &sg->hdr);
	return 0;
}

/* Where the records of sg start. */
static uint64_t replay_start(const struct replay_seg *sg)
{
	return sg->first + (sg->format == SEG_V1 ? SEG_HDR : 0);
}

/* Rewrite the header of sg (format 1) to say mark, without SEG_F_NEXT. */
static int replay_lower_mark(const char *path, const struct replay_seg *sg, uint64_t mark)
{
	unsigned char blk[2 * SEG_SLOT];
	memset(blk, 0, sizeof(blk));
	seghdr_put(blk, 0, sg->first, sg->hdr.seq + 1, mark, sg->hdr.flags & ~SEG_F_NEXT);
	seghdr_put(blk, 1, sg->first, sg->hdr.seq + 1, mark, sg->hdr.flags & ~SEG_F_NEXT);
	if (pwrite(sg->fd, blk, sizeof(blk), 0) != (ssize_t)sizeof(blk) || fsync(sg->fd)) {
		int err = errno ? -errno : -EIO;
		log_error("redo: cannot rewrite the header of %s: %s", path, strerror(-err));
		return err;
	}
	return 0;
}

/* The highest watermark in the headers of segs[idx..n): the log was durable
 * at least up to it (0: none, format-0 segments only).  *at: its segment. */
static uint64_t log_mark(const char *dir, const uint64_t *segs, size_t n, size_t idx,
			 uint64_t *at)
{
	uint64_t mark = 0;
	*at = 0;
	for (size_t j = idx; j < n; j++) {
		char path[4200];
		unsigned char blk[2 * SEG_SLOT];
		struct seg_hdr h = { 0 };
		seg_path(path, sizeof(path), dir, segs[j]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t got = pread(fd, blk, sizeof(blk), 0);
		close(fd);
		if (got > 0 && seghdr_get(blk, (size_t)got, segs[j], &h) == SEG_V1 && h.mark > mark) {
			mark = h.mark;
			*at = segs[j];
		}
	}
	return mark;
}

static void replay_unmap(struct replay_seg *sg)
{
	if (sg->map)
		munmap((void *)sg->map, sg->size);
	if (sg->fd >= 0)
		close(sg->fd);
	sg->fd = -1;
	sg->map = NULL;
}

/* The record at stream position pos of sg, or NULL if there is no valid one. */
static const struct redo_hdr *replay_record(const struct replay_seg *sg, uint64_t pos)
{
	uint64_t off = pos - sg->first;
	if (off + sizeof(struct redo_hdr) > sg->size)
		return NULL;
	struct redo_hdr h;
	memcpy(&h, sg->map + off, sizeof(h));
	if (h.magic != REDO_MAGIC || h.type == 0 || h.len > REDO_MAX_PAYLOAD ||
	    h.lsn != pos + rec_size(h.len) || off + sizeof(h) + h.len > sg->size)
		return NULL;
	uint32_t want = h.crc;
	h.crc = 0;
	uint32_t c = crc32c(0, sg->map + off + sizeof(h), h.len);
	if (crc32c(c, &h, sizeof(h)) != want)
		return NULL;
	return (const struct redo_hdr *)(sg->map + off);
}

static int all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* The log ends at pos inside sg: cut the garbage after it and set aside any
 * later segment (it can only hold records that were never acknowledged). */
static int replay_cut(const char *dir, struct replay_seg *sg, uint64_t pos, const uint64_t *segs,
		      size_t n, size_t idx, uint64_t *cut_bytes)
{
	uint64_t off = pos - sg->first, keep = ALIGN_UP(off, (uint64_t)REDO_BLOCK);
	char path[4200];
	seg_path(path, sizeof(path), dir, sg->first);
	size_t rest = sg->size > off ? sg->size - off : 0;
	int dirty = rest && !all_zero(sg->map + off, rest);
	if (dirty) {
		log_warn("redo: torn or corrupt log tail in %s at LSN %" PRIu64 " (file offset %"
			 PRIu64 "): cut %zu bytes; the log resumes at LSN %" PRIu64, path, pos, off,
			 rest, pos);
		*cut_bytes += rest;
	}
	/* Cut at the end of the block holding pos, zero past pos: the file
	 * keeps the shape the writer gives it (whole 4 KiB blocks). */
	if (dirty || sg->size % REDO_BLOCK) {
		static const unsigned char zero[REDO_BLOCK];
		if ((keep > off && pwrite(sg->fd, zero, keep - off, (off_t)off) != (ssize_t)(keep - off)) ||
		    ftruncate(sg->fd, (off_t)keep) || fsync(sg->fd)) {
			int err = errno ? -errno : -EIO;
			log_error("redo: cannot cut %s at %" PRIu64 ": %s", path, off, strerror(-err));
			return err;
		}
	}
	/* the header must not claim more than is left */
	if (sg->format == SEG_V1 && (sg->hdr.mark > pos || (sg->hdr.flags & SEG_F_NEXT))) {
		int rc = replay_lower_mark(path, sg, pos);
		if (rc)
			return rc;
	}
	for (size_t j = idx + 1; j < n; j++) {
		char p2[4200], cut[4300];
		struct stat stt;
		seg_path(p2, sizeof(p2), dir, segs[j]);
		snprintf(cut, sizeof(cut), "%s.cut", p2);
		if (stat(p2, &stt) == 0)
			*cut_bytes += (uint64_t)stt.st_size;
		log_warn("redo: segment %s lies past the end of the log at LSN %" PRIu64
			 " (its records were never acknowledged): renamed to %s", p2, pos, cut);
		if (rename(p2, cut)) {
			int err = -errno;
			log_error("redo: rename %s: %s", p2, strerror(errno));
			return err;
		}
	}
	return fsync_dir(dir);
}

/* A SEGEND whose next segment was never created: create it (empty) so that
 * redo_open continues in the right file. */
static int replay_make_segment(const char *dir, uint64_t first)
{
	char path[4200];
	unsigned char blk[SEG_HDR];
	seg_path(path, sizeof(path), dir, first);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	seghdr_init(blk, first, first);
	int rc = pwrite(fd, blk, sizeof(blk), 0) == (ssize_t)sizeof(blk) && !fsync(fd) ? 0
		 : errno ? -errno : -EIO;
	close(fd);
	return rc ?: fsync_dir(dir);
}

/* The highest LSN of a valid record past the damage at pos of segment idx,
 * in that segment or a later one (0: none).  *next_valid: where the first
 * valid record after pos in the same segment starts (UINT64_MAX: none);
 * *hi_seg: the segment index of the highest one. */
static uint64_t scan_seg(const struct replay_seg *sg, uint64_t from, uint64_t *first)
{
	uint64_t hi = 0, end = sg->first + sg->size;
	uint32_t magic = REDO_MAGIC;
	*first = UINT64_MAX;
	for (uint64_t q = ALIGN_UP(from, 8); q + sizeof(struct redo_hdr) <= end; q += 8) {
		if (memcmp(sg->map + (q - sg->first) + offsetof(struct redo_hdr, magic), &magic, 4))
			continue;
		const struct redo_hdr *h = replay_record(sg, q);
		if (!h)
			continue;
		if (*first == UINT64_MAX)
			*first = q;
		hi = h->lsn;
		q = h->lsn - 8;
	}
	return hi;
}

static uint64_t scan_ahead(const char *dir, const struct replay_seg *sg, uint64_t pos,
			   const uint64_t *segs, size_t n, size_t idx, uint64_t *next_valid,
			   size_t *hi_seg)
{
	uint64_t hi = scan_seg(sg, pos + 8, next_valid), unused;
	*hi_seg = idx;
	for (size_t j = idx + 1; j < n; j++) {
		struct replay_seg later = { .fd = -1 };
		if (replay_map(dir, segs[j], &later))
			continue;
		uint64_t h = later.map ? scan_seg(&later, later.first, &unused) : 0;
		replay_unmap(&later);
		if (h > hi) {
			hi = h;
			*hi_seg = j;
		}
	}
	return hi;
}

/*
 * Nothing valid follows pos: is the end of sg at pos what a crash leaves, or
 * damage?  A write that did not complete leaves every 512-byte sector either
 * written or as it was; and what it was, past the durable end, is zero (a new
 * file's blocks, and the ring is zeroed past the tail).  An extending O_DIRECT
 * write moves the file size only once it completed.  So after a crash:
 *   - the last 4 KiB block of the file holds the end of the last completed
 *     write (a record ending in it), and a later segment with data means this
 *     one ended completely;
 *   - a partial record has a part that is all zero or past the end of the file.
 * Anything else is damage.  Returns NULL (a torn tail, cut) or why not.
 */
static const char *tail_damage(const struct replay_seg *sg, uint64_t pos, const char *dir,
			       const uint64_t *segs, size_t n, size_t idx)
{
	uint64_t off = pos - sg->first, size = sg->size;
	if (size % REDO_BLOCK)
		return "its size is not a multiple of the 4 KiB write unit, which no crash of "
		       "this writer leaves (the file was cut)";
	if (off + REDO_BLOCK <= size)
		return "the file holds written 4 KiB blocks past its last valid record";
	for (size_t j = idx + 1; j < n; j++) {
		char path[4200];
		struct stat stt;
		seg_path(path, sizeof(path), dir, segs[j]);
		if (stat(path, &stt) == 0 && stt.st_size > 0)
			return "a later segment holds data, so this one was written completely";
	}
	if (off >= size || all_zero(sg->map + off, size - off))
		return NULL;   /* the clean end of the log */
	uint64_t extent = sizeof(struct redo_hdr);
	struct redo_hdr h;
	if (off + sizeof(h) <= size) {
		memcpy(&h, sg->map + off, sizeof(h));
		if (h.magic == REDO_MAGIC && h.type && h.len <= REDO_MAX_PAYLOAD &&
		    h.lsn == pos + rec_size(h.len))
			extent = rec_size(h.len);
	}
	if (off + extent > size)
		return NULL;   /* the record runs past the end of the file: partly missing */
	for (uint64_t a = off; a < off + extent; a = (a | 511) + 1) {
		uint64_t b = MIN((a | 511) + 1, off + extent);
		if (all_zero(sg->map + a, b - a))
			return NULL;   /* a sector of it was never written */
	}
	return extent > sizeof(struct redo_hdr)
	       ? "its last record is complete (no part of it is missing) but fails its checksum"
	       : "bytes after its last valid record are neither zero nor a record";
}

static const char *mode_name(enum redo_recovery mode)
{
	return mode == REDO_RECOVERY_POINT_IN_TIME ? "point-in-time"
	       : mode == REDO_RECOVERY_TOLERATE_TAIL ? "tolerate-tail" : "strict";
}

/*
 * No valid record at pos.  Is it the end of the log, or damage in its middle?
 *
 *   nothing valid follows                  -> torn tail: cut (never acknowledged)
 *   valid records follow, but the damaged  -> not needed (below the replay
 *     bytes end below from_lsn                start): skip to the next record
 *   valid records follow (higher LSNs)     -> damage, not a torn tail:
 *       strict (default)                      refuse: -EIO, nothing changed
 *       tolerate-tail, all in this segment    cut here, loudly
 *       point-in-time                         cut here, loudly, later segments set aside
 *
 * Returns 1 to go on at *pos, 0 when the log ends at *pos (cut done), or an error.
 */
static int replay_damage(const char *dir, struct replay_seg *sg, uint64_t *pos, uint64_t from_lsn,
			 enum redo_recovery mode, const uint64_t *segs, size_t n, size_t idx,
			 uint64_t mark, uint64_t mark_seg, struct redo_replay_stats *s)
{
	char path[4200];
	uint64_t nv, off = *pos - sg->first;
	size_t hseg;
	uint64_t hi = scan_ahead(dir, sg, *pos, segs, n, idx, &nv, &hseg);
	seg_path(path, sizeof(path), dir, sg->first);
	if (nv != UINT64_MAX && nv <= from_lsn) {
		log_warn("redo: %s is damaged at file offset %" PRIu64 " (LSN %" PRIu64 "..%" PRIu64
			 "), below LSN %" PRIu64 " where replay starts: not needed, skipped", path,
			 off, *pos, nv, from_lsn);
		s->skipped_bytes += nv - *pos;
		*pos = nv;
		return 1;
	}
	if (hi == 0) {
		if (*pos < from_lsn) {
			log_error("redo: the log in %s ends at LSN %" PRIu64 " (%s, file offset %"
				  PRIu64 "), before the checkpoint's LSN %" PRIu64 ": records are "
				  "missing", dir, *pos, path, off, from_lsn);
			return -EIO;
		}
		if (*pos < mark) {
			/* the log was durable past here once: a cut, not a crash */
			s->damaged_lsn = *pos;
			s->damaged_to_lsn = mark;
			if (mode == REDO_RECOVERY_STRICT) {
				log_error("redo: the log in %s ends at LSN %" PRIu64 " (%s, file offset %"
					  PRIu64 ", file size %zu), but the header of segment %016" PRIx64
					  " records that the log was durable up to LSN %" PRIu64 ": the "
					  "records of LSN %" PRIu64 "..%" PRIu64 ", acknowledged commits "
					  "among them, are missing.  A crash cannot leave this (the file "
					  "was cut or overwritten).  Refusing to start.  Restore the data "
					  "directory, or accept the loss with --recovery-mode tolerate-tail",
					  dir, *pos, path, off, sg->size, mark_seg, mark, *pos, mark);
				return -EIO;
			}
			log_warn("redo: --recovery-mode %s: the log in %s ends at LSN %" PRIu64 " (%s, "
				 "file offset %" PRIu64 ") but was durable up to LSN %" PRIu64 "; the "
				 "records of LSN %" PRIu64 "..%" PRIu64 " are lost: the database "
				 "recovers as of LSN %" PRIu64, mode_name(mode), dir, *pos, path, off,
				 mark, *pos, mark, *pos);
			return replay_cut(dir, sg, *pos, segs, n, idx, &s->cut_bytes) ?: 0;
		}
		const char *why = tail_damage(sg, *pos, dir, segs, n, idx);
		if (why && mode == REDO_RECOVERY_STRICT) {
			s->damaged_lsn = s->damaged_to_lsn = *pos;
			log_error("redo: the end of the log is damaged in %s at file offset %" PRIu64
				  " (LSN %" PRIu64 "): %s.  A crash cannot leave this, so records "
				  "after LSN %" PRIu64 " that were acknowledged may be lost.  Refusing "
				  "to start.  Restore the data directory, or accept the loss with "
				  "--recovery-mode tolerate-tail", path, off, *pos, why, *pos);
			return -EIO;
		}
		if (why)
			log_warn("redo: --recovery-mode %s: the end of the log is damaged in %s at "
				 "file offset %" PRIu64 " (LSN %" PRIu64 "): %s; cut there as requested",
				 mode_name(mode), path, off, *pos, why);
		return replay_cut(dir, sg, *pos, segs, n, idx, &s->cut_bytes) ?: 0;
	}
	s->damaged_lsn = *pos;
	s->damaged_to_lsn = hi;
	if (*pos < from_lsn || mode == REDO_RECOVERY_STRICT ||
	    (mode == REDO_RECOVERY_TOLERATE_TAIL && hseg != idx)) {
		log_error("redo: the log is damaged in %s at file offset %" PRIu64 " (LSN %" PRIu64
			  "), and valid records with higher LSNs follow%s, up to LSN %" PRIu64 ": "
			  "this is not a torn tail; recovering would drop the records of LSN %" PRIu64
			  "..%" PRIu64 ", acknowledged commits among them.  Refusing to start%s.  "
			  "Restore the data directory, or accept the loss with --recovery-mode "
			  "point-in-time (recovers up to LSN %" PRIu64 ")", path, off, *pos,
			  hseg != idx ? " in later segments" : "", hi, *pos, hi,
			  *pos < from_lsn ? " (the damage is below the checkpoint's LSN: no "
					    "recovery mode can help)" : "",
			  *pos);
		return -EIO;
	}
	log_warn("redo: --recovery-mode %s: the log is damaged in %s at file offset %" PRIu64
		 " (LSN %" PRIu64 "); dropping the records of LSN %" PRIu64 "..%" PRIu64
		 " as requested: the database recovers as of LSN %" PRIu64, mode_name(mode), path,
		 off, *pos, *pos, hi, *pos);
	return replay_cut(dir, sg, *pos, segs, n, idx, &s->cut_bytes) ?: 0;
}

int redo_replay(const char *dir, uint64_t from_lsn, redo_replay_fn cb, void *arg,
		struct redo_replay_stats *st, uint64_t *next_lsn)
{
	return redo_replay_mode(dir, from_lsn, REDO_RECOVERY_STRICT, cb, arg, st, next_lsn);
}

int redo_replay_mode(const char *dir, uint64_t from_lsn, enum redo_recovery mode,
		     redo_replay_fn cb, void *arg, struct redo_replay_stats *st, uint64_t *next_lsn)
{
	struct redo_replay_stats s = { 0 };
	uint64_t t0 = clock_now_ns(), *segs = NULL, pos = from_lsn;
	size_t n = 0;
	struct replay_seg sg = { .fd = -1 };
	int rc = seg_list(dir, &segs, &n);
	if (rc == -ENOENT) {
		rc = 0;   /* no directory: an empty log */
		n = 0;
	} else if (rc) {
		log_error("redo: cannot list %s: %s", dir, strerror(-rc));
		goto out;
	}
	if (n == 0) {
		/* a checkpoint keeps the segment holding its LSN: with one, an
		 * empty log directory lost its records */
		if (from_lsn > 0) {
			log_error("redo: recovery needs the log from LSN %" PRIu64 " (the checkpoint's) "
				  "but %s holds no log segment (redo-*.log): the records after the "
				  "checkpoint are gone.  Refusing to start.  Restore the data directory",
				  from_lsn, dir);
			rc = -ENOENT;
		}
		goto out;
	}
	size_t idx = 0;
	while (idx + 1 < n && segs[idx + 1] <= from_lsn)
		idx++;
	if (segs[idx] > from_lsn) {
		if (from_lsn == 0)
			log_error("redo: the log in %s starts at LSN %" PRIu64 " (redo-%016" PRIx64
				  ".log) but recovery needs it from LSN 0: there is no checkpoint "
				  "(MANIFEST missing) to hold the records before LSN %" PRIu64 ", and "
				  "recovering without them would serve a database with its tables "
				  "and older commits missing.  Refusing to start.  Restore the "
				  "MANIFEST and its pages-*.dat images, or the data directory", dir,
				  segs[idx], segs[idx], segs[idx]);
		else
			log_error("redo: recovery needs the log from LSN %" PRIu64 " but the oldest "
				  "segment in %s starts at %" PRIu64, from_lsn, dir, segs[idx]);
		rc = -ENOENT;
		goto out;
	}
	uint64_t mark_seg, mark = log_mark(dir, segs, n, idx, &mark_seg);
	for (;;) {
		rc = replay_map(dir, segs[idx], &sg);
		if (rc)
			goto out;
		if (sg.format != SEG_V1 && sg.format != SEG_V0) {
			char path[4200];
			seg_path(path, sizeof(path), dir, sg.first);
			if (sg.size == 0 && idx + 1 == n) {
				/* created, then a crash before its header was written */
				replay_unmap(&sg);
				if ((rc = replay_make_segment(dir, segs[idx])) != 0)
					goto out;
				continue;
			}
			log_error(sg.format == SEG_NEWER
				  ? "redo: %s was written by a newer lotus (segment format above %d): "
				    "this one cannot read it.  Refusing to start"
				  : "redo: %s has no valid segment header (format %d, both copies at "
				    "file offsets 0 and 512 fail their checks) and does not start with "
				    "a record: it is damaged.  Refusing to start.  Restore the data "
				    "directory", path, SEG_VERSION);
			rc = -EIO;
			goto out;
		}
		s.segments++;
		pos = replay_start(&sg);
		const struct redo_hdr *h;
		for (;;) {
			h = replay_record(&sg, pos);
			if (!h) {
				rc = replay_damage(dir, &sg, &pos, from_lsn, mode, segs, n, idx, mark,
						   mark_seg, &s);
				if (rc == 1)
					continue;
				goto out;
			}
			pos = h->lsn;
			if (h->type == REDO_SEGEND)
				break;
			if (pos > from_lsn) {
				s.records++;
				s.bytes += rec_size(h->len);
				rc = cb(arg, pos, h->type, h->txn_id, h + 1, h->len);
				if (rc)
					goto out;
			}
		}
		uint64_t next = ALIGN_UP(pos, (uint64_t)REDO_BLOCK);
		int had_next = sg.format == SEG_V1 && (sg.hdr.flags & SEG_F_NEXT);
		replay_unmap(&sg);
		if (idx + 1 < n && segs[idx + 1] == next) {
			idx++;
			continue;
		}
		if (had_next && idx + 1 == n) {
			char path[4200];
			seg_path(path, sizeof(path), dir, next);
			s.damaged_lsn = s.damaged_to_lsn = pos;
			if (mode == REDO_RECOVERY_STRICT) {
				log_error("redo: the log in %s ends at LSN %" PRIu64 " with the end of "
					  "segment %016" PRIx64 ", whose header records that the next "
					  "segment %s was created; it is missing, and with it the records "
					  "after LSN %" PRIu64 ", acknowledged commits among them.  A crash "
					  "cannot leave this.  Refusing to start.  Restore the data "
					  "directory, or accept the loss with --recovery-mode tolerate-tail",
					  dir, pos, segs[idx], path, pos);
				rc = -EIO;
				goto out;
			}
			log_warn("redo: --recovery-mode %s: segment %s, after LSN %" PRIu64 ", is "
				 "missing: the database recovers as of LSN %" PRIu64, mode_name(mode),
				 path, pos, pos);
		}
		pos = next;
		if (idx + 1 < n) {
			log_error("redo: segment %016" PRIx64 " ends with LSN %" PRIu64 " but the next "
				  "one starts at %016" PRIx64, segs[idx], next, segs[idx + 1]);
			rc = replay_map(dir, segs[idx], &sg);
			if (!rc)
				rc = replay_cut(dir, &sg, sg.first + sg.size, segs, n, idx,
						&s.cut_bytes);
			if (rc)
				goto out;
		}
		rc = replay_make_segment(dir, next);
		goto out;
	}
out:
	replay_unmap(&sg);
	free(segs);
	s.elapsed_ns = clock_now_ns() - t0;
	if (st)
		*st = s;
	if (next_lsn)
		*next_lsn = MAX(pos, from_lsn);
	return rc;
}
