/*
 * replica.c - replicated memory servers (replica.h; docs/replication.md).
 *
 * A partition is R servers; ZooKeeper's znode of it names the primary, the
 * epoch and the members in sync (coord.h).  Clients talk to the primary.
 *
 * The primary ships its redo log.  The log writer hands each batch to
 * repl_ship() before it writes it (redo_set_ship); the shipper thread sends
 * it to every live backup (OP_REPL_SHIP) and answers once each has it
 * durable, or has been dropped from the in-sync set by a versioned update of
 * the znode.  So the primary's log never holds a byte its in-sync backups
 * lack, and every acknowledged commit is on every in-sync member.
 *
 *   peer: DOWN --connect, HELLO--> HELLO --tail = shipped, in sync--> LIVE
 *                                        --tail < shipped--> CATCHUP
 *         CATCHUP --the log's bytes from disk, up to shipped; then added to
 *                   the in-sync set--> LIVE
 *         any --lost, refused, no ack within the lease--> DOWN (and out of
 *                   the in-sync set before the batch is acknowledged)
 *
 * A backup mirrors the stream: each record goes into its own log at the same
 * LSN (redo_append_raw) and into its store (ms_durable_follow), and the ack
 * goes out once its log holds it (durability sync) or at once (async).  It
 * serves no client.  Its monitor thread watches the primary's ephemeral
 * znode: once that is gone, a backup in the in-sync set takes over with a
 * versioned update {epoch + 1, primary = itself, insync = [itself]}, so
 * exactly one wins.  Its prepared transactions are then the resolver's.
 *
 * Fencing: a primary whose znode names a newer epoch, whose session
 * expired, or that cannot drop a lost backup because the znode moved on, is
 * deposed: its log refuses (the batch in hand fails with LOTUS_EDURABLE) and
 * the server stops.  A backup refuses a stream of an older epoch.
 *
 * Threads: the shipper owns its net worker and the peers; repl_ship runs on
 * the log writer and waits for the shipper (mu, cv); the backup's stream is
 * handled on whichever worker has the primary's connection (bmu); the
 * monitor calls ZooKeeper only.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "coord/coord.h"
#include "memserver/memserver.h"
#include "memserver/ms_int.h"
#include "memserver/conn.h"
#include "memserver/durable.h"
#include "memserver/replica.h"
#include "memserver/handlers.h"
#include "common/crc32c.h"

#define RP_CHUNK        (1u << 20)   /* log bytes per OP_REPL_SHIP */
#define RP_CATCHUP_AHEAD (8u << 20)  /* catch-up bytes sent and not yet acknowledged */
#define RP_TICK_MS      50u          /* the monitor's pace */
#define RP_RETRY_NS     (200ull * 1000000)

enum { PEER_DOWN, PEER_HELLO, PEER_CATCHUP, PEER_LIVE };
static const char *const peer_state[] = { "down", "hello", "catching up", "live" };

struct rp_peer {
	unsigned id;
	net_conn_t *c;
	int st;
	uint64_t acked, sent;      /* stream positions */
	uint64_t next_try_ns, since_ns;
	int said;                  /* its latest trouble was logged */
};

struct ms_repl {
	struct ms_server *srv;
	coord_t *co;
	uint64_t cid;
	unsigned R, part, self, session_ms;
	_Atomic uint64_t epoch;
	uint64_t start_ns;
	int saw_primary, said_insync;
	char why[160];             /* why it was deposed */

	pthread_t mon;
	int mon_on;
	_Atomic int mon_stop;

	/* backup: the stream from the primary, under bmu */
	pthread_mutex_t bmu;
	uint64_t bpos, bskip;      /* bbuf[0] is at stream position bpos */
	unsigned char *bbuf;
	size_t blen, bcap;
	_Atomic uint64_t b_records, b_bytes;

	/* primary: the shipper */
	pthread_t shp;
	int shp_on;
	_Atomic int shp_stop;
	net_worker_t *sw;
	int sw_ready, sw_rc;
	uint64_t seq;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int job_posted, job_done, job_rc;   /* under mu */
	uint64_t job_from, job_to;
	const unsigned char *job_p1, *job_p2;
	size_t job_n1, job_n2;
	int job_active, job_sent;           /* shipper thread */
	_Atomic int closing;       /* the server stops: give up what waits for ZooKeeper */
	uint64_t job_t0;
	_Atomic uint64_t shipped;  /* every in-sync backup has the stream up to here */
	_Atomic uint64_t insync;   /* the znode's in-sync set as this primary left it */
	struct rp_peer peers[CONFIG_MAX_REPLICAS];
	unsigned npeers;
	unsigned char *cbuf;       /* catch-up reads */
	int wake;

	_Atomic uint64_t st_batches, st_bytes, st_wait_ns, st_catchup_bytes, st_dropped,
		st_joined;
};

static uint64_t now_ns(void) { return clock_now_ns(); }

int ms_repl_deposed(const struct ms_server *srv)
{
	return atomic_load(&srv->role) == MS_ROLE_DEPOSED;
}

