/*
 * durable.c - the memory server on a data directory: recovery at start, the
 * redo records of commits, writebacks and table creations, replies that wait
 * for the log, and the read-only state after a log error (docs/design.md,
 * "Commit and durability"; docs/durability.md).  Nothing here runs with
 * --durability none (srv->log is NULL), except the prepared table of
 * two-phase commit (ms_prepare_logged, ms_prepared_decide), which a memory
 * server then keeps in memory only, skipping every log step.
 *
 * Start (ms_durable_open, main thread, before any worker runs):
 *   1. ckpt_recover: the tables, pages and index of the last checkpoint.  It
 *      returns replay_from (the checkpoint's begin LSN) and log_from <=
 *      replay_from (where the log is kept from).
 *   2. redo_replay from log_from.  Records at or below replay_from are in the
 *      image already; from them only PREPARE/DECIDE are collected.  Above it:
 *        REDO_TABLE   create the table; its id must be the logged one
 *        REDO_COMMIT  apply the writes: upsert / delete-if-present, so a
 *                     change that the fuzzy image already holds is harmless
 *        REDO_DECIDE  commit: apply the writes of its PREPARE
 *      PREPAREs left without a DECIDE go to ms_recovery_undecided(), the hook
 *      for cooperative termination.
 *   3. redo_open where the replay ended (after any torn tail was cut),
 *      ckpt_open, ckpt_start (the page writer).
 *   A tiered store (--capacity, tierback.c) first gets its swap file and page
 *   writers (replay may need frames that only an eviction frees); its
 *   recovery is lazy: pages stay on the image they were loaded from until a
 *   request (or the replay) touches them.
 *
 * Write path (worker threads), write-ahead, inside the checkpoint gate:
 *     t = ckpt_change_begin();  redo_append();  apply;  ckpt_change_end(t)
 * then the caller releases the locks and replies: at once (async), or once
 * the log is durable up to the record (sync; table creation in both modes).
 * The waiting replies of one incoming message share one redo_notify and go
 * out as one message (the durwait life cycle is drawn in ms_int.h).
 *
 * Invariants:
 *  - sync: no status 0 goes out before the record it depends on is durable.
 *    Early lock release lets a txn read changes whose records may not be
 *    durable yet; a read-only commit waits for the highest of them (commit
 *    dependencies, below), a scan for the log tail at the time it read.
 *  - A change is applied only after its record was appended.  Once the log
 *    has failed, appends fail with LOTUS_EREADONLY, nothing more is applied,
 *    and every write request is refused; reads go on.
 *  - Table ids follow the log order: creations are serialised by tables_mu.
 *
 * Layer 3 (ms_int.h): it calls conn.c, handlers.c (applying writes) and
 * outcomes.c directly; handlers.c and conn.c reach its steps only through the
 * hooks ms_durable_register() sets.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/crash.h"
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/json.h"
#include "common/log.h"
#include "memserver/memserver.h"
#include "memserver/ms_int.h"
#include "memserver/conn.h"
#include "memserver/handlers.h"
#include "memserver/outcomes.h"
#include "memserver/durable.h"
#include "memserver/identity.h"
#include "store/tierback.h"

static uint64_t ms_prepare_parts(const unsigned char *payload, uint32_t len);
static void ms_durable_resume(struct ms_worker *wk, struct ms_durwait *dw);

/* ---- applying a logged write list ------------------------------------------ */

/* Apply a wire_write list of len bytes (the count follows from the length).
 * Hints are ignored: they name locations of a store that no longer exists.
 * nospace (replay only; NULL elsewhere): a write that finds no space is
 * counted there per table and skipped, so recovery can say how much space
 * the whole log needs before it refuses to start. */
static int writes_apply_all(store_t *st, store_resv_t **rp, const unsigned char *p, size_t len,
			    uint64_t *n, uint64_t *nospace)
{
	struct wire_iter it;
	const struct wire_write *wp;
	const unsigned char *k, *v;
	int rc = 0;
	wire_iter_bytes(&it, p, len, (unsigned)(len / sizeof(struct wire_write) + 1));
	while (it.p < it.end && (rc = wire_next_write(&it, &wp, &k, &v)) == 1) {
		struct wire_write w;
		memcpy(&w, wp, sizeof(w));
		w.hint = 0;
		if (w.key_len == 0 || w.key_len > STORE_KEY_MAX)
			return LOTUS_EPROTO;
		rc = ms_write_apply(st, rp, &w, k, v);
		if (rc == LOTUS_ENOSPACE && nospace) {
			nospace[w.table]++;
			rc = 0;
		}
		if (rc)
			return rc;
		(*n)++;
	}
	return rc < 0 ? rc : 0;
}

/* ---- replay ------------------------------------------------------------------ */

/* A PREPARE seen in the log and not (yet) decided. */
struct ms_prepared {
	uint64_t txn_id, lsn;
	uint32_t len;
	unsigned char *payload;    /* the whole REDO_PREPARE payload */
	struct ms_prepared *next;
};

struct replay {
	struct ms_server *srv;
	uint64_t apply_from;       /* records at or below are in the image */
	struct ms_prepared *prep;
	uint64_t nospace[STORE_MAX_TABLES];   /* writes that found no space */
};

/* After the replay: if writes found no space, the log holds more than this
 * --memory can: say how much would hold it (an upper bound: every such write
 * counted as a new record) and refuse to start.  0 or LOTUS_ENOSPACE. */
static int replay_space_verdict(struct ms_server *srv, const struct replay *rp)
{
	uint64_t extra = 0, writes = 0;
	size_t pool;
	store_pool(srv->store, &pool);
	for (unsigned t = 0; t < STORE_MAX_TABLES; t++) {
		unsigned per = 1;
		if (!rp->nospace[t])
			continue;
		uint64_t ext = store_table_extent_bytes(srv->store, (uint16_t)t, &per);
		extra += (rp->nospace[t] + per - 1) / per * ext;
		writes += rp->nospace[t];
	}
	if (!writes)
		return 0;
	if (srv->tier) {
		struct store_tier_stats ts;
		store_tier_stats(srv->store, &ts);
		pool = ts.pages * store_page_size(srv->store);   /* the capacity */
	}
	uint64_t mib = (pool + extra + (1u << 20) - 1) >> 20;
	const char *opt = srv->tier ? "--capacity" : "--memory";
	log_error("recovery: the data in %s does not fit in this server's %s (%zu MiB): %"
		  PRIu64 " logged writes found no space.  Restart with %s %" PRIu64 "M (enough "
		  "for everything the log holds)", srv->data_dir, opt,
		  pool >> 20, writes, opt, mib);
	return LOTUS_ENOSPACE;
}

/* The write list inside a PREPARE payload. */
static int prepare_writes(const struct ms_prepared *p, const unsigned char **w, size_t *wlen)
{
	struct ms_redo_prepare h;
	if (p->len < sizeof(h))
		return LOTUS_EPROTO;
	memcpy(&h, p->payload, sizeof(h));
	uint64_t off = sizeof(h) + ALIGN_UP((uint64_t)h.nparts * 4, 8);
	if (off > p->len)
		return LOTUS_EPROTO;
	*w = p->payload + off;
	*wlen = p->len - off;
	return 0;
}

