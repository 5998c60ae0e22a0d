/*
 * outcomes.c - what a memory server remembers about the outcome of prepared
 * transactions, for cooperative termination (termination.c answers
 * OP_TXN_STATUS from it; durable.c notes decisions and refusals and replays
 * them at recovery).  In memory on every server; logged only with a data
 * directory.
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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "memserver/ms_int.h"
#include "memserver/outcomes.h"

#define MS_COMMITS    (1u << 20)     /* remembered COMMIT decisions */
#define MS_OTHERS     (1u << 18)     /* remembered ABORT decisions and refusals */

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
	if (atomic_load(&srv->role) >= MS_ROLE_BACKUP)
		return;   /* a backup's log is its primary's, byte for byte */
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