static void rp_depose(struct ms_repl *rp, const char *why)
{
	struct ms_server *srv = rp->srv;
	if (atomic_exchange(&srv->role, MS_ROLE_DEPOSED) == MS_ROLE_DEPOSED)
		return;
	snprintf(rp->why, sizeof(rp->why), "%s", why);
	log_error("memory server %u: %s; it stops serving partition %u (epoch %" PRIu64 "): "
		  "restart it to rejoin as a backup", rp->self, why, rp->part,
		  atomic_load(&rp->epoch));
}

/* ---- the backup's side ------------------------------------------------------------ */

/* CRC32C of the stream bytes [lsn - 4 KiB, lsn) of the log in dir (from
 * the files: segment headers read as zeroes, so two logs of one history
 * agree).  0, or -ENOENT if the log no longer holds them. */
static int rp_window_crc(const char *dir, uint64_t lsn, uint64_t *crc)
{
	static __thread unsigned char win[4096];
	uint64_t from = lsn > sizeof(win) ? lsn - sizeof(win) : 0;
	int rc = redo_read_stream(dir, from, lsn, win);
	if (rc == 0)
		*crc = crc32c(0, win, (size_t)(lsn - from));
	return rc;
}

/* Take n stream bytes: every whole record goes into the log and the store.
 * *lsn: the log's tail after the last one (unchanged if none).  bmu held. */
static int rp_take(struct ms_repl *rp, const unsigned char *p, size_t n, uint64_t *lsn)
{
	if (rp->blen + n > rp->bcap) {
		size_t cap = MAX(rp->bcap * 2, rp->blen + n);
		unsigned char *nb = realloc(rp->bbuf, cap);
		if (!nb)
			return -ENOMEM;
		rp->bbuf = nb;
		rp->bcap = cap;
	}
	memcpy(rp->bbuf + rp->blen, p, n);
	rp->blen += n;
	size_t off = 0;
	int rc = 0;
	while (off < rp->blen) {
		uint64_t pos = rp->bpos + off;
		if (rp->bskip > pos) {   /* after a SEGEND: the bytes no segment holds */
			off += (size_t)MIN((uint64_t)(rp->blen - off), rp->bskip - pos);
			continue;
		}
		struct redo_rec x;
		int64_t sz = redo_stream_record(rp->bbuf + off, rp->blen - off, pos, &x);
		if (sz == 0)
			break;
		if (sz < 0) {
			log_error("backup: the primary's stream holds no valid record at LSN %" PRIu64
				  ": the stream is dropped (the primary starts it again)", pos);
			rc = LOTUS_EPROTO;
			break;
		}
		rc = ms_durable_follow(rp->srv, rp->bbuf + off, (size_t)sz, &x, lsn);
		if (rc) {   /* its log holds it, its store does not: no faithful copy */
			char why[200];
			snprintf(why, sizeof(why), "a record of its primary's log at LSN %" PRIu64
				 " could not be applied here (%s: give it the primary's --memory)",
				 x.lsn, lotus_strerror(rc));
			rp_depose(rp, why);
			break;
		}
		if (x.type == REDO_SEGEND_TYPE)
			rp->bskip = redo_after_segend(x.lsn);
		off += (size_t)sz;
		atomic_fetch_add(&rp->b_records, 1);
	}
	memmove(rp->bbuf, rp->bbuf + off, rp->blen - off);
	rp->blen -= off;
	rp->bpos += off;
	atomic_fetch_add(&rp->b_bytes, off);
	if (rc)
		rp->blen = 0;
	return rc;
}

static void rp_req(struct ms_worker *wk, uint64_t seq, const struct wire_req *r,
		   const unsigned char *val)
{
	struct ms_server *srv = wk->srv;
	struct ms_repl *rp = srv->repl;
	uint64_t arg = 0, lsn = 0, crc = 0;
	int rc = 0;
	if (!rp || !srv->log) {
		rc = LOTUS_EUNSUPPORTED;
	} else if (atomic_load(&srv->role) != MS_ROLE_BACKUP) {
		rc = LOTUS_ESTATE;     /* a primary, or deposed: not this stream's */
	} else {
		pthread_mutex_lock(&rp->bmu);
		uint64_t ep = atomic_load(&rp->epoch);
		if (r->txn_id != ep) {
			rc = LOTUS_ESTATE;   /* a deposed primary's, or a newer one we do not
					      * know yet (the monitor reads the epoch) */
		} else if (r->op == OP_REPL_HELLO) {
			rp->blen = 0;
			rp->bskip = 0;
			rp->bpos = redo_next_lsn(srv->log);
			arg = rp->bpos;
			/* the last 4 KiB of this log, for the primary to compare with its
			 * own: a log that went another way (it holds what no primary of
			 * this history wrote) must not be caught up */
			rc = redo_wait(srv->log, arg);
			if (rc == 0)
				rc = rp_window_crc(srv->data_dir, arg, &crc);
			log_info("backup %u: primary's stream (epoch %" PRIu64 ") goes on at LSN %"
				 PRIu64, rp->self, r->txn_id, arg);
		} else if (r->arg != rp->bpos + rp->blen) {
			rc = LOTUS_EPROTO;   /* a gap: the primary starts again with a HELLO */
		} else if ((rc = rp_take(rp, val, r->value_len, &lsn)) == 0) {
			arg = rp->bpos;
		}
		pthread_mutex_unlock(&rp->bmu);
	}
	if (srv->durability != LOTUS_DUR_SYNC)
		lsn = 0;   /* async: acknowledged once applied */
	if (r->op == OP_REPL_HELLO && rc == 0) {   /* the window's CRC in the reply's hint */
		struct wire_rep rep = { .op = r->op, .tag = r->tag, .txn_id = r->txn_id, .arg = arg,
					.loc = crc };
		ms_rep_add(wk, &wk->rep, &rep, NULL);
		return;
	}
	srv->hooks.reply_durable(wk, seq, r, rc, arg, lsn);
}

