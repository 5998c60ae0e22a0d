/*
 * txn_spare.c - a session's spare transactions.  lotus_txn_free does not
 * give a two-sided transaction back to malloc: up to TS_SPARE_MAX of them
 * wait on the session's spare list, each with its ops array and the value
 * buffers of its ops, for the session's next lotus_txn_begin.  So a client
 * that begins and frees a transaction per operation allocates nothing per
 * transaction once the list is warm, as lotus_txn_recycle already gave
 * clients that reuse one.  Only the session's own thread touches the list.
 */
#include <stdlib.h>
#include <string.h>
#include "compute/twosided.h"

/* A cleared transaction: a spare (its ops array and buffers kept), else a
 * new one; NULL when out of memory. */
ts_txn_t *txn_spare_get(lotus_session_t *s)
{
	struct ts_sess *ss = ts_sess(s);
	ts_txn_t *t = ss->spare;
	if (!t)
		return calloc(1, sizeof(*t));
	ss->spare = t->fin_next;
	ss->nspare--;
	struct txn_op *ops = t->ops;
	unsigned cap = t->cap;
	memset(t, 0, sizeof(*t));
	t->ops = ops;
	t->cap = cap;
	return t;
}

/* Give t and everything it holds back to malloc. */
void txn_spare_release(ts_txn_t *t)
{
	for (unsigned i = 0; i < t->cap; i++) {
		free(t->ops[i].wval);
		free(t->ops[i].rval);
		free(t->ops[i].scan);
	}
	free(t->ops);
	free(t);
}

/* A freed transaction (off the session's slots, its ops cleared): onto the
 * spare list, or released when the list is full. */
void txn_spare_put(lotus_session_t *s, ts_txn_t *t)
{
	struct ts_sess *ss = ts_sess(s);
	if (ss->nspare < TS_SPARE_MAX) {
		t->fin_next = ss->spare;
		ss->spare = t;
		ss->nspare++;
		return;
	}
	txn_spare_release(t);
}

/* The session closes: release every spare. */
void txn_spare_drain(lotus_session_t *s)
{
	struct ts_sess *ss = ts_sess(s);
	while (ss && ss->spare) {
		ts_txn_t *t = ss->spare;
		ss->spare = t->fin_next;
		txn_spare_release(t);
	}
	if (ss)
		ss->nspare = 0;
}
