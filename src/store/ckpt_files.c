/*
 * ckpt_files.c - the checkpoint's files in DIR (see docs/durability.md):
 *
 *   pages-a.dat, pages-b.dat   page images; page p at offset p * page_size
 *   pages-a.crc, pages-b.crc   CRC32C of every page of that image (header +
 *                              u32 per page; replaced atomically)
 *   MANIFEST                   the last checkpoint: seq, image, begin LSN,
 *                              pages used, the previous checkpoint, tables
 *
 * The image files are written and read by ckpt.c and ckpt_recover.c; this
 * file names them and owns the two small files that say what an image holds.
 * Both are replaced whole and atomically (temp file, fsync, rename, fsync
 * dir), so a crash leaves the old or the new version, never a mix.  The
 * manifest is text, one "key value" per line with the CRC of the text last;
 * table names are %-encoded.  A pages-X.crc names the checkpoint it belongs
 * to, so a CRC file left from a checkpoint that did not finish is not taken
 * for the one the manifest names.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/common.h"
#include "common/log.h"
#include "store/ckpt_int.h"

#define CK_CRC_MAGIC     0x3143524350434b4cull  /* "LKCPCRC1" */
#define CK_MANIFEST      "MANIFEST"

/* pages-X.crc header; u32 crc[npages] follows. */
struct crc_hdr {
	uint64_t magic;
	uint64_t seq;
	uint64_t npages;     /* entries that follow: pages 0..npages-1 */
	uint32_t page_size;
	uint32_t crc;        /* CRC32C of the entries */
	uint32_t version;    /* CK_CRC_VERSION; 0 in files from before it (read as 1) */
	uint32_t reserved0;
	uint64_t reserved[3];
};
/* The format of the CRC files, the header of a checkpoint image.  A file of a
 * higher version is refused (naming both), never misread; 0 and 1 load. */
#define CK_CRC_VERSION 1u
/* The manifest's format: its first line, "lotus-manifest N". */
#define CK_MANIFEST_VERSION 1u
_Static_assert(sizeof(struct crc_hdr) == 64, "crc header is 64 bytes");


/* ---- files ---- */

void ck_path(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

const char *ck_image_name(unsigned image, int crc)
{
	static const char *const names[2][2] = { { "pages-a.dat", "pages-a.crc" },
						 { "pages-b.dat", "pages-b.crc" } };
	return names[image & 1][crc];
}


static int write_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += n;
	}
	return 0;
}

/* Replace DIR/name atomically: temp file, fsync, rename, fsync dir. */
static int replace_file(const char *dir, const char *name, const void *a, size_t alen,
			const void *b, size_t blen)
{
	char tmp[4200], dst[4200];
	snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
	ck_path(dst, sizeof(dst), dir, name);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		int err = -errno;
		log_error("ckpt: create %s: %s", tmp, strerror(errno));
		return err;
	}
	int rc = write_all(fd, a, alen, 0);
	if (!rc && blen)
		rc = write_all(fd, b, blen, (off_t)alen);
	if (!rc && fsync(fd))
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, dst))
		rc = -errno;
	if (!rc)
		rc = fsync_dir(dir);
	if (rc) {
		log_error("ckpt: writing %s: %s", dst, strerror(-rc));
		unlink(tmp);
	}
	return rc;
}

/* ---- manifest (text, one "key value" per line, CRC of the text last) ---- */

static void name_encode(const char *in, char *out, size_t n)
{
	size_t o = 0;
	for (; *in && o + 4 < n; in++) {
		unsigned char ch = (unsigned char)*in;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '_' || ch == '-' || ch == '.')
			out[o++] = (char)ch;
		else
			o += (size_t)snprintf(out + o, n - o, "%%%02x", ch);
	}
	out[o] = '\0';
}

static void name_decode(const char *in, char *out, size_t n)
{
	size_t o = 0;
	while (*in && o + 1 < n) {
		unsigned v;
		if (in[0] == '%' && sscanf(in + 1, "%2x", &v) == 1) {
			out[o++] = (char)v;
			in += 3;
		} else {
			out[o++] = *in++;
		}
	}
	out[o] = '\0';
}

