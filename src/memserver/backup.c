/*
 * backup.c - the memory server's side of `lotus backup` (src/cli/cli_backup.c;
 * docs/operations.md, "Backup and restore"): the decision hold that makes the
 * cut consistent across servers, and the copy of the data directory over the
 * wire while traffic goes on.
 *
 * The cut.  OP_BACKUP_HOLD(W) stops this server from deciding any prepared
 * transaction for W ms from the moment it takes prep_mu (so no decision is
 * half way: each one runs under prep_mu); prepared_decide (durable.c) waits
 * until the hold has run out.  The first thread that finds it run out (a
 * waiting decision, or OP_BACKUP_MARK) records the cut, redo_next_lsn() at
 * that moment, and ends it.  The client sends every server its HOLD and
 * keeps the cut only if all of them answered within W of its first send:
 * then every hold began before every other hold ended, which is what the
 * argument in docs/durability.md ("Backups: the cut") needs.  A hold always
 * ends by itself after W, so a client that dies leaves nothing held.
 *
 * The copy.  The HOLD already pinned the checkpoint files (ckpt_backup_pin:
 * no checkpoint runs, so no image, CRC file, manifest or log segment
 * changes but by appends to the newest segment, and the newest image
 * begins below the cut and holds no change logged after it).
 * OP_BACKUP_BEGIN(cut) waits until the log is durable at the cut and lists IDENTITY, MANIFEST, the images and their
 * CRC files, and every log segment that starts below the cut, the last
 * one up to the cut.  OP_BACKUP_READ returns a chunk of a listed file;
 * each read renews the pin for BK_PIN_MS, and OP_BACKUP_END(hold id) lifts
 * it (the client sends it after a failed cut too), so a client that dies
 * stops checkpoints for at most that long.  Should the pin run out anyway
 * and a checkpoint run, BEGIN and READ refuse (-ESTALE): the checkpoints'
 * run count is checked on each.  One copy at a time: a second HOLD during
 * another's is refused and leaves the first's pin alone; an END names its
 * hold, so a refused backup cannot lift the pin of the one copying.
 *
 * Threads: any worker; the hold under prep_mu, the list under bk_mu.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "memserver/ms_int.h"
#include "memserver/handlers.h"
#include "memserver/backup.h"

#define BK_PIN_MS_DEFAULT 60000u   /* a copy that reads nothing for this long is given up */
#define BK_MAX_FILES 4096u

/* LOTUS_BACKUP_PIN_MS overrides it (the tests' way to make a pin run out) */
static unsigned bk_pin_ms = BK_PIN_MS_DEFAULT;

struct bk_file {
	char name[64];
	uint64_t bytes;
};

struct ms_backup {
	pthread_mutex_t mu;
	uint64_t cut;
	unsigned nfiles;
	struct bk_file *files;
	/* The checkpoints run (ckpt_backup_pin) when the latest hold began
	 * (hold_id), and when the list was made.  A checkpoint after the cut
	 * would hand the copy an image newer than the cut, or change a listed
	 * file under it: BEGIN and READ refuse then (-ESTALE), so a copy is
	 * whole or fails, never silently mixed. */
	uint64_t hold_id, hold_runs, list_runs;
};

static int pin_lapsed(struct ms_server *srv, uint64_t runs, uint64_t want)
{
	if (runs == want)
		return 0;
	log_warn("backup: a checkpoint ran after the cut (the copy read nothing for %u s?); "
		 "this copy is given up: take the backup again", bk_pin_ms / 1000);
	(void)srv;
	return 1;
}

static void reply(struct ms_worker *wk, const struct wire_req *r, int status, uint64_t arg,
		  const void *value, uint32_t vlen)
{
	struct wire_rep rep = { .op = r->op, .status = status, .tag = r->tag,
				.txn_id = r->txn_id, .arg = arg, .value_len = vlen };
	ms_rep_add(wk, &wk->rep, &rep, value);
}

