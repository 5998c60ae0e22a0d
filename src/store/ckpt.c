/*
 * ckpt.c - fuzzy checkpoints (the page writer) and page recovery.
 *
 * Files in DIR (see docs/durability.md):
 *   pages-a.dat, pages-b.dat   page images; page p at offset p * page_size
 *   pages-a.crc, pages-b.crc   CRC32C of every page of that image (header +
 *                              u32 per page; replaced atomically)
 *   MANIFEST                   the last checkpoint: seq, image, begin LSN,
 *                              pages used, the previous checkpoint, tables
 *
 * Two images alternate: checkpoint seq writes image seq & 1, so the image of
 * the previous checkpoint is never touched while a new one is written.  A
 * crash in the middle of a checkpoint leaves the manifest's image intact, and
 * a damaged page in the newest image is recovered from the previous image
 * plus a longer log replay (the log is kept back to the previous checkpoint's
 * begin LSN).  Each image is written only with the pages that differ from
 * what it holds: stale[p] has one bit per image, set when the store reports
 * the page dirty (or the page is new), cleared when that image gets it.
 *
 * One checkpoint (ckpt_run):
 *   1. gate closed: begin = redo_next_lsn(), P = pages used, tables; open
 *   2. collect dirty pages -> stale bits of both images
 *   3. per batch of pages of image seq&1 with a stale bit, p <= P:
 *        (tiered store: pin the batch first, reading in pages that are not
 *        resident, so no miss read happens with the gate closed)
 *        gate closed: copy the pages to the staging buffer, hi = redo_next_lsn()
 *        gate open; CRC the copies; redo_wait(hi)       (write-ahead rule)
 *        write the copies (runs of adjacent pages coalesced, <= 1 MiB each),
 *        up to max_inflight pages in flight
 *   4. fdatasync the image; write pages-X.crc (temp, fsync, rename, fsync dir)
 *   5. write MANIFEST the same way
 *   6. redo_truncate(min(previous need, this need, keep_lsn)); need = min(begin,
 *      keep_lsn when begin was taken): the PREPAREs open at an image's begin
 *
 * The change gate.  A worker brackets "append the redo record, apply it to
 * the store" with ckpt_change_begin/end.  The checkpointer closes the gate
 * (new changes wait) and waits until no change is in flight, so (a) begin is
 * an LSN below which every change is applied, and (b) a page copy never holds
 * half a change.  Without (a) a change logged before begin but applied after
 * its page was copied would be lost; without (b) store_rebuild could meet a
 * half-written slot.  The gate makes each page consistent, not the image:
 * pages are copied at different moments (a page clean at step 2 keeps the
 * copy the image already has), so a record that moved during the checkpoint
 * (deleted, re-inserted into a slot on another page) can be in the image
 * twice.  store_rebuild keeps one copy and replay from begin settles the key.
 * The gate is a sharded counter: a change costs two
 * atomic adds on a per-thread cache line; the gate is closed for one copy
 * batch at a time (a few hundred microseconds).
 *
 * Threads: ckpt_run is serialised by run_mu (the page writer thread and an
 * explicit call may race); each run creates its own io_ctx, so the thread
 * rule of io.h holds whichever thread runs it.  ckpt_set_keep_lsn and the
 * gate from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "common/crash.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "store/ckpt.h"
#include "store/pwriter.h"

#define CK_GATE_SHARDS   64
#define CK_COPY_BATCH    256u           /* pages copied per gate closure */
#define CK_MAX_RUN       (1u << 20)     /* bytes per coalesced write */
#define CK_READ_CHUNK    (1u << 20)
#define CK_READ_DEPTH    256u
#define CK_CRC_MAGIC     0x3143524350434b4cull  /* "LKCPCRC1" */
#define CK_MANIFEST      "MANIFEST"
#define CK_DEF_INFLIGHT  4096u
#define CK_DEF_TRIGGER   (256ull << 20)

#define LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/* pages-X.crc header; u32 crc[npages] follows. */
struct crc_hdr {
	uint64_t magic;
	uint64_t seq;
	uint64_t npages;     /* entries that follow: pages 0..npages-1 */
	uint32_t page_size;
	uint32_t crc;        /* CRC32C of the entries */
	uint64_t reserved[4];
};
_Static_assert(sizeof(struct crc_hdr) == 64, "crc header is 64 bytes");

/* What the manifest says about one checkpoint. */
struct ck_info {
	uint64_t seq;        /* 0: none */
	uint64_t begin_lsn, pages_used;
	uint64_t need_lsn;   /* recovery from this image reads the log from here:
			      * min(begin, oldest PREPARE undecided at begin) */
	unsigned image;      /* 0 = a, 1 = b */
};

struct gate_shard {
	int64_t active;
} __attribute__((aligned(CACHELINE)));

/* The log-growth trigger: a redo_notify callback may outlive the ckpt. */
struct trigger {
	pthread_mutex_t mu;
	int refs;
	struct ckpt *c;      /* NULL once the ckpt closed */
};

struct ckpt {
	store_t *st;
	redo_t *log;
	char dir[4096];
	unsigned max_inflight;
	enum io_backend backend;
	uint64_t log_trigger;
	unsigned interval_ms;
	int checkpoint_on_close;
	uint32_t page_size;
	uint64_t npages;            /* pool pages (tiered: logical pages) */
	int tiered;                 /* store_tiered(): pages are reached through pins */
	unsigned pin_max;           /* tiered: most pages pinned at once */

	/* gate */
	int closed;
	struct gate_shard gate[CK_GATE_SHARDS];

	/* run state, under run_mu */
	pthread_mutex_t run_mu;
	uint8_t *stale;             /* per page: bit i = image i must be rewritten */
	uint32_t *crc[2];           /* per image: CRC of each page it holds */
	uint64_t crc_n[2];          /* entries valid in crc[i] (pages 0..n-1) */
	uint64_t marked_upto;       /* pages <= this had their stale bits set once */
	struct ck_info last, prev;
	uint64_t seq_floor;
	uint64_t recovered_seq;     /* ckpt_opts.recovered_seq */
	void (*on_begin)(void *arg);
	void *on_begin_arg;         /* after a fallback: the damaged checkpoint's seq */
	unsigned char *staging;
	size_t staging_bytes;
	int own_staging;            /* mmap'ed here (else the caller's: ckpt_opts) */
	/* Through the page writers (ckpt_opts.writers): each image's fd, open
	 * for the ckpt's life, and its file id in the writers' rings. */
	pwriter_t *pw;
	int pw_fd[2], pw_file[2];
	unsigned pw_next;           /* round robin over the writers */
	uint64_t keep_lsn;          /* atomic */

	/* page writer thread */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int thread_started, stop, kicked, armed;
	struct trigger *trig;
	uint64_t last_begin;        /* atomic: begin LSN of the last checkpoint */
};

static __thread unsigned gate_slot = UINT32_MAX;
static unsigned gate_next;

/* ---- the change gate ---- */

static void gate_pause(unsigned *spins)
{
	if (++*spins < 64) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 20000 };
		nanosleep(&ts, NULL);
	}
}