/* ---- the coordinator --------------------------------------------------------------- */

/* Add id to (add) or drop it from the partition's in-sync set.  0, -ESTALE
 * (this server is no longer the primary: deposed) or an error. */
static int insync_change(struct ms_repl *rp, unsigned id, int add)
{
	for (int tries = 0; tries < 100; tries++) {
		struct coord_partition part, np;
		int v = 0;
		if (coord_expired(rp->co)) {
			rp_depose(rp, "ZooKeeper expired this server's session");
			return -ESTALE;
		}
		int rc = coord_get_partition_v(rp->co, rp->cid, rp->part, &part, &v);
		if (rc)
			return rc;
		if (part.epoch != atomic_load(&rp->epoch) || part.primary != rp->self) {
			char why[160];
			snprintf(why, sizeof(why), "the coordinator names server %u primary at epoch %"
				 PRIu64, part.primary, part.epoch);
			rp_depose(rp, why);
			return -ESTALE;
		}
		np = part;
		np.ninsync = 0;
		for (unsigned i = 0; i < part.ninsync; i++)
			if (part.insync[i] != id)
				np.insync[np.ninsync++] = part.insync[i];
		if (add)
			np.insync[np.ninsync++] = id;
		if (np.ninsync != part.ninsync || coord_partition_insync(&part, id) != add) {
			rc = coord_set_partition(rp->co, rp->cid, rp->part, &np, v);
			if (rc == -ESTALE)
				continue;
			if (rc)
				return rc;
		}
		uint64_t mask = 0;
		for (unsigned i = 0; i < np.ninsync; i++)
			mask |= 1ull << np.insync[i];
		rp->insync = mask;
		return 0;
	}
	return -EAGAIN;
}

/* ---- the primary's shipper ---------------------------------------------------------- */

static void peer_down(struct ms_repl *rp, struct rp_peer *p, const char *why, uint64_t retry_ns)
{
	if (p->c)
		net_conn_close(p->c);
	p->c = NULL;
	if (p->st == PEER_LIVE)
		atomic_fetch_add(&rp->st_dropped, 1);
	if (!p->said || p->st == PEER_LIVE)
		log_warn("primary %u: backup %u is %s: %s", rp->self, p->id,
			 p->st == PEER_LIVE ? "lost" : "not following", why);
	p->said = 1;
	p->st = PEER_DOWN;
	p->next_try_ns = now_ns() + retry_ns;
}

static int peer_send(struct ms_repl *rp, struct rp_peer *p, uint16_t op, uint64_t arg,
		     const void *val, size_t n)
{
	struct wire_buf b;
	wire_buf_init(&b);
	struct wire_req r = { .op = (uint8_t)op, .txn_id = atomic_load(&rp->epoch), .arg = arg,
			      .value_len = (uint32_t)n };
	int rc = net_wire_buf(rp->sw, &b, n + 256);
	if (rc == 0)
		rc = wire_buf_begin(&b, WIRE_REQ, rp->self, ++rp->seq);
	if (rc == 0)
		rc = wire_buf_add_req(&b, &r, NULL, val);
	if (rc == 0) {
		size_t len;
		wire_buf_end(&b);
		unsigned char *data = wire_buf_detach(&b, &len);
		rc = net_send(p->c, data, len);
	}
	wire_buf_free(&b);
	if (rc)
		peer_down(rp, p, lotus_strerror(rc), RP_RETRY_NS);
	return rc;
}

/* Send stream bytes [from, from + n1 + n2) (two pieces) in chunks. */
static void peer_ship(struct ms_repl *rp, struct rp_peer *p, uint64_t from, const unsigned char *p1,
		      size_t n1, const unsigned char *p2, size_t n2)
{
	const unsigned char *piece[2] = { p1, p2 };
	size_t len[2] = { n1, n2 };
	for (int i = 0; i < 2; i++)
		for (size_t off = 0; off < len[i] && p->c;) {
			size_t k = MIN((size_t)RP_CHUNK, len[i] - off);
			if (peer_send(rp, p, OP_REPL_SHIP, from, piece[i] + off, k))
				return;
			from += k;
			off += k;
		}
	p->sent = from;
}

