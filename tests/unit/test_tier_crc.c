/*
 * test_tier_crc - the checksums of a tiered store's backing files
 * (tierback.c), on real files: a tiered store of 48 frames and 1024 logical
 * pages with its tierback (page writers on io_uring, pages.swap, images) in
 * a fresh data directory, a table of 2100 records of up to 1000 bytes (about
 * 6x the pool), and a checkpointer without a log.
 *
 *  1. After a checkpoint (checkpoint 1) every record is updated (version
 *     2), so most pages are evicted again to pages.swap.  One byte of every
 *     page of pages.swap is flipped.  Then every record is read: each read
 *     gives the right version-2 bytes or -EIO, never other bytes; -EIO came
 *     up, swap_crc_errors counts them.  A scan prefetch of the pages makes
 *     no rotten page resident.  With the bytes flipped back every record
 *     reads right again (a failed check changed nothing).
 *  2. With the rot back, a checkpoint fails with -EIO (it must fault the
 *     rotten pages in) and the MANIFEST still names checkpoint 1.
 *  3. A fresh store recovers from the directory (pages.swap is truncated,
 *     recovery never reads it): every record reads its version 1 - the
 *     failed checkpoint wrote no rot into an image that recovery used.
 *  4. The recovered pages live on the image; a byte flipped in it makes
 *     the reads of that page -EIO (image_crc_errors), never other bytes.
 *  5. With the image repaired, version 3 goes into checkpoint 2 (image a).
 *     Then page 1 of image a gets a bad extent header and a CRC entry that
 *     matches it (a damaged copy checkpointed with its damage): recovery
 *     finds it in its checking pass and falls back to checkpoint 1 instead
 *     of failing halfway through the rebuild.
 */
#include <pthread.h>
#include <sys/mman.h>
#include "common/common.h"
#include "common/crc32c.h"
#include "store/ckpt.h"
#include "store/store.h"
#include "store/tierback.h"
#include "test_redo_util.h"

#define PS      8192u
#define FRAMES  48u
#define NPAGES  1024u
#define NREC    2100u
#define VMAX    1000u

struct tier {
	tierback_t *tb;
	store_t *st;
	uint16_t tab;
};

static void tier_open(struct tier *t, const char *dir)
{
	struct tierback_opts to = { .capacity = (uint64_t)NPAGES * PS, .page_size = PS,
				    .page_writers = 1 };
	struct store_tier_opts so;
	CHECK_RC(tierback_create(&to, &t->tb));
	tierback_store_opts(t->tb, &so);
	CHECK_RC(store_create_tiered((size_t)FRAMES * PS, PS, &so, &t->st));
	CHECK_RC(tierback_start(t->tb, t->st, dir));
}

static void tier_close(struct tier *t)
{
	tierback_stop(t->tb);
	store_destroy(t->st);
	tierback_destroy(t->tb);
}

static uint32_t value_of(unsigned i, unsigned ver, unsigned char *v)
{
	uint32_t n = 200 + (i * 37 + ver * 101) % (VMAX - 200);
	for (uint32_t k = 0; k < n; k++)
		v[k] = (unsigned char)(i * 7 + ver * 13 + k);
	return n;
}

static unsigned mkkey(unsigned i, unsigned char *k)
{
	return (unsigned)snprintf((char *)k, 32, "key-%06u", i);
}

/* Read record i: 0 right bytes of version ver, -EIO; anything else fails. */
static int read_rec(struct tier *t, unsigned i, unsigned ver)
{
	unsigned char k[32], want[VMAX];
	unsigned kl = mkkey(i, k);
	store_loc_t loc;
	struct store_rec *r;
	CHECK_RC(store_get(t->st, t->tab, k, (uint16_t)kl, &loc));
	int rc = store_rec_get(t->st, loc, t->tab, k, (uint16_t)kl, &r);
	if (rc == -EIO)
		return rc;
	CHECK_RC(rc);
	uint32_t n = value_of(i, ver, want);
	int same = r->value_len == n && memcmp(store_rec_value(r), want, n) == 0;
	store_rec_put(t->st, loc);
	if (!same)
		fprintf(stderr, "record %u: the bytes read are not version %u\n", i, ver);
	CHECK(same);
	return 0;
}

static void write_all(struct tier *t, unsigned ver, int insert)
{
	unsigned char k[32], v[VMAX];
	for (unsigned i = 0; i < NREC; i++) {
		unsigned kl = mkkey(i, k);
		uint32_t n = value_of(i, ver, v);
		store_loc_t loc;
		if (insert) {
			CHECK_RC(store_insert(t->st, t->tab, k, (uint16_t)kl, v, n, &loc));
		} else {
			CHECK_RC(store_get(t->st, t->tab, k, (uint16_t)kl, &loc));
			CHECK_RC(store_update(t->st, loc, v, n));
		}
	}
}

