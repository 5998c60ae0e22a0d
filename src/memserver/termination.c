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
 * Outcomes are remembered in two tables (prep_mu), because only one kind is
 * dangerous to forget:
 *   commits   COMMIT decisions.  Forgetting one would make an asker abort its
 *             half of a committed txn.  Only a newer COMMIT decided here can
 *             push one out (the last MS_COMMITS of them are kept), and every
 *             checkpoint logs them all again (REDO_OUTCOMES, right after its
 *             begin LSN: ms_outcomes_relog), so they survive log truncation
 *             and restarts; recovery reloads them.
 *   others    ABORT decisions and refusals (MS_OTHERS, FIFO).  A forgotten
 *             ABORT is answered UNKNOWN, which also means abort.  A status
 *             query about an id this server never saw adds a refusal here, so
 *             a flood of such queries never evicts a COMMIT.
 * Recovery refills both from the DECIDE, REFUSE and OUTCOMES records the log
 * still holds.
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

#define MS_COMMITS    (1u << 20)     /* remembered COMMIT decisions */
#define MS_OTHERS     (1u << 18)     /* remembered ABORT decisions and refusals */
#define RESOLVE_AFTER_NS (1000000000ULL) /* a live PREPARE is stuck after this */
#define RESOLVE_BATCH 256

/* One FIFO table of txn ids with a hash index (prep_mu). */
struct out_tab {
	uint32_t cap, nbuckets;
	uint64_t *ids;
	int32_t *next;                   /* chain in the bucket; -1 ends */
	uint8_t *what;                   /* enum ms_outcome; NONE: slot unused */
	int32_t *head;
	uint32_t pos;                    /* next slot to (re)use, FIFO */
};

struct ms_outcomes {
	struct out_tab commits, others;
};

static unsigned out_bucket(const struct out_tab *t, uint64_t id)
{
	return (unsigned)((id * 0x9e3779b97f4a7c15ULL) >> 32) & (t->nbuckets - 1);
}

static int tab_init(struct out_tab *t, uint32_t cap)
{
	t->cap = cap;
	t->nbuckets = cap / 4;
	t->ids = calloc(cap, sizeof(*t->ids));
	t->next = calloc(cap, sizeof(*t->next));
	t->what = calloc(cap, 1);
	t->head = malloc(t->nbuckets * sizeof(*t->head));
	if (!t->ids || !t->next || !t->what || !t->head)
		return -ENOMEM;
	memset(t->head, 0xff, t->nbuckets * sizeof(*t->head));
	return 0;
}

static void tab_free(struct out_tab *t)
{
	free(t->ids);
	free(t->next);
	free(t->what);
	free(t->head);
}

static int32_t *tab_link(struct out_tab *t, uint64_t id)
{
	int32_t *pp = &t->head[out_bucket(t, id)];
	while (*pp >= 0 && t->ids[*pp] != id)
		pp = &t->next[*pp];
	return pp;
}

static enum ms_outcome tab_find(struct out_tab *t, uint64_t id)
{
	int32_t i = *tab_link(t, id);
	return i >= 0 ? (enum ms_outcome)t->what[i] : MS_OUT_NONE;
}

static void tab_remove(struct out_tab *t, uint64_t id)
{
	int32_t *pp = tab_link(t, id), i = *pp;
	if (i < 0)
		return;
	*pp = t->next[i];
	t->what[i] = MS_OUT_NONE;   /* the slot stays in the FIFO, unused */
}

static void tab_note(struct out_tab *t, uint64_t id, enum ms_outcome what)
{
	int32_t *pp = tab_link(t, id);
	if (*pp >= 0) {            /* known: the newer word wins */
		t->what[*pp] = (uint8_t)what;
		return;
	}
	uint32_t i = t->pos;
	t->pos = (t->pos + 1) % t->cap;
	if (t->what[i] != MS_OUT_NONE) {   /* evict the oldest of this table */
		int32_t *old = tab_link(t, t->ids[i]);
		*old = t->next[i];
	}
	pp = tab_link(t, id);  /* the eviction may have changed the chain */
	t->ids[i] = id;
	t->what[i] = (uint8_t)what;
	t->next[i] = -1;
	*pp = (int32_t)i;
}

int ms_term_open(struct ms_server *srv)
{
	struct ms_outcomes *o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	srv->outcomes = o;
	if (tab_init(&o->commits, MS_COMMITS) || tab_init(&o->others, MS_OTHERS))
		return -ENOMEM;    /* ms_term_free cleans up */
	return 0;
}

void ms_term_free(struct ms_server *srv)
{
	if (srv->outcomes) {
		tab_free(&srv->outcomes->commits);
		tab_free(&srv->outcomes->others);
	}
	free(srv->outcomes);
	srv->outcomes = NULL;
}

enum ms_outcome ms_outcome_find(struct ms_server *srv, uint64_t txn_id)
{
	struct ms_outcomes *o = srv->outcomes;
	enum ms_outcome w = tab_find(&o->commits, txn_id);
	return w != MS_OUT_NONE ? w : tab_find(&o->others, txn_id);
}

void ms_outcome_note(struct ms_server *srv, uint64_t txn_id, enum ms_outcome what)
{
	struct ms_outcomes *o = srv->outcomes;
	if (what == MS_OUT_COMMIT) {
		tab_remove(&o->others, txn_id);
		tab_note(&o->commits, txn_id, what);
	} else if (tab_find(&o->commits, txn_id) == MS_OUT_NONE) {
		tab_note(&o->others, txn_id, what);   /* a COMMIT is never overruled */
	}
}

/* Page writer thread, right after a checkpoint took its begin LSN: log every
 * remembered COMMIT again (oldest first, in records of up to 1 Mi ids), so
 * that they stay in the log that recovery from this checkpoint reads. */
void ms_outcomes_relog(void *arg)
{
	struct ms_server *srv = arg;
	enum { CHUNK = 1u << 17 };
	uint64_t *buf = malloc(CHUNK * sizeof(*buf));
	if (!buf) {
		log_warn("out of memory: the COMMIT outcomes are not logged again at this "
			 "checkpoint (they stay in the log until the next one)");
		return;
	}
	pthread_mutex_lock(&srv->prep_mu);
	struct out_tab *t = &srv->outcomes->commits;
	uint32_t n = 0;
	int rc = 0;
	for (uint32_t k = 0; k < t->cap && rc == 0; k++) {
		uint32_t i = (t->pos + k) % t->cap;
		if (t->what[i] != MS_OUT_COMMIT)
			continue;
		buf[n++] = t->ids[i];
		if (n == CHUNK || k + 1 == t->cap) {
			rc = redo_append(srv->log, REDO_OUTCOMES, 0, buf, n * 8, NULL);
			n = 0;
		}
	}
	if (n && rc == 0)
		rc = redo_append(srv->log, REDO_OUTCOMES, 0, buf, n * 8, NULL);
	pthread_mutex_unlock(&srv->prep_mu);
	free(buf);
	if (rc)
		log_warn("the COMMIT outcomes could not be logged again: %s", lotus_strerror(rc));
}

/* Recovery: a REDO_OUTCOMES record. */
void ms_outcomes_replay(struct ms_server *srv, const void *payload, uint32_t len)
{
	for (uint32_t off = 0; off + 8 <= len; off += 8) {
		uint64_t id;
		memcpy(&id, (const unsigned char *)payload + off, 8);
		ms_outcome_note(srv, id, MS_OUT_COMMIT);
	}
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