/* Send the bytes [p->sent, to) from the log on disk (catch-up). */
static int peer_ship_disk(struct ms_repl *rp, struct rp_peer *p, uint64_t to)
{
	while (p->c && p->sent < to) {
		size_t n = (size_t)MIN((uint64_t)RP_CHUNK, to - p->sent);
		int rc = redo_read_stream(rp->srv->data_dir, p->sent, p->sent + n, rp->cbuf);
		if (rc == -ENOENT) {
			char why[200];
			snprintf(why, sizeof(why), "it needs the log from LSN %" PRIu64 ", which a "
				 "checkpoint has removed here; it needs a full copy (restore it from "
				 "`lotus backup` of this server)", p->sent);
			peer_down(rp, p, why, 30000ull * 1000000);
			return rc;
		}
		if (rc) {
			peer_down(rp, p, strerror(-rc), RP_RETRY_NS);
			return rc;
		}
		if (peer_send(rp, p, OP_REPL_SHIP, p->sent, rp->cbuf, n))
			return LOTUS_EUNAVAIL;
		atomic_fetch_add(&rp->st_catchup_bytes, n);
		p->sent += n;
	}
	return 0;
}

static struct rp_peer *peer_of(struct ms_repl *rp, net_conn_t *c)
{
	for (unsigned i = 0; i < rp->npeers; i++)
		if (rp->peers[i].c == c)
			return &rp->peers[i];
	return NULL;
}

static void sh_hello_reply(struct ms_repl *rp, struct rp_peer *p, const struct wire_rep *r)
{
	if (r->status) {
		peer_down(rp, p, lotus_strerror(r->status), RP_RETRY_NS);
		return;
	}
	uint64_t tail = r->arg, crc = 0;
	int wrc = tail <= rp->shipped ? rp_window_crc(rp->srv->data_dir, tail, &crc) : 0;
	if (tail > rp->shipped || wrc || crc != r->loc) {
		char why[240];
		snprintf(why, sizeof(why), "its log %s at LSN %" PRIu64 " (this primary's reaches %"
			 PRIu64 "): it holds records no primary of this partition's history wrote "
			 "there, and needs a full copy", tail > rp->shipped ? "ends past this one's"
			 : wrc ? "ends below what this log still holds" : "differs from this one's",
			 tail, (uint64_t)rp->shipped);
		peer_down(rp, p, why, 30000ull * 1000000);
		return;
	}
	p->sent = p->acked = tail;
	p->since_ns = now_ns();
	p->said = 0;
	p->st = tail == rp->shipped && (rp->insync >> p->id & 1) ? PEER_LIVE : PEER_CATCHUP;
	log_info("primary %u: backup %u follows from LSN %" PRIu64 " (%s)", rp->self, p->id,
		 tail, peer_state[p->st]);
}

static void sh_on_msg(void *arg, net_conn_t *c, const void *data, size_t len)
{
	struct ms_repl *rp = arg;
	struct rp_peer *p = peer_of(rp, c);
	const struct wire_hdr *h = data;
	if (!p)
		return;
	if (wire_msg_check(data, len) != 0 || h->type == WIRE_ERROR) {
		peer_down(rp, p, h->type == WIRE_ERROR ? lotus_strerror(h->aux) : "a bad message",
			  RP_RETRY_NS);
		return;
	}
	if (h->type != WIRE_REP)
		return;
	struct wire_iter it;
	const struct wire_rep *r;
	const unsigned char *k, *v;
	wire_iter_init(&it, data, len);
	while (p->c && wire_next_rep(&it, &r, &k, &v) == 1) {
		if (r->op == OP_REPL_HELLO && p->st == PEER_HELLO)
			sh_hello_reply(rp, p, r);
		else if (r->op == OP_REPL_SHIP && r->status)
			peer_down(rp, p, lotus_strerror(r->status), RP_RETRY_NS);
		else if (r->op == OP_REPL_SHIP)
			p->acked = MAX(p->acked, r->arg);
	}
}

static void sh_on_close(void *arg, net_conn_t *c, int reason)
{
	struct ms_repl *rp = arg;
	struct rp_peer *p = peer_of(rp, c);
	if (!p)
		return;
	p->c = NULL;   /* freed by the net layer */
	peer_down(rp, p, reason ? lotus_strerror(reason) : "it closed the connection",
		  RP_RETRY_NS);
}

static void sh_on_post(void *arg, void *item)
{
	(void)arg;
	(void)item;   /* a wake-up: the loop looks at the job */
}

static const struct net_handlers sh_handlers = {
	.on_msg = sh_on_msg, .on_close = sh_on_close, .on_post = sh_on_post,
};

/* Connect to a down peer and say HELLO. */
static void peer_connect(struct ms_repl *rp, struct rp_peer *p)
{
	char host[256];
	uint16_t port = 0;
	p->next_try_ns = now_ns() + RP_RETRY_NS;
	int rc = coord_server_addr(rp->co, rp->cid, p->id, host, sizeof(host), &port);
	if (rc) {
		if (!p->said)
			log_info("primary %u: backup %u is not running (no znode)", rp->self, p->id);
		p->said = 1;
		return;
	}
	rc = net_connect(rp->sw, host, port, 250, &p->c);   /* batches wait meanwhile */
	if (rc) {
		p->c = NULL;
		p->next_try_ns = now_ns() + (rc == LOTUS_ETIMEOUT ? 1000ull : 200ull) * 1000000;
		if (!p->said)
			log_info("primary %u: backup %u at %s:%u: %s", rp->self, p->id, host, port,
				 lotus_strerror(rc));
		p->said = 1;
		return;
	}
	p->st = PEER_HELLO;
	p->since_ns = now_ns();
	peer_send(rp, p, OP_REPL_HELLO, rp->shipped, NULL, 0);
}

