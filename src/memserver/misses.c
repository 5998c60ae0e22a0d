/*
 * misses.c - misses that do not block (issue 24; the Oracle paper's
 * asynchronous path, LeanStore's "a task that misses submits its read and
 * yields").
 *
 * A lock request of a tiered server holds its lock and is about to touch
 * its record; if the record's page is not resident, the request parks
 * (struct ms_pending, PEND_MISS, as a lock wait parks) on the wait list of
 * that page, an entry of this worker's miss table, and the worker goes on
 * with the rest of the message and with other connections.  The page's read
 * goes on the worker's own ring (tierback_ring_*: io_uring with the backing
 * files registered and the pool's registration cloned, libaio where io_uring
 * cannot be made), at most srv->miss_depth in flight; a page beyond that
 * waits in the table (QUEUED) without a frame or a lock until a read
 * completes.  Each loop (ms_miss_poll) submits the reads prepared since,
 * reaps the completions, publishes each page read (store_miss_end: resident,
 * unpinned, REF set) and resumes its waiters in arrival order through
 * srv->hooks.miss_resume, which pins and answers them as if they had never
 * parked (a page dropped again meanwhile just misses again).
 *
 * Ordering.  A request to a page that has an entry here joins its wait list
 * whatever the page's state, so the requests of a transaction to one page
 * are answered in the order they came; replies of one message may go out in
 * several messages and out of order (the client matches them by tag).
 *
 * Errors.  A read that fails (I/O error, short read, checksum, injected
 * fault) fails exactly the requests on that page's list, with -EIO; the
 * page stays non-resident and the next request reads it again.
 *
 * The hybrid rule (the paper's split; docs/store.md).  A miss takes the
 * synchronous pread of the store instead (store_rec_get blocks) when this
 * worker has no read in flight or queued and the request is the last of its
 * message: nothing else is there to overlap with, and the pread saves the
 * ring's submit and reap.  LOTUS_MISS_HYBRID=0 turns the rule off (every
 * miss goes on the ring).  Misses also block when the table is full
 * (MS_MISS_MAX pages), when no frame is free without waiting (the blocking
 * path waits for the page writers), when another thread has the page
 * LOCKED, and for requests that are not point lock requests (commits' writes,
 * scans: these prefetch), and for a stale hint (the record is elsewhere).
 *
 * A pin of this worker that meets a page it has LOCKED itself (a COMMIT's
 * write to a page its own READ is still reading) would wait for itself:
 * store_thread_poll makes such a pin complete this worker's reads
 * (miss_tls_poll: reap and publish, resume later).
 *
 * Thread: everything here runs on the worker's thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/log.h"
#include "memserver/misses.h"
#include "store/tierback.h"

#define MS_MISS_MAX 1024u

enum { MISS_FREE, MISS_QUEUED, MISS_INFLIGHT, MISS_DONE };

struct ms_miss {
	struct store_miss m;
	uint64_t page;
	struct ms_pending *head, *tail;   /* waiters, in arrival order */
	int state, res;
	uint64_t order;                   /* QUEUED: started in this order */
};

struct ms_misses {
	tb_ring_t *ring;
	int wake_fd;                      /* the ring's completion eventfd, or -1 */
	int off;                          /* no ring: every miss blocks */
	int hybrid;
	struct ms_miss ent[MS_MISS_MAX];
	struct ms_miss *act[MS_MISS_MAX]; /* entries in use, unordered */
	unsigned nact, nqueued;
	struct ms_miss *free[MS_MISS_MAX];
	unsigned nfree;
	struct ms_miss *done[MS_MISS_MAX]; /* read (or failed), not yet resumed: FIFO */
	unsigned done_head, done_n;
	uint64_t order;
};

static void miss_tls_poll(void *arg);