unsigned ckpt_change_begin(ckpt_t *c)
{
	if (!c)
		return 0;
	if (gate_slot == UINT32_MAX)
		gate_slot = __atomic_fetch_add(&gate_next, 1, __ATOMIC_RELAXED) % CK_GATE_SHARDS;
	struct gate_shard *g = &c->gate[gate_slot];
	unsigned spins = 0;
	for (;;) {
		while (__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST))
			gate_pause(&spins);
		__atomic_fetch_add(&g->active, 1, __ATOMIC_SEQ_CST);
		if (!__atomic_load_n(&c->closed, __ATOMIC_SEQ_CST))
			return gate_slot;
		__atomic_fetch_sub(&g->active, 1, __ATOMIC_SEQ_CST);
	}
}

void ckpt_change_end(ckpt_t *c, unsigned token)
{
	if (c)
		__atomic_fetch_sub(&c->gate[token % CK_GATE_SHARDS].active, 1, __ATOMIC_SEQ_CST);
}

static void gate_close(struct ckpt *c)
{
	__atomic_store_n(&c->closed, 1, __ATOMIC_SEQ_CST);
	unsigned spins = 0;
	for (;;) {
		int64_t n = 0;
		for (unsigned i = 0; i < CK_GATE_SHARDS; i++)
			n += __atomic_load_n(&c->gate[i].active, __ATOMIC_SEQ_CST);
		if (n == 0)
			return;
		gate_pause(&spins);
	}
}

static void gate_open(struct ckpt *c)
{
	__atomic_store_n(&c->closed, 0, __ATOMIC_SEQ_CST);
}

/* ---- files ---- */

static void ck_path(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static const char *image_name(unsigned image, int crc)
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

static int manifest_write(struct ckpt *c, const struct ck_info *cur, const struct ck_info *prev,
			  uint64_t log_from)
{
	size_t cap = 4096 + (size_t)store_table_count(c->st) * 200, len = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
#define EMIT(...) (len += (size_t)snprintf(buf + len, cap - len, __VA_ARGS__))
	EMIT("lotus-manifest 1\n");
	EMIT("page_size %u\n", c->page_size);
	EMIT("seq %" PRIu64 "\nimage %s\nbegin_lsn %" PRIu64 "\npages_used %" PRIu64
	     "\nneed_lsn %" PRIu64 "\n", cur->seq, image_name(cur->image, 0), cur->begin_lsn,
	     cur->pages_used, cur->need_lsn);
	if (prev->seq)
		EMIT("prev_seq %" PRIu64 "\nprev_image %s\nprev_begin_lsn %" PRIu64
		     "\nprev_pages_used %" PRIu64 "\nprev_need_lsn %" PRIu64 "\n", prev->seq,
		     image_name(prev->image, 0), prev->begin_lsn, prev->pages_used,
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

struct manifest {
	uint32_t page_size;
	struct ck_info cur, prev;
	uint64_t log_from;
	unsigned ntables;
	struct { char name[STORE_TABLE_NAME_MAX + 1]; uint32_t max_value; } tables[STORE_MAX_TABLES];
};

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
static int manifest_read(const char *dir, struct manifest *m)
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
	unsigned want;
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
static int crc_read(const char *dir, unsigned image, uint64_t seq, uint32_t page_size,
		    uint32_t **crc, uint64_t *n, int quiet)
{
	char path[4200];
	ck_path(path, sizeof(path), dir, image_name(image, 1));
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
	if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != CK_CRC_MAGIC ||
	    h.page_size != page_size || h.npages > (1ull << 40)) {
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

static int crc_write(struct ckpt *c, unsigned image, uint64_t seq, uint64_t npages)
{
	struct crc_hdr h = { .magic = CK_CRC_MAGIC, .seq = seq, .npages = npages,
			     .page_size = c->page_size };
	h.crc = crc32c(0, c->crc[image], npages * sizeof(uint32_t));
	return replace_file(c->dir, image_name(image, 1), &h, sizeof(h), c->crc[image],
			    npages * sizeof(uint32_t));
}

/* ---- one checkpoint ---- */

struct run {
	struct ckpt *c;
	io_ctx_t *ctx;
	int file;
	unsigned image;
	uint64_t *slot_page;        /* staging slot -> page */
	uint32_t *slot_crc;
	unsigned staged, inflight;  /* slots used; pages in flight */
	uint64_t ios, pages;
	int err;
	/* page-writer mode: batches handed to the writers, completed in order */
	struct pw_page *slot_pp;
	int *slot_status;
	struct ck_batch *batches;
	unsigned bhead, btail;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int pw_inited;              /* mu, cv initialised */
};

/* One batch of copies handed to a page writer (pwriter_submit). */
struct ck_batch {
	struct run *r;
	unsigned first, n;
	int done;                   /* under r->mu */
};

static void batch_written(void *arg, int rc)
{
	struct ck_batch *b = arg;
	(void)rc;                   /* per page in slot_status */
	pthread_mutex_lock(&b->r->mu);
	b->done = 1;
	pthread_cond_broadcast(&b->r->cv);
	pthread_mutex_unlock(&b->r->mu);
}

/* Page-writer mode: take back the oldest batch (waiting for it). */
static void batch_reap_one(struct run *r)
{
	struct ck_batch *b = &r->batches[r->bhead % r->c->max_inflight];
	pthread_mutex_lock(&r->mu);
	while (!b->done)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
	for (unsigned j = 0; j < b->n; j++) {
		unsigned slot = b->first + j;
		if (r->slot_status[slot]) {
			if (!r->err)
				r->err = r->slot_status[slot];
			continue;
		}
		uint64_t p = r->slot_page[slot];
		r->c->stale[p] &= (uint8_t)~(1u << r->image);
		r->c->crc[r->image][p] = r->slot_crc[slot];
		r->pages++;
	}
	r->inflight -= b->n;
	r->bhead++;
}

static void run_complete(struct run *r, const struct io_cqe *e)
{
	unsigned slot = (unsigned)e->user_data, k = (unsigned)(e->user_data >> 32);
	r->inflight -= k;
	if (e->res != (int64_t)k * r->c->page_size) {
		if (!r->err)
			r->err = e->res < 0 ? (int)e->res : -EIO;
		return;
	}
	for (unsigned j = 0; j < k; j++) {
		uint64_t p = r->slot_page[slot + j];
		r->c->stale[p] &= (uint8_t)~(1u << r->image);
		r->c->crc[r->image][p] = r->slot_crc[slot + j];
	}
	r->pages += k;
}

static int run_reap(struct run *r, unsigned until_inflight)
{
	struct io_cqe cqes[64];
	while (r->c->pw && r->inflight > until_inflight)
		batch_reap_one(r);
	while (r->inflight > until_inflight) {
		int n = io_reap(r->ctx, cqes, ARRAY_SIZE(cqes), 1);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++)
			run_complete(r, &cqes[i]);
	}
	return 0;
}

/* Untiered: copy up to CK_COPY_BATCH stale pages from *next on out of the
 * pool, gate closed.  Returns the count; *hi = the log tail at the copy. */
static unsigned copy_pool_pages(struct run *r, uint64_t *next, uint64_t last, uint64_t *hi)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	uint8_t bit = (uint8_t)(1u << r->image);
	size_t pool_bytes;
	unsigned char *pool = store_pool(c->st, &pool_bytes);
	unsigned first = r->staged, n = 0;
	uint64_t p = *next;
	gate_close(c);
	for (; p <= last && n < CK_COPY_BATCH; p++) {
		if (!(c->stale[p] & bit))
			continue;
		memcpy(c->staging + (size_t)(first + n) * ps, pool + p * ps, ps);
		r->slot_page[first + n++] = p;
	}
	*hi = c->log ? redo_next_lsn(c->log) : 0;
	gate_open(c);
	*next = p;
	return n;
}

/* Tiered: pin the next stale pages first (a page that is not resident is
 * faulted in here, outside the gate: a miss read must not stall the
 * writers), then copy them with the gate closed, then unpin.  At most
 * pin_max pins at once, so the checkpoint never holds a large share of the
 * frames.  Returns the count, or a pin error (-EIO, LOTUS_ENOSPACE). */
static int copy_pinned_pages(struct run *r, uint64_t *next, uint64_t last, uint64_t *hi)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	uint8_t bit = (uint8_t)(1u << r->image);
	unsigned first = r->staged, n = 0, max = MIN(CK_COPY_BATCH, c->pin_max);
	unsigned char *bufs[CK_COPY_BATCH];
	uint64_t p = *next;
	int rc = 0;
	for (; p <= last && n < max; p++) {
		if (!(c->stale[p] & bit))
			continue;
		bufs[n] = store_page_get(c->st, p, &rc);
		if (!bufs[n]) {
			log_error("ckpt: page %" PRIu64 " cannot be read in for the checkpoint: %s",
				  p, lotus_strerror(rc));
			break;
		}
		r->slot_page[first + n++] = p;
	}
	if (!rc) {
		gate_close(c);
		for (unsigned i = 0; i < n; i++)
			memcpy(c->staging + (size_t)(first + i) * ps, bufs[i], ps);
		*hi = c->log ? redo_next_lsn(c->log) : 0;
		gate_open(c);
	}
	for (unsigned i = 0; i < n; i++)
		store_page_put(c->st, r->slot_page[first + i]);
	*next = p;
	return rc ? rc : (int)n;
}

/* Page-writer mode: the copies in slots first..first+n go to the next page
 * writer as one job (it coalesces adjacent pages: adjacent slots hold
 * ascending pages, and the staging buffer is registered with the pool). */
static int submit_to_writers(struct run *r, unsigned first, unsigned n)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	for (unsigned i = 0; i < n; i++) {
		unsigned slot = first + i;
		r->slot_pp[slot] = (struct pw_page){ .page = r->slot_page[slot],
						     .buf = c->staging + (size_t)slot * ps };
		r->slot_status[slot] = 1;
		if (i == 0 || r->slot_page[slot] != r->slot_page[slot - 1] + 1)
			r->ios++;   /* runs of adjacent pages, as the writer merges them */
	}
	struct ck_batch *b = &r->batches[r->btail % c->max_inflight];
	*b = (struct ck_batch){ .r = r, .first = first, .n = n };
	int rc = pwriter_submit(c->pw, c->pw_next++, c->pw_file[r->image], &r->slot_pp[first], n,
				&r->slot_status[first], batch_written, b);
	if (rc)
		return rc;
	r->btail++;
	r->inflight += n;
	r->staged += n;
	return 0;
}

