/*
 * redo_seg.c - the redo log's segment files: their names, the listing of a
 * log directory, and the two-copy segment header (format in redo_int.h).
 * Used by the log writer (redo.c) and by replay (redo_replay.c); the
 * functions keep no state and touch only what they are given.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/crc32c.h"
#include "store/redo_int.h"

/* ---- segment names ---- */

void seg_path(char *out, size_t n, const char *dir, uint64_t first)
{
	snprintf(out, n, "%s/redo-%016" PRIx64 ".log", dir, first);
}

static int seg_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The first LSNs of the segments in dir, sorted.  *out is malloc'ed. */
int seg_list(const char *dir, uint64_t **out, size_t *n)
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
void seghdr_put(unsigned char *blk, unsigned slot, uint64_t first, uint64_t seq, uint64_t mark,
		uint32_t flags)
{
	struct seg_hdr h = { .magic = SEG_MAGIC,
			     .version = (flags & SEG_F_PREALLOC) ? SEG_VERSION : SEG_VERSION_PLAIN,
			     .hdr_bytes = SEG_HDR,
			     .first = first, .seq = seq, .mark = mark, .flags = flags };
	h.crc = crc32c(0, &h, sizeof(h));
	memset(blk + slot * SEG_SLOT, 0, SEG_SLOT);
	memcpy(blk + slot * SEG_SLOT, &h, sizeof(h));
}

/* A new segment's header block: both copies alike. */
void seghdr_init_flags(unsigned char *blk, uint64_t first, uint64_t mark, uint32_t flags)
{
	memset(blk, 0, SEG_HDR);
	seghdr_put(blk, 0, first, 1, mark, flags);
	seghdr_put(blk, 1, first, 1, mark, flags);
}

void seghdr_init(unsigned char *blk, uint64_t first, uint64_t mark)
{
	seghdr_init_flags(blk, first, mark, 0);
}

/* What the first size bytes p of the segment starting at first hold: SEG_V1
 * (*out: the newest good copy), SEG_V0 (the format before headers: a record
 * at offset 0), SEG_NEWER (a header of a later format), or SEG_BAD. */
int seghdr_get(const unsigned char *p, size_t size, uint64_t first, struct seg_hdr *out)
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
		if (h.version < SEG_VERSION_PLAIN || h.version > SEG_VERSION) {
			newer = MAX(newer, h.version > SEG_VERSION ? (int)h.version : 0);
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
	if (newer) {   /* out->version: the newer format, for the message */
		memset(out, 0, sizeof(*out));
		out->version = (uint16_t)newer;
		return SEG_NEWER;
	}
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
int seghdr_write(int fd, const unsigned char *blk, int odsync)
{
	ssize_t n = pwrite(fd, blk, SEG_HDR, 0);
	if (n != (ssize_t)SEG_HDR)
		return n < 0 ? -errno : -ENOSPC;
	if (!odsync && fdatasync(fd))
		return -errno;
	return 0;
}

int redo_restore_tail(const char *dir, uint64_t cut)
{
	uint64_t *segs = NULL;
	size_t n = 0;
	int rc = seg_list(dir, &segs, &n);
	if (rc || n == 0) {
		free(segs);
		return rc;
	}
	char path[4200];
	uint64_t first = segs[n - 1];
	free(segs);
	if (first >= cut)
		return -EEXIST;
	seg_path(path, sizeof(path), dir, first);
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	unsigned char *blk = NULL;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	uint64_t size = (uint64_t)st.st_size;
	if (size > cut - first) {
		rc = -EINVAL;
		goto out;
	}
	if (ftruncate(fd, (off_t)ALIGN_UP(size, REDO_BLOCK))) {   /* zeros: no record */
		rc = -errno;
		goto out;
	}
	blk = calloc(1, SEG_HDR);
	struct seg_hdr h;
	if (!blk) {
		rc = -ENOMEM;
		goto out;
	}
	if (size >= SEG_HDR && pread(fd, blk, SEG_HDR, 0) == (ssize_t)SEG_HDR &&
	    seghdr_get(blk, SEG_HDR, first, &h) == SEG_V1) {
		uint64_t mark = MIN(h.mark, cut);
		uint32_t flags = h.flags & ~SEG_F_NEXT;
		seghdr_put(blk, 0, first, h.seq + 1, mark, flags);
		seghdr_put(blk, 1, first, h.seq + 1, mark, flags);
		rc = seghdr_write(fd, blk, 0);
	}
	if (rc == 0 && fsync(fd))
		rc = -errno;
out:
	free(blk);
	close(fd);
	return rc;
}
