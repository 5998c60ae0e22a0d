/*
 * api.c - the top of the compute side: lotus_connect() composes the layers
 * (cluster, then the engine's cluster state), lotus_session_open() the
 * session layer's session and the engine's, and the public transaction API
 * (lotus.h) goes to the engine interface (engine.h): every lotus_txn_* call
 * and lotus_session_poll reach the engine the cluster was connected with,
 * and the synchronous forms wait for the asynchronous ones by polling.
 * Nothing here knows which engine runs.
 *
 * A NULL handle (or a NULL out pointer) is -EINVAL from every call that
 * returns an error, 0 / NULL from the getters, and a no-op for the rest: an
 * application's bug gets an error, not a crash inside the library.
 */
#include <errno.h>
#include <string.h>
#include "common/log.h"
#include "compute/cluster.h"
#include "compute/engine.h"
#include "compute/session.h"
#include "compute/txn_cache.h"

static const struct engine *sess_engine(const lotus_session_t *s)
{
	return s->cl->engine;
}

/* ---- cluster and sessions -------------------------------------------------------- */

const struct engine *engine_find(enum lotus_engine kind)
{
	switch (kind) {
	case LOTUS_ENGINE_TWOSIDED:
		return &engine_twosided;
	case LOTUS_ENGINE_ONESIDED:
		return &engine_onesided;
	case LOTUS_ENGINE_DEX:
		return &engine_dex;
	}
	return NULL;
}

const char *engine_kind_name(enum lotus_engine kind)
{
	return kind == LOTUS_ENGINE_TWOSIDED ? "twosided"
	       : kind == LOTUS_ENGINE_ONESIDED ? "onesided"
	       : kind == LOTUS_ENGINE_DEX ? "dex" : "unknown";
}