/* Copy a batch of stale pages (gate closed), make the log durable past
 * every change in them, and write them. */
static int run_batch(struct run *r, uint64_t *next, uint64_t last)
{
	struct ckpt *c = r->c;
	uint32_t ps = c->page_size;
	unsigned first = r->staged, n;
	uint64_t hi = 0;
	if (c->tiered) {
		int k = copy_pinned_pages(r, next, last, &hi);
		if (k < 0)
			return k;
		n = (unsigned)k;
	} else {
		n = copy_pool_pages(r, next, last, &hi);
	}
	if (!n)
		return 0;
	for (unsigned i = 0; i < n; i++)
		r->slot_crc[first + i] = crc32c(0, c->staging + (size_t)(first + i) * ps, ps);
	if (c->log) {
		int rc = redo_wait(c->log, hi);  /* the write-ahead rule */
		if (rc)
			return rc;
	}
	if (c->pw)
		return submit_to_writers(r, first, n);
	unsigned max_run = CK_MAX_RUN / ps ? CK_MAX_RUN / ps : 1;
	for (unsigned i = 0; i < n;) {
		unsigned k = 1;
		while (i + k < n && k < max_run &&
		       r->slot_page[first + i + k] == r->slot_page[first + i] + k)
			k++;
		unsigned slot = first + i;
		int rc = io_prep_write(r->ctx, r->file, c->staging + (size_t)slot * ps, (size_t)k * ps,
				       (off_t)(r->slot_page[slot] * ps),
				       (uint64_t)slot | (uint64_t)k << 32);
		if (rc == -EAGAIN) {
			rc = io_submit_batch(r->ctx);
			if (rc >= 0)
				rc = run_reap(r, r->inflight / 2);
			if (rc < 0)
				return rc;
			continue;
		}
		if (rc < 0)
			return rc;
		r->inflight += k;
		r->ios++;
		i += k;
	}
	r->staged += n;
	int rc = io_submit_batch(r->ctx);
	return rc < 0 ? rc : 0;
}

/* Set both stale bits of every dirty page and of pages new since last time. */
static void collect_dirty(struct ckpt *c, uint64_t pages_used)
{
	uint64_t buf[4096], cursor = 0;
	for (uint64_t p = c->marked_upto + 1; p <= pages_used; p++)
		c->stale[p] = 3;
	c->marked_upto = MAX(c->marked_upto, pages_used);
	for (;;) {
		size_t n = store_dirty_collect(c->st, &cursor, buf, ARRAY_SIZE(buf));
		for (size_t i = 0; i < n; i++)
			c->stale[buf[i]] = 3;
		if (n < ARRAY_SIZE(buf))
			break;
	}
}

