/*
 * redo_replay.c - recovery: replay of the redo log, with torn-tail cutting
 * and the damage policy of redo.h's redo_replay_mode().
 *
 * Replay walks the segments from the one holding from_lsn (the checkpoint's
 * LSN) on, each mmap'ed read-only, calling the callback for every valid
 * record past from_lsn and following SEGEND records to the next file (the
 * format: redo_int.h).  It writes to the log directory only to cut: to
 * truncate a torn tail, rename the segments past a cut *.cut, lower a
 * segment's watermark, or create the segment appending resumes in.
 *
 * Torn tail or damage (replay_damage, tail_damage).  Where replay finds no
 * valid record it scans ahead for valid records with higher LSNs.  Only a
 * write that never completed may be cut silently, and it can leave only
 * whole 512-byte sectors unwritten (zero) at the end of the stream, with the
 * file size not moved past it; valid records after the damage, or an end that
 * does not look like that, is damage: refused unless --recovery-mode says
 * otherwise (see redo.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "store/redo.h"
#include "store/redo_int.h"

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

/* Was sg zero-filled to its segment size when created (redo.c)? */
static int seg_zeroed(const struct replay_seg *sg)
{
	return sg->format == SEG_V1 && (sg->hdr.flags & SEG_F_PREALLOC);
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
	if (seg_zeroed(sg)) {
		/* a preallocated segment keeps its size; whatever lies past pos
		 * (what a torn last batch left) becomes zeros again, or the
		 * writer's next records could line up with stale ones */
		if (dirty) {
			static const unsigned char zero[64 * 1024];
			for (uint64_t o = off; o < sg->size; o += sizeof(zero)) {
				size_t n = (size_t)MIN((uint64_t)sizeof(zero), sg->size - o);
				if (pwrite(sg->fd, zero, n, (off_t)o) != (ssize_t)n) {
					int err = errno ? -errno : -EIO;
					log_error("redo: cannot cut %s at %" PRIu64 ": %s", path,
						  off, strerror(-err));
					return err;
				}
			}
			if (fsync(sg->fd)) {
				int err = -errno;
				log_error("redo: cannot cut %s at %" PRIu64 ": %s", path, off,
					  strerror(-err));
				return err;
			}
		}
	} else if (dirty || sg->size % REDO_BLOCK) {
		/* Cut at the end of the block holding pos, zero past pos: the file
		 * keeps the shape the writer gives it (whole 4 KiB blocks). */
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
	/* a preallocated segment holds zeros to its end: only non-zero bytes
	 * past pos count (below) */
	if (!seg_zeroed(sg) && off + REDO_BLOCK <= size)
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
	if (seg_zeroed(sg) && idx + 1 == n && hseg == idx && *pos >= from_lsn && *pos >= mark) {
		/* A preallocated segment is overwritten in place, so a batch the
		 * crash tore can leave later blocks written and an earlier one not
		 * (an extending write cannot: the size moves when it completed).
		 * Above the header's mark and in the last segment (the writer
		 * creates the next one only after this one's writes completed),
		 * the records past the gap are that batch's: never acknowledged.
		 * Cut, zeroing. */
		log_warn("redo: torn last write in %s at LSN %" PRIu64 " (file offset %" PRIu64
			 "): records up to LSN %" PRIu64 " past the gap were never acknowledged; "
			 "cut", path, *pos, off, hi);
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
			if (sg.format == SEG_NEWER)
				log_error("redo: %s was written by a newer lotus: segment format "
					  "version %u, and this lotus reads versions 0 to %d.  Refusing "
					  "to start: run the newer lotus", path, sg.hdr.version,
					  SEG_VERSION);
			else
				log_error("redo: %s has no valid segment header (format %d, both copies "
					  "at file offsets 0 and 512 fail their checks) and does not "
					  "start with a record: it is damaged.  Refusing to start.  "
					  "Restore the data directory", path, SEG_VERSION);
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
