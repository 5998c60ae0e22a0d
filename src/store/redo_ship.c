/*
 * redo_ship.c - the redo log's stream as replication sees it (redo.h,
 * "replication"; docs/replication.md): one record of a byte stream checked
 * where it stands, and the stream read back from the segment files, for a
 * backup that catches up.  The writer's side (the ship hook, raw appends)
 * is in redo.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "common/common.h"
#include "common/crc32c.h"
#include "store/redo.h"
#include "store/redo_int.h"

_Static_assert(REDO_SEGEND_TYPE == REDO_SEGEND, "redo.h names SEGEND's type");

int64_t redo_stream_record(const void *p, size_t n, uint64_t pos, struct redo_rec *out)
{
	struct redo_hdr h;
	if (n < sizeof(h))
		return 0;
	memcpy(&h, p, sizeof(h));
	if (h.magic != REDO_MAGIC || h.type == 0 || h.len > REDO_MAX_PAYLOAD ||
	    h.lsn != pos + rec_size(h.len))
		return -EINVAL;
	if (n < rec_size(h.len))
		return 0;
	uint32_t want = h.crc;
	h.crc = 0;
	uint32_t c = crc32c(0, (const unsigned char *)p + sizeof(h), h.len);
	if (crc32c(c, &h, sizeof(h)) != want)
		return -EINVAL;
	out->type = h.type;
	out->txn_id = h.txn_id;
	out->lsn = h.lsn;
	out->payload = (const unsigned char *)p + sizeof(h);
	out->len = h.len;
	return (int64_t)rec_size(h.len);
}

uint64_t redo_after_segend(uint64_t lsn)
{
	return ALIGN_UP(lsn, (uint64_t)REDO_BLOCK) + SEG_HDR;
}

int redo_read_stream(const char *dir, uint64_t from, uint64_t to, void *buf)
{
	uint64_t *segs = NULL;
	size_t n = 0;
	int rc = seg_list(dir, &segs, &n);
	if (rc)
		return rc;
	unsigned char *out = buf;
	memset(out, 0, (size_t)(to - from));
	if (!n || segs[0] > from) {
		free(segs);
		return -ENOENT;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		uint64_t first = segs[i], end = i + 1 < n ? segs[i + 1] : UINT64_MAX;
		uint64_t lo = MAX(from, first + SEG_HDR), hi = MIN(to, end);
		if (lo >= hi)
			continue;
		char path[4200];
		seg_path(path, sizeof(path), dir, first);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;   /* deleted under us by a checkpoint: -ENOENT */
			break;
		}
		for (uint64_t at = lo; at < hi;) {
			ssize_t got = pread(fd, out + (at - from), (size_t)(hi - at),
					    (off_t)(at - first));
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				rc = -errno;
			if (got <= 0)
				break;   /* past the file's end: zeroes, as the stream skips them */
			at += (uint64_t)got;
		}
		close(fd);
	}
	free(segs);
	return rc;
}