static uint64_t stat_of(struct tier *t, const char *name)
{
	char buf[8192], key[64];
	tierback_stats_json(t->tb, buf, sizeof(buf));
	snprintf(key, sizeof(key), "\"%s\":", name);
	const char *p = strstr(buf, key);
	CHECK(p);
	return strtoull(p + strlen(key), NULL, 10);
}

/* xor one byte (offset 100) of every page 1..last of file */
static void rot(const char *dir, const char *file, uint64_t last)
{
	char p[1200];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	for (uint64_t pg = 1; pg <= last; pg++) {
		unsigned char b;
		off_t off = (off_t)(pg * PS + 100);
		if (pread(fd, &b, 1, off) != 1)
			break;
		b ^= 0x5a;
		CHECK(pwrite(fd, &b, 1, off) == 1);
	}
	CHECK(fsync(fd) == 0);
	close(fd);
}

static uint64_t manifest_seq(const char *dir)
{
	char p[1200], line[256];
	uint64_t seq = 0;
	snprintf(p, sizeof(p), "%s/MANIFEST", dir);
	FILE *f = fopen(p, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "seq %llu", (unsigned long long *)&seq) == 1)
			break;
	fclose(f);
	return seq;
}

/* Damage page `page` of DIR/pages-X.dat (its extent header's slot_size)
 * and make DIR/pages-X.crc agree with the damage. */
static void forge(const char *dir, char x, uint64_t page)
{
	char p[1200];
	unsigned char pg[PS], hdr[64];
	snprintf(p, sizeof(p), "%s/pages-%c.dat", dir, x);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, pg, PS, (off_t)(page * PS)) == PS);
	pg[12] ^= 0x01;
	CHECK(pwrite(fd, pg, PS, (off_t)(page * PS)) == PS);
	close(fd);
	snprintf(p, sizeof(p), "%s/pages-%c.crc", dir, x);
	fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr));
	uint64_t n;
	memcpy(&n, hdr + 16, 8);
	CHECK(n > page && n <= NPAGES);
	uint32_t v[NPAGES];
	CHECK(pread(fd, v, n * 4, sizeof(hdr)) == (ssize_t)(n * 4));
	v[page] = crc32c(0, pg, PS);
	uint32_t all = crc32c(0, v, n * 4);
	memcpy(hdr + 28, &all, 4);
	CHECK(pwrite(fd, v, n * 4, sizeof(hdr)) == (ssize_t)(n * 4));
	CHECK(pwrite(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr));
	close(fd);
}

static ckpt_t *ckpt_on(struct tier *t, const char *dir, uint64_t seq)
{
	void *staging;
	size_t sbytes;
	struct pwriter *pw = tierback_writers(t->tb, &staging, &sbytes);
	struct ckpt_opts co = { .dir = dir, .writers = pw, .staging = staging,
				.staging_bytes = sbytes, .recovered_seq = seq };
	ckpt_t *ck;
	CHECK_RC(ckpt_open(t->st, NULL, &co, &ck));
	return ck;
}