static uint64_t deadline_of(uint64_t until_ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(until_ns / 1000000000u);
	ts->tv_nsec = (long)(until_ns % 1000000000u);
	return until_ns;
}

static void h_hold(struct ms_worker *wk, const struct wire_req *r)
{
	struct ms_server *srv = wk->srv;
	if (r->arg == 0 || r->arg > 10000)
		return reply(wk, r, -EINVAL, 0, NULL, 0);
	pthread_mutex_lock(&srv->prep_mu);
	int busy = ms_hold_check_locked(srv, clock_now_ns());
	pthread_mutex_unlock(&srv->prep_mu);
	if (busy)   /* another backup holds this server: leave its pin alone */
		return reply(wk, r, -EBUSY, 0, NULL, 0);
	/* No checkpoint from before the cut on: the image the copy lists must
	 * begin at or below the cut (a checkpoint under way finishes first, so
	 * this may take a while; the client then tries a longer pause). */
	uint64_t runs = ckpt_backup_pin(srv->ckpt, clock_now_ns() + (uint64_t)bk_pin_ms * 1000000ull);
	pthread_mutex_lock(&srv->prep_mu);   /* no decision is half way now */
	uint64_t now = clock_now_ns(), id = 0;
	int rc = 0;
	if (ms_hold_check_locked(srv, now)) {
		rc = -EBUSY;   /* another backup holds this server */
	} else {
		struct ms_hold *h = &srv->hold;
		id = ++h->id;
		h->start_ns = now;
		h->until_ns = now + r->arg * 1000000u;
		h->ended = 0;
		h->cut = h->held_ns = 0;
	}
	pthread_mutex_unlock(&srv->prep_mu);
	if (rc == 0) {
		pthread_mutex_lock(&srv->backup->mu);
		srv->backup->hold_id = id;
		srv->backup->hold_runs = runs;
		srv->backup->nfiles = 0;   /* a list of an older cut is no longer served */
		pthread_mutex_unlock(&srv->backup->mu);
	}
	reply(wk, r, rc, id, NULL, 0);
}

static void h_mark(struct ms_worker *wk, const struct wire_req *r)
{
	struct ms_server *srv = wk->srv;
	struct ms_hold *h = &srv->hold;
	char txt[32];
	int rc = 0, n = 0;
	uint64_t cut = 0;
	pthread_mutex_lock(&srv->prep_mu);
	if (r->arg != h->id || !h->id) {
		rc = -ESTALE;
	} else {
		struct timespec ts;
		while (ms_hold_check_locked(srv, clock_now_ns()))
			pthread_cond_timedwait(&h->cv, &srv->prep_mu, (deadline_of(h->until_ns, &ts), &ts));
		cut = h->cut;
		n = snprintf(txt, sizeof(txt), "%" PRIu64, h->held_ns);
	}
	pthread_mutex_unlock(&srv->prep_mu);
	reply(wk, r, rc, cut, txt, (uint32_t)(n > 0 ? n : 0));
}

static int list_add(struct ms_backup *b, unsigned *cap, const char *name, uint64_t bytes)
{
	if (b->nfiles == *cap) {
		if (*cap >= BK_MAX_FILES)
			return -E2BIG;
		unsigned nc = *cap ? *cap * 2 : 16;
		struct bk_file *f = realloc(b->files, nc * sizeof(*f));
		if (!f)
			return -ENOMEM;
		b->files = f;
		*cap = nc;
	}
	snprintf(b->files[b->nfiles].name, sizeof(b->files[0].name), "%s", name);
	b->files[b->nfiles++].bytes = bytes;
	return 0;
}

static int name_is(const char *n, const char *want)
{
	return !strcmp(n, want);
}