/* Between batches: bring the peers that do not follow up to date. */
static void sh_maintain(struct ms_repl *rp)
{
	uint64_t now = now_ns(), lease = (uint64_t)rp->session_ms * 1000000;
	for (unsigned i = 0; i < rp->npeers; i++) {
		struct rp_peer *p = &rp->peers[i];
		if (p->st == PEER_DOWN && now >= p->next_try_ns) {
			peer_connect(rp, p);
		} else if (p->st == PEER_HELLO && now - p->since_ns > lease) {
			peer_down(rp, p, "no answer to HELLO", RP_RETRY_NS);
		} else if (p->st == PEER_CATCHUP) {
			uint64_t to = MIN(rp->shipped, redo_durable_lsn(rp->srv->log));
			if (p->sent - p->acked < RP_CATCHUP_AHEAD)
				peer_ship_disk(rp, p, MIN(to, p->acked + RP_CATCHUP_AHEAD));
			if (p->st == PEER_CATCHUP && p->acked == rp->shipped) {
				int rc = insync_change(rp, p->id, 1);
				if (rc == 0) {
					p->st = PEER_LIVE;
					atomic_fetch_add(&rp->st_joined, 1);
					log_info("primary %u: backup %u caught up at LSN %" PRIu64
						 ": in sync", rp->self, p->id, rp->shipped);
				}
			}
		}
	}
}

/* The batch in hand: 0 done, 1 not yet, or an error for the log writer. */
static int sh_job_step(struct ms_repl *rp)
{
	uint64_t lease = (uint64_t)rp->session_ms * 1000000;
	if (ms_repl_deposed(rp->srv) && !rp->job_sent)
		return -ESTALE;
	if (!rp->job_sent) {
		for (unsigned i = 0; i < rp->npeers; i++) {
			struct rp_peer *p = &rp->peers[i];
			if (p->st != PEER_LIVE)
				continue;
			/* bytes written without the hook (a takeover's first batch) */
			if (rp->shipped < rp->job_from && p->sent < rp->job_from)
				peer_ship_disk(rp, p, rp->job_from);
			if (p->st == PEER_LIVE)
				peer_ship(rp, p, rp->job_from, rp->job_p1, rp->job_n1, rp->job_p2,
					  rp->job_n2);
		}
		rp->job_sent = 1;
		rp->job_t0 = now_ns();
	}
	int waiting = 0;
	if (ms_repl_deposed(rp->srv)) {
		/* every live backup has it: the batch is in the successor's log
		 * (write it here too); else nobody can tell: -ESTALE, and the
		 * clients waiting for it lose their connections, not an answer */
		for (unsigned i = 0; i < rp->npeers; i++)
			if (rp->peers[i].st == PEER_LIVE && rp->peers[i].acked < rp->job_to)
				return -ESTALE;
		for (unsigned i = 0; i < rp->npeers; i++)
			if (rp->peers[i].st != PEER_LIVE && (rp->insync >> rp->peers[i].id & 1))
				return -ESTALE;
		return 0;
	}
	for (unsigned i = 0; i < rp->npeers; i++) {
		struct rp_peer *p = &rp->peers[i];
		if (p->st == PEER_LIVE && p->acked < rp->job_to) {
			if (now_ns() - rp->job_t0 > lease)
				peer_down(rp, p, "no acknowledgment within the lease", RP_RETRY_NS);
			else
				waiting = 1;
		}
		/* a member in sync that does not follow leaves the set first */
		if (p->st != PEER_LIVE && (rp->insync >> p->id & 1)) {
			int rc = insync_change(rp, p->id, 0);
			if (rc == -ESTALE)
				return rc;
			if (rc && atomic_load(&rp->closing)) {
				log_warn("primary %u: stopping, and backup %u cannot leave the in-sync "
					 "set (%s): the last batch is not written", rp->self, p->id,
					 lotus_strerror(rc));
				return -ESTALE;
			}
			/* no coordinator: the batch waits; but not past a whole
			 * session without an answer (serve_until is half of one
			 * after the last): ZooKeeper counts this server gone by
			 * then, and a backup that took over refuses the stream,
			 * so the batch would wait for ever with its clients.  It
			 * is not written; they lose their connections and ask
			 * the successor (sh_job_step's deposed branch) */
			if (rc && now_ns() > atomic_load(&rp->srv->serve_until_ns) + lease / 2) {
				char why[160];
				snprintf(why, sizeof(why), "no answer from ZooKeeper for a whole session "
					 "(%u ms) while backup %u does not follow", rp->session_ms, p->id);
				rp_depose(rp, why);
				return -ESTALE;
			}
			if (rc) {
				waiting = 1;
				struct timespec ts = { 0, 50 * 1000000L };
				nanosleep(&ts, NULL);
			} else {
				log_warn("primary %u: backup %u left the in-sync set; commits go on "
					 "without it", rp->self, p->id);
			}
		}
	}
	return waiting;
}

