/*
 * termination.c - cooperative termination of prepared transactions (docs/design.md,
 * "Commit and durability", after Cornus, VLDB 2022), on every server: a
 * memory server without a data directory keeps its prepared table and its
 * outcomes in memory and logs nothing (a refusal is then final for as long as
 * the server lives, which is as long as its data does).
 *
 * A transaction prepared here waits for its client's COMMIT or ABORT.  When
 * that does not come - the server restarted with the PREPARE undecided in its
 * log, or the client vanished after preparing (the lost-client cleanup hands
 * its prepared transactions over at once, ms_prepared_hold) - the resolver
 * thread asks the other writing participants (their addresses from the
 * cluster config, --config or --peers) with OP_TXN_STATUS and decides:
 *
 *   any COMMITTED                     -> commit
 *   any ABORTED or UNKNOWN            -> abort (an UNKNOWN server refused it)
 *   every other one PREPARED          -> commit (every vote was yes, durably)
 *   a participant unreachable         -> ask again later, locks kept
 *     (or not in the config yet: never abort on silence, since a client
 *     acknowledges its commit on the durable yes votes alone)
 *
 * A server asked about a transaction it never prepared answers UNKNOWN, and
 * that answer must be final: the client cannot have seen every participant
 * vote yes.  If the txn is live here (it holds locks, so its PREPARE may still
 * come), the server logs REDO_REFUSE, waits until that is durable, and from
 * then on refuses to prepare it (ms_prepare_logged).  If it holds nothing
 * here, no PREPARE of it can succeed anyway (h_prepare needs its locks, and
 * its client locks nothing after sending PREPAREs), so nothing is logged or
 * remembered: a flood of queries about unknown ids costs no log.
 *
 * A PREPARED answer is a promise (struct ms_prep_ent.promised): the asker may
 * commit on it, so it goes out only once the PREPARE is durable, and from then
 * on the client's ABORT no longer aborts the txn here: it is left to the
 * resolver, which asks at once (durable.c, prepared_decide).  A PREPARE whose
 * client is still connected is otherwise left to that client for
 * RESOLVE_LIVE_AFTER_NS; a client's COMMIT that comes after the resolver
 * decided is answered with the decision (handlers.c, commit_decided).
 *
 * The outcomes it answers from are remembered in outcomes.c.
 *
 * Layer 4 (ms_int.h), the top but for memserver.c: it calls durable.c and
 * outcomes.c; handlers.c reaches ms_txn_status through srv->hooks.
 *
 * Threads: the resolver is one thread per server (ms_term_start/stop); it uses
 * liblotus (a cluster handle and one session per pass) to reach the others.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/config.h"
#include "common/log.h"
#include "compute/session.h"
#include "memserver/ms_int.h"
#include "memserver/outcomes.h"
#include "memserver/durable.h"
#include "memserver/termination.h"

/* A PREPARE whose client is still connected is its client's to decide; the
 * resolver takes it only after this (a client that gave it up while staying
 * connected: one of its writers was lost during the PREPARE round), or at
 * once when asked about it or told to abort it after answering PREPARED. */
#define RESOLVE_LIVE_AFTER_NS (5000000000ULL)
#define RESOLVE_BATCH 256

/* Is txn_id live here: does it hold locks (an entry in the lock table)?
 * Only such a txn can still be prepared here: h_prepare refuses a txn
 * without one, and a client sends its PREPAREs only after every operation
 * of the txn was answered, so none that would create one can come after a
 * participant holds the txn prepared and asks about it. */
static int txn_live_here(struct ms_server *srv, uint64_t txn_id)
{
	lock_txn_t *txn = lock_txn_find(srv->locks, txn_id);
	if (txn)
		lock_txn_put(srv->locks, txn);
	return txn != NULL;
}