static struct ms_misses *misses_get(struct ms_worker *wk)
{
	struct ms_misses *mi = wk->misses;
	if (mi)
		return mi->off ? NULL : mi;
	if (!(mi = calloc(1, sizeof(*mi))))
		return NULL;
	wk->misses = mi;
	int rc = tierback_ring_open(wk->srv->tier, wk->srv->miss_depth, &mi->ring);
	if (rc < 0) {
		log_warn("worker %u: no ring for misses (%s): every miss blocks", wk->idx,
			 strerror(-rc));
		mi->off = 1;
		return NULL;
	}
	store_thread_poll(miss_tls_poll, wk);   /* before any page is LOCKED for a read */
	if (getenv("LOTUS_MISS_SLEEP") && !strcmp(getenv("LOTUS_MISS_SLEEP"), "0"))
		mi->wake_fd = -1;                /* the old busy poll, for side-by-side runs */
	else if ((mi->wake_fd = tierback_ring_notify_fd(mi->ring)) < 0) {
		log_info("worker %u: no completion fd for the miss ring (%s): the worker polls "
			 "while reads are in flight", wk->idx, strerror(-mi->wake_fd));
		mi->wake_fd = -1;
	}
	const char *h = getenv("LOTUS_MISS_HYBRID");
	mi->hybrid = !(h && !strcmp(h, "0"));
	for (unsigned i = 0; i < MS_MISS_MAX; i++)
		mi->free[i] = &mi->ent[MS_MISS_MAX - 1 - i];
	mi->nfree = MS_MISS_MAX;
	return mi;
}

uint64_t ms_miss_spin_ns(void)
{
	const char *v = getenv("LOTUS_MISS_SPIN_US");
	char *end;
	unsigned long long us = v && *v ? strtoull(v, &end, 10) : MS_DEFAULT_MISS_SPIN_US;
	if (v && *v && *end) {
		log_warn("LOTUS_MISS_SPIN_US=%s is not a number of microseconds: %u it is", v,
			 MS_DEFAULT_MISS_SPIN_US);
		us = MS_DEFAULT_MISS_SPIN_US;
	}
	return us * 1000;
}

int ms_miss_on(const struct ms_worker *wk)
{
	return wk->srv->miss_depth && wk->srv->tier && (!wk->misses || !wk->misses->off);
}

int ms_miss_busy(const struct ms_worker *wk)
{
	return wk->misses && wk->misses->nact;
}

int ms_miss_wake_fd(const struct ms_worker *wk)
{
	const struct ms_misses *mi = wk->misses;
	/* no sleep while reads are done but not resumed (a pin reaped them) or
	 * prepared but not submitted (a submit failed): no completion would
	 * wake the worker for them */
	return mi && !mi->off && !mi->done_n && !tierback_ring_unsubmitted(mi->ring)
	       ? mi->wake_fd : -1;
}

static struct ms_miss *miss_find(struct ms_misses *mi, uint64_t page)
{
	for (unsigned i = 0; i < mi->nact; i++)
		if (mi->act[i]->page == page)
			return mi->act[i];
	return NULL;
}

static void miss_free(struct ms_misses *mi, struct ms_miss *e)
{
	for (unsigned i = 0; i < mi->nact; i++)
		if (mi->act[i] == e) {
			mi->act[i] = mi->act[--mi->nact];
			break;
		}
	e->state = MISS_FREE;
	e->head = e->tail = NULL;
	mi->free[mi->nfree++] = e;
}

static void miss_done(struct ms_misses *mi, struct ms_miss *e, int res)
{
	e->state = MISS_DONE;
	e->res = res;
	mi->done[(mi->done_head + mi->done_n++) % MS_MISS_MAX] = e;
}

/* Start the read of e's page: LOCKED with a frame, prepared on the ring
 * (INFLIGHT once submitted), or done at once (resident meanwhile, no copy
 * to read, no frame, another thread has it, the read failed now: its
 * waiters are resumed and take the blocking path or the error). */
static void miss_start(struct ms_worker *wk, struct ms_misses *mi, struct ms_miss *e)
{
	int rc = store_miss_begin(wk->srv->store, e->page, &e->m);
	if (rc != 1) {
		miss_done(mi, e, 0);
		return;
	}
	rc = tierback_ring_prep(mi->ring, e->page, e->m.buf, (uint64_t)(e - mi->ent));
	if (rc == 0) {
		e->state = MISS_INFLIGHT;
		return;
	}
	store_miss_end(wk->srv->store, &e->m, rc == 1 ? 1 : rc);
	miss_done(mi, e, rc == 1 ? 0 : rc);
}