static void *shipper_main(void *arg)
{
	struct ms_repl *rp = arg;
	int rc = net_worker_create(rp->srv->net, &sh_handlers, rp, &rp->sw);
	pthread_mutex_lock(&rp->mu);
	rp->sw_rc = rc;
	rp->sw_ready = 1;
	pthread_cond_broadcast(&rp->cv);
	pthread_mutex_unlock(&rp->mu);
	if (rc)
		return NULL;
	while (!atomic_load(&rp->shp_stop)) {
		net_progress(rp->sw);
		if (!rp->job_active) {
			pthread_mutex_lock(&rp->mu);
			if (rp->job_posted && !rp->job_done) {
				rp->job_active = 1;
				rp->job_sent = 0;
			}
			pthread_mutex_unlock(&rp->mu);
		}
		if (rp->job_active) {
			int st = sh_job_step(rp);
			if (st == 1) {   /* a commit waits: net_wait spins (LOTUS_NET_SPIN_US), then naps */
				net_wait(rp->sw, 1);
				continue;
			}
			if (st == 0)
				rp->shipped = rp->job_to;
			atomic_fetch_add(&rp->st_batches, 1);
			atomic_fetch_add(&rp->st_bytes, rp->job_to - rp->job_from);
			pthread_mutex_lock(&rp->mu);
			rp->job_rc = st;
			rp->job_done = 1;
			rp->job_active = 0;
			pthread_cond_broadcast(&rp->cv);
			pthread_mutex_unlock(&rp->mu);
			continue;
		}
		sh_maintain(rp);
		net_wait(rp->sw, 10);
	}
	for (unsigned i = 0; i < rp->npeers; i++)
		if (rp->peers[i].c) {
			net_conn_close(rp->peers[i].c);
			rp->peers[i].c = NULL;
		}
	pthread_mutex_lock(&rp->mu);
	if (rp->job_posted && !rp->job_done) {   /* nobody ships it now */
		rp->job_rc = -ESTALE;
		rp->job_done = 1;
		pthread_cond_broadcast(&rp->cv);
	}
	net_worker_destroy(rp->sw);
	rp->sw = NULL;
	pthread_mutex_unlock(&rp->mu);
	return NULL;
}

/* The log writer's hook: ship [from, to), wait until the backups have it. */
static int repl_ship(void *arg, uint64_t from, uint64_t to, const void *p1, size_t n1,
		     const void *p2, size_t n2)
{
	struct ms_repl *rp = arg;
	uint64_t t0 = now_ns();
	pthread_mutex_lock(&rp->mu);
	if (!rp->shp_on || !rp->sw) {
		pthread_mutex_unlock(&rp->mu);
		return ms_repl_deposed(rp->srv) ? -ESTALE : 0;
	}
	rp->job_from = from;
	rp->job_to = to;
	rp->job_p1 = p1;
	rp->job_n1 = n1;
	rp->job_p2 = p2;
	rp->job_n2 = n2;
	rp->job_done = 0;
	rp->job_posted = 1;
	pthread_mutex_unlock(&rp->mu);
	net_post(rp->sw, &rp->wake);
	pthread_mutex_lock(&rp->mu);
	while (!rp->job_done)
		pthread_cond_wait(&rp->cv, &rp->mu);
	int rc = rp->job_rc;
	rp->job_posted = 0;
	pthread_mutex_unlock(&rp->mu);
	atomic_fetch_add(&rp->st_wait_ns, now_ns() - t0);
	return rc ? -ESTALE : 0;
}

static int shipper_start(struct ms_repl *rp)
{
	rp->shipped = redo_durable_lsn(rp->srv->log);
	if (!rp->cbuf && !(rp->cbuf = malloc(RP_CHUNK)))
		return -ENOMEM;
	if (pthread_create(&rp->shp, NULL, shipper_main, rp))
		return -EAGAIN;
	pthread_mutex_lock(&rp->mu);
	while (!rp->sw_ready)
		pthread_cond_wait(&rp->cv, &rp->mu);
	int rc = rp->sw_rc;
	rp->shp_on = 1;
	pthread_mutex_unlock(&rp->mu);
	if (rc) {
		pthread_join(rp->shp, NULL);
		rp->shp_on = 0;
		return rc;
	}
	redo_set_ship(rp->srv->log, repl_ship, rp);
	return 0;
}

/* ---- the monitor: failover ---------------------------------------------------------- */