static int ms_txn_status(struct ms_server *srv, uint64_t txn_id, uint64_t *lsn)
{
	int answer = WIRE_TXN_UNKNOWN;
	*lsn = 0;
	pthread_mutex_lock(&srv->prep_mu);
	for (struct ms_prep_ent *e = srv->prep[ms_prep_bucket(txn_id)]; e; e = e->next)
		if (e->txn_id == txn_id) {   /* prepared here and undecided */
			answer = WIRE_TXN_PREPARED;
			/* the asker may commit on this answer: it holds only once the
			 * vote is durable, and this server's client may no longer
			 * abort it; the resolver here asks the others now */
			*lsn = srv->log ? e->lsn : 0;
			e->promised = 1;
			e->since_ns = 0;
		}
	if (answer == WIRE_TXN_UNKNOWN) {
		switch (ms_outcome_find(srv, txn_id)) {
		case MS_OUT_COMMIT:
			answer = WIRE_TXN_COMMITTED;
			break;
		case MS_OUT_ABORT:
			answer = WIRE_TXN_ABORTED;
			break;
		case MS_OUT_REFUSED:
			break;
		default:
			if (!txn_live_here(srv, txn_id))
				break;   /* can never be prepared here: nothing to refuse */
			/* live here, not prepared: refuse it for good (durably) */
			if (!srv->log ||
			    redo_append(srv->log, REDO_REFUSE, txn_id, "", 0, lsn) == 0)
				ms_outcome_note(srv, txn_id, MS_OUT_REFUSED);
			else   /* cannot promise the refusal: no answer */
				answer = 0;
			break;
		}
	}
	pthread_mutex_unlock(&srv->prep_mu);
	return answer;
}

/* ---- the resolver --------------------------------------------------------- */

struct resolve_item {
	uint64_t txn_id, parts;
};

/* Ask every other participant about one txn: 1 commit, 0 abort, -1 unknown
 * yet (a participant did not answer). */
static int resolve_ask(lotus_session_t *s, unsigned self, const struct resolve_item *it)
{
	int all_prepared = 1;
	for (unsigned sv = 0; sv < 64; sv++) {
		if (!(it->parts >> sv & 1) || sv == self)
			continue;
		if (sv >= s->cl->nservers)
			return -1;  /* not in the config (yet: --peers): its durable yes
				     * vote may have acknowledged the txn, so ask later */
		struct wire_req r = { .op = OP_TXN_STATUS, .txn_id = it->txn_id };
		if (session_admin(s, sv, &r, NULL, NULL, 2000) != 0)
			return -1;
		switch (session_admin_arg(s, sv)) {
		case WIRE_TXN_COMMITTED:
			return 1;
		case WIRE_TXN_PREPARED:
			break;
		case WIRE_TXN_ABORTED:
		case WIRE_TXN_UNKNOWN:
			all_prepared = 0;
			break;
		default:
			return -1;
		}
	}
	return all_prepared;
}

/* Decide one txn here: log the DECIDE, apply or drop, release its locks. */
static void resolve_apply(struct ms_server *srv, uint64_t txn_id, int commit)
{
	int rc = 0;
	if (!ms_prepared_decide(srv, txn_id, commit, &rc))
		return;   /* its client decided meanwhile */
	lock_txn_t *txn = lock_txn_find(srv->locks, txn_id);
	if (txn)
		lock_txn_release(srv->locks, txn);
	log_info("prepared txn %" PRIx64 " resolved with the other participants: %s%s%s",
		 txn_id, commit ? "commit" : "abort", rc ? ", but applying failed: " : "",
		 rc ? lotus_strerror(rc) : "");
}

/* The prepared txns to decide now.  Not one whose own PREPARE is not durable
 * yet: a commit decided on it (every other writer prepared) would be answered
 * COMMITTED to the others, and a crash would then lose this server's half. */
static unsigned resolve_collect(struct ms_server *srv, struct resolve_item *items)
{
	uint64_t now = clock_now_ns();
	unsigned n = 0;
	pthread_mutex_lock(&srv->prep_mu);
	for (unsigned b = 0; b < MS_PREP_BUCKETS && n < RESOLVE_BATCH; b++)
		for (struct ms_prep_ent *e = srv->prep[b]; e && n < RESOLVE_BATCH; e = e->next)
			if ((!srv->log || redo_durable_lsn(srv->log) >= e->lsn) &&
			    (e->recovered || e->since_ns == 0 ||
			     now - e->since_ns > RESOLVE_LIVE_AFTER_NS))
				items[n++] = (struct resolve_item){ e->txn_id, e->parts };
	pthread_mutex_unlock(&srv->prep_mu);
	return n;
}