static int replay_table(struct replay *rp, const unsigned char *payload, uint32_t len)
{
	struct ms_redo_table t;
	char name[STORE_TABLE_NAME_MAX + 1];
	uint16_t id = 0;
	int rc = LOTUS_EPROTO;
	if (len >= sizeof(t)) {
		memcpy(&t, payload, sizeof(t));
		if (t.name_len && t.name_len <= STORE_TABLE_NAME_MAX && sizeof(t) + t.name_len <= len) {
			memcpy(name, payload + sizeof(t), t.name_len);
			name[t.name_len] = 0;
			rc = store_table_create(rp->srv->store, name, t.max_value, &id);
			if (rc == 0 && id != t.id)
				rc = -EINVAL;
		}
	}
	if (rc) {
		log_error("recovery: the log's table record %u cannot be replayed: %s",
			  len >= sizeof(t) ? t.id : 0,
			  rc == -EINVAL ? "the store gave it another id" : lotus_strerror(rc));
		return rc;
	}
	rp->srv->rec.tables++;
	return 0;
}

static int replay_prepare(struct replay *rp, uint64_t lsn, uint64_t txn_id,
			  const unsigned char *payload, uint32_t len)
{
	struct ms_prepared *p = calloc(1, sizeof(*p));
	if (!p || !(p->payload = malloc(len ? len : 1))) {
		free(p);
		return -ENOMEM;
	}
	memcpy(p->payload, payload, len);
	p->txn_id = txn_id;
	p->lsn = lsn;
	p->len = len;
	p->next = rp->prep;
	rp->prep = p;
	return 0;
}

static int replay_decide(struct replay *rp, uint64_t lsn, uint64_t txn_id,
			 const unsigned char *payload, uint32_t len)
{
	struct ms_redo_decide d = { 0 };
	struct ms_prepared **pp = &rp->prep, *p;
	memcpy(&d, payload, MIN(len, (uint32_t)sizeof(d)));
	ms_outcome_note(rp->srv, txn_id, d.commit ? MS_OUT_COMMIT : MS_OUT_ABORT);
	while (*pp && (*pp)->txn_id != txn_id)
		pp = &(*pp)->next;
	if (!(p = *pp)) {
		if (lsn > rp->apply_from && d.commit)
			log_warn("recovery: txn %" PRIx64 " was decided (commit) but its PREPARE is "
				 "not in the log", txn_id);
		return 0;
	}
	*pp = p->next;
	int rc = 0;
	if (lsn > rp->apply_from && d.commit) {
		const unsigned char *w;
		size_t wlen;
		rc = prepare_writes(p, &w, &wlen);
		if (rc == 0)
			rc = writes_apply_all(rp->srv->store, NULL, w, wlen, &rp->srv->rec.writes,
					      rp->nospace);
		if (rc == 0)
			rp->srv->rec.txns++;
		else
			log_error("recovery: the writes of prepared txn %" PRIx64 " cannot be "
				  "applied: %s", txn_id, lotus_strerror(rc));
	}
	free(p->payload);
	free(p);
	return rc;
}

static int replay_one(void *arg, uint64_t lsn, uint8_t type, uint64_t txn_id,
		      const void *payload, uint32_t len)
{
	struct replay *rp = arg;
	struct ms_server *srv = rp->srv;
	int apply = lsn > rp->apply_from, rc;
	switch (type) {
	case REDO_TABLE:
		return apply ? replay_table(rp, payload, len) : 0;
	case REDO_COMMIT:
		if (!apply)
			return 0;
		rc = writes_apply_all(srv->store, NULL, payload, len, &srv->rec.writes, rp->nospace);
		if (rc)
			log_error("recovery: the commit of txn %" PRIx64 " at LSN %" PRIu64
				  " cannot be applied: %s", txn_id, lsn, lotus_strerror(rc));
		else
			srv->rec.txns++;
		return rc;
	case REDO_PREPARE:
		return replay_prepare(rp, lsn, txn_id, payload, len);
	case REDO_DECIDE:
		return replay_decide(rp, lsn, txn_id, payload, len);
	case REDO_REFUSE:
		ms_outcome_note(srv, txn_id, MS_OUT_REFUSED);
		return 0;
	case REDO_OUTCOMES:
		ms_outcomes_replay(srv, payload, len);
		return 0;
	default:
		return 0;  /* other users' records: not state */
	}
}

/* Recovery: take the X locks of a prepared txn's writes again and make it
 * COMMITTING, so that nobody reads around it until it is decided. */
static int prep_relock(struct ms_server *srv, const struct ms_prepared *p)
{
	const unsigned char *wl, *k, *v;
	const struct wire_write *wp;
	struct wire_iter it;
	size_t wlen;
	int rc = prepare_writes(p, &wl, &wlen);
	lock_txn_t *txn = rc ? NULL : lock_txn_get(srv->locks, p->txn_id, 0, srv);
	if (!txn)
		return rc ? rc : -ENOMEM;
	wire_iter_bytes(&it, wl, wlen, (unsigned)(wlen / sizeof(struct wire_write) + 1));
	while (rc == 0 && it.p < it.end && (rc = wire_next_write(&it, &wp, &k, &v)) == 1) {
		struct wire_write w;
		memcpy(&w, wp, sizeof(w));
		/* no waiter: a conflict (with another prepared txn: cannot happen)
		 * is LOTUS_EABORTED, never a wait */
		rc = lock_acquire(srv->locks, txn, w.table, k, w.key_len, LOCK_X, CC_NO_WAIT, NULL);
		if (rc == 1)      /* cannot happen without a waiter */
			rc = LOTUS_EABORTED;
	}
	if (rc == 0)
		rc = lock_txn_begin_commit(srv->locks, txn);
	if (rc)
		lock_txn_release(srv->locks, txn);
	else
		lock_txn_put(srv->locks, txn);
	return rc;
}

/* Recovery: an undecided PREPARE joins the prepared table, flagged for the
 * resolver (termination.c). */
static int prep_adopt(struct ms_server *srv, const struct ms_prepared *p)
{
	struct ms_prep_ent *e = calloc(1, sizeof(*e));
	if (!e || !(e->payload = malloc(p->len ? p->len : 1))) {
		free(e);
		return -ENOMEM;
	}
	int rc = prep_relock(srv, p);
	if (rc) {
		free(e->payload);
		free(e);
		return rc;
	}
	/* the space its writes need was held before the crash: hold it again */
	const unsigned char *wl;
	size_t wlen;
	if (prepare_writes(p, &wl, &wlen) == 0 &&
	    (rc = ms_writes_reserve(srv->store, wl, wlen,
				    (unsigned)(wlen / sizeof(struct wire_write) + 1), &e->resv)) != 0)
		log_error("recovery: prepared txn %" PRIx64 " cannot reserve the space of its "
			  "writes: %s (a commit decision may not fit)", p->txn_id,
			  lotus_strerror(rc));
	memcpy(e->payload, p->payload, p->len);
	e->len = p->len;
	e->txn_id = p->txn_id;
	e->lsn = p->lsn;
	e->parts = ms_prepare_parts(p->payload, p->len);
	e->since_ns = clock_now_ns();
	e->recovered = 1;
	unsigned b = ms_prep_bucket(e->txn_id);
	e->next = srv->prep[b];
	srv->prep[b] = e;
	if (srv->nprep++ == 0 || e->lsn < srv->prep_min_lsn)
		srv->prep_min_lsn = e->lsn;
	return 0;
}

static uint64_t ms_prepare_parts(const unsigned char *payload, uint32_t len)
{
	struct ms_redo_prepare h;
	uint64_t parts = 0;
	if (len < sizeof(h))
		return 0;
	memcpy(&h, payload, sizeof(h));
	if (sizeof(h) + (uint64_t)h.nparts * 4 > len)
		return 0;
	for (uint32_t i = 0; i < h.nparts; i++) {
		uint32_t id;
		memcpy(&id, payload + sizeof(h) + 4 * i, 4);
		if (id < 64)
			parts |= 1ULL << id;
	}
	return parts;
}