/* A backup in sync takes over: the znode names it, at epoch + 1. */
static void rp_take_over(struct ms_repl *rp, const struct coord_partition *part, int v)
{
	struct ms_server *srv = rp->srv;
	struct coord_partition np = *part;
	np.epoch = part->epoch + 1;
	np.primary = rp->self;
	np.ninsync = 1;
	np.insync[0] = rp->self;
	if (coord_set_partition(rp->co, rp->cid, rp->part, &np, v) != 0)
		return;   /* another backup won, or no coordinator: look again */
	pthread_mutex_lock(&rp->bmu);   /* no stream record half applied, no more taken */
	atomic_store(&rp->epoch, np.epoch);
	rp->blen = 0;
	rp->insync = 1ull << rp->self;
	/* what it followed on its disk, then the hook: shipping starts at the end */
	redo_wait(srv->log, redo_next_lsn(srv->log));
	int rc = shipper_start(rp);
	atomic_store(&srv->serve_until_ns, now_ns() + (uint64_t)rp->session_ms * 500000);
	atomic_store(&srv->role, MS_ROLE_PRIMARY);
	pthread_mutex_unlock(&rp->bmu);
	log_warn("memory server %u: took over partition %u as its primary, epoch %" PRIu64
		 " (server %u's session ended), at LSN %" PRIu64 "; %u prepared transaction%s "
		 "go to the resolver%s%s", rp->self, rp->part, np.epoch, part->primary,
		 redo_next_lsn(srv->log), atomic_load(&srv->nprep),
		 atomic_load(&srv->nprep) == 1 ? "" : "s", rc ? "; no shipper: " : "",
		 rc ? lotus_strerror(rc) : "");
}

static void *monitor_main(void *arg)
{
	struct ms_repl *rp = arg;
	struct ms_server *srv = rp->srv;
	uint64_t grace = 2ull * rp->session_ms * 1000000 + 1000000000ull;
	while (!atomic_load(&rp->mon_stop) && !ms_repl_deposed(srv)) {
		struct timespec ts = { 0, RP_TICK_MS * 1000000L };
		nanosleep(&ts, NULL);
		if (coord_expired(rp->co)) {
			rp_depose(rp, "ZooKeeper expired this server's session (it was paused or cut "
				  "off for longer than the session timeout)");
			break;
		}
		struct coord_partition part;
		int v = 0;
		uint64_t asked = now_ns();
		if (coord_get_partition_v(rp->co, rp->cid, rp->part, &part, &v) != 0)
			continue;
		/* ZooKeeper answered: the session lives at least a timeout from
		 * when we asked; serve for half of it */
		atomic_store(&srv->serve_until_ns, asked + (uint64_t)rp->session_ms * 500000);
		int role = atomic_load(&srv->role);
		if (role == MS_ROLE_PRIMARY) {
			if (part.epoch != atomic_load(&rp->epoch) || part.primary != rp->self) {
				char why[160];
				snprintf(why, sizeof(why), "the coordinator names server %u primary "
					 "at epoch %" PRIu64, part.primary, part.epoch);
				rp_depose(rp, why);
			}
			continue;
		}
		if (part.primary == rp->self)
			continue;
		/* a newer epoch: the stream of an older primary is refused from now */
		pthread_mutex_lock(&rp->bmu);
		if (part.epoch > atomic_load(&rp->epoch))
			atomic_store(&rp->epoch, part.epoch);
		pthread_mutex_unlock(&rp->bmu);
		char host[256];
		uint16_t port;
		int rc = coord_server_addr(rp->co, rp->cid, part.primary, host, sizeof(host), &port);
		if (rc == 0) {
			rp->saw_primary = 1;
			continue;
		}
		if (rc != -ENOENT)
			continue;
		/* the primary's session is gone (a backup that never saw it
		 * gives it a start-up's grace first) */
		if (!rp->saw_primary && now_ns() - rp->start_ns < grace)
			continue;
		if (!coord_partition_insync(&part, rp->self)) {
			if (!rp->said_insync++)
				log_warn("backup %u: partition %u's primary %u is gone, and this "
					 "backup is not in sync (it may lack acknowledged commits): it "
					 "cannot take over", rp->self, rp->part, part.primary);
			continue;
		}
		rp_take_over(rp, &part, v);
	}
	return NULL;
}

/* ---- start, stop, stats ---------------------------------------------------------- */

static int rp_stats_json(struct ms_server *srv, char *buf, size_t len)
{
	struct ms_repl *rp = srv->repl;
	if (!rp)
		return snprintf(buf, len, "%s", "");
	int role = atomic_load(&srv->role);
	const char *name = role == MS_ROLE_PRIMARY ? "primary" : role == MS_ROLE_BACKUP ? "backup"
			   : "deposed";
	uint64_t lag = 0;   /* a backup knows only what it has: the primary reports lag */
	char peers[512] = "";
	size_t off = 0;
	if (role == MS_ROLE_PRIMARY)
		for (unsigned i = 0; i < rp->npeers && off < sizeof(peers); i++) {
			const struct rp_peer *p = &rp->peers[i];
			uint64_t l = rp->shipped > p->acked ? rp->shipped - p->acked : 0;
			int k = snprintf(peers + off, sizeof(peers) - off,
					 "%s{\"id\":%u,\"state\":\"%s\",\"in_sync\":%s,\"lag\":%" PRIu64 "}",
					 i ? "," : "", p->id, peer_state[p->st],
					 rp->insync >> p->id & 1 ? "true" : "false",
					 p->st == PEER_DOWN ? 0 : l);
			if (k < 0)
				break;
			off += (size_t)k;
			if (p->st != PEER_DOWN)
				lag = MAX(lag, l);
		}
	return snprintf(buf, len,
		",\"replication\":{\"partition\":%u,\"role\":\"%s\",\"epoch\":%" PRIu64
		",\"lag\":%" PRIu64 ",\"shipped_lsn\":%" PRIu64 ",\"log_lsn\":%" PRIu64
		",\"batches\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"ack_wait_ns\":%" PRIu64
		",\"catchup_bytes\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"joined\":%" PRIu64
		",\"followed_records\":%" PRIu64 ",\"followed_bytes\":%" PRIu64
		",\"backups\":[%s]}",
		rp->part, name, atomic_load(&rp->epoch), lag, rp->shipped,
		srv->log ? redo_next_lsn(srv->log) : 0, atomic_load(&rp->st_batches),
		atomic_load(&rp->st_bytes), atomic_load(&rp->st_wait_ns),
		atomic_load(&rp->st_catchup_bytes), atomic_load(&rp->st_dropped),
		atomic_load(&rp->st_joined), atomic_load(&rp->b_records),
		atomic_load(&rp->b_bytes), peers);
}

