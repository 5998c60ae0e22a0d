/*
 * ckpt_recover.c - recovery from the checkpoint images: ckpt_recover and
 * ckpt_recover_home.
 *
 * Recovery reads MANIFEST (ckpt_files.c), re-creates the tables, and loads
 * the image of the newest checkpoint, checking every page against its CRC in
 * pages-X.crc and that the store can rebuild it.  If that image is damaged
 * and the log still reaches back to the previous checkpoint's need LSN, the
 * previous image is loaded instead and the caller replays the longer log
 * (*replay_from is the begin LSN of the image used).  Damage is -EIO with a
 * log line; a pool or capacity too small for the image is LOTUS_ENOSPACE,
 * not damage.
 *
 * Two ways in:
 *   untiered store   the image is read into the pool whole with large
 *                    direct reads (CK_READ_CHUNK, CK_READ_DEPTH in flight),
 *                    then store_rebuild indexes it;
 *   tiered store     lazy: the image is streamed twice through a small
 *                    staging buffer (check, then store_rebuild_page) and
 *                    stays the pages' home until they are touched (below).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "store/ckpt.h"
#include "store/ckpt_int.h"

#define CK_READ_CHUNK    (1u << 20)
#define CK_READ_DEPTH    256u

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
	ck_path(path, sizeof(path), dir, ck_image_name(ci->image, 0));
	int crc_rc = ck_crc_read(dir, ci->image, ci->seq, ps, &crc, &ncrc, 0);
	if (crc_rc)   /* a newer format is refused, not taken for damage */
		return crc_rc == -EPROTO ? -EPROTO : -EIO;
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
		  "the image holds a damaged copy", page, dir, ck_image_name(ci->image, 0),
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
	ck_path(path, sizeof(path), dir, ck_image_name(ci->image, 0));
	int crc_rc = ck_crc_read(dir, ci->image, ci->seq, ps, &crc, &ncrc, 0);
	if (crc_rc)   /* a newer format is refused, not taken for damage */
		return crc_rc == -EPROTO ? -EPROTO : -EIO;
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
			 PRIu64, m->cur.seq, ck_image_name(m->cur.image, 0), m->prev.seq,
			 ck_image_name(m->prev.image, 0), m->prev.begin_lsn);
		*used = &m->prev;
		rc = stream_image(st, dir, &m->prev, backend, 0, NULL, NULL, out);
	} else if (rc == -EIO && m->prev.seq) {
		log_error("ckpt: checkpoint %" PRIu64 " (%s) is damaged and the log no longer "
			  "reaches back to LSN %" PRIu64 ", which the previous checkpoint needs",
			  m->cur.seq, ck_image_name(m->cur.image, 0), m->prev.need_lsn);
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
			  "tried in this process)", dir, ck_image_name((*used)->image, 0),
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
	int rc = ck_manifest_read(dir, m);
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
			  m->cur.seq, ck_image_name(m->cur.image, 0), m->prev.need_lsn);
	if (rc == -EIO && m->prev.seq && m->prev.need_lsn >= m->log_from) {
		log_warn("ckpt: checkpoint %" PRIu64 " (%s) is damaged; recovering from the "
			 "previous checkpoint %" PRIu64 " (%s) and a longer log replay from LSN %"
			 PRIu64, m->cur.seq, ck_image_name(m->cur.image, 0), m->prev.seq,
			 ck_image_name(m->prev.image, 0), m->prev.begin_lsn);
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
			  ck_image_name(used->image, 0), lotus_strerror(rc));
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
