/*
 * test_ckpt_damage - a damaged page is detected, named in a message, and
 * survived: (1) a flipped byte in the newest image -> recovery falls back to
 * the previous image plus a longer log replay and matches the model; (2) the
 * previous image damaged too -> -EIO, with a log line naming page and file;
 * (3) a damaged MANIFEST -> -EIO; (4) the newest image holds a page with the
 * right CRC that store_rebuild cannot take (a damaged copy checkpointed with
 * its damage: its CRC was computed over the damage) -> recovery falls back
 * to the previous image, as for a CRC mismatch, and matches the model.
 */
#include "common/crc32c.h"
#include "test_ckpt_model.h"

static char errlog[1200];

/* Run ckpt-recover with stderr captured into errlog's file; return its text. */
static char *captured(void)
{
	static char buf[16384];
	FILE *f = fopen(errlog, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

static int recover_capture(struct tmodel *m, struct ckpt_recover_stats *rs, uint64_t *next,
			   uint64_t *replayed)
{
	fflush(stderr);
	int saved = dup(2), fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	dup2(fd, 2);
	close(fd);
	int rc = tm_recover(m, rs, next, replayed);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	fputs(captured(), stderr);
	return rc;
}

static void flip(const char *dir, const char *file, off_t off)
{
	char p[1300];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	unsigned char b;
	CHECK(pread(fd, &b, 1, off) == 1);
	b ^= 0x01;
	CHECK(pwrite(fd, &b, 1, off) == 1);
	close(fd);
}

/* "pages-a.dat" or "pages-b.dat": the image the manifest names as key. */
static void manifest_image(const char *dir, const char *key, char *out)
{
	char p[1300], line[256];
	snprintf(p, sizeof(p), "%s/MANIFEST", dir);
	FILE *f = fopen(p, "r");
	CHECK(f);
	out[0] = '\0';
	size_t kl = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ' ')
			sscanf(line + kl + 1, "%63s", out);
	fclose(f);
	CHECK(out[0]);
}

/* Damage page `page` of image `file` (the low bit of its extent header's
 * slot_size) and rewrite its entry in the image's CRC file, and that file's
 * own CRC, so that the image passes every CRC check. */
static void forge(const char *dir, const char *file, uint64_t page)
{
	char p[1300], crcname[64];
	unsigned char pg[8192], hdr[64];
	snprintf(p, sizeof(p), "%s/%s", dir, file);
	int fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, pg, sizeof(pg), (off_t)(page * sizeof(pg))) == (ssize_t)sizeof(pg));
	pg[12] ^= 0x01;
	CHECK(pwrite(fd, pg, sizeof(pg), (off_t)(page * sizeof(pg))) == (ssize_t)sizeof(pg));
	close(fd);
	snprintf(crcname, sizeof(crcname), "%.*s.crc", (int)(strlen(file) - 4), file);
	snprintf(p, sizeof(p), "%s/%s", dir, crcname);
	fd = open(p, O_RDWR);
	CHECK(fd >= 0);
	CHECK(pread(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr));
	uint64_t n;
	memcpy(&n, hdr + 16, 8);
	CHECK(n > page && n < (1u << 20));
	uint32_t *v = malloc(n * 4);
	CHECK(v);
	CHECK(pread(fd, v, n * 4, sizeof(hdr)) == (ssize_t)(n * 4));
	v[page] = crc32c(0, pg, sizeof(pg));
	uint32_t all = crc32c(0, v, n * 4);
	memcpy(hdr + 28, &all, 4);
	CHECK(pwrite(fd, v, n * 4, sizeof(hdr)) == (ssize_t)(n * 4));
	CHECK(pwrite(fd, hdr, sizeof(hdr), 0) == (ssize_t)sizeof(hdr));
	close(fd);
	free(v);
}

int main(void)
{
	static struct tmodel m;
	const char *dir = tdur_setup();
	snprintf(errlog, sizeof(errlog), "%s/stderr.txt", dir);
	m.dir = dir;
	m.backend = IO_BACKEND_AUTO;
	tm_open(&m, 0, 1);
	tm_workload(&m, 2, 6000, 1);
	struct ckpt_stats cs;
	CHECK_RC(ckpt_run(m.ck, &cs));
	tm_workload(&m, 2, 4000, 2);
	CHECK_RC(ckpt_run(m.ck, &cs));
	tm_workload(&m, 2, 2000, 3);
	tm_crash(&m);

	/* 1. the newest image has a damaged page: fall back to the previous one */
	char cur[64], prev[64];
	manifest_image(dir, "image", cur);
	manifest_image(dir, "prev_image", prev);
	CHECK(strcmp(cur, prev));
	flip(dir, cur, 2 * 8192 + 100);
	struct ckpt_recover_stats rs;
	uint64_t next, replayed;
	CHECK_RC(recover_capture(&m, &rs, &next, &replayed));
	char want[1400];
	snprintf(want, sizeof(want), "page 2 of %s/%s is damaged", dir, cur);
	CHECK(strstr(captured(), want));
	CHECK(strstr(captured(), "recovering from the previous checkpoint"));
	CHECK(replayed >= 6000);   /* the longer replay covers both later workloads */
	tm_compare(&m);
	store_destroy(m.st);

	/* 2. both images damaged: -EIO with a message naming page and file */
	flip(dir, prev, 3 * 8192 + 5);
	CHECK_EQ(recover_capture(&m, &rs, &next, &replayed), -EIO);
	snprintf(want, sizeof(want), "page 3 of %s/%s is damaged", dir, prev);
	CHECK(strstr(captured(), want));
	store_destroy(m.st);

	/* 3. a damaged manifest */
	flip(dir, prev, 3 * 8192 + 5);   /* repair the page again */
	flip(dir, "MANIFEST", 30);
	CHECK_EQ(recover_capture(&m, &rs, &next, &replayed), -EIO);
	CHECK(strstr(captured(), "MANIFEST is damaged"));
	store_destroy(m.st);

	/* 4. a CRC-valid page that cannot be rebuilt: fall back as for damage */
	flip(dir, "MANIFEST", 30);        /* repair the manifest and the newest image */
	flip(dir, cur, 2 * 8192 + 100);
	forge(dir, cur, 1);
	CHECK_RC(recover_capture(&m, &rs, &next, &replayed));
	snprintf(want, sizeof(want), "page 1 of %s/%s has the right CRC but cannot be rebuilt",
		 dir, cur);
	CHECK(strstr(captured(), want));
	CHECK(strstr(captured(), "recovering from the previous checkpoint"));
	CHECK_EQ(rs.fell_back, 1);
	CHECK(replayed >= 6000);
	tm_compare(&m);
	store_destroy(m.st);
	tdur_cleanup();
	printf("ok\n");
	return 0;
}
