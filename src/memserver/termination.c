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
 *
 * A server asked about a transaction it never prepared logs REDO_REFUSE, waits
 * until that is durable, answers UNKNOWN, and from then on refuses to prepare
 * it (ms_prepare_logged); so "UNKNOWN" is final and the client cannot have
 * seen every participant vote yes.
 *
 * Outcomes are remembered in a bounded table (the last MS_OUTCOMES decisions
 * and refusals, FIFO, prep_mu): a decision older than that is forgotten and
 * would be answered UNKNOWN.  Restarts take seconds, so a participant that
 * asks does so long before.  Recovery refills the table from the DECIDE and
 * REFUSE records the log still holds.
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
#include "compute/compute_int.h"
#include "memserver/ms_int.h"

#define MS_OUTCOMES   (1u << 18)     /* remembered decisions */
#define MS_OUT_BUCKETS (1u << 16)
#define RESOLVE_AFTER_NS (1000000000ULL) /* a live PREPARE is stuck after this */
#define RESOLVE_BATCH 256

struct ms_outcomes {
	uint64_t ids[MS_OUTCOMES];
	int32_t next[MS_OUTCOMES];       /* chain in the bucket; -1 ends */
	uint8_t what[MS_OUTCOMES];       /* enum ms_outcome; NONE: slot unused */
	int32_t head[MS_OUT_BUCKETS];
	uint32_t pos;                    /* next slot to (re)use, FIFO */
};

static unsigned out_bucket(uint64_t id)
{
	return (unsigned)((id * 0x9e3779b97f4a7c15ULL) >> 48) & (MS_OUT_BUCKETS - 1);
}

int ms_term_open(struct ms_server *srv)
{
	struct ms_outcomes *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	memset(o->head, 0xff, sizeof(o->head));
	srv->outcomes = o;
	return 0;
}

void ms_term_free(struct ms_server *srv)
{
	free(srv->outcomes);
	srv->outcomes = NULL;
}

static int32_t *out_link(struct ms_outcomes *o, uint64_t id)
{
	int32_t *pp = &o->head[out_bucket(id)];
	while (*pp >= 0 && o->ids[*pp] != id)
		pp = &o->next[*pp];
	return pp;
}

enum ms_outcome ms_outcome_find(struct ms_server *srv, uint64_t txn_id)
{
	struct ms_outcomes *o = srv->outcomes;
	int32_t i = *out_link(o, txn_id);
	return i >= 0 ? (enum ms_outcome)o->what[i] : MS_OUT_NONE;
}

void ms_outcome_note(struct ms_server *srv, uint64_t txn_id, enum ms_outcome what)
{
	struct ms_outcomes *o = srv->outcomes;
	int32_t *pp = out_link(o, txn_id);
	if (*pp >= 0) {            /* known: the newer word wins */
		o->what[*pp] = (uint8_t)what;
		return;
	}
	uint32_t i = o->pos;
	o->pos = (o->pos + 1) % MS_OUTCOMES;
	if (o->what[i] != MS_OUT_NONE) {   /* evict the oldest */
		int32_t *old = out_link(o, o->ids[i]);
		*old = o->next[i];
	}
	pp = out_link(o, txn_id);  /* the eviction may have changed the chain */
	o->ids[i] = txn_id;
	o->what[i] = (uint8_t)what;
	o->next[i] = -1;
	*pp = (int32_t)i;
}

int ms_txn_status(struct ms_server *srv, uint64_t txn_id, uint64_t *lsn)
{
	int answer = WIRE_TXN_UNKNOWN;
	*lsn = 0;
	pthread_mutex_lock(&srv->prep_mu);
	for (struct ms_prep_ent *e = srv->prep[ms_prep_bucket(txn_id)]; e; e = e->next)
		if (e->txn_id == txn_id)   /* prepared here and undecided */
			answer = WIRE_TXN_PREPARED;
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
		default:   /* never prepared: refuse it for good (durably, with a log) */
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
			return 0;   /* a participant the config does not know: abort */
		struct wire_req r = { .op = OP_TXN_STATUS, .txn_id = it->txn_id };
		if (session_admin(s, sv, &r, NULL, NULL, 2000) != 0)
			return -1;
		switch (s->g->admin_arg[sv]) {
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

static unsigned resolve_collect(struct ms_server *srv, struct resolve_item *items)
{
	uint64_t now = clock_now_ns();
	unsigned n = 0;
	pthread_mutex_lock(&srv->prep_mu);
	for (unsigned b = 0; b < MS_PREP_BUCKETS && n < RESOLVE_BATCH; b++)
		for (struct ms_prep_ent *e = srv->prep[b]; e && n < RESOLVE_BATCH; e = e->next)
			if (e->recovered || now - e->since_ns > RESOLVE_AFTER_NS)
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
	if (self < 0) {
		log_warn("cannot resolve %u prepared transaction%s: %s does not name this server "
			 "(%u)", n, n == 1 ? "" : "s", srv->config_path, srv->id);
		return;
	}
	lotus_options_init(&o);
	o.config_path = srv->config_path;
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
		if (!atomic_load(&srv->nprep))
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