static int run_setup(struct run *r, struct ckpt *c, unsigned image)
{
	char path[4200];
	memset(r, 0, sizeof(*r));
	r->c = c;
	r->image = image;
	r->file = -1;
	r->slot_page = malloc(c->max_inflight * sizeof(*r->slot_page));
	r->slot_crc = malloc(c->max_inflight * sizeof(*r->slot_crc));
	if (!r->slot_page || !r->slot_crc)
		return -ENOMEM;
	if (c->pw) {   /* the writers' rings hold the image fds already */
		pthread_mutex_init(&r->mu, NULL);
		pthread_cond_init(&r->cv, NULL);
		r->pw_inited = 1;
		r->slot_pp = malloc(c->max_inflight * sizeof(*r->slot_pp));
		r->slot_status = malloc(c->max_inflight * sizeof(*r->slot_status));
		r->batches = malloc(c->max_inflight * sizeof(*r->batches));
		if (!r->slot_pp || !r->slot_status || !r->batches)
			return -ENOMEM;
		return c->pw_fd[image];
	}
	ck_path(path, sizeof(path), c->dir, image_name(image, 0));
	int fd = io_open_direct(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		return fd;
	struct io_opts o = { .backend = c->backend, .depth = MIN(c->max_inflight, 4096u),
			     .flags = IO_F_NO_CPU_STATS };
	int rc = io_ctx_create(&o, &r->ctx);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	io_ctx_register_buffer(r->ctx, c->staging, c->staging_bytes);
	r->file = io_ctx_add_file(r->ctx, fd);
	if (r->file < 0) {
		close(fd);
		return r->file;
	}
	return fd;
}

static void run_teardown(struct run *r, int fd, struct ckpt_stats *out)
{
	if (r->ctx) {
		struct io_stats io;
		io_ctx_stats(r->ctx, &io);
		out->syscalls = io.sys_enter + io.sys_submit + io.sys_getevents + io.sys_pwrite;
		out->backend = io_backend_name(io_ctx_backend(r->ctx));
		io_ctx_destroy(r->ctx);
	}
	if (r->c->pw) {   /* fd is the ckpt's; every batch was reaped */
		out->backend = "page writers";
		free(r->slot_pp);
		free(r->slot_status);
		free(r->batches);
		if (r->pw_inited) {
			pthread_mutex_destroy(&r->mu);
			pthread_cond_destroy(&r->cv);
		}
	} else if (fd >= 0) {
		close(fd);
	}
	free(r->slot_page);
	free(r->slot_crc);
}

static int ckpt_run_locked(struct ckpt *c, struct ckpt_stats *out)
{
	uint64_t t0 = clock_now_ns(), cpu0 = clock_thread_cpu_ns();
	struct ck_info cur = { .seq = c->last.seq + 1 };
	while (cur.seq <= c->seq_floor)   /* never into the image recovery came from */
		cur.seq += 2;
	cur.image = (unsigned)(cur.seq & 1);
	struct store_stats ss;
	gate_close(c);
	cur.begin_lsn = c->log ? redo_next_lsn(c->log) : 0;
	/* With the gate closed every PREPARE below begin has set the keep LSN (it
	 * is appended inside the gate), so this is the oldest one still open. */
	cur.need_lsn = MIN(cur.begin_lsn, LOAD(&c->keep_lsn));
	store_stats(c->st, &ss);
	gate_open(c);
	if (c->on_begin)
		c->on_begin(c->on_begin_arg);
	cur.pages_used = ss.pages_used;
	collect_dirty(c, cur.pages_used);

	struct run r;
	int fd = run_setup(&r, c, cur.image), rc = fd < 0 ? fd : 0;
	uint64_t next = 1;
	while (!rc && next <= cur.pages_used) {
		if (r.staged + CK_COPY_BATCH > c->max_inflight) {
			rc = run_reap(&r, 0);
			r.staged = 0;
			if (rc || r.err)
				break;
		}
		rc = run_batch(&r, &next, cur.pages_used);
	}
	int rc2 = r.ctx || c->pw ? run_reap(&r, 0) : 0;
	rc = rc ? rc : rc2 ? rc2 : r.err;
	if (!rc && fdatasync(fd))
		rc = -errno;
	run_teardown(&r, fd, out);
	if (!rc)
		crash_point("checkpoint");  /* tests: pages written, manifest not */
	if (!rc)
		rc = crc_write(c, cur.image, cur.seq, cur.pages_used + 1);
	uint64_t keep = LOAD(&c->keep_lsn);
	/* Keep what a recovery from either image needs: the previous image (the
	 * fallback) replays from its begin and needs the PREPAREs that were open
	 * when it began, even if they were decided since. */
	uint64_t log_from = MIN(c->last.seq ? MIN(c->last.need_lsn, cur.need_lsn) : cur.need_lsn,
				keep);
	if (!rc)
		rc = manifest_write(c, &cur, &c->last, log_from);
	if (rc) {
		log_error("ckpt: checkpoint %" PRIu64 " to %s/%s failed: %s; the previous one "
			  "stays in effect", cur.seq, c->dir, image_name(cur.image, 0),
			  lotus_strerror(rc));
		return rc;
	}
	c->prev = c->last;
	c->last = cur;
	STORE(&c->last_begin, cur.begin_lsn);
	if (c->log)
		redo_truncate(c->log, log_from);
	out->begin_lsn = cur.begin_lsn;
	out->pages = r.pages;
	out->bytes = r.pages * c->page_size;
	out->ios = r.ios;
	out->elapsed_ns = clock_now_ns() - t0;
	out->cpu_ns = clock_thread_cpu_ns() - cpu0;
	log_debug("ckpt: checkpoint %" PRIu64 ": %" PRIu64 " pages to %s in %.1f ms, begin LSN %"
		  PRIu64, cur.seq, r.pages, image_name(cur.image, 0), out->elapsed_ns / 1e6,
		  cur.begin_lsn);
	return 0;
}

int ckpt_run(ckpt_t *c, struct ckpt_stats *out)
{
	struct ckpt_stats tmp;
	if (!out)
		out = &tmp;
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&c->run_mu);
	int rc = ckpt_run_locked(c, out);
	pthread_mutex_unlock(&c->run_mu);
	return rc;
}

void ckpt_set_keep_lsn(ckpt_t *c, uint64_t lsn)
{
	STORE(&c->keep_lsn, lsn);
}

/* ---- the page writer thread ---- */

static void trigger_put(struct trigger *t)
{
	pthread_mutex_lock(&t->mu);
	int last = --t->refs == 0;
	pthread_mutex_unlock(&t->mu);
	if (last) {
		pthread_mutex_destroy(&t->mu);
		free(t);
	}
}

