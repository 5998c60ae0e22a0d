/*
 * os_lotus.c - the one-sided engine under lotus's public transaction API:
 * `const struct engine engine_onesided` (compute/engine.h) over os_engine.h.
 *
 * The cluster keeps one os_engine (its own UCX context with RMA), each
 * lotus session one os_session, made at cluster/session open.  A lotus
 * table is attached on a session the first time one of its transactions
 * names it (the memory servers build its region then: from the records the
 * table already has, or empty, and a YCSB load then fills it by one-sided
 * inserts).  Tables are created and server counters read through lotus's
 * two-sided messages as before.
 *
 * Each step (execute, commit, abort) runs as a coroutine of its transaction
 * (os_txn_step): its RMA operations are still one at a time, but while one
 * waits the session's other transactions (ycsb --inflight) go on, and poll
 * resumes them as their operations complete.  A step's end is queued and
 * its callback runs from poll, as the interface requires.  poll also
 * answers the servers' liveness pings on both the two-sided session's
 * connections and the engine's own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include <pthread.h>
#include "compute/cluster.h"
#include "compute/engine.h"
#include "compute/session.h"
#include "onesided/os_engine.h"

#define OSL_QUEUE 1024
#define OSL_POLL_NS 10000000        /* the two-sided session's pings */

struct osl_done {
	lotus_txn_t *t;
	lotus_txn_cb cb;
	void *arg;
	int rc;
};

struct osl_session {
	os_session_t *os;
	unsigned tid[LOTUS_MAX_TABLES];   /* os table + 1; 0: not attached yet */
	struct osl_done q[OSL_QUEUE];
	unsigned qhead, qlen;
	uint64_t next_id, last_poll_ns;
};

struct osl_txn {
	struct lotus_txn pub;
	os_txn_t *t;
	int err;                  /* sticky staging error */
	lotus_txn_cb cb;          /* the step running */
	void *arg;
};

static struct osl_session *osl_of(const lotus_session_t *s)
{
	return s->eng;
}

/* The os_engine of each connected cluster (the cluster has no slot for an
 * engine's state; the sessions do). */
#define OSL_CLUSTERS 64
static pthread_mutex_t osl_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { const lotus_cluster_t *c; os_engine_t *e; } osl_clusters[OSL_CLUSTERS];

static os_engine_t *osl_engine(const lotus_cluster_t *c)
{
	os_engine_t *e = NULL;
	pthread_mutex_lock(&osl_mu);
	for (unsigned i = 0; i < OSL_CLUSTERS && !e; i++)
		if (osl_clusters[i].c == c)
			e = osl_clusters[i].e;
	pthread_mutex_unlock(&osl_mu);
	return e;
}

static int osl_engine_set(const lotus_cluster_t *c, os_engine_t *e)
{
	int rc = -ENOMEM;
	pthread_mutex_lock(&osl_mu);
	for (unsigned i = 0; i < OSL_CLUSTERS && rc; i++)
		if (osl_clusters[i].c == (e ? NULL : c)) {
			osl_clusters[i].c = e ? c : NULL;
			osl_clusters[i].e = e;
			rc = 0;
		}
	pthread_mutex_unlock(&osl_mu);
	return rc;
}

static struct osl_txn *ot_of(lotus_txn_t *t)
{
	return container_of(t, struct osl_txn, pub);
}

static int osl_cluster_open(lotus_cluster_t *c)
{
	const char *hosts[LOTUS_MAX_SERVERS];
	uint16_t ports[LOTUS_MAX_SERVERS];
	for (unsigned i = 0; i < c->nservers; i++) {
		hosts[i] = c->servers[i].host;
		ports[i] = c->servers[i].port;
	}
	struct os_engine_opts o = {
		.transport = c->transport, .nservers = c->nservers, .hosts = hosts,
		.ports = ports, .cc = c->opts.cc, .cache_bytes = c->opts.cache_bytes,
		.timeout_ms = c->opts.timeout_ms, .lease_ms = c->lease_ms,
		.secret_file = c->secret_path[0] ? c->secret_path : NULL,
	};
	os_engine_t *e;
	int rc = os_engine_create(&o, &e);
	if (rc == 0 && (rc = osl_engine_set(c, e)) != 0)
		os_engine_destroy(e);
	return rc;
}

static void osl_cluster_close(lotus_cluster_t *c)
{
	os_engine_t *e = osl_engine(c);
	osl_engine_set(c, NULL);
	os_engine_destroy(e);
}