/*
 * ms_recovery_undecided - THE HOOK FOR TWO-PHASE COMMIT.  Called once at
 * start, after the replay, with every PREPARE that has no DECIDE in the log
 * (list, linked by next; owned by the caller, freed after the call).  Returns
 * the lowest LSN whose log must be kept (UINT64_MAX: none); it becomes the
 * checkpointer's keep LSN, so the PREPAREs stay readable for later restarts.
 *
 * Each one gets its X locks back (so nobody reads around it) and joins the
 * prepared table; the resolver thread (termination.c) then asks the other
 * participants and logs the decision (cooperative termination, Cornus).
 */
static uint64_t ms_recovery_undecided(struct ms_server *srv, const struct ms_prepared *list)
{
	char ids[512];
	size_t n = 0, len = 0;
	uint64_t keep = UINT64_MAX;
	ids[0] = 0;
	for (const struct ms_prepared *p = list; p; p = p->next, n++) {
		keep = MIN(keep, p->lsn - 1);  /* replay delivers records above from_lsn */
		int rc = prep_adopt(srv, p);
		if (rc)
			log_error("recovery: prepared txn %" PRIx64 " cannot be locked again: %s "
				  "(left undecided)", p->txn_id, lotus_strerror(rc));
		if (len + 24 < sizeof(ids))
			len += (size_t)snprintf(ids + len, sizeof(ids) - len, "%s%" PRIx64,
						n ? " " : "", p->txn_id);
		else if (len + 4 < sizeof(ids) && ids[len - 1] != '.')
			len += (size_t)snprintf(ids + len, sizeof(ids) - len, " ...");
	}
	srv->rec.undecided = n;
	if (n)
		log_warn("recovery: %zu prepared transaction%s without a decision (locked; the "
			 "other participants will be asked%s): %s", n, n == 1 ? "" : "s",
			 srv->config_path ? "" : " - but there is no --config or --peers to find them", ids);
	return keep;
}

/* ---- open / close ------------------------------------------------------------ */

/* One server per data directory: an exclusive flock on DIR/LOCK, held until
 * the process exits (the kernel drops it on any death, kill -9 included).  The
 * file holds the owner's pid, for the message a second server prints. */
static int dir_lock(struct ms_server *srv, const char *dir)
{
	char path[4200], owner[32] = "";
	snprintf(path, sizeof(path), "%s/LOCK", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		int rc = -errno;
		log_error("cannot open the lock file %s: %s", path, strerror(errno));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		int rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		ssize_t n = pread(fd, owner, sizeof(owner) - 1, 0);
		owner[n > 0 ? n : 0] = '\0';
		owner[strcspn(owner, "\n")] = '\0';
		if (rc == -EBUSY)
			log_error("the data directory %s is in use by another memory server (pid %s "
				  "holds %s); two servers must never share a data directory", dir,
				  owner[0] ? owner : "?", path);
		else
			log_error("cannot lock %s: %s", path, strerror(-rc));
		close(fd);
		return rc;
	}
	int len = snprintf(owner, sizeof(owner), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) || pwrite(fd, owner, (size_t)len, 0) != len)
		log_warn("cannot write the pid into %s: %s", path, strerror(errno));
	srv->dir_lock_fd = fd;
	return 0;
}

static void recovery_report(struct ms_server *srv)
{
	const struct ms_recovery *r = &srv->rec;
	double secs = (double)r->elapsed_ns / 1e9;
	double mb = (double)(r->ckpt_bytes + r->log_bytes) / 1e6;
	log_info("recovered %s in %.3f s: checkpoint %" PRIu64 " pages (%.1f MB, %" PRIu64
		 " records, LSN %" PRIu64 "); log %" PRIu64 " records (%.1f MB%s) from LSN %" PRIu64
		 ": %" PRIu64 " transactions, %" PRIu64 " tables replayed; %.0f MB/s; appending "
		 "at LSN %" PRIu64, srv->data_dir, secs, r->ckpt_pages, (double)r->ckpt_bytes / 1e6,
		 r->ckpt_records, r->ckpt_begin_lsn, r->log_records, (double)r->log_bytes / 1e6,
		 r->cut_bytes ? ", torn tail cut" : "", r->log_from, r->txns, r->tables,
		 secs > 0 ? mb / secs : 0.0, r->next_lsn);
}

/* Bytes of the redo log's segment files in dir (what the disk holds now;
 * checkpoints truncate it). */
static uint64_t log_disk_bytes(const char *dir)
{
	uint64_t sum = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	if (!d)
		return 0;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		size_t l = strlen(e->d_name);
		if (strncmp(e->d_name, "redo-", 5) || l < 9 || strcmp(e->d_name + l - 4, ".log"))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, 0) == 0)
			sum += (uint64_t)st.st_size;
	}
	closedir(d);
	return sum;
}

static int ms_durable_stats_json(struct ms_server *srv, char *buf, size_t len)
{
	struct redo_stats rs;
	struct ckpt_last cl = { 0 };
	uint64_t waits = 0, immediate = 0;
	char dir[4200];
	redo_stats(srv->log, &rs);
	if (srv->ckpt)
		ckpt_last(srv->ckpt, &cl);
	json_str_buf(dir, sizeof(dir), srv->data_dir ? srv->data_dir : "");
	for (unsigned i = 0; i < srv->nworkers; i++) { /* racy reads of counters: fine */
		waits += srv->workers[i].dur_waits;
		immediate += srv->workers[i].dur_immediate;
	}
	int n = snprintf(buf, len,
		",\"durability\":{\"mode\":\"%s\",\"readonly\":%d,\"durable_lsn\":%" PRIu64
		",\"log_writes\":%" PRIu64 ",\"log_ios\":%" PRIu64 ",\"log_records\":%" PRIu64
		",\"log_bytes\":%" PRIu64 ",\"reply_batches_waited\":%" PRIu64
		",\"replies_at_once\":%" PRIu64 ",\"data_dir\":%s,\"next_lsn\":%" PRIu64
		",\"log_disk_bytes\":%" PRIu64 ",\"checkpoint\":{\"seq\":%" PRIu64
		",\"begin_lsn\":%" PRIu64 ",\"unix_ms\":%" PRIu64 "}}",
		config_durability_name(srv->durability), redo_status(srv->log) != 0,
		redo_durable_lsn(srv->log), rs.writes, rs.ios, rs.records, rs.bytes, waits,
		immediate, dir, redo_next_lsn(srv->log),
		srv->data_dir ? log_disk_bytes(srv->data_dir) : 0, cl.seq, cl.begin_lsn,
		cl.wall_ns / 1000000);
	if (srv->tier && n > 0 && (size_t)n < len)   /* memserver stats: the tier's figures */
		n += tierback_stats_json(srv->tier, buf + n, len - (size_t)n);
	return n;
}

int ms_recovery_json(const struct ms_server *srv, char *buf, size_t len)
{
	const struct ms_recovery *r = &srv->rec;
	double secs = (double)r->elapsed_ns / 1e9;
	double mb = (double)(r->ckpt_bytes + r->log_bytes) / 1e6;
	return snprintf(buf, len,
		"{\"pages\":%" PRIu64 ",\"ckpt_bytes\":%" PRIu64 ",\"ckpt_records\":%" PRIu64
		",\"log_records\":%" PRIu64 ",\"log_bytes\":%" PRIu64 ",\"cut_bytes\":%" PRIu64
		",\"txns\":%" PRIu64 ",\"writes\":%" PRIu64 ",\"tables\":%" PRIu64
		",\"undecided\":%" PRIu64 ",\"next_lsn\":%" PRIu64 ",\"ms\":%.1f,\"mb_s\":%.1f}",
		r->ckpt_pages, r->ckpt_bytes, r->ckpt_records, r->log_records, r->log_bytes,
		r->cut_bytes, r->txns, r->writes, r->tables, r->undecided, r->next_lsn,
		secs * 1e3, secs > 0 ? mb / secs : 0.0);
}

