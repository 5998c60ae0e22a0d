/*
 * redo_int.h - the redo log's on-disk format, shared by the log writer
 * (redo.c), the segment files (redo_seg.c) and replay (redo_replay.c).
 * Private to src/store/redo*.c; the log's users see redo.h.
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
 */
#ifndef LOTUS_REDO_INT_H
#define LOTUS_REDO_INT_H
#include <stddef.h>
#include <stdint.h>
#include "common/common.h"

#define REDO_BLOCK        4096u
#define REDO_MAX_PAYLOAD  (16u << 20)
#define REDO_MAGIC        0x4f44524cu  /* "LRDO" */
#define REDO_SEGEND       0xfe         /* internal: the segment ends here */
#define SEG_MAGIC         0x4753524cu  /* "LRSG" */
#define SEG_VERSION       2            /* the newest segment format read and written */
#define SEG_VERSION_PLAIN 1            /* a segment created empty; 2: preallocated
					* (SEG_F_PREALLOC), so that an older lotus
					* refuses it as newer instead of taking its
					* zeros for damage */
#define SEG_HDR           REDO_BLOCK   /* LSNs [first, first + SEG_HDR): the header block */
#define SEG_SLOT          512u         /* two header copies, one per sector */
#define SEG_F_NEXT        1u           /* the next segment was created */
#define SEG_F_PREALLOC    2u           /* the file was zero-filled to its segment size before
					* its first record: zeros past the tail are not damage */

struct redo_hdr {
	uint32_t len;
	uint32_t crc;
	uint64_t lsn;
	uint64_t txn_id;
	uint8_t type;
	uint8_t zero[3];
	uint32_t magic;
};
/* The layouts below are read back by later builds: a change that trips one
 * of these needs a new format version, not a silent reinterpretation. */
_Static_assert(sizeof(struct redo_hdr) == 32, "record header is 32 bytes");
_Static_assert(sizeof(struct redo_hdr) % 8 == 0, "records stay 8-byte aligned");
_Static_assert(offsetof(struct redo_hdr, len) == 0, "len at 0");
_Static_assert(offsetof(struct redo_hdr, crc) == 4, "crc at 4");
_Static_assert(offsetof(struct redo_hdr, lsn) == 8, "lsn at 8");
_Static_assert(offsetof(struct redo_hdr, txn_id) == 16, "txn_id at 16");
_Static_assert(offsetof(struct redo_hdr, type) == 24, "type at 24");
_Static_assert(offsetof(struct redo_hdr, zero) == 25, "zero at 25");
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
_Static_assert(sizeof(struct seg_hdr) <= SEG_SLOT, "a header copy fits its sector");
_Static_assert(offsetof(struct seg_hdr, magic) == 0, "magic at 0");
_Static_assert(offsetof(struct seg_hdr, version) == 4, "version at 4");
_Static_assert(offsetof(struct seg_hdr, hdr_bytes) == 6, "hdr_bytes at 6");
_Static_assert(offsetof(struct seg_hdr, first) == 8, "first at 8");
_Static_assert(offsetof(struct seg_hdr, seq) == 16, "seq at 16");
_Static_assert(offsetof(struct seg_hdr, mark) == 24, "mark at 24");
_Static_assert(offsetof(struct seg_hdr, flags) == 32, "flags at 32");
_Static_assert(offsetof(struct seg_hdr, crc) == 36, "crc at 36");

static inline uint64_t rec_size(uint32_t len)
{
	return ALIGN_UP((uint64_t)sizeof(struct redo_hdr) + len, 8);
}

/* ---- segment files (redo_seg.c) ---- */

/* DIR/redo-<first, 16 hex>.log into out. */
void seg_path(char *out, size_t n, const char *dir, uint64_t first);
/* The first LSNs of the segments in dir, sorted.  *out is malloc'ed. */
int seg_list(const char *dir, uint64_t **out, size_t *n);
/* Fill copy slot (0 or 1) of the header block blk. */
void seghdr_put(unsigned char *blk, unsigned slot, uint64_t first, uint64_t seq, uint64_t mark,
		uint32_t flags);
/* A new segment's header block: both copies alike (flags SEG_F_*). */
void seghdr_init(unsigned char *blk, uint64_t first, uint64_t mark);
void seghdr_init_flags(unsigned char *blk, uint64_t first, uint64_t mark, uint32_t flags);

enum { SEG_V1 = 1, SEG_V0 = 0, SEG_BAD = -1, SEG_NEWER = -2 };

/* What the first size bytes p of the segment starting at first hold: SEG_V1
 * (*out: the newest good copy), SEG_V0 (the format before headers: a record
 * at offset 0), SEG_NEWER (a header of a later format: out->version is it),
 * or SEG_BAD. */
int seghdr_get(const unsigned char *p, size_t size, uint64_t first, struct seg_hdr *out);
/* Write the header block blk at offset 0 of fd and make it durable. */
int seghdr_write(int fd, const unsigned char *blk, int odsync);

#endif
