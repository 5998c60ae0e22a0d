/*
 * test_redo_ship - the redo log's replication stream (redo.h, "replication"):
 *   a primary log's ship hook sees every byte of the stream, batch after
 *   batch with no gap, before the batch is written;
 *   a backup log fed those bytes record by record with redo_append_raw
 *   (SEGEND records included, with small segments so that several roll)
 *   ends at the same LSN, replays to the same records at the same LSNs, and
 *   has the same segment files;
 *   redo_read_stream gives back the primary's stream from its files, and
 *   -ENOENT below its first segment;
 *   a raw record that is not the next one of the stream is refused
 *   (-ESPIPE);
 *   a hook that refuses a batch fails the log: the batch's record is never
 *   written (replay does not find it), waiters get LOTUS_EDURABLE and later
 *   appends LOTUS_EREADONLY.
 */
#include <dirent.h>
#include <inttypes.h>
#include "store/redo.h"
#include "test_redo_util.h"

#define N 3000
#define SEG (64u << 10)

static unsigned char *stream;          /* the shipped bytes, by stream position */
static uint64_t stream_from, stream_to, batches;
static int refuse;

static int ship(void *arg, uint64_t from, uint64_t to, const void *p1, size_t n1, const void *p2,
		size_t n2)
{
	(void)arg;
	CHECK_EQ(n1 + n2, to - from);
	if (refuse)
		return -ESTALE;
	if (!stream_to)
		stream_from = from;
	CHECK_EQ(from, stream_to ? stream_to : from);   /* no gap, no overlap */
	CHECK(to - stream_from <= (uint64_t)N * 4200 + (64u << 20), "stream larger than expected");
	memcpy(stream + (from - stream_from), p1, n1);
	memcpy(stream + (from - stream_from) + n1, p2, n2);
	stream_to = to;
	batches++;
	return 0;
}

struct seen {
	uint64_t n, lsn[N + 16];
	uint32_t crc[N + 16];
};

static int collect(void *arg, uint64_t lsn, uint8_t type, uint64_t txn_id, const void *payload,
		   uint32_t len)
{
	struct seen *s = arg;
	CHECK(s->n < N + 16);
	s->lsn[s->n] = lsn;
	s->crc[s->n++] = crc32c((uint32_t)(type ^ txn_id), payload, len);
	return 0;
}

static unsigned list_segments(const char *dir, char names[][256], unsigned max)
{
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *e;
	CHECK(d != NULL);
	while ((e = readdir(d)) && n < max)
		if (!strncmp(e->d_name, "redo-", 5))
			snprintf(names[n++], 256, "%s", e->d_name);
	closedir(d);
	return n;
}