static int durable_start(struct ms_server *srv, const struct memserver_opts *o);

static int ms_recover(struct ms_server *srv)
{
	struct ms_recovery *rec = &srv->rec;
	struct ckpt_recover_stats cs;
	struct redo_replay_stats rs = { 0 };
	struct replay rp = { .srv = srv };
	uint64_t replay_from = 0, t0 = clock_now_ns();
	/* a tiered store recovers lazily: pages stay on the image until touched */
	int rc = ckpt_recover_home(srv->store, srv->data_dir, IO_BACKEND_AUTO,
				   srv->tier ? tierback_set_home : NULL, srv->tier, &replay_from, &cs);
	if (rc) {
		log_error("recovery from %s failed: %s", srv->data_dir, lotus_strerror(rc));
		return rc;
	}
	rp.apply_from = replay_from;
	rec->ckpt_pages = cs.pages;
	rec->ckpt_bytes = cs.bytes;
	rec->ckpt_records = cs.records;
	rec->ckpt_begin_lsn = replay_from;
	rec->log_from = MIN(cs.log_from, replay_from);
	rec->ckpt_seq = cs.fell_back ? cs.seq : 0;
	rc = redo_replay_mode(srv->data_dir, rec->log_from, (enum redo_recovery)srv->recovery_mode,
			      replay_one, &rp, &rs, &rec->next_lsn);
	if (rc)
		log_error("recovery: replaying the log in %s failed: %s", srv->data_dir,
			  lotus_strerror(rc));
	else if ((rc = replay_space_verdict(srv, &rp)) != 0)
		;
	else
		srv->rec.keep_lsn = ms_recovery_undecided(srv, rp.prep);
	while (rp.prep) {
		struct ms_prepared *p = rp.prep;
		rp.prep = p->next;
		free(p->payload);
		free(p);
	}
	rec->log_records = rs.records;
	rec->log_bytes = rs.bytes;
	rec->cut_bytes = rs.cut_bytes;
	rec->elapsed_ns = clock_now_ns() - t0;
	rec->ran = 1;
	return rc;
}

/* mkdir -p (as initdb): 0, or -1 with errno. */
static int mkdir_parents(const char *dir)
{
	char p[4096];
	if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = 0;
		if (mkdir(p, 0755) && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0755) && errno != EEXIST ? -1 : 0;
}

int ms_durable_open(struct ms_server *srv, const struct memserver_opts *o)
{
	srv->durability = o->durability;
	srv->data_dir = o->data_dir;
	srv->rec.keep_lsn = UINT64_MAX;
	srv->recovery_mode = o->recovery_mode;
	srv->dir_lock_fd = -1;
	/* Only --init creates a database (identity.c): a missing directory is
	 * more often a wrong path than a new server. */
	struct stat st;
	if (!o->init && stat(o->data_dir, &st) != 0 && errno == ENOENT) {
		log_error("the data directory %s does not exist: give --init to create a new "
			  "database there, or point --data-dir / data_dir at this server's data",
			  o->data_dir);
		return LOTUS_ECONFIG;
	}
	if (o->init && mkdir_parents(o->data_dir) != 0) {
		int rc = -errno;
		log_error("cannot create the data directory %s: %s", o->data_dir, strerror(errno));
		return rc;
	}
	struct ms_identity id;
	int rc = dir_lock(srv, o->data_dir);
	if (rc == 0 && (rc = identity_settle(o->data_dir, srv->id, o->cluster_id, o->init,
					     &id)) == 0)
		srv->cluster_id = id.cluster_id;
	if (rc == 0 && (rc = durable_start(srv, o)) != 0) {
		close(srv->dir_lock_fd);
		srv->dir_lock_fd = -1;
	}
	return rc;
}

/* ms_durable_open, with the directory locked. */
static int durable_start(struct ms_server *srv, const struct memserver_opts *o)
{
	/* The swap file and the page writers first: log replay may need frames
	 * that only an eviction can free.  The directory is locked: no other
	 * server truncates the swap file under us. */
	int rc = srv->tier ? tierback_start(srv->tier, srv->store, o->data_dir) : 0;
	if (rc) {
		log_error("cannot start the page writers in %s: %s", o->data_dir, lotus_strerror(rc));
		return rc;
	}
	rc = ms_recover(srv);
	if (rc)
		return rc;
	struct redo_opts ro = { .dir = o->data_dir, .prealloc = 1 };
	rc = redo_open(&ro, srv->rec.next_lsn, &srv->log);
	if (rc) {
		log_error("cannot open the redo log in %s: %s", o->data_dir, lotus_strerror(rc));
		return rc;
	}
	struct ckpt_opts co = { .dir = o->data_dir, .log_trigger = o->checkpoint_log,
				.interval_ms = o->checkpoint_interval_ms,
				.recovered_seq = srv->rec.ckpt_seq,
				.on_begin = ms_outcomes_relog, .on_begin_arg = srv };
	if (srv->tier)   /* a tiered server's page writers write the checkpoints too */
		co.writers = tierback_writers(srv->tier, &co.staging, &co.staging_bytes);
	rc = ckpt_open(srv->store, srv->log, &co, &srv->ckpt);
	if (rc == 0 && srv->rec.keep_lsn != UINT64_MAX)
		ckpt_set_keep_lsn(srv->ckpt, srv->rec.keep_lsn);
	if (rc == 0)
		rc = ckpt_start(srv->ckpt);
	if (rc) {
		log_error("cannot start checkpoints in %s: %s", o->data_dir, lotus_strerror(rc));
		return rc;
	}
	if (srv->durability == LOTUS_DUR_SYNC &&
	    !(srv->deps = calloc(MS_DEP_SLOTS, sizeof(*srv->deps)))) {
		log_error("no memory for the commit dependency table");
		return -ENOMEM;
	}
	recovery_report(srv);
	return 0;
}

void ms_durable_close(struct ms_server *srv, int clean)
{
	if (srv->ckpt && clean) {
		struct ckpt_stats cs;
		int rc = redo_status(srv->log);
		if (rc == 0)
			rc = ckpt_run(srv->ckpt, &cs);
		if (rc)
			log_warn("no final checkpoint in %s: %s (the next start replays the log)",
				 srv->data_dir, lotus_strerror(rc));
		else
			log_info("final checkpoint in %s: %" PRIu64 " pages (%.1f MB) in %.3f s, "
				 "begin LSN %" PRIu64, srv->data_dir, cs.pages,
				 (double)cs.bytes / 1e6, (double)cs.elapsed_ns / 1e9, cs.begin_lsn);
	}
	ckpt_close(srv->ckpt);
	srv->ckpt = NULL;
	if (srv->tier) {   /* after the final checkpoint, which may fault pages in */
		tierback_log_summary(srv->tier);
		tierback_stop(srv->tier);
	}
	redo_close(srv->log);   /* posts the last callbacks; workers are gone */
	srv->log = NULL;        /* undecided PREPAREs stay in the log */
	/* the last callbacks posted their durwaits to workers that are gone (and
	 * net_worker_destroy drops undelivered items): their replies never go */
	for (unsigned i = 0; srv->workers && i < srv->nworkers; i++) {
		struct ms_worker *wk = &srv->workers[i];
		while (wk->durwaits) {
			struct ms_durwait *dw = wk->durwaits;
			wk->durwaits = dw->wk_next;
			wire_buf_free(&dw->rep);
			free(dw);
		}
	}
	free((void *)srv->deps);
	srv->deps = NULL;
	if (srv->dir_lock_fd >= 0)  /* last: nothing touches the directory after this */
		close(srv->dir_lock_fd);
	srv->dir_lock_fd = -1;
}