int ck_manifest_write(struct ckpt *c, const struct ck_info *cur, const struct ck_info *prev,
		      uint64_t log_from)
{
	size_t cap = 4096 + (size_t)store_table_count(c->st) * 200, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
#define EMIT(...) (len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__))
	EMIT("lotus-manifest %u\n", CK_MANIFEST_VERSION);
	EMIT("page_size %u\n", c->page_size);
	EMIT("seq %" PRIu64 "\nimage %s\nbegin_lsn %" PRIu64 "\npages_used %" PRIu64
	     "\nneed_lsn %" PRIu64 "\n", cur->seq, ck_image_name(cur->image, 0), cur->begin_lsn,
	     cur->pages_used, cur->need_lsn);
	if (prev->seq)
		EMIT("prev_seq %" PRIu64 "\nprev_image %s\nprev_begin_lsn %" PRIu64
		     "\nprev_pages_used %" PRIu64 "\nprev_need_lsn %" PRIu64 "\n", prev->seq,
		     ck_image_name(prev->image, 0), prev->begin_lsn, prev->pages_used,
		     prev->need_lsn);
	EMIT("log_kept_from %" PRIu64 "\n", log_from);
	unsigned nt = store_table_count(c->st);
	for (unsigned i = 0; i < nt; i++) {
		char name[STORE_TABLE_NAME_MAX + 1], enc[3 * STORE_TABLE_NAME_MAX + 4];
		uint32_t maxv = 0;
		if (store_table_info(c->st, (uint16_t)i, name, sizeof(name), &maxv))
			break;
		name_encode(name, enc, sizeof(enc));
		EMIT("table %u %u %s\n", i, maxv, enc);
	}
	uint32_t crc = crc32c(0, buf, len);
	EMIT("crc %08x\n", crc);
#undef EMIT
	int rc = len < cap ? replace_file(c->dir, CK_MANIFEST, buf, len, NULL, 0) : -EOVERFLOW;
	free(buf);
	return rc;
}

static int image_of(const char *s, unsigned *image)
{
	if (!strcmp(s, "pages-a.dat"))
		*image = 0;
	else if (!strcmp(s, "pages-b.dat"))
		*image = 1;
	else
		return -1;
	return 0;
}

/* 0, -ENOENT (no manifest: a new database) or -EIO (damaged, logged). */
int ck_manifest_read(const char *dir, struct manifest *m)
{
	char path[4200], *buf = NULL;
	ck_path(path, sizeof(path), dir, CK_MANIFEST);
	memset(m, 0, sizeof(*m));
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ENOENT : -errno;
	size_t cap = 1 << 20;
	buf = malloc(cap);
	size_t len = buf ? fread(buf, 1, cap - 1, f) : 0;
	fclose(f);
	if (!buf)
		return -ENOMEM;
	buf[len] = '\0';
	int rc = -EIO;
	char *crcline = strstr(buf, "\ncrc ");
	unsigned want, version = 0;
	if (sscanf(buf, "lotus-manifest %u\n", &version) == 1 && version > CK_MANIFEST_VERSION) {
		log_error("ckpt: %s was written by a newer lotus: manifest format version %u, and "
			  "this lotus reads versions up to %u.  Refusing to start: run the newer lotus",
			  path, version, CK_MANIFEST_VERSION);
		rc = -EPROTO;
		goto out;
	}
	if (strncmp(buf, "lotus-manifest 1\n", 17) || !crcline ||
	    sscanf(crcline + 5, "%x", &want) != 1 ||
	    crc32c(0, buf, (size_t)(crcline + 1 - buf)) != want) {
		log_error("ckpt: %s is damaged (bad header or CRC); recovery cannot continue", path);
		goto out;
	}
	*crcline = '\0';
	char *save = NULL;
	unsigned have_need = 0;
	for (char *ln = strtok_r(buf, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save)) {
		char key[32], val[200];
		unsigned id, maxv;
		if (sscanf(ln, "table %u %u %199s", &id, &maxv, val) == 3) {
			if (id != m->ntables || id >= STORE_MAX_TABLES)
				goto bad;
			name_decode(val, m->tables[id].name, sizeof(m->tables[id].name));
			m->tables[id].max_value = maxv;
			m->ntables++;
			continue;
		}
		if (sscanf(ln, "%31s %199s", key, val) != 2)
			continue;
		uint64_t v = strtoull(val, NULL, 10);
		if (!strcmp(key, "page_size")) m->page_size = (uint32_t)v;
		else if (!strcmp(key, "seq")) m->cur.seq = v;
		else if (!strcmp(key, "begin_lsn")) m->cur.begin_lsn = v;
		else if (!strcmp(key, "pages_used")) m->cur.pages_used = v;
		else if (!strcmp(key, "prev_seq")) m->prev.seq = v;
		else if (!strcmp(key, "prev_begin_lsn")) m->prev.begin_lsn = v;
		else if (!strcmp(key, "prev_pages_used")) m->prev.pages_used = v;
		else if (!strcmp(key, "log_kept_from")) m->log_from = v;
		else if (!strcmp(key, "need_lsn")) m->cur.need_lsn = v, have_need |= 1;
		else if (!strcmp(key, "prev_need_lsn")) m->prev.need_lsn = v, have_need |= 2;
		else if (!strcmp(key, "image") && image_of(val, &m->cur.image)) goto bad;
		else if (!strcmp(key, "prev_image") && image_of(val, &m->prev.image)) goto bad;
	}
	if (!m->cur.seq || !m->page_size)
		goto bad;
	/* manifests written before need_lsn existed: the begin LSN (their rule) */
	if (!(have_need & 1))
		m->cur.need_lsn = m->cur.begin_lsn;
	if (!(have_need & 2))
		m->prev.need_lsn = m->prev.begin_lsn;
	rc = 0;
	goto out;
bad:
	log_error("ckpt: %s: malformed line; recovery cannot continue", path);
out:
	free(buf);
	return rc;
}