static void resolve_pass(struct ms_server *srv, const struct resolve_item *items, unsigned n)
{
	struct lotus_config cfg;
	struct lotus_options o;
	lotus_cluster_t *cl = NULL;
	lotus_session_t *s = NULL;
	config_defaults(&cfg);
	int self = config_load(srv->config_path, &cfg) ? -1
		   : config_find_server(&cfg, srv->id);
	/* Clients number the participants by partition (replicas > 1). */
	if (self >= 0)
		self /= (int)config_replicas(&cfg);
	if (self < 0) {
		log_warn("cannot resolve %u prepared transaction%s: %s does not name this server "
			 "(%u)", n, n == 1 ? "" : "s", srv->config_path, srv->id);
		return;
	}
	lotus_options_init(&o);
	o.config_path = srv->config_path;
	o.secret_file = srv->secret_file;   /* the server's own, whatever the file says */
	o.compute_id = 4095 - (srv->id % 1024);
	if (lotus_connect(&o, &cl) != 0 || lotus_session_open(cl, &s) != 0) {
		lotus_disconnect(cl);
		return;
	}
	for (unsigned i = 0; i < n && !atomic_load(&srv->resolver_stop); i++) {
		int d = resolve_ask(s, (unsigned)self, &items[i]);
		if (d >= 0)
			resolve_apply(srv, items[i].txn_id, d);
	}
	lotus_session_close(s);
	lotus_disconnect(cl);
}

/* The cluster file can be read: it exists and, if it is a memfd (a local
 * cluster's peers file), its writer has sealed it, i.e. it is complete. */
static int peers_ready(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	int seals = fcntl(fd, F_GET_SEALS);
	close(fd);
	return seals < 0 || (seals & F_SEAL_WRITE);
}

static void *resolver_main(void *arg)
{
	struct ms_server *srv = arg;
	struct resolve_item *items = calloc(RESOLVE_BATCH, sizeof(*items));
	int warned = 0;
	while (items && !atomic_load(&srv->resolver_stop)) {
		struct timespec ts = { 0, 200 * 1000000L };
		nanosleep(&ts, NULL);
		/* a backup's prepared txns are its primary's to decide */
		if (!atomic_load(&srv->nprep) || atomic_load(&srv->role) >= MS_ROLE_BACKUP)
			continue;
		unsigned n = resolve_collect(srv, items);
		if (!n)
			continue;
		if (!srv->config_path) {
			if (!warned++)
				log_warn("prepared transactions awaiting a decision: %u; without "
					 "--config or --peers this server cannot ask the other "
					 "participants", n);
			continue;
		}
		if (!peers_ready(srv->config_path)) {   /* --peers: not written yet */
			if (!warned++)
				log_info("prepared transactions awaiting a decision: %u; waiting "
					 "for %s to name the other participants", n,
					 srv->config_path);
			continue;
		}
		resolve_pass(srv, items, n);
	}
	free(items);
	return NULL;
}

void ms_term_start(struct ms_server *srv)
{
	atomic_store(&srv->resolver_stop, 0);
	if (pthread_create(&srv->resolver, NULL, resolver_main, srv) == 0)
		srv->resolver_running = 1;
	else
		log_warn("no resolver thread: undecided prepared transactions stay locked");
}

void ms_term_stop(struct ms_server *srv)
{
	if (!srv->resolver_running)
		return;
	atomic_store(&srv->resolver_stop, 1);
	pthread_join(srv->resolver, NULL);
	srv->resolver_running = 0;
}

void ms_term_register(struct ms_server *srv)
{
	srv->hooks.txn_status = ms_txn_status;
}