/* ---- the prepared table (every server) ----------------------------------------- */

int ms_prep_open(struct ms_server *srv)
{
	pthread_mutex_init(&srv->prep_mu, NULL);
	if (!(srv->prep = calloc(MS_PREP_BUCKETS, sizeof(*srv->prep))) || ms_term_open(srv))
		return -ENOMEM;
	return 0;
}

void ms_prep_close(struct ms_server *srv)
{
	if (!srv->prep)
		return;
	for (unsigned b = 0; b < MS_PREP_BUCKETS; b++)
		while (srv->prep[b]) {
			struct ms_prep_ent *e = srv->prep[b];
			srv->prep[b] = e->next;
			store_resv_release(srv->store, e->resv);
			free(e->payload);
			free(e);
		}
	free(srv->prep);
	srv->prep = NULL;
	ms_term_free(srv);
	pthread_mutex_destroy(&srv->prep_mu);
}

static int ms_prepared_hold(struct ms_server *srv, uint64_t txn_id)
{
	int held = 0;
	if (!atomic_load(&srv->nprep))
		return 0;
	pthread_mutex_lock(&srv->prep_mu);
	for (struct ms_prep_ent *e = srv->prep[ms_prep_bucket(txn_id)]; e; e = e->next)
		if (e->txn_id == txn_id) {
			e->since_ns = 0;   /* its client is gone: resolve it at once */
			held = 1;
		}
	pthread_mutex_unlock(&srv->prep_mu);
	return held;
}

/* ---- the write paths --------------------------------------------------------- */

static int ms_durable_refuses(struct ms_server *srv)
{
	int rc = redo_status(srv->log);
	if (rc && !atomic_exchange(&srv->readonly_said, 1))
		log_error("memory server %u: the redo log in %s failed (see above): refusing every "
			  "write from now on (reads still work); restart the server once the "
			  "device is fixed", srv->id, srv->data_dir);
	return rc;
}

/* ---- commit dependencies (sync) ------------------------------------------
 *
 * Locks are released as soon as a commit's record is in the log buffer, so a
 * reader may see a change whose record is not durable yet.  Each slot of
 * srv->deps holds the highest LSN of a COMMIT record (or writeback) that
 * wrote a key hashing there, set before the writer's locks go.  A read takes
 * the slot's LSN as a dependency of its txn (lock_txn_dep_note) if it is not
 * durable yet; a read-only COMMIT's reply waits for it.  A writer's own
 * record has a higher LSN than anything it read on this server (the writer it
 * read from appended before releasing), and the log is durable as a prefix,
 * so its reply waiting for its record covers its dependencies.  Keys sharing
 * a slot can only make a reader wait longer, never shorter.  The table
 * starts empty: after recovery everything in the log is durable.
 *
 * The COMMIT of a decided 2PC (ms_prepared_decide) sets no dependency: every
 * participant's PREPARE is durable before any COMMIT is sent, so after a
 * crash the resolver finds all prepared (or one committed) and commits; its
 * writes cannot vanish even if the lazily logged DECIDE did. */
static inline unsigned dep_slot(uint16_t table, const unsigned char *key, uint16_t klen)
{
	uint64_t h = (fnv1a64(key, klen) ^ table) * 0x9e3779b97f4a7c15ULL;
	return (unsigned)(h >> 48) & (MS_DEP_SLOTS - 1);
}

static void dep_raise(struct ms_server *srv, unsigned slot, uint64_t lsn)
{
	uint64_t cur = atomic_load_explicit(&srv->deps[slot], memory_order_relaxed);
	while (cur < lsn && !atomic_compare_exchange_weak(&srv->deps[slot], &cur, lsn))
		;
}

/* A logged write list at lsn: raise the slot of every key it writes. */
static void deps_note_writes(struct ms_server *srv, const unsigned char *wl, size_t len,
			     unsigned count, uint64_t lsn)
{
	struct wire_iter it;
	const struct wire_write *w;
	const unsigned char *k, *v;
	if (!srv->deps)
		return;
	wire_iter_bytes(&it, wl, len, count);
	while (it.p < it.end && wire_next_write(&it, &w, &k, &v) == 1)
		dep_raise(srv, dep_slot(w->table, k, w->key_len), lsn);
}

/* The LSN a read-only reply waits for in sync mode: the log's tail, if it is
 * not durable yet (0: nothing to wait for).  Not after a log error: reads go
 * on then, and what they see is what recovery may bring back. */
static uint64_t tail_wait_lsn(struct ms_server *srv)
{
	if (srv->durability != LOTUS_DUR_SYNC || redo_status(srv->log))
		return 0;
	uint64_t tail = redo_next_lsn(srv->log);
	return tail > redo_durable_lsn(srv->log) ? tail : 0;
}

static uint64_t ms_read_dep(struct ms_server *srv, uint16_t table, const unsigned char *key,
			    uint16_t klen)
{
	if (!srv->deps)
		return 0;
	if (!key)
		return tail_wait_lsn(srv);
	uint64_t lsn = atomic_load(&srv->deps[dep_slot(table, key, klen)]);
	return lsn > redo_durable_lsn(srv->log) ? lsn : 0;
}

static int ms_commit_logged(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		     store_resv_t **rp, uint64_t dep, uint64_t *lsn)
{
	*lsn = 0;
	if (r->arg == 0) {                  /* read-only: nothing to log */
		if (srv->durability == LOTUS_DUR_SYNC && !redo_status(srv->log) &&
		    dep > redo_durable_lsn(srv->log))
			*lsn = dep;
		return 0;
	}
	int rc = ms_durable_refuses(srv);
	if (rc)
		return rc;
	unsigned t = ckpt_change_begin(srv->ckpt);
	rc = redo_append(srv->log, REDO_COMMIT, r->txn_id, val, r->value_len, lsn);
	if (rc == 0) {
		/* before the caller releases the locks: a reader sees the slot */
		deps_note_writes(srv, val, r->value_len, (unsigned)r->arg, *lsn);
		rc = ms_commit_apply(srv, r, val, rp);
		if (rc)   /* cannot happen: the caller reserved its space */
			log_error("commit of txn %llx applied partially: %s",
				  (unsigned long long)r->txn_id, lotus_strerror(rc));
	}
	ckpt_change_end(srv->ckpt, t);
	if (rc == LOTUS_EREADONLY)
		ms_durable_refuses(srv);
	if (rc || srv->durability != LOTUS_DUR_SYNC)
		*lsn = 0;
	return rc;
}

/* ---- two-phase commit ------------------------------------------------------------
 *
 *   PREPARE (writes, writer bitmask) --ms_prepare_logged--> prepared (table;
 *     REDO_PREPARE durable before the vote goes out; X locks kept)
 *   prepared --COMMIT: ms_prepared_decide(1)--> DECIDE(commit) logged, writes
 *     applied inside the gate, locks released by the caller
 *   prepared --ABORT: ms_prepared_decide(0)--> DECIDE(abort) logged, dropped
 *
 * The table (srv->prep, guarded by prep_mu) holds each REDO_PREPARE payload.
 * Its lowest LSN is the checkpointer's keep LSN, so a PREPARE stays in the
 * log while it is undecided.  Without a data directory (srv->log NULL) the
 * same table lives in memory only: nothing is logged, the vote goes out at
 * once, and decisions are remembered in the outcome table alone (a memory
 * server that restarts has lost its data anyway). */