static int osl_session_open(lotus_session_t *s)
{
	struct osl_session *ss = calloc(1, sizeof(*ss));
	if (!ss)
		return -ENOMEM;
	os_engine_t *e = osl_engine(s->cl);
	int rc = e ? os_session_open(e, &ss->os) : LOTUS_ESTATE;
	if (rc) {
		free(ss);
		return rc;
	}
	s->eng = ss;
	return 0;
}

static void osl_session_close(lotus_session_t *s)
{
	struct osl_session *ss = osl_of(s);
	if (!ss)
		return;
	os_session_close(ss->os);
	free(ss);
	s->eng = NULL;
}

/* Queue a finished step's callback for the next poll. */
static int osl_queue(lotus_txn_t *t, lotus_txn_cb cb, void *arg, int rc)
{
	struct osl_session *ss = osl_of(t->s);
	if (ss->qlen == OSL_QUEUE)
		return -ENOMEM;
	ss->q[(ss->qhead + ss->qlen++) % OSL_QUEUE] = (struct osl_done){ t, cb, arg, rc };
	return 0;
}

static int osl_poll(lotus_session_t *s, int timeout_ms)
{
	struct osl_session *ss = osl_of(s);
	uint64_t now = clock_now_ns();
	int n = 0;
	if (os_session_active(ss->os))
		n += os_session_run(ss->os);
	if (now - ss->last_poll_ns > OSL_POLL_NS || (!ss->qlen && !os_session_active(ss->os))) {
		ss->last_poll_ns = now;
		os_session_poll(ss->os);
		int busy = ss->qlen || os_session_active(ss->os);
		session_lock(s);
		n += session_progress(s, busy ? 0 : MIN(timeout_ms, 1), busy);
		session_unlock(s);
		session_yield(s);
	}
	for (unsigned todo = ss->qlen; todo > 0 && ss->qlen > 0; todo--) {
		struct osl_done d = ss->q[ss->qhead];
		ss->qhead = (ss->qhead + 1) % OSL_QUEUE;
		ss->qlen--;
		d.cb(d.t, d.rc, d.arg);
		n++;
	}
	return n;
}

static int osl_begin(lotus_session_t *s, lotus_txn_t **out)
{
	struct osl_session *ss = osl_of(s);
	struct osl_txn *ot = calloc(1, sizeof(*ot));
	if (!ot)
		return -ENOMEM;
	int rc = os_txn_begin(ss->os, &ot->t);
	if (rc) {
		free(ot);
		return rc;
	}
	ot->pub.eng = s->cl->engine;
	ot->pub.s = s;
	ot->pub.id = ++ss->next_id;
	ot->pub.prio = os_txn_priority(ot->t);
	*out = &ot->pub;
	return 0;
}

static int osl_restart(lotus_txn_t *t, bool new_priority)
{
	struct osl_txn *ot = ot_of(t);
	int rc = new_priority ? os_txn_recycle(ot->t) : os_txn_restart(ot->t);
	ot->err = 0;
	t->id = ++osl_of(t->s)->next_id;
	t->prio = os_txn_priority(ot->t);
	return rc;
}

static void osl_free(lotus_txn_t *t)
{
	struct osl_txn *ot = ot_of(t);
	os_txn_free(ot->t);
	free(ot);
}

/* The os table of lotus table tb, attached on first use. */
static int osl_table(lotus_session_t *s, lotus_table_t tb, unsigned *tid)
{
	struct osl_session *ss = osl_of(s);
	lotus_cluster_t *c = s->cl;
	if (tb >= LOTUS_MAX_TABLES || tb >= c->ntables)
		return LOTUS_ENOTABLE;
	if (!ss->tid[tb]) {
		unsigned id;
		int rc = os_session_attach(ss->os, c->tables[tb].name, &id);
		if (rc)
			return rc;
		ss->tid[tb] = id + 1;
	}
	*tid = ss->tid[tb] - 1;
	return 0;
}