static void trigger_fired(void *arg, int status)
{
	struct trigger *t = arg;
	pthread_mutex_lock(&t->mu);
	struct ckpt *c = t->c;
	if (c) {
		pthread_mutex_lock(&c->mu);
		if (status == 0)
			c->kicked = 1;
		c->armed = 0;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
	pthread_mutex_unlock(&t->mu);
	trigger_put(t);
}

static void *page_writer_main(void *arg)
{
	struct ckpt *c = arg;
	struct timespec deadline;
	clock_deadline_in(CLOCK_MONOTONIC, &deadline, c->interval_ms);
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		/* not while kicked: a target durable already fires at once, and
		 * arming again before running the checkpoint would spin */
		if (c->log && c->log_trigger && !c->armed && !c->kicked && redo_status(c->log) == 0) {
			uint64_t target = LOAD(&c->last_begin) + c->log_trigger;
			c->armed = 1;
			/* Lock order is trig->mu, then c->mu (trigger_fired): take the
			 * callback's reference only after letting go of c->mu.  The
			 * ckpt's own reference keeps trig alive meanwhile. */
			pthread_mutex_unlock(&c->mu);
			pthread_mutex_lock(&c->trig->mu);
			c->trig->refs++;
			pthread_mutex_unlock(&c->trig->mu);
			if (redo_notify(c->log, target, trigger_fired, c->trig))
				trigger_put(c->trig);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		int timed_out = 0;
		if (!c->kicked) {
			if (c->interval_ms)
				timed_out = pthread_cond_timedwait(&c->cv, &c->mu, &deadline) == ETIMEDOUT;
			else
				pthread_cond_wait(&c->cv, &c->mu);
		}
		if (c->stop || (!c->kicked && !timed_out))
			continue;
		c->kicked = 0;
		pthread_mutex_unlock(&c->mu);
		if (!c->log || redo_next_lsn(c->log) != LOAD(&c->last_begin) || !timed_out) {
			struct ckpt_stats s;
			ckpt_run(c, &s);
		}
		pthread_mutex_lock(&c->mu);
		clock_deadline_in(CLOCK_MONOTONIC, &deadline, c->interval_ms);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int ckpt_start(ckpt_t *c)
{
	if (c->thread_started)
		return 0;
	int rc = -pthread_create(&c->thread, NULL, page_writer_main, c);
	if (!rc)
		c->thread_started = 1;
	return rc;
}

/* ---- open / close ---- */

/* After recovery: which pages does each image already hold?  Compare the
 * store's pages with the CRCs of both images; the rest is stale. */
static void ckpt_load_state(struct ckpt *c)
{
	struct manifest *m = malloc(sizeof(*m));
	if (!m || manifest_read(c->dir, m) || m->page_size != c->page_size) {
		free(m);
		return;  /* new database (or unreadable): every page is new */
	}
	c->last = m->cur;
	c->prev = m->prev;
	const struct ck_info *infos[2] = { &m->cur, &m->prev };
	if (c->recovered_seq && c->recovered_seq == m->prev.seq) {
		/* Recovery fell back: the newest image is damaged.  The next
		 * checkpoint rewrites that image (all of it) and keeps the one the
		 * store came from. */
		c->last = m->prev;
		c->prev = (struct ck_info){ 0 };
		c->seq_floor = m->cur.seq;
		infos[0] = &m->prev;
		infos[1] = &c->prev;
	}
	STORE(&c->last_begin, c->last.begin_lsn);
	for (int i = 0; i < 2; i++) {
		const struct ck_info *ci = infos[i];
		uint32_t *v;
		uint64_t n;
		if (!ci->seq || crc_read(c->dir, ci->image, ci->seq, c->page_size, &v, &n, 1))
			continue;
		n = MIN(n, c->npages);
		memcpy(c->crc[ci->image], v, n * sizeof(*v));
		c->crc_n[ci->image] = n;
		free(v);
	}
	free(m);
	struct store_stats ss;
	store_stats(c->st, &ss);
	if (c->tiered) {
		/* Pages are not all in memory: what recovery loaded is its image
		 * (every page's CRC was checked), so that image is current for each
		 * of them and the other one where its CRC differs.  Pages changed
		 * since (log replay) are dirty in the store: collect_dirty marks them. */
		unsigned li = c->last.image & 1, oi = li ^ 1;
		for (uint64_t p = 1; p <= ss.pages_used && p < c->npages; p++) {
			uint8_t bits = 0;
			if (p >= c->crc_n[li])
				bits = 3;
			else if (p >= c->crc_n[oi] || c->crc[oi][p] != c->crc[li][p])
				bits = (uint8_t)(1u << oi);
			c->stale[p] |= bits;
		}
		c->marked_upto = ss.pages_used;
		return;
	}
	size_t pool_bytes;
	const unsigned char *pool = store_pool(c->st, &pool_bytes);
	for (uint64_t p = 1; p <= ss.pages_used; p++) {
		uint32_t crc = crc32c(0, pool + p * c->page_size, c->page_size);
		uint8_t bits = 0;
		for (unsigned i = 0; i < 2; i++)
			if (p >= c->crc_n[i] || c->crc[i][p] != crc)
				bits |= (uint8_t)(1u << i);
		c->stale[p] |= bits;
	}
	c->marked_upto = ss.pages_used;
}

/* Checkpoints through the page writers: both images open for the ckpt's
 * life, each added to every writer's ring once. */
static int ckpt_open_writers(struct ckpt *c, pwriter_t *pw)
{
	char path[4200];
	for (unsigned i = 0; i < 2; i++) {
		ck_path(path, sizeof(path), c->dir, image_name(i, 0));
		c->pw_fd[i] = io_open_direct(path, O_RDWR | O_CREAT, 0644);
		if (c->pw_fd[i] < 0)
			return c->pw_fd[i];
		c->pw_file[i] = pwriter_add_file(pw, c->pw_fd[i]);
		if (c->pw_file[i] < 0) {
			log_error("ckpt: the page writers cannot take %s: %s", path,
				  strerror(-c->pw_file[i]));
			return c->pw_file[i];
		}
	}
	c->pw = pw;
	return 0;
}

int ckpt_open(store_t *st, redo_t *log, const struct ckpt_opts *o, ckpt_t **out)
{
	if (!st || !o || !o->dir || !out || strlen(o->dir) >= sizeof(((struct ckpt *)0)->dir))
		return -EINVAL;
	*out = NULL;
	struct ckpt *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int rc = -ENOMEM;
	snprintf(c->dir, sizeof(c->dir), "%s", o->dir);
	c->st = st;
	c->log = log;
	c->max_inflight = o->max_inflight ? o->max_inflight : CK_DEF_INFLIGHT;
	c->max_inflight = MAX(c->max_inflight, CK_COPY_BATCH);
	c->backend = o->backend;
	c->log_trigger = o->log_trigger ? o->log_trigger : CK_DEF_TRIGGER;
	c->interval_ms = o->interval_ms;
	c->checkpoint_on_close = o->checkpoint_on_close;
	c->recovered_seq = o->recovered_seq;
	c->on_begin = o->on_begin;
	c->on_begin_arg = o->on_begin_arg;
	c->page_size = store_page_size(st);
	size_t pool_bytes;
	store_pool(st, &pool_bytes);
	c->tiered = store_tiered(st);
	c->npages = c->tiered ? store_npages(st) : pool_bytes / c->page_size;
	c->pin_max = (unsigned)MAX(MIN((uint64_t)CK_COPY_BATCH, pool_bytes / c->page_size / 8), 1);
	c->keep_lsn = UINT64_MAX;
	pthread_mutex_init(&c->run_mu, NULL);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->stale = calloc(c->npages, 1);
	c->crc[0] = calloc(c->npages, sizeof(uint32_t));
	c->crc[1] = calloc(c->npages, sizeof(uint32_t));
	c->trig = calloc(1, sizeof(*c->trig));
	c->staging_bytes = (size_t)c->max_inflight * c->page_size;
	c->pw_fd[0] = c->pw_fd[1] = -1;
	if (o->staging && o->staging_bytes >= c->staging_bytes) {
		c->staging = o->staging;   /* registered with the page writers' pool */
	} else {
		c->own_staging = 1;
		c->staging = mmap(NULL, c->staging_bytes, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (c->staging == MAP_FAILED)
			c->staging = NULL;
	}
	if (!c->stale || !c->crc[0] || !c->crc[1] || !c->trig || !c->staging)
		goto fail;
	pthread_mutex_init(&c->trig->mu, NULL);
	c->trig->refs = 1;
	c->trig->c = c;
	if (mkdir(c->dir, 0755) && errno != EEXIST) {
		rc = -errno;
		log_error("ckpt: mkdir %s: %s", c->dir, strerror(errno));
		goto fail;
	}
	if (o->writers && (rc = ckpt_open_writers(c, o->writers)) != 0)
		goto fail;
	ckpt_load_state(c);
	*out = c;
	return 0;
fail:
	c->checkpoint_on_close = 0;
	ckpt_close(c);
	return rc;
}

void ckpt_close(ckpt_t *c)
{
	if (!c)
		return;
	if (c->checkpoint_on_close) {
		struct ckpt_stats s;
		ckpt_run(c, &s);
	}
	if (c->thread_started) {
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		pthread_cond_signal(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thread, NULL);
	}
	if (c->trig && c->trig->refs) {
		pthread_mutex_lock(&c->trig->mu);
		c->trig->c = NULL;
		pthread_mutex_unlock(&c->trig->mu);
		trigger_put(c->trig);
	} else {
		free(c->trig);
	}
	if (c->staging && c->own_staging)
		munmap(c->staging, c->staging_bytes);
	for (unsigned i = 0; i < 2; i++)
		if (c->pw_fd[i] >= 0)
			close(c->pw_fd[i]);
	free(c->stale);
	free(c->crc[0]);
	free(c->crc[1]);
	pthread_mutex_destroy(&c->run_mu);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

/* ---- recovery ---- */

struct loader {
	io_ctx_t *ctx;
	int file;
	unsigned char *pool;
	uint32_t ps;
	const uint32_t *crc;
	const char *path;
	uint64_t bad, first_bad;
	int err;
};

static void load_check(struct loader *l, const struct io_cqe *e, uint64_t off, size_t len)
{
	if (e->res != (int64_t)len) {
		if (!l->err) {
			l->err = e->res < 0 ? (int)e->res : -EIO;
			log_error("ckpt: reading %s at offset %" PRIu64 ": %s", l->path, off,
				  e->res < 0 ? strerror((int)-e->res)
					     : "the file is shorter than the manifest says");
		}
		return;
	}
	for (uint64_t p = off / l->ps; p < (off + len) / l->ps; p++) {
		uint32_t got = crc32c(0, l->pool + p * l->ps, l->ps);
		if (got != l->crc[p]) {
			if (l->bad++ < 8)
				log_error("ckpt: page %" PRIu64 " of %s is damaged (CRC %08x, "
					  "expected %08x)", p, l->path, got, l->crc[p]);
			if (!l->first_bad)
				l->first_bad = p;
		}
	}
}

/* Read image ci into the pool, checking every page's CRC.  0 or -EIO. */
static int load_image(store_t *st, const char *dir, const struct ck_info *ci,
		      enum io_backend backend, struct ckpt_recover_stats *out)
{
	uint32_t ps = store_page_size(st), *crc = NULL;
	uint64_t ncrc = 0, P = ci->pages_used;
	char path[4200];
	ck_path(path, sizeof(path), dir, image_name(ci->image, 0));
	if (crc_read(dir, ci->image, ci->seq, ps, &crc, &ncrc, 0))
		return -EIO;
	size_t pool_bytes;
	struct loader l = { .pool = store_pool(st, &pool_bytes), .ps = ps, .crc = crc,
			    .path = path, .file = -1 };
	int fd = -1, rc = -EIO;
	if (ncrc < P + 1 || (P + 1) * ps > pool_bytes) {
		log_error("ckpt: %s: %" PRIu64 " pages do not fit (crc entries %" PRIu64
			  ", pool %zu bytes)", path, P, ncrc, pool_bytes);
		goto out;
	}
	if (P == 0) {
		rc = 0;
		goto out;
	}
	fd = io_open_direct(path, O_RDONLY, 0);
	if (fd < 0)
		goto out;
	struct io_opts o = { .backend = backend, .depth = CK_READ_DEPTH, .flags = IO_F_NO_CPU_STATS };
	rc = io_ctx_create(&o, &l.ctx);
	if (rc < 0)
		goto out;
	/* The pool is not registered: pinning a freshly mapped pool costs more
	 * (about 1.8 s per GiB here) than one pass of reads into it saves. */
	l.file = io_ctx_add_file(l.ctx, fd);
	rc = l.file < 0 ? l.file : 0;
	uint64_t off = ps, end = (P + 1) * ps;
	unsigned inflight = 0;
	struct io_cqe cqes[64];
	while (!rc && !l.err && (off < end || inflight)) {
		while (off < end && inflight < CK_READ_DEPTH) {
			size_t len = (size_t)MIN((uint64_t)CK_READ_CHUNK, end - off);
			rc = io_prep_read(l.ctx, l.file, l.pool + off, len, (off_t)off, off);
			if (rc < 0)
				break;
			off += len;
			inflight++;
		}
		if (rc < 0 || (rc = io_submit_batch(l.ctx)) < 0)
			break;
		rc = io_reap(l.ctx, cqes, ARRAY_SIZE(cqes), 1);
		if (rc < 0)
			break;
		for (int i = 0; i < rc; i++) {
			uint64_t o2 = cqes[i].user_data;
			load_check(&l, &cqes[i], o2, (size_t)MIN((uint64_t)CK_READ_CHUNK, end - o2));
		}
		inflight -= (unsigned)rc;
		rc = 0;
	}
	if (l.ctx) {
		while (inflight) { /* drain after an error */
			int n = io_reap(l.ctx, cqes, ARRAY_SIZE(cqes), 1);
			if (n <= 0)
				break;
			inflight -= (unsigned)n;
		}
		out->backend = io_backend_name(io_ctx_backend(l.ctx));
		io_ctx_destroy(l.ctx);
	}
	if (rc < 0 && !l.err)
		log_error("ckpt: reading %s: %s", path, strerror(-rc));
	if (!rc && !l.err && l.bad == 0) {
		out->pages = P;
		out->bytes = P * ps;
		rc = 0;
	} else {
		if (l.bad)
			log_error("ckpt: %s: %" PRIu64 " damaged page(s), first page %" PRIu64,
				  path, l.bad, l.first_bad);
		rc = -EIO;
	}
out:
	if (fd >= 0)
		close(fd);
	free(crc);
	return rc;
}

/* Untiered: image ci, loaded into the pool with every CRC right, must also
 * be one store_rebuild can take (a damaged copy checkpointed with its damage
 * has a valid CRC).  0, or -EIO (logged) so that the caller falls back. */
static int image_rebuildable(store_t *st, const char *dir, const struct ck_info *ci)
{
	uint64_t page = 0;
	int rc = store_rebuild_check(st, ci->pages_used, &page);
	if (rc == 0)
		return 0;
	log_error("ckpt: page %" PRIu64 " of %s/%s has the right CRC but cannot be rebuilt (%s): "
		  "the image holds a damaged copy", page, dir, image_name(ci->image, 0),
		  lotus_strerror(rc));
	return -EIO;
}

/* ---- lazy recovery of a tiered store ----
 * The image is streamed through a staging buffer (CK_LAZY_DEPTH reads of
 * CK_READ_CHUNK in flight), never into the frames wholesale: the image can
 * be larger than the pool.  Pass 1 checks every page's CRC, and that a page
 * with the right CRC can be rebuilt (store_rebuild_page_check: a damaged
 * copy that was checkpointed with its damage has a valid CRC), so that a
 * damaged image is refused before any of it is indexed and the previous
 * image can be used instead; pass 2 reads it again and hands each page to
 * store_rebuild_page, which indexes it and keeps it resident while frames
 * are free.  The rest stays on the image until a request touches it. */
#define CK_LAZY_DEPTH 32u

struct streamer {
	struct loader l;
	store_t *st;
	int rebuild;
	unsigned char *staging;
	uint64_t slot_off[CK_LAZY_DEPTH];
	uint32_t free_slots[CK_LAZY_DEPTH];
	unsigned nfree;
	uint64_t end;
};

static void stream_done(struct streamer *sm, const struct io_cqe *e)
{
	unsigned slot = (unsigned)e->user_data;
	uint64_t off = sm->slot_off[slot];
	size_t len = (size_t)MIN((uint64_t)CK_READ_CHUNK, sm->end - off);
	unsigned char *buf = sm->staging + (size_t)slot * CK_READ_CHUNK;
	uint32_t ps = sm->l.ps;
	sm->free_slots[sm->nfree++] = slot;
	if (e->res != (int64_t)len) {
		if (!sm->l.err) {
			sm->l.err = e->res < 0 ? (int)e->res : -EIO;
			log_error("ckpt: reading %s at offset %" PRIu64 ": %s", sm->l.path, off,
				  e->res < 0 ? strerror((int)-e->res)
					     : "the file is shorter than the manifest says");
		}
		return;
	}
	for (uint64_t i = 0; i < len / ps; i++) {
		uint64_t p = off / ps + i;
		const unsigned char *img = buf + i * ps;
		uint32_t got = crc32c(0, img, ps);
		if (got != sm->l.crc[p]) {
			if (sm->l.bad++ < 8)
				log_error("ckpt: page %" PRIu64 " of %s is damaged (CRC %08x, "
					  "expected %08x)", p, sm->l.path, got, sm->l.crc[p]);
			if (!sm->l.first_bad)
				sm->l.first_bad = p;
			continue;
		}
		if (!sm->rebuild) {
			int rc = store_rebuild_page_check(sm->st, p, img);
			if (rc) {
				if (sm->l.bad++ < 8)
					log_error("ckpt: page %" PRIu64 " of %s has the right CRC but "
						  "cannot be rebuilt (%s): the image holds a damaged "
						  "copy", p, sm->l.path, lotus_strerror(rc));
				if (!sm->l.first_bad)
					sm->l.first_bad = p;
			}
			continue;
		}
		if (!sm->l.err) {
			int rc = store_rebuild_page(sm->st, p, img);
			if (rc) {
				log_error("ckpt: page %" PRIu64 " of %s cannot be rebuilt: %s", p,
					  sm->l.path, lotus_strerror(rc));
				sm->l.err = rc;
			}
		}
	}
}

/* Stream image ci (pages 1..pages_used); rebuild: name the image the pages'
 * home (home may be NULL), then index the pages.  0 or -EIO (damage, logged)
 * or another error. */
static int stream_image(store_t *st, const char *dir, const struct ck_info *ci,
			enum io_backend backend, int rebuild, ckpt_home_fn home, void *home_arg,
			struct ckpt_recover_stats *out)
{
	uint32_t ps = store_page_size(st), *crc = NULL;
	uint64_t ncrc = 0, P = ci->pages_used;
	char path[4200];
	ck_path(path, sizeof(path), dir, image_name(ci->image, 0));
	if (crc_read(dir, ci->image, ci->seq, ps, &crc, &ncrc, 0))
		return -EIO;
	struct streamer sm = { .l = { .ps = ps, .crc = crc, .path = path, .file = -1 }, .st = st,
			       .rebuild = rebuild, .end = (P + 1) * ps };
	int fd = -1, rc = -EIO;
	if (ncrc < P + 1 || P + 1 > store_npages(st)) {
		log_error("ckpt: %s: %" PRIu64 " pages do not fit (crc entries %" PRIu64
			  ", %" PRIu64 " logical pages)", path, P, ncrc, store_npages(st));
		goto out;
	}
	if (rebuild && home && P)
		home(home_arg, 1, P, ci->image, crc);
	if (P == 0) {
		rc = 0;
		goto out;
	}
	sm.staging = mmap(NULL, (size_t)CK_LAZY_DEPTH * CK_READ_CHUNK, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rc = -ENOMEM;
	if (sm.staging == MAP_FAILED) {
		sm.staging = NULL;
		goto out;
	}
	fd = io_open_direct(path, O_RDONLY, 0);
	rc = fd;
	if (fd < 0)
		goto out;
	struct io_opts o = { .backend = backend, .depth = CK_LAZY_DEPTH, .flags = IO_F_NO_CPU_STATS };
	rc = io_ctx_create(&o, &sm.l.ctx);
	if (rc < 0)
		goto out;
	io_ctx_register_buffer(sm.l.ctx, sm.staging, (size_t)CK_LAZY_DEPTH * CK_READ_CHUNK);
	sm.l.file = io_ctx_add_file(sm.l.ctx, fd);
	rc = sm.l.file < 0 ? sm.l.file : 0;
	for (unsigned i = 0; i < CK_LAZY_DEPTH; i++)
		sm.free_slots[sm.nfree++] = CK_LAZY_DEPTH - 1 - i;
	uint64_t off = ps;
	struct io_cqe cqes[CK_LAZY_DEPTH];
	while (!rc && !sm.l.err && (off < sm.end || sm.nfree < CK_LAZY_DEPTH)) {
		while (off < sm.end && sm.nfree) {
			unsigned slot = sm.free_slots[--sm.nfree];
			size_t len = (size_t)MIN((uint64_t)CK_READ_CHUNK, sm.end - off);
			rc = io_prep_read(sm.l.ctx, sm.l.file, sm.staging + (size_t)slot * CK_READ_CHUNK,
					  len, (off_t)off, slot);
			if (rc < 0) {
				sm.free_slots[sm.nfree++] = slot;
				break;
			}
			sm.slot_off[slot] = off;
			off += len;
		}
		if (rc < 0 || (rc = io_submit_batch(sm.l.ctx)) < 0)
			break;
		rc = io_reap(sm.l.ctx, cqes, CK_LAZY_DEPTH, 1);
		if (rc < 0)
			break;
		for (int i = 0; i < rc; i++)
			stream_done(&sm, &cqes[i]);
		rc = 0;
	}
	if (sm.l.ctx) {
		while (sm.nfree < CK_LAZY_DEPTH) {   /* drain after an error */
			int n = io_reap(sm.l.ctx, cqes, CK_LAZY_DEPTH, 1);
			if (n <= 0)
				break;
			sm.nfree += (unsigned)n;
		}
		out->backend = io_backend_name(io_ctx_backend(sm.l.ctx));
		io_ctx_destroy(sm.l.ctx);
	}
	if (rc < 0 && !sm.l.err)
		log_error("ckpt: reading %s: %s", path, strerror(-rc));
	if (!rc && !sm.l.err && !sm.l.bad) {
		out->pages = P;
		out->bytes = P * ps;
	} else {
		if (sm.l.bad)
			log_error("ckpt: %s: %" PRIu64 " damaged page(s), first page %" PRIu64,
				  path, sm.l.bad, sm.l.first_bad);
		rc = sm.l.err && sm.l.err != -EIO && !sm.l.bad ? sm.l.err : -EIO;
	}
out:
	if (sm.staging)
		munmap(sm.staging, (size_t)CK_LAZY_DEPTH * CK_READ_CHUNK);
	if (fd >= 0)
		close(fd);
	free(crc);
	return rc;
}

/* The tiered part of ckpt_recover_home: check the newest image (else the
 * previous one, as for untiered stores), name it the pages' home, rebuild. */
static int recover_tiered(store_t *st, const char *dir, const struct manifest *m,
			  enum io_backend backend, ckpt_home_fn home, void *home_arg,
			  struct ckpt_recover_stats *out, const struct ck_info **used)
{
	if (m->cur.pages_used + 1 > store_npages(st)) {
		log_error("ckpt: the checkpoint in %s holds %" PRIu64 " pages of %u bytes: it needs "
			  "--capacity %" PRIu64 "M or more (this server holds %" PRIu64 " pages)", dir,
			  m->cur.pages_used, store_page_size(st),
			  (((m->cur.pages_used + 1) * store_page_size(st)) + (1u << 20) - 1) >> 20,
			  store_npages(st));
		return LOTUS_ENOSPACE;
	}
	*used = &m->cur;
	int rc = stream_image(st, dir, &m->cur, backend, 0, NULL, NULL, out);
	if (rc == -EIO && m->prev.seq && m->prev.need_lsn >= m->log_from) {
		log_warn("ckpt: checkpoint %" PRIu64 " (%s) is damaged; recovering from the "
			 "previous checkpoint %" PRIu64 " (%s) and a longer log replay from LSN %"
			 PRIu64, m->cur.seq, image_name(m->cur.image, 0), m->prev.seq,
			 image_name(m->prev.image, 0), m->prev.begin_lsn);
		*used = &m->prev;
		rc = stream_image(st, dir, &m->prev, backend, 0, NULL, NULL, out);
	} else if (rc == -EIO && m->prev.seq) {
		log_error("ckpt: checkpoint %" PRIu64 " (%s) is damaged and the log no longer "
			  "reaches back to LSN %" PRIu64 ", which the previous checkpoint needs",
			  m->cur.seq, image_name(m->cur.image, 0), m->prev.need_lsn);
	}
	if (rc) {
		log_error("ckpt: recovery from %s failed: no undamaged checkpoint image", dir);
		return -EIO;
	}
	rc = stream_image(st, dir, *used, backend, 1, home, home_arg, out);
	if (rc == 0)
		rc = store_rebuild_finish(st, (*used)->pages_used);
	if (rc) {   /* pass 1 found the image sound: not damage (memory, a bug) */
		log_error("ckpt: rebuilding the store from %s/%s failed: %s (the image passed "
			  "its checks; the store is half built, so the other image cannot be "
			  "tried in this process)", dir, image_name((*used)->image, 0),
			  lotus_strerror(rc));
		return -EIO;
	}
	return 0;
}

int ckpt_recover_home(store_t *st, const char *dir, enum io_backend backend, ckpt_home_fn home,
		      void *home_arg, uint64_t *replay_from, struct ckpt_recover_stats *out)
{
	struct ckpt_recover_stats tmp;
	if (!out)
		out = &tmp;
	memset(out, 0, sizeof(*out));
	out->backend = "none";
	uint64_t t0 = clock_now_ns();
	*replay_from = 0;
	struct manifest *m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	int rc = manifest_read(dir, m);
	if (rc == -ENOENT) {
		log_info("ckpt: no checkpoint in %s: a new database", dir);
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	rc = -EINVAL;
	if (m->page_size != store_page_size(st)) {
		log_error("ckpt: %s was written with %u-byte pages, the store uses %u", dir,
			  m->page_size, store_page_size(st));
		goto out;
	}
	for (unsigned i = 0; i < m->ntables; i++) {
		uint16_t id;
		rc = store_table_create(st, m->tables[i].name, m->tables[i].max_value, &id);
		if (rc || id != i) {
			log_error("ckpt: re-creating table %u (%s) failed: %s", i, m->tables[i].name,
				  rc ? lotus_strerror(rc) : "wrong id (store not fresh?)");
			rc = rc ? rc : -EINVAL;
			goto out;
		}
	}
	const struct ck_info *used = &m->cur;
	if (store_tiered(st)) {
		rc = recover_tiered(st, dir, m, backend, home, home_arg, out, &used);
		if (rc)
			goto out;
		goto rebuilt;
	}
	size_t pool_bytes0;
	store_pool(st, &pool_bytes0);
	if ((m->cur.pages_used + 1) * store_page_size(st) > pool_bytes0) {
		/* not damage: the pool is smaller than when the image was taken */
		/* the pool in the unit that shows it exactly (256K is not "0 MiB") */
		bool mib = pool_bytes0 % (1u << 20) == 0;
		log_error("ckpt: the checkpoint in %s holds %" PRIu64 " pages of %u bytes: it needs "
			  "--memory %" PRIu64 "M or more (this server has %zu %s)", dir,
			  m->cur.pages_used, store_page_size(st),
			  (((m->cur.pages_used + 1) * store_page_size(st)) + (1u << 20) - 1) >> 20,
			  mib ? pool_bytes0 >> 20 : pool_bytes0 >> 10, mib ? "MiB" : "KiB");
		rc = LOTUS_ENOSPACE;
		goto out;
	}
	rc = load_image(st, dir, &m->cur, backend, out);
	if (rc == 0)
		rc = image_rebuildable(st, dir, &m->cur);
	if (rc == -EIO && m->prev.seq && m->prev.need_lsn < m->log_from)
		log_error("ckpt: checkpoint %" PRIu64 " (%s) is damaged and the log no longer "
			  "reaches back to LSN %" PRIu64 ", which the previous checkpoint needs",
			  m->cur.seq, image_name(m->cur.image, 0), m->prev.need_lsn);
	if (rc == -EIO && m->prev.seq && m->prev.need_lsn >= m->log_from) {
		log_warn("ckpt: checkpoint %" PRIu64 " (%s) is damaged; recovering from the "
			 "previous checkpoint %" PRIu64 " (%s) and a longer log replay from LSN %"
			 PRIu64, m->cur.seq, image_name(m->cur.image, 0), m->prev.seq,
			 image_name(m->prev.image, 0), m->prev.begin_lsn);
		size_t pool_bytes;
		unsigned char *pool = store_pool(st, &pool_bytes);
		uint32_t ps = store_page_size(st);
		uint64_t hi = MIN((m->cur.pages_used + 1) * ps, (uint64_t)pool_bytes);
		memset(pool + ps, 0, hi > ps ? hi - ps : 0);
		used = &m->prev;
		rc = load_image(st, dir, &m->prev, backend, out);
		if (rc == 0)
			rc = image_rebuildable(st, dir, &m->prev);
	}
	if (rc) {
		log_error("ckpt: recovery from %s failed: no undamaged checkpoint image", dir);
		rc = -EIO;
		goto out;
	}
	rc = store_rebuild(st, used->pages_used);
	if (rc) {
		log_error("ckpt: rebuilding the store from %s/%s failed: %s", dir,
			  image_name(used->image, 0), lotus_strerror(rc));
		rc = -EIO;
		goto out;
	}
rebuilt:;
	struct store_stats ss;
	store_stats(st, &ss);
	out->records = ss.records;
	out->begin_lsn = used->begin_lsn;
	out->log_from = m->log_from;
	out->seq = used->seq;
	out->fell_back = used == &m->prev;
	*replay_from = used->begin_lsn;
out:
	free(m);
	out->elapsed_ns = clock_now_ns() - t0;
	return rc;
}

int ckpt_recover(store_t *st, const char *dir, enum io_backend backend, uint64_t *replay_from,
		 struct ckpt_recover_stats *out)
{
	return ckpt_recover_home(st, dir, backend, NULL, NULL, replay_from, out);
}