void ms_repl_register(struct ms_server *srv)
{
	srv->hooks.repl_req = rp_req;
	srv->hooks.repl_stats_json = rp_stats_json;
}

int ms_repl_start(struct ms_server *srv, const struct memserver_opts *o)
{
	unsigned lease = o->lease_ms ? o->lease_ms : 3000;
	struct coord_partition part;
	if (!o->coordinator) {
		log_error("memory server %u: replicas = %u needs a coordinator", o->id, o->replicas);
		return LOTUS_ECONFIG;
	}
	struct ms_repl *rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->srv = srv;
	rp->R = o->replicas;
	rp->self = o->id;
	rp->part = o->id / o->replicas;
	rp->cid = o->cluster_id ? o->cluster_id : srv->cluster_id;
	rp->start_ns = now_ns();
	pthread_mutex_init(&rp->bmu, NULL);
	pthread_mutex_init(&rp->mu, NULL);
	pthread_cond_init(&rp->cv, NULL);
	for (unsigned i = 0; i < rp->R; i++)
		if (rp->part * rp->R + i != rp->self)
			rp->peers[rp->npeers++] = (struct rp_peer){ .id = rp->part * rp->R + i };
	srv->repl = rp;
	int rc = coord_open(o->coordinator, lease, lease + 10000, &rp->co);
	if (rc == 0)
		rc = coord_register_server(rp->co, o->replicas, rp->cid, o->id, o->host,
					   net_listener_port(srv->listener),
					   2 * coord_session_ms(rp->co) + 5000, &part);
	if (rc)
		return rc;
	rp->session_ms = coord_session_ms(rp->co);
	if (rp->session_ms != lease)
		log_info("coordinator: session timeout %u ms (asked for the lease, %u ms; "
			 "ZooKeeper bounds it to 2..20 x its tickTime)", rp->session_ms, lease);
	atomic_store(&rp->epoch, part.epoch);
	for (unsigned i = 0; i < part.ninsync; i++)
		rp->insync |= 1ull << part.insync[i];
	int primary = part.primary == o->id;
	log_info("memory server %u: partition %u (servers %u..%u), %s, epoch %" PRIu64, o->id,
		 rp->part, rp->part * rp->R, rp->part * rp->R + rp->R - 1,
		 primary ? "primary" : "backup", part.epoch);
	atomic_store(&srv->serve_until_ns, now_ns() + (uint64_t)rp->session_ms * 500000);
	if (primary) {
		/* the hook first: nothing is appended yet (no client is served
		 * before the role says primary), so shipping starts at the log's end */
		if ((rc = shipper_start(rp)) != 0) {
			log_error("memory server %u: cannot start the log shipper: %s", o->id,
				  lotus_strerror(rc));
			return rc;
		}
		atomic_store(&srv->role, MS_ROLE_PRIMARY);
	} else {
		atomic_store(&srv->role, MS_ROLE_BACKUP);
	}
	if (pthread_create(&rp->mon, NULL, monitor_main, rp) == 0)
		rp->mon_on = 1;
	else
		log_warn("memory server %u: no monitor thread: no failover", o->id);
	return 0;
}

void ms_repl_quiesce(struct ms_server *srv)
{
	struct ms_repl *rp = srv->repl;
	if (!rp || !rp->mon_on)
		return;
	atomic_store(&rp->mon_stop, 1);
	pthread_join(rp->mon, NULL);
	rp->mon_on = 0;
}

void ms_repl_closing(struct ms_server *srv)
{
	if (srv->repl)
		atomic_store(&srv->repl->closing, 1);
}

void ms_repl_stop(struct ms_server *srv)
{
	struct ms_repl *rp = srv->repl;
	if (!rp)
		return;
	ms_repl_quiesce(srv);
	if (rp->shp_on) {
		atomic_store(&rp->shp_stop, 1);
		if (rp->sw)
			net_post(rp->sw, &rp->wake);
		pthread_join(rp->shp, NULL);
		rp->shp_on = 0;
	}
	coord_close(rp->co);   /* its ephemeral znode goes at once */
	free(rp->bbuf);
	free(rp->cbuf);
	pthread_mutex_destroy(&rp->bmu);
	pthread_mutex_destroy(&rp->mu);
	pthread_cond_destroy(&rp->cv);
	free(rp);
	srv->repl = NULL;
}