/* Whether a log segment's name: redo-<16 hex>.log, and its first LSN. */
static int seg_name(const char *n, uint64_t *first)
{
	char tail[8];
	unsigned long long v;
	if (strlen(n) != 25 || sscanf(n, "redo-%16llx%7s", &v, tail) != 2 || strcmp(tail, ".log"))
		return 0;
	*first = v;
	return 1;
}

/* List what a restore of the cut needs (b->mu held). */
static int list_build(struct ms_server *srv, struct ms_backup *b, uint64_t cut)
{
	DIR *d = opendir(srv->data_dir);
	if (!d)
		return -errno;
	unsigned cap = 0;
	int rc = 0;
	b->nfiles = 0;
	b->cut = cut;
	for (struct dirent *de; rc == 0 && (de = readdir(d));) {
		const char *n = de->d_name;
		uint64_t first;
		struct stat st;
		if (fstatat(dirfd(d), n, &st, 0) || !S_ISREG(st.st_mode))
			continue;
		if (name_is(n, "IDENTITY") || name_is(n, "MANIFEST") || name_is(n, "pages-a.dat") ||
		    name_is(n, "pages-b.dat") || name_is(n, "pages-a.crc") || name_is(n, "pages-b.crc"))
			rc = list_add(b, &cap, n, (uint64_t)st.st_size);
		else if (seg_name(n, &first) && first < cut)
			rc = list_add(b, &cap, n, MIN((uint64_t)st.st_size, cut - first));
	}
	closedir(d);
	return rc;
}

static void h_begin(struct ms_worker *wk, const struct wire_req *r)
{
	struct ms_server *srv = wk->srv;
	struct ms_backup *b = srv->backup;
	char *txt = NULL;
	size_t len = 0;
	int rc = 0;
	pthread_mutex_lock(&srv->prep_mu);
	if (!srv->hold.ended || srv->hold.cut != r->arg || !r->arg)
		rc = -ESTALE;   /* not the cut of the latest hold here */
	pthread_mutex_unlock(&srv->prep_mu);
	if (rc == 0)
		rc = redo_wait(srv->log, r->arg);
	if (rc)
		return reply(wk, r, rc, 0, NULL, 0);
	uint64_t runs = ckpt_backup_pin(srv->ckpt, clock_now_ns() + (uint64_t)bk_pin_ms * 1000000ull);
	pthread_mutex_lock(&b->mu);
	if (pin_lapsed(srv, runs, b->hold_runs))
		rc = -ESTALE;
	else
		rc = list_build(srv, b, r->arg);
	b->list_runs = runs;
	if (rc == 0) {
		txt = malloc((size_t)b->nfiles * 96 + 1);
		if (!txt)
			rc = -ENOMEM;
		for (unsigned i = 0; txt && i < b->nfiles; i++)
			len += (size_t)sprintf(txt + len, "%s %" PRIu64 "\n", b->files[i].name,
					       b->files[i].bytes);
	}
	if (rc)
		b->nfiles = 0;
	pthread_mutex_unlock(&b->mu);
	if (rc)
		ckpt_backup_pin(srv->ckpt, 0);
	else
		log_info("backup: copying %s at LSN %" PRIu64 " (checkpoints wait until it is done)",
			 srv->data_dir, r->arg);
	reply(wk, r, rc, 0, txt, (uint32_t)len);
	free(txt);
}