/* prep_mu held: the keep LSN follows the oldest undecided PREPARE. */
static void prep_update_keep(struct ms_server *srv)
{
	uint64_t keep = srv->rec.keep_lsn;
	if (srv->nprep)
		keep = MIN(keep, srv->prep_min_lsn - 1);
	if (srv->ckpt)   /* NULL during recovery: ms_durable_open sets it then */
		ckpt_set_keep_lsn(srv->ckpt, keep);
}

/* Build the REDO_PREPARE payload: header, participant ids, writes. */
static unsigned char *prepare_payload(const struct wire_req *r, const unsigned char *val,
				      uint32_t *len)
{
	struct ms_redo_prepare h = { .nparts = (uint32_t)__builtin_popcountll(r->hint) };
	size_t ids = ALIGN_UP((size_t)h.nparts * 4, 8);
	unsigned char *p = calloc(1, sizeof(h) + ids + r->value_len);
	if (!p)
		return NULL;
	memcpy(p, &h, sizeof(h));
	uint32_t *id = (uint32_t *)(p + sizeof(h));
	for (uint32_t sv = 0; sv < 64; sv++)
		if (r->hint >> sv & 1)
			*id++ = sv;
	memcpy(p + sizeof(h) + ids, val, r->value_len);
	*len = (uint32_t)(sizeof(h) + ids + r->value_len);
	return p;
}

static int ms_prepare_logged(struct ms_server *srv, const struct wire_req *r, const unsigned char *val,
		      store_resv_t **rp, uint64_t *lsn)
{
	*lsn = 0;
	int rc = srv->log ? ms_durable_refuses(srv) : 0;
	if (rc)
		return rc;
	struct ms_prep_ent *e = calloc(1, sizeof(*e));
	if (!e || !(e->payload = prepare_payload(r, val, &e->len))) {
		free(e);
		return -ENOMEM;
	}
	e->txn_id = r->txn_id;
	e->parts = r->hint;
	e->since_ns = clock_now_ns();
	unsigned t = ckpt_change_begin(srv->ckpt);
	pthread_mutex_lock(&srv->prep_mu);
	/* a txn this server already answered for (refused) is never prepared */
	rc = ms_outcome_find(srv, r->txn_id) != MS_OUT_NONE ? LOTUS_EABORTED
	     : !srv->log ? 0
	     : redo_append(srv->log, REDO_PREPARE, r->txn_id, e->payload, e->len, &e->lsn);
	if (rc == 0) {
		unsigned b = ms_prep_bucket(e->txn_id);
		e->next = srv->prep[b];
		srv->prep[b] = e;
		if (srv->nprep++ == 0 || e->lsn < srv->prep_min_lsn)
			srv->prep_min_lsn = e->lsn;
		prep_update_keep(srv);
		*lsn = e->lsn;
		e->resv = *rp;      /* its slots wait with it for the decision */
		*rp = NULL;
	}
	pthread_mutex_unlock(&srv->prep_mu);
	ckpt_change_end(srv->ckpt, t);
	if (rc) {
		free(e->payload);
		free(e);
		if (rc == LOTUS_EREADONLY)
			ms_durable_refuses(srv);
	} else if (srv->log && crash_point_armed("prepared") && redo_wait(srv->log, *lsn) == 0) {
		crash_point("prepared");  /* tests: the vote is durable, not sent */
	}
	return rc;
}

/* prep_mu held: unlink txn_id's entry (NULL if not prepared here). */
static struct ms_prep_ent *prep_take(struct ms_server *srv, uint64_t txn_id)
{
	struct ms_prep_ent **pp = &srv->prep[ms_prep_bucket(txn_id)], *e;
	while (*pp && (*pp)->txn_id != txn_id)
		pp = &(*pp)->next;
	if (!(e = *pp))
		return NULL;
	*pp = e->next;
	if (--srv->nprep && srv->log && e->lsn == srv->prep_min_lsn) {
		srv->prep_min_lsn = UINT64_MAX;
		for (unsigned b = 0; b < MS_PREP_BUCKETS; b++)
			for (struct ms_prep_ent *x = srv->prep[b]; x; x = x->next)
				srv->prep_min_lsn = MIN(srv->prep_min_lsn, x->lsn);
	}
	prep_update_keep(srv);
	return e;
}

/* prep_mu held: txn_id's entry, left in the table (NULL if not prepared). */
static struct ms_prep_ent *prep_find(struct ms_server *srv, uint64_t txn_id)
{
	struct ms_prep_ent *e = srv->prep[ms_prep_bucket(txn_id)];
	while (e && e->txn_id != txn_id)
		e = e->next;
	return e;
}

/* client: DECIDE_FOLLOWED: a backup follows its primary's DECIDE record,
 * already in its log (replica.c). */
#define DECIDE_FOLLOWED 2

/* The decision itself.  client: the word of the txn's own client (its COMMIT
 * or ABORT; handlers.c), not the resolver's.  A client's ABORT of a txn whose
 * PREPARED this server has told another server (promised), or which recovery
 * found undecided, is not carried out: an asker that heard PREPARED from every
 * participant commits, so this server may no longer abort on the client's
 * word.  It stays prepared and locked, goes to the resolver at once, and the
 * ABORT is answered LOTUS_ESTATE (1 with *rc set).  A COMMIT is always
 * carried out: a client sends it only once every writer voted yes. */
static int prepared_decide(struct ms_server *srv, uint64_t txn_id, int commit, int client,
			   int *rc)
{
	struct ms_redo_decide d = { .commit = (uint8_t)(commit != 0) };
	uint64_t lsn, nw = 0;
	if (!srv->nprep)   /* racy read: a txn prepared by this client is visible */
		return 0;
	unsigned t = ckpt_change_begin(srv->ckpt);
	pthread_mutex_lock(&srv->prep_mu);
	/* `lotus backup` holds decisions for a moment (backup.c): wait it out */
	for (uint64_t now; ms_hold_check_locked(srv, now = clock_now_ns());) {
		struct timespec ts = { .tv_sec = (time_t)(srv->hold.until_ns / 1000000000u),
				       .tv_nsec = (long)(srv->hold.until_ns % 1000000000u) };
		pthread_cond_timedwait(&srv->hold.cv, &srv->prep_mu, &ts);
	}
	struct ms_prep_ent *e = prep_find(srv, txn_id);
	*rc = 0;
	if (e && client == 1 && !commit && (e->promised || e->recovered)) {
		e->since_ns = 0;   /* the resolver asks the others now */
		pthread_mutex_unlock(&srv->prep_mu);
		ckpt_change_end(srv->ckpt, t);
		log_info("the client's ABORT of prepared txn %" PRIx64 " is left to the resolver: "
			 "this server already answered PREPARED for it", txn_id);
		*rc = LOTUS_ESTATE;
		return 1;
	}
	if (e)
		e = prep_take(srv, txn_id);
	if (e && commit)
		crash_point("before_commit");  /* tests: all prepared, nothing applied */
	if (e) {
		/* logged lazily: every participant's PREPARE is durable already,
		 * so the record waits for the next write (redo_append_lazy) */
		int lrc = srv->log && client != DECIDE_FOLLOWED
			  ? redo_append_lazy(srv->log, REDO_DECIDE, txn_id, &d, sizeof(d), &lsn)
			  : 0;
		ms_outcome_note(srv, txn_id, commit ? MS_OUT_COMMIT : MS_OUT_ABORT);
		if (commit) {
			struct ms_prepared p = { .txn_id = txn_id, .len = e->len,
						 .payload = e->payload };
			const unsigned char *w;
			size_t wlen;
			*rc = prepare_writes(&p, &w, &wlen);
			if (*rc == 0)
				*rc = writes_apply_all(srv->store, &e->resv, w, wlen, &nw, NULL);
			if (*rc)
				log_error("commit of prepared txn %" PRIx64 " applied partially: %s",
					  txn_id, lotus_strerror(*rc));
		}
		if (lrc)
			log_warn("the decision on prepared txn %" PRIx64 " could not be logged: %s",
				 txn_id, lotus_strerror(lrc));
	}
	pthread_mutex_unlock(&srv->prep_mu);
	ckpt_change_end(srv->ckpt, t);
	if (!e)
		return 0;
	store_resv_release(srv->store, e->resv);
	free(e->payload);
	free(e);
	return 1;
}