int ms_miss_park(struct ms_worker *wk, uint64_t page, struct ms_pending *p)
{
	struct ms_misses *mi = misses_get(wk);
	if (!mi || page == 0)
		return 0;
	struct ms_miss *e = mi->nact ? miss_find(mi, page) : NULL;
	if (!e) {
		if (store_page_resident(wk->srv->store, page) || !mi->nfree)
			return 0;
		unsigned busy = tierback_ring_inflight(mi->ring) + mi->nqueued + mi->nact;
		if (mi->hybrid && busy == 0 && wk->msg_left == 0)
			return 0;        /* nothing to overlap with: the blocking pread */
		e = mi->free[--mi->nfree];
		memset(&e->m, 0, sizeof(e->m));
		e->page = page;
		e->res = 0;
		e->head = e->tail = NULL;
		mi->act[mi->nact++] = e;
		if (tierback_ring_inflight(mi->ring) + 0 < wk->srv->miss_depth &&
		    mi->nqueued == 0) {
			miss_start(wk, mi, e);
			if (e->state == MISS_DONE && !e->res) {   /* nothing to wait for */
				mi->done_n--;
				miss_free(mi, e);
				return 0;
			}
		} else {
			e->state = MISS_QUEUED;
			e->order = mi->order++;
			mi->nqueued++;
		}
	}
	atomic_store(&p->state, PEND_MISS);
	p->miss_next = NULL;
	if (e->tail)
		e->tail->miss_next = p;
	else
		e->head = p;
	e->tail = p;
	tierback_note_parked(wk->srv->tier, 1);
	return 1;
}

/* Reap what completed (at least min), publish each page; the waiters are
 * resumed later, from ms_miss_poll. */
static void miss_reap(struct ms_worker *wk, struct ms_misses *mi, unsigned min)
{
	uint64_t tags[64];
	int res[64];
	for (;;) {
		int n = tierback_ring_reap(mi->ring, tags, res, 64, min);
		if (n <= 0)
			return;
		for (int j = 0; j < n; j++) {
			struct ms_miss *e = &mi->ent[tags[j] % MS_MISS_MAX];
			store_miss_end(wk->srv->store, &e->m, res[j]);
			miss_done(mi, e, res[j]);
		}
		if (n < 64)
			return;
		min = 0;
	}
}

/* A pin of this thread met a LOCKED page (store_thread_poll). */
static void miss_tls_poll(void *arg)
{
	struct ms_worker *wk = arg;
	struct ms_misses *mi = wk->misses;
	if (mi && mi->ring) {
		tierback_ring_submit(mi->ring);
		miss_reap(wk, mi, 0);
	}
}

/* Start queued pages while the ring has room, oldest first. */
static void miss_start_queued(struct ms_worker *wk, struct ms_misses *mi)
{
	while (mi->nqueued && tierback_ring_inflight(mi->ring) < wk->srv->miss_depth) {
		struct ms_miss *e = NULL;
		for (unsigned i = 0; i < mi->nact; i++)
			if (mi->act[i]->state == MISS_QUEUED && (!e || mi->act[i]->order < e->order))
				e = mi->act[i];
		if (!e)
			break;
		mi->nqueued--;
		miss_start(wk, mi, e);
	}
}

static int miss_poll(struct ms_worker *wk, struct ms_misses *mi, unsigned min)
{
	int resumed = 0;
	tierback_ring_submit(mi->ring);
	if (mi->wake_fd >= 0)   /* before the reap: a later completion signals again */
		tierback_ring_notify_clear(mi->ring);
	miss_reap(wk, mi, min);
	while (mi->done_n) {
		struct ms_miss *e = mi->done[mi->done_head];
		mi->done_head = (mi->done_head + 1) % MS_MISS_MAX;
		mi->done_n--;
		struct ms_pending *p = e->head;
		int res = e->res;
		miss_free(mi, e);       /* a waiter that misses again starts anew */
		while (p) {
			struct ms_pending *next = p->miss_next;
			p->miss_next = NULL;
			wk->srv->hooks.miss_resume(wk, p, res);
			resumed++;
			p = next;
		}
		miss_start_queued(wk, mi);
	}
	if (resumed)
		wk->srv->hooks.miss_resumed(wk);
	miss_start_queued(wk, mi);
	tierback_ring_submit(mi->ring);
	return resumed;
}

int ms_miss_poll(struct ms_worker *wk)
{
	struct ms_misses *mi = wk->misses;
	if (!mi || mi->off || !mi->nact)
		return 0;
	return miss_poll(wk, mi, 0);
}

void ms_miss_drain(struct ms_worker *wk)
{
	struct ms_misses *mi = wk->misses;
	if (!mi)
		return;
	while (!mi->off && mi->nact)
		miss_poll(wk, mi, tierback_ring_inflight(mi->ring) ? 1 : 0);
	store_thread_poll(NULL, NULL);
	tierback_ring_close(mi->ring);
	free(mi);
	wk->misses = NULL;
}