static void h_read(struct ms_worker *wk, const struct wire_req *r, const unsigned char *key)
{
	struct ms_server *srv = wk->srv;
	struct ms_backup *b = srv->backup;
	char name[65], path[4200];
	if (r->key_len >= sizeof(name))   /* no listed name is that long */
		return reply(wk, r, -ENOENT, 0, NULL, 0);
	snprintf(name, sizeof(name), "%.*s", (int)r->key_len, (const char *)key);
	pthread_mutex_lock(&b->mu);
	uint64_t bytes = 0;
	int found = 0;
	for (unsigned i = 0; i < b->nfiles && !found; i++)
		if (!strcmp(b->files[i].name, name))
			found = 1, bytes = b->files[i].bytes;
	pthread_mutex_unlock(&b->mu);
	if (!found)   /* only what the list names: no path reaches anything else */
		return reply(wk, r, -ENOENT, 0, NULL, 0);
	/* renewed by every read, an empty one too (the client's keep-alive
	 * while it copies another server) */
	uint64_t runs = ckpt_backup_pin(srv->ckpt, clock_now_ns() + (uint64_t)bk_pin_ms * 1000000ull);
	pthread_mutex_lock(&b->mu);
	int lapsed = pin_lapsed(srv, runs, b->list_runs);
	pthread_mutex_unlock(&b->mu);
	if (lapsed)
		return reply(wk, r, -ESTALE, 0, NULL, 0);
	if (r->arg >= bytes)
		return reply(wk, r, 0, 0, NULL, 0);
	size_t want = (size_t)MIN(bytes - r->arg, (uint64_t)WIRE_BACKUP_CHUNK);
	unsigned char *buf = malloc(want);
	snprintf(path, sizeof(path), "%s/%s", srv->data_dir, name);
	int fd = buf ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, want, (off_t)r->arg);
	int rc = !buf ? -ENOMEM : n < 0 ? -errno : (size_t)n < want ? -EIO : 0;
	if (fd >= 0)
		close(fd);
	if (rc)
		log_warn("backup: reading %s at offset %" PRIu64 " failed: %s", path, r->arg,
			 lotus_strerror(rc));
	reply(wk, r, rc, rc ? 0 : want, rc ? NULL : buf, rc ? 0 : (uint32_t)want);
	free(buf);
}

static void h_end(struct ms_worker *wk, const struct wire_req *r)
{
	struct ms_server *srv = wk->srv;
	pthread_mutex_lock(&srv->backup->mu);
	int mine = r->arg && r->arg == srv->backup->hold_id;   /* not another backup's */
	if (mine)
		srv->backup->nfiles = 0;
	pthread_mutex_unlock(&srv->backup->mu);
	if (!mine)
		return reply(wk, r, -ESTALE, 0, NULL, 0);
	ckpt_backup_pin(srv->ckpt, 0);
	log_info("backup: the copy of %s is done", srv->data_dir);
	reply(wk, r, 0, 0, NULL, 0);
}

static void ms_backup_req(struct ms_worker *wk, uint64_t seq, const struct wire_req *r,
			  const unsigned char *key)
{
	(void)seq;
	if (!wk->srv->log || !wk->srv->backup)   /* nothing on disk to copy */
		return reply(wk, r, LOTUS_ECONFIG, 0, NULL, 0);
	switch (r->op) {
	case OP_BACKUP_HOLD: return h_hold(wk, r);
	case OP_BACKUP_MARK: return h_mark(wk, r);
	case OP_BACKUP_BEGIN: return h_begin(wk, r);
	case OP_BACKUP_READ: return h_read(wk, r, key);
	default: return h_end(wk, r);
	}
}

int ms_backup_register(struct ms_server *srv)
{
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&srv->hold.cv, &a);
	pthread_condattr_destroy(&a);
	const char *e = getenv("LOTUS_BACKUP_PIN_MS");
	if (e && atoi(e) > 0)
		bk_pin_ms = (unsigned)atoi(e);
	srv->hooks.backup_req = ms_backup_req;
	srv->backup = calloc(1, sizeof(*srv->backup));
	if (!srv->backup)
		return -ENOMEM;
	pthread_mutex_init(&srv->backup->mu, NULL);
	return 0;
}

void ms_backup_free(struct ms_server *srv)
{
	if (!srv->backup)
		return;
	pthread_mutex_destroy(&srv->backup->mu);
	free(srv->backup->files);
	free(srv->backup);
	srv->backup = NULL;
	pthread_cond_destroy(&srv->hold.cv);
}