int ms_prepared_decide(struct ms_server *srv, uint64_t txn_id, int commit, int *rc)
{
	return prepared_decide(srv, txn_id, commit, 0, rc);
}

static int ms_prepared_decide_client(struct ms_server *srv, uint64_t txn_id, int commit, int *rc)
{
	return prepared_decide(srv, txn_id, commit, 1, rc);
}

/* What was decided here about txn_id, once it is no longer prepared: for a
 * client's COMMIT that comes after the resolver took its txn, so that it is
 * told the decision, not the COMMIT it asked for. */
static enum ms_outcome ms_prepared_outcome(struct ms_server *srv, uint64_t txn_id)
{
	pthread_mutex_lock(&srv->prep_mu);
	enum ms_outcome o = prep_find(srv, txn_id) ? MS_OUT_NONE : ms_outcome_find(srv, txn_id);
	pthread_mutex_unlock(&srv->prep_mu);
	return o;
}

static int ms_writeback_logged(struct ms_worker *wk, const struct wire_write *w, uint64_t txn_id,
			const unsigned char *key, const unsigned char *val, uint64_t *lsn)
{
	struct ms_server *srv = wk->srv;
	*lsn = 0;
	int rc = ms_durable_refuses(srv);
	if (rc)
		return rc;
	wk->scratch.len = 0;
	wk->scratch.count = 0;
	rc = wire_buf_append_write(&wk->scratch, w, key, val);
	if (rc)
		return rc;
	store_resv_t *rv = NULL;   /* a new key's slot, before it is logged */
	rc = ms_writes_reserve(srv->store, wk->scratch.data, wk->scratch.len, 1, &rv);
	if (rc) {
		store_resv_release(srv->store, rv);
		return rc;
	}
	unsigned t = ckpt_change_begin(srv->ckpt);
	rc = redo_append(srv->log, REDO_COMMIT, txn_id, wk->scratch.data, (uint32_t)wk->scratch.len,
			 lsn);
	if (rc == 0 && srv->deps)
		dep_raise(srv, dep_slot(w->table, key, w->key_len), *lsn);
	if (rc == 0)
		rc = ms_write_apply(srv->store, &rv, w, key, val);
	ckpt_change_end(srv->ckpt, t);
	store_resv_release(srv->store, rv);
	if (rc == LOTUS_EREADONLY)
		ms_durable_refuses(srv);
	if (rc || srv->durability != LOTUS_DUR_SYNC)
		*lsn = 0;
	return rc;
}

/* A new table is created, then logged, both inside the gate and under
 * tables_mu (so ids follow log order).  If the append fails the table lives
 * in memory only; the server is read-only from then on anyway. */
static int ms_table_create_logged(struct ms_server *srv, const char *name, uint32_t max_value,
			   uint16_t *id, uint64_t *lsn)
{
	uint16_t have_id;
	uint32_t have_max;
	*lsn = 0;
	pthread_mutex_lock(&srv->tables_mu);
	int rc;
	if (store_table_find(srv->store, name, &have_id, &have_max) == 0) {
		rc = store_table_create(srv->store, name, max_value, id);
		/* it may have been created just now: wait for what is in the log -
		 * unless the log failed: then nothing more becomes durable, and
		 * opening an existing table is a read, which goes on (its creator
		 * got LOTUS_EDURABLE if its record never made it) */
		uint64_t tail = redo_next_lsn(srv->log);
		*lsn = tail > redo_durable_lsn(srv->log) && !redo_status(srv->log) ? tail : 0;
		goto out;
	}
	rc = ms_durable_refuses(srv);
	if (rc)
		goto out;
	unsigned before = store_table_count(srv->store);
	unsigned t = ckpt_change_begin(srv->ckpt);
	rc = store_table_create(srv->store, name, max_value, id);
	if (rc == 0 && store_table_count(srv->store) != before) {
		unsigned char buf[sizeof(struct ms_redo_table) + STORE_TABLE_NAME_MAX];
		struct ms_redo_table rt = { .id = *id, .name_len = (uint16_t)strlen(name),
					    .max_value = store_table_max_value(srv->store, *id) };
		memcpy(buf, &rt, sizeof(rt));
		memcpy(buf + sizeof(rt), name, rt.name_len);
		rc = redo_append(srv->log, REDO_TABLE, 0, buf, (uint32_t)(sizeof(rt) + rt.name_len),
				 lsn);
	}
	ckpt_change_end(srv->ckpt, t);
	if (rc == LOTUS_EREADONLY)
		ms_durable_refuses(srv);
out:
	pthread_mutex_unlock(&srv->tables_mu);
	if (rc)
		*lsn = 0;
	return rc;
}

/* ---- a backup follows its primary's log (replica.c) ------------------------- */

/* What a followed record changes: as replay_one, but in a running server. */
static int follow_apply(struct ms_server *srv, const struct redo_rec *x)
{
	uint64_t n = 0;
	int rc = 0;
	switch (x->type) {
	case REDO_TABLE: {
		struct ms_redo_table t;
		char name[STORE_TABLE_NAME_MAX + 1];
		uint16_t id = 0;
		if (x->len < sizeof(t))
			return LOTUS_EPROTO;
		memcpy(&t, x->payload, sizeof(t));
		if (!t.name_len || t.name_len > STORE_TABLE_NAME_MAX || sizeof(t) + t.name_len > x->len)
			return LOTUS_EPROTO;
		memcpy(name, (const unsigned char *)x->payload + sizeof(t), t.name_len);
		name[t.name_len] = 0;
		pthread_mutex_lock(&srv->tables_mu);
		rc = store_table_create(srv->store, name, t.max_value, &id);
		pthread_mutex_unlock(&srv->tables_mu);
		if (rc == 0 && id != t.id)
			rc = -EINVAL;
		return rc;
	}
	case REDO_COMMIT:
		rc = writes_apply_all(srv->store, NULL, x->payload, x->len, &n, NULL);
		if (rc == 0 && x->txn_id) {   /* a one-phase commit: its client may ask
					       * this server once it has taken over */
			pthread_mutex_lock(&srv->prep_mu);
			ms_outcome_note(srv, x->txn_id, MS_OUT_COMMIT);
			pthread_mutex_unlock(&srv->prep_mu);
		}
		return rc;
	case REDO_PREPARE: {
		/* kept as recovery keeps one: locked, in the prepared table, for
		 * the resolver once this server is the primary */
		struct ms_prepared p = { .txn_id = x->txn_id, .lsn = x->lsn, .len = x->len,
					 .payload = (unsigned char *)x->payload };
		pthread_mutex_lock(&srv->prep_mu);
		rc = prep_adopt(srv, &p);
		if (rc == 0)
			prep_update_keep(srv);
		pthread_mutex_unlock(&srv->prep_mu);
		return rc;
	}
	case REDO_DECIDE: {
		struct ms_redo_decide d = { 0 };
		memcpy(&d, x->payload, MIN(x->len, (uint32_t)sizeof(d)));
		if (prepared_decide(srv, x->txn_id, d.commit, DECIDE_FOLLOWED, &rc)) {
			lock_txn_t *txn = lock_txn_find(srv->locks, x->txn_id);
			if (txn)
				lock_txn_release(srv->locks, txn);
		} else {
			pthread_mutex_lock(&srv->prep_mu);
			ms_outcome_note(srv, x->txn_id, d.commit ? MS_OUT_COMMIT : MS_OUT_ABORT);
			pthread_mutex_unlock(&srv->prep_mu);
		}
		return rc;
	}
	case REDO_REFUSE:
		pthread_mutex_lock(&srv->prep_mu);
		ms_outcome_note(srv, x->txn_id, MS_OUT_REFUSED);
		pthread_mutex_unlock(&srv->prep_mu);
		return 0;
	case REDO_OUTCOMES:
		pthread_mutex_lock(&srv->prep_mu);
		ms_outcomes_replay(srv, x->payload, x->len);
		pthread_mutex_unlock(&srv->prep_mu);
		return 0;
	default:
		return 0;   /* SEGEND, other users' records: no state */
	}
}

