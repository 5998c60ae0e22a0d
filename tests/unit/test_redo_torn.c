/*
 * test_redo_torn - a torn or corrupt log tail is cut at the last valid
 * record: (1) a flipped byte in the last record, (2) a file cut in the middle
 * of a record, (3) garbage after the last record.  Each time replay stops at
 * the right record, reports the cut, next_lsn is right, and the log reopened
 * there takes appends that replay correctly after the survivors.  (1) and (3)
 * are not what a crash leaves (a complete record, or non-zero bytes that are
 * no record): refused by default, cut under tolerate-tail.  (6) a whole
 * zeroed last block is refused too: the file size says it was written.  Damage
 * followed by valid records is not a tail: (4) a bad length field and (5) a
 * zeroed block in the middle are refused by default (nothing changed on
 * disk) and cut only under an explicit recovery mode.
 * Cases 1-6 fake crashes after a clean close, so they run without the
 * watermark (LOTUS_REDO_MARK_MS=0); (7) with it, a cut at a 4 KiB boundary
 * below the mark is refused, and a file cut to a size no write leaves is
 * refused even without it.
 */
#include <errno.h>
#include <sys/stat.h>
#include "common/common.h"
#include "store/redo.h"
#include "test_redo_util.h"

#define MAXLEN 900
#define MAXREC 4000

static uint64_t lsns[MAXREC];
static unsigned nrec;          /* records the log should hold */

struct rs { unsigned n, bad; };

static int check(void *arg, uint64_t lsn, uint8_t type, uint64_t txn_id, const void *p, uint32_t len)
{
	struct rs *s = arg;
	unsigned char buf[MAXLEN];
	uint32_t want = tdur_payload(txn_id, buf, MAXLEN);
	if (s->n >= nrec || txn_id != s->n || lsns[s->n] != lsn || len != want ||
	    memcmp(buf, p, len) || type != REDO_USER)
		s->bad++;
	s->n++;
	return 0;
}

static void append_some(const char *dir, uint64_t at, unsigned count)
{
	struct redo_opts o = { .dir = dir };
	redo_t *r;
	unsigned char buf[MAXLEN];
	CHECK_RC(redo_open(&o, at, &r));
	for (unsigned i = 0; i < count; i++) {
		uint32_t len = tdur_payload(nrec, buf, MAXLEN);
		CHECK_RC(redo_append(r, REDO_USER, nrec, buf, len, &lsns[nrec]));
		nrec++;
		if (i % 7 == 0)
			CHECK_EQ(redo_wait(r, lsns[nrec - 1]), 0);
	}
	CHECK_EQ(redo_wait(r, lsns[nrec - 1]), 0);
	redo_close(r);
}

static void replay_expect(const char *dir, unsigned n, int expect_cut)
{
	struct rs s = { 0 };
	struct redo_replay_stats st;
	uint64_t next;
	CHECK_RC(redo_replay(dir, 0, check, &s, &st, &next));
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.n, n);
	CHECK_EQ(next, lsns[n - 1]);
	if (expect_cut)
		CHECK(st.cut_bytes > 0);
	else
		CHECK_EQ(st.cut_bytes, 0);
	nrec = n;
}

static void replay_mode_expect(const char *dir, enum redo_recovery mode, unsigned n,
			       int expect_cut)
{
	struct rs s = { 0 };
	struct redo_replay_stats st;
	uint64_t next;
	CHECK_RC(redo_replay_mode(dir, 0, mode, check, &s, &st, &next));
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(s.n, n);
	CHECK_EQ(next, lsns[n - 1]);
	CHECK(expect_cut ? st.cut_bytes > 0 : st.cut_bytes == 0);
	nrec = n;
}

/* Replay refuses (-EIO) and reports the damage at `at` and valid records up to hi. */
static void refuse_expect(const char *dir, enum redo_recovery mode, uint64_t at, uint64_t hi)
{
	struct rs s = { 0 };
	struct redo_replay_stats st;
	uint64_t next;
	CHECK_EQ(redo_replay_mode(dir, 0, mode, check, &s, &st, &next), -EIO);
	CHECK_EQ(s.bad, 0);
	CHECK_EQ(st.damaged_lsn, at);
	CHECK_EQ(st.damaged_to_lsn, hi);
	CHECK_EQ(st.cut_bytes, 0);
}

static int seg_fd(const char *dir)
{
	char p[1200];
	snprintf(p, sizeof(p), "%s/redo-%016x.log", dir, 0);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	return fd;
}