static int osl_stage(lotus_txn_t *t, const struct engine_op *op)
{
	struct osl_txn *ot = ot_of(t);
	unsigned tid;
	if (ot->err)
		return ot->err;
	int rc = osl_table(t->s, op->table, &tid);
	if (rc == 0) {
		switch (op->kind) {
		case ENGINE_READ:
			rc = os_txn_read(ot->t, tid, op->key, op->klen);
			break;
		case ENGINE_READ_X:
			rc = os_txn_read_for_update(ot->t, tid, op->key, op->klen);
			break;
		case ENGINE_WRITE:
			rc = os_txn_write(ot->t, tid, op->key, op->klen, op->value, op->vlen);
			break;
		case ENGINE_INSERT:
			rc = os_txn_insert(ot->t, tid, op->key, op->klen, op->value, op->vlen);
			break;
		case ENGINE_DELETE:
			rc = os_txn_delete(ot->t, tid, op->key, op->klen);
			break;
		case ENGINE_SCAN:
			rc = os_txn_scan(ot->t, tid, op->key, op->klen, op->count);
			break;
		default:
			rc = LOTUS_EUNSUPPORTED;
			break;
		}
	}
	if (rc < 0)
		ot->err = rc;
	return rc;
}

static void osl_step_done(os_txn_t *t, int rc, void *arg)
{
	struct osl_txn *ot = arg;
	if (osl_queue(&ot->pub, ot->cb, ot->arg, rc) != 0)
		log_error("onesided: callback queue full: a step's end is lost");
}

static int osl_step(lotus_txn_t *t, enum os_step step, lotus_txn_cb cb, void *arg)
{
	struct osl_txn *ot = ot_of(t);
	if (ot->err && step != OS_STEP_ABORT)
		return ot->err;
	if (osl_of(t->s)->qlen + os_session_active(osl_of(t->s)->os) >= OSL_QUEUE)
		return -ENOMEM;
	ot->cb = cb;
	ot->arg = arg;
	return os_txn_step(ot->t, step, osl_step_done, ot);
}

static int osl_execute(lotus_txn_t *t, lotus_txn_cb cb, void *arg)
{
	return osl_step(t, OS_STEP_EXECUTE, cb, arg);
}

static int osl_commit(lotus_txn_t *t, lotus_txn_cb cb, void *arg)
{
	return osl_step(t, OS_STEP_COMMIT, cb, arg);
}

static int osl_abort(lotus_txn_t *t, lotus_txn_cb cb, void *arg)
{
	return osl_step(t, OS_STEP_ABORT, cb, arg);
}

static int osl_finished(const lotus_txn_t *t)
{
	return os_txn_finished(container_of(t, const struct osl_txn, pub)->t);
}

static int osl_result(const lotus_txn_t *t, int op, const void **value, size_t *vlen)
{
	return os_txn_result(container_of(t, const struct osl_txn, pub)->t, op, value, vlen);
}

static int osl_scan_rows(const lotus_txn_t *t, int op)
{
	return os_txn_scan_rows(container_of(t, const struct osl_txn, pub)->t, op);
}

static int osl_scan_row(const lotus_txn_t *t, int op, unsigned i, const void **key, size_t *klen,
			const void **value, size_t *vlen)
{
	return os_txn_scan_row(container_of(t, const struct osl_txn, pub)->t, op, i, key, klen,
			       value, vlen);
}

static void tally_to(struct lotus_attempt_counters *d, const struct os_tally *t, uint64_t n)
{
	d->attempts = n;
	d->round_trips = t->round_trips;
	for (int i = 0; i < OS_NTYPES; i++) {
		d->ops += t->ops[i];
		d->bytes_sent += t->out[i];
		d->bytes_recv += t->in[i];
		d->type[i].ops = t->ops[i];
		d->type[i].bytes_sent = t->out[i];
		d->type[i].bytes_recv = t->in[i];
	}
}

static void osl_counters(const lotus_session_t *s, struct lotus_txn_counters *out)
{
	struct os_counters c;
	os_session_counters(osl_of(s)->os, &c);
	out->engine = "onesided";
	out->ntypes = OS_NTYPES;
	for (int i = 0; i < OS_NTYPES; i++)
		out->type_names[i] = os_op_type_name((enum os_op_type)i);
	tally_to(&out->committed, &c.committed, c.commits);
	tally_to(&out->aborted, &c.aborted, c.aborts);
}

const struct engine engine_onesided = {
	.name = "onesided",
	.cluster_open = osl_cluster_open,
	.cluster_close = osl_cluster_close,
	.session_open = osl_session_open,
	.session_close = osl_session_close,
	.poll = osl_poll,
	.begin = osl_begin,
	.restart = osl_restart,
	.free = osl_free,
	.stage = osl_stage,
	.execute = osl_execute,
	.commit = osl_commit,
	.abort = osl_abort,
	.finished = osl_finished,
	.result = osl_result,
	.scan_rows = osl_scan_rows,
	.scan_row = osl_scan_row,
	.counters = osl_counters,
};