int ms_durable_follow(struct ms_server *srv, const void *rec, size_t size,
		      const struct redo_rec *x, uint64_t *lsn)
{
	/* appended and applied inside one checkpoint change, as a commit is:
	 * an image either holds the change or begins below its record */
	unsigned t = ckpt_change_begin(srv->ckpt);
	int rc = redo_append_raw(srv->log, rec, size, lsn);
	if (rc == 0 && (rc = follow_apply(srv, x)) != 0)
		log_error("backup: the primary's record at LSN %" PRIu64 " (type %u, txn %" PRIx64
			  ") cannot be applied here: %s", x->lsn, x->type, x->txn_id,
			  lotus_strerror(rc));
	ckpt_change_end(srv->ckpt, t);
	return rc;
}

/* ---- replies that wait for the log ------------------------------------------- */

/* Every reply of dw becomes status (the log failed before they were durable). */
static void durwait_fail_all(struct ms_durwait *dw, int status)
{
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	wire_buf_end(&dw->rep);
	wire_iter_init(&it, dw->rep.data, dw->rep.len);
	while (wire_next_rep(&it, &r, &k, &v) == 1)
		((struct wire_rep *)r)->status = status;
}

static void ms_reply_durable(struct ms_worker *wk, uint64_t seq, const struct wire_req *r, int status,
		      uint64_t arg, uint64_t lsn)
{
	struct wire_rep rep = {
		.op = r->op, .status = status, .tag = r->tag, .txn_id = r->txn_id, .arg = arg,
	};
	redo_t *log = wk->srv->log;
	if (lsn && redo_durable_lsn(log) < lsn) {
		if (wk->dur_rep.count > 0 ||
		    wire_buf_begin(&wk->dur_rep, WIRE_REP, wk->srv->id, seq) == 0) {
			if (wire_buf_add_rep(&wk->dur_rep, &rep, NULL, NULL) == 0) {
				wk->dur_lsn = MAX(wk->dur_lsn, lsn);
				return;
			}
		}
		/* out of memory for the batch: wait here, then reply in line */
		if (redo_wait(log, lsn) != 0)
			rep.status = LOTUS_EDURABLE;
	}
	wk->dur_immediate++;
	ms_rep_add(wk, &wk->rep, &rep, NULL);
}

/* Log writer thread (or the caller's, if already durable): hand back. */
static void durwait_notify(void *arg, int status)
{
	struct ms_durwait *dw = arg;
	dw->status = status;
	if (ms_post(dw->conn->wk->net, dw) != 0)
		log_error("out of memory: %u replies that waited for the log are lost",
			  dw->rep.count);
}

static void ms_durable_flush(struct ms_worker *wk, struct ms_conn *c)
{
	struct ms_durwait *dw = calloc(1, sizeof(*dw));
	uint64_t lsn = wk->dur_lsn;
	wk->dur_lsn = 0;
	if (!dw) {
		if (redo_wait(wk->srv->log, lsn) != 0) {
			struct ms_durwait tmp = { .rep = wk->dur_rep };
			durwait_fail_all(&tmp, LOTUS_EDURABLE);
		}
		ms_send_reply_msg(wk, c, &wk->dur_rep);
		wire_buf_free(&wk->dur_rep);
		return;
	}
	dw->kind = MS_POST_DURABLE;
	dw->lsn = lsn;
	dw->conn = c;
	dw->rep = wk->dur_rep;          /* the batch moves to dw */
	wire_buf_init(&wk->dur_rep);
	c->refs++;
	dw->wk_next = wk->durwaits;
	if (wk->durwaits)
		wk->durwaits->wk_prev = dw;
	wk->durwaits = dw;
	wk->dur_waits++;
	if (redo_notify(wk->srv->log, lsn, durwait_notify, dw) != 0) {
		dw->status = redo_wait(wk->srv->log, lsn);
		ms_durable_resume(wk, dw);
	}
}

/* Does a batch of durable replies hold a yes vote (tests: crash point voted)? */
static int durwait_has_vote(struct ms_durwait *dw)
{
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	wire_buf_end(&dw->rep);
	wire_iter_init(&it, dw->rep.data, dw->rep.len);
	while (wire_next_rep(&it, &r, &k, &v) == 1)
		if (r->op == OP_PREPARE && r->status == 0)
			return 1;
	return 0;
}

static void ms_durable_resume(struct ms_worker *wk, struct ms_durwait *dw)
{
	struct ms_conn *c = dw->conn;
	if (dw->status)
		durwait_fail_all(dw, LOTUS_EDURABLE);
	/* a deposed primary cannot tell whether its successor has the batch:
	 * the client loses the connection, not an answer, and asks the
	 * successor (docs/replication.md) */
	if (dw->status && atomic_load(&wk->srv->role) == MS_ROLE_DEPOSED)
		c->broken = 1;
	int vote = !c->closed && !c->broken && crash_point_armed("voted") && durwait_has_vote(dw);
	if (!c->closed && !c->broken)
		ms_send_reply_msg(wk, c, &dw->rep);
	if (vote)
		crash_point("voted");  /* tests: a durable yes vote sent, its decision not here */
	if (dw->wk_prev)
		dw->wk_prev->wk_next = dw->wk_next;
	else
		wk->durwaits = dw->wk_next;
	if (dw->wk_next)
		dw->wk_next->wk_prev = dw->wk_prev;
	wire_buf_free(&dw->rep);
	free(dw);
	ms_conn_settle(wk, c);
	ms_conn_unref(c);
}

void ms_durable_register(struct ms_server *srv)
{
	srv->hooks.durable_flush = ms_durable_flush;
	srv->hooks.durable_resume = ms_durable_resume;
	srv->hooks.prepared_hold = ms_prepared_hold;
	srv->hooks.durable_refuses = ms_durable_refuses;
	srv->hooks.commit_logged = ms_commit_logged;
	srv->hooks.writeback_logged = ms_writeback_logged;
	srv->hooks.table_create_logged = ms_table_create_logged;
	srv->hooks.prepare_logged = ms_prepare_logged;
	srv->hooks.prepared_decide = ms_prepared_decide_client;
	srv->hooks.prepared_outcome = ms_prepared_outcome;
	srv->hooks.reply_durable = ms_reply_durable;
	srv->hooks.read_dep = ms_read_dep;
	srv->hooks.durable_stats_json = ms_durable_stats_json;
}
