/*
 * test_redo_format0 - segments of the format before segment headers (format
 * 0: records from file offset 0) are still read: replay finds every record,
 * the log reopens there and appends, and a later replay finds both.  A
 * segment whose header is of a later version, or whose first block is neither
 * a header nor a record, is refused with -EIO and nothing replayed.
 */
#include <errno.h>
#include <sys/stat.h>
#include "common/common.h"
#include "common/crc32c.h"
#include "store/redo.h"
#include "test_redo_util.h"

#define NOLD 50

struct rs { unsigned n; uint64_t last; };

static int count(void *arg, uint64_t lsn, uint8_t type, uint64_t txn_id, const void *p, uint32_t len)
{
	struct rs *s = arg;
	(void)p;
	(void)len;
	CHECK(type == REDO_USER && txn_id == s->n && lsn > s->last);
	s->n++;
	s->last = lsn;
	return 0;
}

/* A format-0 segment at LSN 0: NOLD records of 100 bytes, as the older
 * writer left them (whole 4 KiB blocks, zero after the last record). */
static uint64_t write_format0(const char *dir)
{
	unsigned char buf[8192] = { 0 };
	uint64_t pos = 0;
	for (unsigned i = 0; i < NOLD; i++) {
		unsigned char payload[100];
		memset(payload, (int)(i + 1), sizeof(payload));
		uint64_t size = ALIGN_UP(32 + sizeof(payload), 8);
		unsigned char h[32] = { 0 };
		uint32_t len = sizeof(payload), magic = 0x4f44524cu, crc;
		uint64_t lsn = pos + size, txn = i;
		memcpy(h, &len, 4);
		memcpy(h + 8, &lsn, 8);
		memcpy(h + 16, &txn, 8);
		h[24] = REDO_USER;
		memcpy(h + 28, &magic, 4);
		crc = crc32c(crc32c(0, payload, sizeof(payload)), h, sizeof(h));
		memcpy(h + 4, &crc, 4);
		memcpy(buf + pos, h, sizeof(h));
		memcpy(buf + pos + 32, payload, sizeof(payload));
		pos = lsn;
	}
	char p[1200];
	snprintf(p, sizeof(p), "%s/redo-%016x.log", dir, 0);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(pwrite(fd, buf, ALIGN_UP(pos, 4096), 0) == (ssize_t)ALIGN_UP(pos, 4096));
	close(fd);
	return pos;
}

int main(void)
{
	const char *dir = tdur_setup();
	uint64_t end0 = write_format0(dir);
	struct rs s = { 0 };
	struct redo_replay_stats st;
	uint64_t next;
	CHECK_RC(redo_replay(dir, 0, count, &s, &st, &next));
	CHECK_EQ(s.n, NOLD);
	CHECK_EQ(next, end0);
	CHECK_EQ(st.cut_bytes, 0);

	/* appending goes on in the format-0 segment */
	struct redo_opts o = { .dir = dir };
	redo_t *r;
	CHECK_RC(redo_open(&o, next, &r));
	unsigned char payload[64];
	memset(payload, 7, sizeof(payload));
	uint64_t lsn = 0;
	for (unsigned i = 0; i < 10; i++)
		CHECK_RC(redo_append(r, REDO_USER, NOLD + i, payload, sizeof(payload), &lsn));
	CHECK_EQ(redo_wait(r, lsn), 0);
	redo_close(r);
	struct rs s2 = { 0 };
	CHECK_RC(redo_replay(dir, 0, count, &s2, &st, &next));
	CHECK_EQ(s2.n, NOLD + 10);
	CHECK_EQ(next, lsn);
	/* small segments: the log rolls from the format-0 segment into
	 * format-1 ones, and replay follows */
	o.segment_bytes = 4096;
	CHECK_RC(redo_open(&o, next, &r));
	for (unsigned i = 0; i < 200; i++)
		CHECK_RC(redo_append(r, REDO_USER, NOLD + 10 + i, payload, sizeof(payload), &lsn));
	CHECK_EQ(redo_wait(r, lsn), 0);
	struct redo_stats rst;
	redo_stats(r, &rst);
	CHECK(rst.segments_created >= 2);
	redo_close(r);
	struct rs s4 = { 0 };
	CHECK_RC(redo_replay(dir, 0, count, &s4, &st, &next));
	CHECK_EQ(s4.n, NOLD + 210);
	CHECK_EQ(next, lsn);
	CHECK(st.segments >= 3);

	/* a header of a later version: refused, nothing replayed */
	char p[1200];
	snprintf(p, sizeof(p), "%s/redo-%016x.log", dir, 0);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	unsigned char h[40] = { 0 };
	uint32_t magic = 0x4753524cu, crc;
	uint16_t version = 2;
	memcpy(h, &magic, 4);
	memcpy(h + 4, &version, 2);
	crc = crc32c(0, h, sizeof(h));
	memcpy(h + 36, &crc, 4);
	CHECK(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
	struct rs s3 = { 0 };
	CHECK_EQ(redo_replay(dir, 0, count, &s3, &st, &next), -EIO);
	CHECK_EQ(s3.n, 0);
	/* neither a header nor a record: damaged */
	memset(h, 0x5a, sizeof(h));
	CHECK(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
	close(fd);
	CHECK_EQ(redo_replay(dir, 0, count, &s3, &st, &next), -EIO);
	CHECK_EQ(s3.n, 0);
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
