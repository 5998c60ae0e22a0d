/*
 * os_layout.h - the memory layout of a one-sided region (the Sherman/Deft-style
 * baseline engine, docs/onesided.md), shared by the memory server that builds
 * it (os_region.c) and the compute side that reads and writes it by RMA
 * (os_engine.c).
 *
 * A region is a list of chunks, each one buffer allocated by UCX
 * (ucp_mem_map with UCP_MEM_MAP_ALLOCATE, so shared memory reaches it without
 * the target CPU) with its own rkey:
 *
 *   chunk 0:  [os_region_hdr][pages and records, bump-allocated from hdr.alloc]
 *   chunk i:  [os_region_hdr (magic OS_CHUNK_MAGIC; alloc, end)][pages, records]
 *
 * Every pointer inside the region is an absolute address in the memory
 * server's address space (what ucp_get_nbx/ucp_put_nbx take), 0 = none; a
 * pointer may name any chunk.  Each chunk has its own allocation cursor (its
 * header's alloc word, moved only by the compute servers' FAA).  The chunk
 * being allocated from is the last one: an FAA that returns past its end
 * means it is full, and the client asks the memory server (OP_OS_ATTACH with
 * the number of chunks it knows) for the next one, Sherman's chunk
 * allocator; the server adds a chunk only when the asker knows them all, so
 * concurrent askers get one new chunk between them.  The bytes an FAA took
 * past a chunk's end are never used.
 *
 * B+tree pages are 1 KiB.  A page carries its own lock word (CAS 0 -> 1 by an
 * inserter; 0 again by a put) and two copies of its version, at its first and
 * its last word: a writer puts a page with both raised by one, a reader
 * accepts a page only if the two are equal (Sherman's read-and-check) and
 * reads again otherwise.  Pages are B-link: [low, high) fences and a right
 * sibling, so a reader that lands left of its key (a split it did not see)
 * moves right.  Internal entry i points at the child holding keys in
 * [key_i, key_i+1).  Keys are 8-byte big-endian strings, compared as numbers.
 * A leaf entry whose ptr is 0 is a deleted key's mark: readers and scans
 * pass it by, an insert of that key fills it again.
 *
 * A record is a 16-byte header, then an 8-byte value length and the value:
 *   lock  bit 63 = writer; bits 0..31 = readers.  CAS to take, FAA -1 to drop
 *         a shared lock, a put of 0 to drop the exclusive one.  Bit 62 =
 *         deleted: the deleter's release puts OS_LOCK_DEAD instead of 0,
 *         after it marked the leaf entry, and the record is never locked
 *         again (whoever found it through an older copy of the leaf looks
 *         again).
 *   ts    the priority (timestamp) of the last transaction that took the lock,
 *         written after the CAS by WAIT_DIE transactions only.
 */
#ifndef LOTUS_OS_LAYOUT_H
#define LOTUS_OS_LAYOUT_H
#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#define OS_MAGIC        0x4f534c54u   /* "TLSO" */
#define OS_CHUNK_MAGIC  0x4b434f54u   /* "TOCK": the header of chunk 1, 2, ... */
#define OS_MAX_CHUNKS   32u           /* per table and server */
#define OS_PAGE_SIZE    1024u
#define OS_PAGE_ENTRIES 60u
#define OS_LOCK_W       (1ULL << 63)
#define OS_LOCK_READERS 0xffffffffULL
#define OS_LOCK_DEAD    (1ULL << 62)
#define OS_KEY_INF      UINT64_MAX    /* high fence of a rightmost page */

struct os_region_hdr {
	uint32_t magic;
	uint32_t value_max;       /* bytes of value room in every record */
	uint64_t root;            /* address of the root page (CAS on a root split) */
	uint64_t alloc;           /* next free byte, as an address (FAA to allocate) */
	uint64_t end;             /* first address past the region */
	uint64_t records;         /* at build time (chunk 0) */
	uint64_t pad[3];
};
static_assert(sizeof(struct os_region_hdr) == 64, "os_region_hdr size");
static_assert(offsetof(struct os_region_hdr, root) == 8, "os_region_hdr.root");
static_assert(offsetof(struct os_region_hdr, alloc) == 16, "os_region_hdr.alloc");

struct os_entry {
	uint64_t key;             /* host-order value of the big-endian key */
	uint64_t ptr;             /* child page (internal) or record (leaf) */
};

struct os_page {
	uint64_t lock;            /* 0 free, 1 held by an inserter */
	uint64_t front;           /* version, first copy */
	uint16_t level;           /* 0 = leaf */
	uint16_t count;
	uint32_t pad;
	uint64_t sibling;         /* right sibling, 0 = rightmost */
	uint64_t low, high;       /* keys in [low, high); high OS_KEY_INF: no bound */
	struct os_entry e[OS_PAGE_ENTRIES];
	uint64_t pad2;
	uint64_t rear;            /* version, second copy */
};
static_assert(sizeof(struct os_page) == OS_PAGE_SIZE, "os_page size");
static_assert(offsetof(struct os_page, e) == 48, "os_page.e");
static_assert(offsetof(struct os_page, rear) == OS_PAGE_SIZE - 8, "os_page.rear");

struct os_rec_hdr {
	uint64_t lock;
	uint64_t ts;
	uint64_t len;             /* value bytes that follow (the data starts here) */
};
static_assert(sizeof(struct os_rec_hdr) == 24, "os_rec_hdr size");
#define OS_REC_HDR   16u      /* the lock header proper: lock + ts */
#define OS_REC_DATA  16u      /* offset of the data (len, then the value) */

static inline uint64_t os_rec_size(uint32_t value_max)
{
	return (sizeof(struct os_rec_hdr) + value_max + 63) & ~63ULL;
}

/* The OP_OS_ATTACH reply value: where the region's chunks are and how to
 * reach them: an os_attach_info, then nchunks times an os_chunk_info and its
 * packed rkey bytes.  Chunk 0 holds the region header.  The request's value,
 * if 4 bytes, is the number of chunks the client knows and asks the server
 * to add one when that is all of them (the last is full). */
struct os_attach_info {
	uint32_t value_max;
	uint32_t nchunks;         /* 1..OS_MAX_CHUNKS */
};
static_assert(sizeof(struct os_attach_info) == 8, "os_attach_info size");

struct os_chunk_info {
	uint64_t base;            /* address of the chunk's os_region_hdr */
	uint64_t size;
	uint32_t rkey_len;        /* packed rkey bytes that follow */
	uint32_t pad;
};
static_assert(sizeof(struct os_chunk_info) == 24, "os_chunk_info size");

static inline uint64_t os_key_u64(const unsigned char k[8])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | k[i];
	return v;
}

#endif