static int cluster_connect(const struct lotus_options *o, lotus_cluster_t **out)
{
	if (!o || !out)
		return -EINVAL;
	const struct engine *eng = engine_find(o->engine);
	lotus_cluster_t *c;
	if (!eng) {
		log_error("lotus_connect: the %s engine is not built yet", engine_kind_name(o->engine));
		return LOTUS_EUNSUPPORTED;
	}
	if (o->nplacement && o->engine != LOTUS_ENGINE_TWOSIDED) {
		log_error("lotus_connect: placement rules need the two-sided engine");
		return LOTUS_EUNSUPPORTED;
	}
	int rc = cluster_create(o, &c);
	if (rc)
		return rc;
	c->engine = eng;
	keeper_init(c);
	if (eng->cluster_open && (rc = eng->cluster_open(c)) != 0) {
		keeper_stop(c);
		cluster_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

/* The host's log sink (lotus_options.log_fn) is installed before anything
 * logs, and taken back if the connect fails. */
int lotus_connect(const struct lotus_options *o, lotus_cluster_t **out)
{
	if (!o || !out)
		return -EINVAL;
	if (o->log_fn)
		log_set_sink((log_sink_fn)o->log_fn, o->log_arg);
	int rc = cluster_connect(o, out);
	if (rc && o->log_fn)
		log_sink_clear((log_sink_fn)o->log_fn, o->log_arg);
	return rc;
}

void lotus_disconnect(lotus_cluster_t *c)
{
	if (!c)
		return;
	keeper_stop(c);
	if (c->engine->cluster_close)
		c->engine->cluster_close(c);
	log_sink_fn sink = (log_sink_fn)c->opts.log_fn;
	void *sink_arg = c->opts.log_arg;
	cluster_destroy(c);
	if (sink)
		log_sink_clear(sink, sink_arg);
}

int lotus_session_open(lotus_cluster_t *c, lotus_session_t **out)
{
	lotus_session_t *s;
	if (!c || !out)
		return -EINVAL;
	int rc = session_open(c, 0, &s);
	if (rc)
		return rc;
	if (c->engine->session_open && (rc = c->engine->session_open(s)) != 0) {
		session_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void lotus_session_close(lotus_session_t *s)
{
	if (!s)
		return;
	/* first: a transaction left in flight must not be completed into the
	 * engine state the engine is about to free */
	session_slots_drop(s);
	if (sess_engine(s)->session_close)
		sess_engine(s)->session_close(s);
	session_close(s);
}

int lotus_session_poll(lotus_session_t *s, int timeout_ms)
{
	if (!s)
		return -EINVAL;
	return sess_engine(s)->poll(s, timeout_ms);
}

void lotus_session_txn_counters(const lotus_session_t *s, struct lotus_txn_counters *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (s)
		sess_engine(s)->counters(s, out);
}

int lotus_txn_begin(lotus_session_t *s, lotus_txn_t **out)
{
	if (!s || !out)
		return -EINVAL;
	return sess_engine(s)->begin(s, out);
}

int lotus_txn_restart(lotus_txn_t *t)
{
	if (!t)
		return -EINVAL;
	return t->eng->restart(t, false);
}

int lotus_txn_recycle(lotus_txn_t *t)
{
	if (!t)
		return -EINVAL;
	return t->eng->restart(t, true);
}

void lotus_txn_free(lotus_txn_t *t)
{
	if (t)
		t->eng->free(t);
}

uint64_t lotus_txn_id(const lotus_txn_t *t) { return t ? t->id : 0; }
uint64_t lotus_txn_priority(const lotus_txn_t *t) { return t ? t->prio : 0; }

/* ---- staging ----------------------------------------------------------------- */

static int stage(lotus_txn_t *t, enum engine_op_kind kind, lotus_table_t tb, const void *key,
		 size_t klen, const void *value, size_t vlen, unsigned count)
{
	struct engine_op op = { .kind = kind, .table = tb, .key = key, .klen = klen,
				.value = value, .vlen = vlen, .count = count };
	if (!t)
		return -EINVAL;
	return t->eng->stage(t, &op);
}

int lotus_txn_read(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen)
{
	return stage(t, ENGINE_READ, tb, key, klen, NULL, 0, 0);
}

int lotus_txn_read_for_update(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen)
{
	return stage(t, ENGINE_READ_X, tb, key, klen, NULL, 0, 0);
}

int lotus_txn_write(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen,
		    const void *value, size_t vlen)
{
	return stage(t, ENGINE_WRITE, tb, key, klen, value, vlen, 0);
}

int lotus_txn_insert(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen,
		     const void *value, size_t vlen)
{
	return stage(t, ENGINE_INSERT, tb, key, klen, value, vlen, 0);
}

int lotus_txn_delete(lotus_txn_t *t, lotus_table_t tb, const void *key, size_t klen)
{
	return stage(t, ENGINE_DELETE, tb, key, klen, NULL, 0, 0);
}

int lotus_txn_scan(lotus_txn_t *t, lotus_table_t tb, const void *start, size_t slen,
		   unsigned count)
{
	return stage(t, ENGINE_SCAN, tb, start, slen, NULL, 0, count);
}

/* ---- results ------------------------------------------------------------------ */

int lotus_txn_result(const lotus_txn_t *t, int op, const void **value, size_t *vlen)
{
	if (!t)
		return -EINVAL;
	return t->eng->result(t, op, value, vlen);
}

int lotus_txn_result_version(const lotus_txn_t *t, int op, uint64_t *version)
{
	if (!t)
		return -EINVAL;
	if (!t->eng->result_version)
		return LOTUS_EUNSUPPORTED;
	return t->eng->result_version(t, op, version);
}

int lotus_txn_scan_rows(const lotus_txn_t *t, int op)
{
	if (!t)
		return -EINVAL;
	return t->eng->scan_rows(t, op);
}

int lotus_txn_scan_row(const lotus_txn_t *t, int op, unsigned i, const void **key, size_t *klen,
		       const void **value, size_t *vlen)
{
	const void *k, *v;   /* what the caller did not ask for */
	size_t kl, vl;
	if (!t)
		return -EINVAL;
	return t->eng->scan_row(t, op, i, key ? key : &k, klen ? klen : &kl, value ? value : &v,
				vlen ? vlen : &vl);
}

/* ---- steps ---------------------------------------------------------------------- */

int lotus_txn_execute_async(lotus_txn_t *t, lotus_txn_cb cb, void *arg)
{
	if (!t)
		return -EINVAL;
	return t->eng->execute(t, cb, arg);
}

int lotus_txn_commit_async(lotus_txn_t *t, lotus_txn_cb cb, void *arg)
{
	if (!t)
		return -EINVAL;
	return t->eng->commit(t, cb, arg);
}

int lotus_txn_abort_async(lotus_txn_t *t, lotus_txn_cb cb, void *arg)
{
	if (!t)
		return -EINVAL;
	return t->eng->abort(t, cb, arg);
}

struct sync_wait {
	int done, result;
};

static void sync_done(lotus_txn_t *t, int result, void *arg)
{
	struct sync_wait *w = arg;
	w->result = result;
	w->done = 1;
}

/* Wait for the step a successful start (rc 0) began. */
static int sync_wait(lotus_txn_t *t, struct sync_wait *w, int rc)
{
	if (rc)
		return rc;
	while (!w->done)
		lotus_session_poll(t->s, 100);
	return w->result;
}

int lotus_txn_execute(lotus_txn_t *t)
{
	struct sync_wait w = { 0 };
	if (!t)
		return -EINVAL;
	return sync_wait(t, &w, t->eng->execute(t, sync_done, &w));
}

int lotus_txn_commit(lotus_txn_t *t)
{
	struct sync_wait w = { 0 };
	if (!t)
		return -EINVAL;
	int rc = sync_wait(t, &w, t->eng->commit(t, sync_done, &w));
	if (rc && !t->eng->finished(t))
		lotus_txn_abort(t);
	return rc;
}

int lotus_txn_abort(lotus_txn_t *t)
{
	struct sync_wait w = { 0 };
	if (!t)
		return -EINVAL;
	return sync_wait(t, &w, t->eng->abort(t, sync_done, &w));
}

/* The engine's own cache (dex: index pages), else the record cache's. */
void lotus_cluster_cache_counters(lotus_cluster_t *c, struct lotus_cache_counters *out)
{
	if (!out)
		return;
	memset(out, 0, sizeof(*out));
	if (c && c->engine && c->engine->cache_counters)
		c->engine->cache_counters(c, out);
	else
		txn_cache_counters(c, out);
}