int main(void)
{
	const char *dir = tdur_setup();
	struct tier t;
	tier_open(&t, dir);
	CHECK_RC(store_table_create(t.st, "t", VMAX, &t.tab));
	ckpt_t *ck = ckpt_on(&t, dir, 0);
	write_all(&t, 1, 1);
	struct ckpt_stats cs;
	CHECK_RC(ckpt_run(ck, &cs));
	CHECK_EQ(manifest_seq(dir), 1);
	write_all(&t, 2, 0);
	struct store_stats ss;
	store_stats(t.st, &ss);
	for (unsigned i = 0; i < NREC; i++)   /* version 2 reads back right */
		CHECK_EQ(read_rec(&t, i, 2), 0);
	CHECK(stat_of(&t, "evict_dirty") > 2 * FRAMES);
	printf("%llu pages used, %llu frames; %llu dirty evictions, %llu miss reads\n",
	       (unsigned long long)ss.pages_used, (unsigned long long)FRAMES,
	       (unsigned long long)stat_of(&t, "evict_dirty"),
	       (unsigned long long)stat_of(&t, "miss_reads"));

	/* 1. rot in pages.swap: right bytes or -EIO, never other bytes */
	rot(dir, "pages.swap", ss.pages_used);
	unsigned eio = 0;
	for (unsigned i = 0; i < NREC; i++)
		eio += read_rec(&t, i, 2) == -EIO;
	uint64_t bad = stat_of(&t, "swap_crc_errors");
	printf("rotten pages.swap: %u of %u reads failed with EIO, swap_crc_errors %llu\n", eio,
	       NREC, (unsigned long long)bad);
	CHECK(eio > NREC / 4 && bad > 0);
	CHECK_EQ(stat_of(&t, "image_crc_errors"), 0);
	{   /* the scan prefetch checks too: nothing rotten becomes resident */
		uint64_t pages[256];
		unsigned n = 0;
		for (uint64_t p = 1; p <= ss.pages_used && n < 256; p++)
			pages[n++] = p;
		uint64_t pf0 = stat_of(&t, "prefetch_errors");
		int got = store_prefetch(t.st, pages, n, NULL, NULL);
		printf("prefetch of %u pages: %d made resident, prefetch_errors +%llu\n", n, got,
		       (unsigned long long)(stat_of(&t, "prefetch_errors") - pf0));
		CHECK(stat_of(&t, "prefetch_errors") > pf0);
		for (unsigned i = 0; i < NREC; i++)
			read_rec(&t, i, 2);       /* right bytes or -EIO (checked inside) */
	}
	rot(dir, "pages.swap", ss.pages_used);   /* flipped back: all good again */
	for (unsigned i = 0; i < NREC; i++)
		CHECK_EQ(read_rec(&t, i, 2), 0);

	/* 2. a checkpoint that needs a rotten page fails; checkpoint 1 stays */
	rot(dir, "pages.swap", ss.pages_used);
	int rc = ckpt_run(ck, &cs);
	printf("checkpoint over rotten swap pages: %s\n", lotus_strerror(rc));
	CHECK_EQ(rc, -EIO);
	CHECK_EQ(manifest_seq(dir), 1);
	ckpt_close(ck);
	tier_close(&t);

	/* 3. recovery: checkpoint 1, version 1 everywhere (no log here) */
	tier_open(&t, dir);
	uint64_t from;
	struct ckpt_recover_stats rs;
	CHECK_RC(ckpt_recover_home(t.st, dir, IO_BACKEND_AUTO, tierback_set_home, t.tb, &from, &rs));
	CHECK_EQ(rs.seq, 1);
	CHECK_EQ(rs.fell_back, 0);
	uint32_t maxv;
	CHECK_RC(store_table_find(t.st, "t", &t.tab, &maxv));
	for (unsigned i = 0; i < NREC; i++)
		CHECK_EQ(read_rec(&t, i, 1), 0);

	/* 4. rot in the image the pages live on: -EIO, never other bytes */
	tier_close(&t);
	tier_open(&t, dir);
	CHECK_RC(ckpt_recover_home(t.st, dir, IO_BACKEND_AUTO, tierback_set_home, t.tb, &from, &rs));
	CHECK_RC(store_table_find(t.st, "t", &t.tab, &maxv));
	rot(dir, "pages-b.dat", rs.pages);   /* checkpoint 1 is image b */
	eio = 0;
	for (unsigned i = 0; i < NREC; i++)
		eio += read_rec(&t, i, 1) == -EIO;
	printf("rotten image after recovery: %u of %u reads failed with EIO, image_crc_errors "
	       "%llu\n", eio, NREC, (unsigned long long)stat_of(&t, "image_crc_errors"));
	CHECK(eio > 0 && stat_of(&t, "image_crc_errors") > 0);

	/* 5. a CRC-valid image that cannot be rebuilt: fall back to the other */
	rot(dir, "pages-b.dat", rs.pages);   /* repaired */
	ck = ckpt_on(&t, dir, 0);
	write_all(&t, 3, 0);
	CHECK_RC(ckpt_run(ck, &cs));
	CHECK_EQ(manifest_seq(dir), 2);
	ckpt_close(ck);
	tier_close(&t);
	forge(dir, 'a', 1);
	tier_open(&t, dir);
	rc = ckpt_recover_home(t.st, dir, IO_BACKEND_AUTO, tierback_set_home, t.tb, &from, &rs);
	printf("recovery with a CRC-valid bad page in the newest image: %s, checkpoint %llu, "
	       "fell back %d\n", lotus_strerror(rc), (unsigned long long)rs.seq, rs.fell_back);
	CHECK_RC(rc);
	CHECK_EQ(rs.seq, 1);
	CHECK_EQ(rs.fell_back, 1);
	CHECK_RC(store_table_find(t.st, "t", &t.tab, &maxv));
	for (unsigned i = 0; i < NREC; i++)
		CHECK_EQ(read_rec(&t, i, 1), 0);
	tier_close(&t);
	printf("ok\n");
	return 0;
}