int main(void)
{
	setenv("LOTUS_REDO_MARK_MS", "0", 1);
	const char *dir = tdur_setup();
	append_some(dir, 0, 500);
	replay_expect(dir, 500, 0);

	/* 1. flip a byte inside the payload (or header) of the last record */
	int fd = seg_fd(dir);
	off_t at = (off_t)lsns[498] + 20;   /* in the header of record 499 */
	unsigned char b;
	CHECK(pread(fd, &b, 1, at) == 1);
	b ^= 0x40;
	CHECK(pwrite(fd, &b, 1, at) == 1);
	close(fd);
	/* a complete record with a bad CRC is not what a crash leaves: refused
	 * by default, cut under tolerate-tail */
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[498], lsns[498]);
	replay_mode_expect(dir, REDO_RECOVERY_TOLERATE_TAIL, 499, 1);
	append_some(dir, lsns[498], 50);
	replay_expect(dir, 549, 0);

	/* 2. the last three records end in sectors that were never written (a
	 * write that never completed, in whole blocks): cut by default */
	fd = seg_fd(dir);
	{
		off_t cut = (off_t)ALIGN_UP(lsns[546] + 17, 512), blkend = (off_t)ALIGN_UP(cut, 4096);
		unsigned char z[4096] = { 0 };
		CHECK(pwrite(fd, z, (size_t)(blkend - cut), cut) == blkend - cut);
		CHECK(ftruncate(fd, blkend) == 0);
	}
	close(fd);
	replay_expect(dir, 547, 1);
	append_some(dir, lsns[546], 60);
	replay_expect(dir, 607, 0);

	/* 3. garbage right after the last record (a torn next record) */
	fd = seg_fd(dir);
	unsigned char junk[300];
	for (unsigned i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 11);
	CHECK(pwrite(fd, junk, sizeof(junk), (off_t)lsns[606]) == (ssize_t)sizeof(junk));
	close(fd);
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[606], lsns[606]);
	replay_mode_expect(dir, REDO_RECOVERY_TOLERATE_TAIL, 607, 1);
	append_some(dir, lsns[606], 10);
	replay_expect(dir, 617, 0);

	/* 4. a mid-log record whose length field points past a later record:
	 * valid records follow, so it is damage, not a torn tail.  The default
	 * refuses and changes nothing; point-in-time cuts there on request. */
	fd = seg_fd(dir);
	uint32_t big = 100000;
	CHECK(pwrite(fd, &big, 4, (off_t)lsns[599]) == 4);
	struct stat before, after;
	CHECK(fstat(fd, &before) == 0);
	close(fd);
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[599], lsns[616]);
	fd = seg_fd(dir);
	CHECK(fstat(fd, &after) == 0 && after.st_size == before.st_size);
	close(fd);
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[599], lsns[616]);  /* still there */
	replay_mode_expect(dir, REDO_RECOVERY_POINT_IN_TIME, 600, 1);
	append_some(dir, lsns[599], 5);
	replay_expect(dir, 605, 0);
	/* 5. a zeroed 4 KiB block in the middle (a lost write), followed by
	 * valid records: refused by default, cut under tolerate-tail (one segment) */
	append_some(dir, lsns[604], 300);
	fd = seg_fd(dir);
	unsigned char zero[4096] = { 0 };
	off_t blk = (off_t)(lsns[700] & ~4095ull);
	CHECK(pwrite(fd, zero, sizeof(zero), blk) == (ssize_t)sizeof(zero));
	close(fd);
	unsigned k = 0;
	while (lsns[k] <= (uint64_t)blk)
		k++;   /* records 0..k-1 end before the block; record k is the first hit */
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[k - 1], lsns[904]);
	replay_mode_expect(dir, REDO_RECOVERY_TOLERATE_TAIL, k, 1);
	/* 6. the last 4 KiB block zeroed: no valid record follows, but the file
	 * size shows the block was written by a completed write */
	append_some(dir, lsns[k - 1], 200);
	fd = seg_fd(dir);
	struct stat end;
	CHECK(fstat(fd, &end) == 0 && end.st_size % 4096 == 0);
	CHECK(pwrite(fd, zero, sizeof(zero), end.st_size - 4096) == (ssize_t)sizeof(zero));
	close(fd);
	unsigned j = 0;
	while (lsns[j] <= (uint64_t)end.st_size - 4096)
		j++;
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[j - 1], lsns[j - 1]);
	replay_mode_expect(dir, REDO_RECOVERY_TOLERATE_TAIL, j, 1);

	/* 7. with the watermark (written at the latest by the clean close): a
	 * cut at a block boundary, which a crash could leave, is refused because
	 * the header says the log was durable past it; tolerate-tail cuts and
	 * lowers the mark, so a later strict start is clean */
	unsetenv("LOTUS_REDO_MARK_MS");
	append_some(dir, lsns[j - 1], 300);
	unsigned last = nrec - 1;
	fd = seg_fd(dir);
	off_t cut = (off_t)(lsns[last - 100] & ~4095ull);
	CHECK(ftruncate(fd, cut) == 0);
	close(fd);
	unsigned m = 0;
	while (lsns[m] <= (uint64_t)cut)
		m++;
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[m - 1], lsns[last]);
	replay_mode_expect(dir, REDO_RECOVERY_TOLERATE_TAIL, m, 1);
	replay_expect(dir, m, 0);
	/* 8. a file cut to a size that is no multiple of 4 KiB, past the mark
	 * (marks off again): no crash of this writer leaves it */
	setenv("LOTUS_REDO_MARK_MS", "0", 1);
	append_some(dir, lsns[m - 1], 100);
	fd = seg_fd(dir);
	CHECK(ftruncate(fd, (off_t)lsns[nrec - 1] - 7) == 0);
	close(fd);
	refuse_expect(dir, REDO_RECOVERY_STRICT, lsns[nrec - 2], lsns[nrec - 2]);
	replay_mode_expect(dir, REDO_RECOVERY_TOLERATE_TAIL, nrec - 1, 1);
	replay_expect(dir, nrec, 0);
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