/* Read DIR/pages-X.crc.  0 (crc malloc'ed, *n entries), or -errno / -EIO. */
int ck_crc_read(const char *dir, unsigned image, uint64_t seq, uint32_t page_size,
		uint32_t **crc, uint64_t *n, int quiet)
{
	char path[4200];
	ck_path(path, sizeof(path), dir, ck_image_name(image, 1));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = -errno;
		if (!quiet)
			log_error("ckpt: open %s: %s", path, strerror(errno));
		return err;
	}
	struct crc_hdr h;
	int rc = -EIO;
	uint32_t *v = NULL;
	if (pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && h.magic == CK_CRC_MAGIC &&
	    h.version > CK_CRC_VERSION) {
		log_error("ckpt: %s was written by a newer lotus: checkpoint format version %u, and "
			  "this lotus reads versions up to %u.  Refusing to start: run the newer lotus", path, h.version,
			  CK_CRC_VERSION);
		rc = -EPROTO;
		goto out;
	}
	struct stat st;
	/* npages must fit the file (it is exactly the header and the entries):
	 * a flipped high byte must not become a many-GiB allocation */
	if (h.magic != CK_CRC_MAGIC || h.page_size != page_size || h.npages > (1ull << 40) ||
	    fstat(fd, &st) || (uint64_t)st.st_size != sizeof(h) + h.npages * sizeof(uint32_t)) {
		if (!quiet)
			log_error("ckpt: %s: bad header", path);
		goto out;
	}
	if (seq && h.seq != seq) {
		if (!quiet)
			log_error("ckpt: %s belongs to checkpoint %" PRIu64 ", not %" PRIu64, path,
				  h.seq, seq);
		goto out;
	}
	v = malloc(MAX(h.npages, 1) * sizeof(*v));
	rc = -ENOMEM;
	if (!v)
		goto out;
	rc = -EIO;
	size_t bytes = h.npages * sizeof(*v);
	if (pread(fd, v, bytes, sizeof(h)) != (ssize_t)bytes || crc32c(0, v, bytes) != h.crc) {
		if (!quiet)
			log_error("ckpt: %s is damaged (short or bad CRC)", path);
		free(v);
		v = NULL;
		goto out;
	}
	*crc = v;
	*n = h.npages;
	rc = 0;
out:
	close(fd);
	return rc;
}

int ck_crc_write(struct ckpt *c, unsigned image, uint64_t seq, uint64_t npages)
{
	struct crc_hdr h = { .magic = CK_CRC_MAGIC, .seq = seq, .npages = npages,
			     .page_size = c->page_size, .version = CK_CRC_VERSION };
	h.crc = crc32c(0, c->crc[image], npages * sizeof(uint32_t));
	return replace_file(c->dir, ck_image_name(image, 1), &h, sizeof(h), c->crc[image],
			    npages * sizeof(uint32_t));
}