int main(void)
{
	const char *base = tdur_setup();
	char pdir[1200], bdir[1200];
	snprintf(pdir, sizeof(pdir), "%s/primary", base);
	snprintf(bdir, sizeof(bdir), "%s/backup", base);
	stream = calloc(1, (size_t)N * 4200 + (64u << 20));
	CHECK(stream != NULL);

	/* The primary: records of 0..4000 bytes, some lazy, small segments. */
	struct redo_opts po = { .dir = pdir, .segment_bytes = SEG };
	redo_t *p, *b;
	CHECK_EQ(redo_open(&po, 0, &p), 0);
	redo_set_ship(p, ship, NULL);
	static unsigned char buf[4096];
	uint64_t lsn = 0;
	for (uint64_t i = 0; i < N; i++) {
		uint32_t len = tdur_payload(i, buf, 4000);
		int rc = i % 7 == 3 ? redo_append_lazy(p, REDO_USER, i, buf, len, &lsn)
				    : redo_append(p, REDO_USER + 1, i, buf, len, &lsn);
		CHECK_EQ(rc, 0);
		if (i % 500 == 499)
			CHECK_EQ(redo_wait(p, lsn), 0);
	}
	CHECK_EQ(redo_wait(p, lsn), 0);
	CHECK_EQ(stream_to, redo_next_lsn(p));
	printf("primary: %d records, stream %" PRIu64 "..%" PRIu64 " shipped in %" PRIu64
	       " batches\n", N, stream_from, stream_to, batches);

	/* The backup follows the stream, record by record. */
	struct redo_opts bo = { .dir = bdir, .segment_bytes = 1u << 30 };  /* rolls only on SEGEND */
	CHECK_EQ(redo_open(&bo, 0, &b), 0);
	CHECK_EQ(redo_next_lsn(b), stream_from);
	uint64_t pos = stream_from, skip = 0, recs = 0, segends = 0, blsn = 0, mid = 0;
	while (pos < stream_to) {
		if (skip > pos) {
			pos = skip;
			continue;
		}
		struct redo_rec x;
		int64_t sz = redo_stream_record(stream + (pos - stream_from), stream_to - pos, pos, &x);
		CHECK(sz > 0, "no record at stream position %" PRIu64, pos);
		if (recs == N / 3 && !mid)
			mid = pos;
		if (recs == 10) {   /* the record after next is not the next one */
			struct redo_rec y;
			int64_t sz2 = redo_stream_record(stream + (pos + sz - stream_from),
							 stream_to - pos - sz, pos + sz, &y);
			CHECK(sz2 > 0);
			CHECK_EQ(redo_append_raw(b, stream + (pos + sz - stream_from), (size_t)sz2,
						 &blsn), -ESPIPE);
		}
		CHECK_EQ(redo_append_raw(b, stream + (pos - stream_from), (size_t)sz, &blsn), 0);
		if (x.type == REDO_SEGEND_TYPE) {
			segends++;
			skip = redo_after_segend(x.lsn);
			CHECK_EQ(blsn, skip);
		} else {
			CHECK_EQ(blsn, x.lsn);
			recs++;
		}
		pos += (uint64_t)sz;
	}
	CHECK_EQ(recs, (uint64_t)N);
	CHECK(segends >= 10, "only %" PRIu64 " segments rolled", segends);
	CHECK_EQ(redo_wait(b, blsn), 0);
	CHECK_EQ(redo_next_lsn(b), redo_next_lsn(p));

	/* The primary's files give its stream back, record for record. */
	unsigned char *back = malloc((size_t)(stream_to - stream_from));
	CHECK(back != NULL);
	CHECK_EQ(redo_read_stream(pdir, mid, stream_to, back), 0);
	uint64_t compared = 0;
	for (pos = mid, skip = 0; pos < stream_to;) {
		struct redo_rec x;
		if (skip > pos) {
			pos = skip;
			continue;
		}
		int64_t a = redo_stream_record(stream + (pos - stream_from), stream_to - pos, pos, &x);
		CHECK(a > 0);
		CHECK(!memcmp(back + (pos - mid), stream + (pos - stream_from), (size_t)a),
		      "the files' stream differs from the shipped one at %" PRIu64, pos);
		if (x.type == REDO_SEGEND_TYPE)
			skip = redo_after_segend(x.lsn);
		pos += (uint64_t)a;
		compared++;
	}
	CHECK(compared > N / 2);
	redo_close(p);
	redo_close(b);

	/* Both logs replay to the same records at the same LSNs. */
	static struct seen sp, sb;
	uint64_t np = 0, nb = 0;
	CHECK_EQ(redo_replay(pdir, 0, collect, &sp, NULL, &np), 0);
	CHECK_EQ(redo_replay(bdir, 0, collect, &sb, NULL, &nb), 0);
	CHECK_EQ(sp.n, (uint64_t)N);
	CHECK_EQ(sb.n, sp.n);
	CHECK_EQ(np, nb);
	for (uint64_t i = 0; i < sp.n; i++) {
		CHECK_EQ(sp.lsn[i], sb.lsn[i]);
		CHECK_EQ(sp.crc[i], sb.crc[i]);
	}
	static char ns1[256][256], ns2[256][256];
	unsigned n1 = list_segments(pdir, ns1, 256), n2 = list_segments(bdir, ns2, 256);
	CHECK_EQ(n1, n2);
	for (unsigned i = 0; i < n1; i++) {
		int found = 0;
		for (unsigned j = 0; j < n2; j++)
			found |= !strcmp(ns1[i], ns2[j]);
		CHECK(found, "segment %s of the primary is not in the backup", ns1[i]);
	}
	printf("backup: the same %" PRIu64 " records at the same LSNs, %u segment files alike "
	       "(%" PRIu64 " SEGEND records followed)\n", sb.n, n1, segends);

	/* The first segment gone (as a checkpoint removes it): -ENOENT. */
	char first[1500];
	snprintf(first, sizeof(first), "%s/redo-%016x.log", pdir, 0);
	CHECK_EQ(unlink(first), 0);
	CHECK_EQ(redo_read_stream(pdir, stream_from, stream_from + 8, back), -ENOENT);

	/* A hook that refuses: the batch is not written, the log fails. */
	char fdir[1200];
	snprintf(fdir, sizeof(fdir), "%s/refused", base);
	struct redo_opts fo = { .dir = fdir };
	redo_t *f;
	CHECK_EQ(redo_open(&fo, 0, &f), 0);
	redo_set_ship(f, ship, NULL);
	stream_to = 0;
	CHECK_EQ(redo_append(f, REDO_USER, 1, "kept", 4, &lsn), 0);
	CHECK_EQ(redo_wait(f, lsn), 0);
	refuse = 1;
	CHECK_EQ(redo_append(f, REDO_USER, 2, "refused", 7, &lsn), 0);
	CHECK_EQ(redo_wait(f, lsn), LOTUS_EDURABLE);
	CHECK_EQ(redo_append(f, REDO_USER, 3, "late", 4, &lsn), LOTUS_EREADONLY);
	redo_close(f);
	static struct seen sf;
	CHECK_EQ(redo_replay(fdir, 0, collect, &sf, NULL, &np), 0);
	CHECK_EQ(sf.n, 1u);   /* only the record the hook took */
	printf("a refused batch: not written, the log read-only\n");
	free(back);
	free(stream);
	printf("PASS\n");
	return 0;
}
