/*
 * store_tier.c - the buffer manager of a tiered store: frames, pins, misses
 * and the CLOCK; dirty pages; eviction for the page writers; page access and
 * the tier stats.  store.c has the store, its slots and records; store_int.h
 * the state word and the structs.
 *
 * Tiered stores (store_create_tiered; the default store is untiered and
 * none of this applies to it).  The pool becomes nframes frames (frame 0
 * unused) and the store holds npages = capacity / page_size logical pages,
 * which is what locations, page_owner[] and dirty[] are indexed by.  A
 * logical page has one 64-bit state word in pstate[]:
 *
 *   | frame (32) | pins (24) | BACKED DIRTY REF LOCKED RESIDENT (8) |
 *
 * RESIDENT: the page is in frame `frame`.  LOCKED: it is being read in (not
 * resident) or written out (a victim): nobody may pin it.  REF: the CLOCK bit,
 * set by every read or write pin.  DIRTY: the frame differs from the backing
 * copy.  BACKED: a backing copy exists (the page was written out once, or
 * rebuilt from an image); a page without one is zero-filled on a miss, no
 * read.  frame_page[f] maps a frame back to its page for the CLOCK hands.
 *
 * Pin: a CAS adding one pin (and REF, and DIRTY for a write) to a RESIDENT,
 * unlocked state; unpin: an atomic subtract.  Record bytes are touched only
 * between the two (store_rec_get/put for callers; the store's own writes pin
 * with DIRTY set before they write, so a page cannot be picked as a clean
 * victim while or after it changes).  A pinner that meets LOCKED backs off and
 * retries.  Miss: the thread CASes the non-resident state to LOCKED, takes a
 * frame (a free one; else it runs the CLOCK itself over all frames and drops
 * the first clean unpinned page whose REF is clear; else, only dirty or
 * pinned pages left, it calls want_frames and waits on fr_cv, bounded by
 * frame_wait_ms, then LOTUS_ENOSPACE), calls read_page (or zero-fills),
 * publishes the page RESIDENT with one pin, and counts the read's latency.
 * A failed read puts the frame back and restores the old state: -EIO for that
 * request only.  Dropping a clean page is one CAS from "resident, unpinned,
 * clean, REF clear" to "not resident", so it cannot race with a pin.
 *
 * Eviction (store_evict_pick, the page writers): writer `part` owns a slice
 * of the frames and a CLOCK hand over it; it clears REF bits as it passes,
 * drops clean victims, and returns dirty unpinned ones LOCKED with DIRTY
 * cleared (so nobody can pin or change the page while it is written).
 * store_evict_done(0) makes the page non-resident and BACKED and frees the
 * frame; a failed write makes it resident, DIRTY and unlocked again.
 * want_frames is called when a miss leaves fewer than low_water frames free.
 *
 * Scan prefetch (store_prefetch): for each page it locks a non-resident one
 * as a miss does (tier_lock_absent), takes a frame without waiting
 * (frame_try, the miss's first steps; none: the batch stops there), reads
 * all of them with one read_batch call and publishes each success resident,
 * unpinned, clean, REF set (tier_publish, as a miss does, without the pin);
 * a failed read puts the frame back and restores the state, so the later pin
 * just misses.  Counted apart from misses (prefetched, prefetch_batches).
 *
 * Misses that do not block (store_miss_begin/end; the memory server parks
 * the requests meanwhile): the first steps of a miss (lock the absent page,
 * frame_try) without waiting and without the read, which the caller issues
 * on its own ring; store_miss_end publishes the page unpinned with REF set,
 * or restores it on a failed read.  A thread with such reads in flight may
 * itself pin a page it has LOCKED (a COMMIT's write to a page its READ is
 * still reading): tier_pin then calls the thread's poll function
 * (store_thread_poll) while it backs off, which completes those reads.
 *
 * Dirty tracking for the checkpointer: one byte per pool page (tiered: per
 * logical page, apart from the state word's DIRTY), set by every
 * store write (and by store_mark_dirty() after writes through
 * store_rec_value), cleared by store_dirty_collect().
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include "common/clock.h"
#include "common/common.h"
#include "common/log.h"
#include "store/store_int.h"

/* ---- tiered stores: frames, pins, misses, CLOCK ---- */

static void backoff(unsigned *spins)
{
	if (++*spins < 64) {
		__builtin_ia32_pause();
	} else if (*spins < 256) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 50000 };
		nanosleep(&ts, NULL);
	}
}

static void want_frames(store_t *st)
{
	if (st->topts.want_frames)
		st->topts.want_frames(st->topts.arg);
}

static void frame_put(store_t *st, uint32_t f)
{
	pthread_mutex_lock(&st->fr_mu);
	st->free_fr[st->nfree] = f;
	STORE(&st->nfree, st->nfree + 1);
	if (st->fr_waiters)
		pthread_cond_broadcast(&st->fr_cv);
	pthread_mutex_unlock(&st->fr_mu);
}

int frame_pop(store_t *st, uint32_t *f)
{
	uint32_t left = 0;
	int got = 0;
	if (!LOAD(&st->nfree))
		return 0;
	pthread_mutex_lock(&st->fr_mu);
	if (st->nfree) {
		*f = st->free_fr[st->nfree - 1];
		STORE(&st->nfree, st->nfree - 1);
		left = st->nfree;
		got = 1;
	}
	pthread_mutex_unlock(&st->fr_mu);
	if (got && left < st->low_water)
		want_frames(st);
	return got;
}

/* Look at frame f for the CLOCK: 0 skip (free, locked, pinned, or its bit
 * was set: now cleared), 1 a clean victim was dropped (f is now the
 * caller's), 2 a dirty victim was locked for writing (*pagep). */
static int clock_visit(store_t *st, uint32_t f, int take_dirty, uint64_t *pagep)
{
	uint64_t page = LOAD_ACQ(&st->frame_page[f]);
	if (page == 0)
		return 0;
	uint64_t *w = &st->pstate[page];
	uint64_t s = LOAD_ACQ(w);
	for (;;) {
		if ((s & (PS_RESIDENT | PS_LOCKED)) != PS_RESIDENT || PS_FRAME(s) != f)
			return 0;
		if (s & PS_REF) {
			if (CAS(w, &s, s & ~PS_REF))
				return 0;
			continue;
		}
		if (PS_PINS(s))
			return 0;
		if (!(s & PS_DIRTY)) {
			if (!CAS(w, &s, s & PS_BACKED))
				continue;
			STORE(&st->frame_page[f], 0);
			__atomic_fetch_sub(&st->resident, 1, __ATOMIC_RELAXED);
			ADD(&st->evict_clean, 1);
			return 1;
		}
		if (!take_dirty)
			return 0;
		if (!CAS(w, &s, (s | PS_LOCKED) & ~PS_DIRTY))
			continue;
		*pagep = page;
		return 2;
	}
}

/* A miss found no free frame: drop a clean unpinned victim itself. */
int clock_drop_one(store_t *st, uint32_t *f)
{
	uint32_t nf = st->nframes - 1;
	uint64_t dummy;
	for (uint32_t i = 0; i < 2 * nf; i++) {
		uint32_t c = 1 + (uint32_t)(ADD(&st->hand, 1) % nf);
		if (clock_visit(st, c, 0, &dummy) == 1) {
			*f = c;
			return 1;
		}
	}
	return 0;
}

/* A frame without waiting: a free one or a clean victim.  1 got one. */
static int frame_try(store_t *st, uint32_t *f)
{
	if (frame_pop(st, f))
		return 1;
	if (clock_drop_one(st, f)) {
		want_frames(st);
		return 1;
	}
	return 0;
}

static __thread void (*tls_poll)(void *arg);
static __thread void *tls_poll_arg;

/* A frame for a miss: a free one, a clean victim, or (only dirty ones left)
 * wait for the page writers, bounded.  0 or LOTUS_ENOSPACE. */
static int frame_get(store_t *st, uint32_t *f)
{
	uint64_t deadline = 0;
	for (;;) {
		if (frame_try(st, f))
			return 0;
		want_frames(st);
		uint64_t now = clock_now_ns();
		if (!deadline) {
			deadline = now + (uint64_t)LOAD(&st->topts.frame_wait_ms) * 1000000u;
			ADD(&st->frame_waits, 1);
		} else if (now >= deadline) {
			ADD(&st->frame_timeouts, 1);
			return LOTUS_ENOSPACE;
		}
		if (tls_poll)   /* complete this thread's own reads meanwhile: they hold frames */
			tls_poll(tls_poll_arg);
		struct timespec ts;
		clock_deadline_in(CLOCK_REALTIME, &ts, 2);
		pthread_mutex_lock(&st->fr_mu);
		st->fr_waiters++;
		if (!st->nfree)
			pthread_cond_timedwait(&st->fr_cv, &st->fr_mu, &ts);
		st->fr_waiters--;
		pthread_mutex_unlock(&st->fr_mu);
	}
}

/* The page, LOCKED by us (its state was s), is in frame f: make it resident
 * with `bits` (pins, REF, DIRTY) and BACKED as it was. */
static void tier_publish(store_t *st, uint64_t page, uint32_t f, uint64_t s, uint64_t bits)
{
	ADD(&st->resident, 1);
	STORE_REL(&st->frame_page[f], page);
	STORE_REL(&st->pstate[page], (uint64_t)f << 32 | PS_RESIDENT | (s & PS_BACKED) | bits);
}

/* The page is LOCKED by us (its state was s, not resident): bring it in. */
__attribute__((noinline)) static int tier_miss(store_t *st, uint64_t page, uint64_t s, uint64_t how, unsigned char **base)
{
	uint64_t *w = &st->pstate[page];
	uint32_t f;
	int rc = frame_get(st, &f);
	if (rc) {
		STORE_REL(w, s);
		return rc;
	}
	unsigned char *buf = st->pool + ((size_t)f << st->page_shift);
	uint64_t t0 = clock_now_ns();
	int r = (s & PS_BACKED) && st->topts.read_page ? st->topts.read_page(st->topts.arg, page, buf) : 1;
	if (r < 0) {
		frame_put(st, f);
		STORE_REL(w, s);
		if (ADD(&st->miss_errors, 1) < 10)
			log_warn("store: reading page %" PRIu64 " failed: %s", page, strerror(-r));
		return -EIO;
	}
	if (r == 1) {
		memset(buf, 0, st->page_size);
		ADD(&st->miss_zero, 1);
	} else {
		uint64_t ns = clock_now_ns() - t0, m = LOAD(&st->miss_ns_max);
		ADD(&st->miss_ns_sum, ns);
		while (ns > m && !__atomic_compare_exchange_n(&st->miss_ns_max, &m, ns, true,
							      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	ADD(&st->misses, 1);
	tier_publish(st, page, f, s, PS_PIN1 | how);
	*base = buf;
	return 0;
}

/* Try to lock a non-resident, unlocked page for reading it in: 1 locked (its
 * old state in *sp), 0 it is resident or someone else has it locked. */
static int tier_lock_absent(store_t *st, uint64_t page, uint64_t *sp)
{
	uint64_t *w = &st->pstate[page];
	uint64_t s = LOAD_ACQ(w);
	while (!(s & (PS_RESIDENT | PS_LOCKED)))
		if (CAS(w, &s, s | PS_LOCKED)) {
			*sp = s;
			return 1;
		}
	return 0;
}

void store_thread_poll(void (*poll)(void *arg), void *arg)
{
	tls_poll = poll;
	tls_poll_arg = arg;
}

__attribute__((noinline)) int tier_pin(store_t *st, uint64_t page, uint64_t how, unsigned char **base)
{
	uint64_t *w = &st->pstate[page];
	uint64_t s = LOAD_ACQ(w);
	unsigned spins = 0;
	for (;;) {
		if ((s & (PS_RESIDENT | PS_LOCKED)) == PS_RESIDENT) {
			if (CAS(w, &s, (s + PS_PIN1) | how)) {
				*base = st->pool + ((size_t)PS_FRAME(s) << st->page_shift);
				return 0;
			}
		} else if (s & PS_LOCKED) {
			if (tls_poll)        /* it may be our own read in flight */
				tls_poll(tls_poll_arg);
			backoff(&spins);
			s = LOAD_ACQ(w);
		} else if (CAS(w, &s, s | PS_LOCKED)) {
			return tier_miss(st, page, s, how, base);
		}
	}
}

int store_page_resident(const store_t *st, uint64_t page)
{
	if (!st->tiered)
		return 1;
	if (page == 0 || page >= st->npages)
		return 1;           /* nothing to read: the pin decides */
	return (LOAD_ACQ(&st->pstate[page]) & (PS_RESIDENT | PS_LOCKED)) == PS_RESIDENT;
}

int store_miss_begin(store_t *st, uint64_t page, struct store_miss *m)
{
	uint64_t s;
	uint32_t f;
	if (!st->tiered || page == 0 || page >= st->npages)
		return 0;
	if (!tier_lock_absent(st, page, &s))
		return (LOAD_ACQ(&st->pstate[page]) & (PS_RESIDENT | PS_LOCKED)) == PS_RESIDENT
		       ? 0 : STORE_MISS_BUSY;
	if (!frame_try(st, &f)) {
		STORE_REL(&st->pstate[page], s);
		return -EAGAIN;
	}
	unsigned char *buf = st->pool + ((size_t)f << st->page_shift);
	if (!(s & PS_BACKED) || !st->topts.read_page) {   /* no backing copy: zeros */
		memset(buf, 0, st->page_size);
		ADD(&st->miss_zero, 1);
		ADD(&st->misses, 1);
		tier_publish(st, page, f, s, PS_REF);
		return 0;
	}
	m->page = page;
	m->old = s;
	m->frame = f;
	m->buf = buf;
	m->t0 = clock_now_ns();
	return 1;
}

void store_miss_end(store_t *st, const struct store_miss *m, int res)
{
	if (res < 0) {
		frame_put(st, m->frame);
		STORE_REL(&st->pstate[m->page], m->old);
		if (ADD(&st->miss_errors, 1) < 10)
			log_warn("store: reading page %" PRIu64 " failed: %s", m->page, strerror(-res));
		return;
	}
	if (res == 1) {
		memset(m->buf, 0, st->page_size);
		ADD(&st->miss_zero, 1);
	} else {
		uint64_t ns = clock_now_ns() - m->t0, mx = LOAD(&st->miss_ns_max);
		ADD(&st->miss_ns_sum, ns);
		while (ns > mx && !__atomic_compare_exchange_n(&st->miss_ns_max, &mx, ns, true,
							       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			;
	}
	ADD(&st->misses, 1);
	ADD(&st->misses_async, 1);
	tier_publish(st, m->page, m->frame, m->old, PS_REF);
}

#define PF_MAX 256u

int store_prefetch(store_t *st, const uint64_t *pages, unsigned n,
		   int (*read_batch)(void *arg, const uint64_t *pages, void *const *bufs,
				     unsigned n, int *res), void *arg)
{
	if (!st->tiered)
		return 0;
	if (!read_batch) {
		read_batch = st->topts.read_batch;
		arg = st->topts.arg;
	}
	if (!read_batch || !n)
		return 0;
	uint64_t pg[PF_MAX], old[PF_MAX];
	uint32_t fr[PF_MAX];
	void *bufs[PF_MAX];
	int res[PF_MAX];
	unsigned k = 0, done = 0;
	n = MIN(n, PF_MAX);
	for (unsigned i = 0; i < n; i++) {
		uint64_t p = pages[i], s;
		int dup = 0;
		if (p == 0 || p >= st->npages)
			continue;
		for (unsigned j = 0; j < k && !dup; j++)
			dup = pg[j] == p;
		if (dup || !tier_lock_absent(st, p, &s))
			continue;
		uint32_t f;
		if (!frame_try(st, &f)) {    /* no frame without waiting: stop here */
			STORE_REL(&st->pstate[p], s);
			break;
		}
		unsigned char *buf = st->pool + ((size_t)f << st->page_shift);
		if (!(s & PS_BACKED)) {      /* no backing copy: zeros, as a miss */
			memset(buf, 0, st->page_size);
			ADD(&st->miss_zero, 1);
			tier_publish(st, p, f, s, PS_REF);
			continue;
		}
		pg[k] = p;
		old[k] = s;
		fr[k] = f;
		bufs[k] = buf;
		res[k] = -EIO;
		k++;
	}
	if (k) {
		int rc = read_batch(arg, pg, bufs, k, res);
		for (unsigned j = 0; j < k; j++) {
			if (rc == 0 && res[j] == 1) {
				memset(bufs[j], 0, st->page_size);
				res[j] = 0;
			}
			if (rc == 0 && res[j] == 0) {
				tier_publish(st, pg[j], fr[j], old[j], PS_REF);
				done++;
			} else {             /* the later pin misses normally */
				frame_put(st, fr[j]);
				STORE_REL(&st->pstate[pg[j]], old[j]);
				ADD(&st->prefetch_errors, 1);
			}
		}
		ADD(&st->prefetch_batches, 1);
		ADD(&st->prefetched, done);
	}
	return (int)done;
}

int store_prefetch_enabled(const store_t *st)
{
	return st->tiered && st->topts.read_batch;
}

uint64_t store_loc_page(store_loc_t loc)
{
	return loc_page(loc);
}

/* ---- dirty pages ---- */

void store_mark_dirty(store_t *st, store_loc_t loc)
{
	struct table *t;
	if (st->tiered) {
		if (!(t = loc_table(st, loc)))
			return;
		uint64_t page = loc_page(loc);
		if (LOAD(&st->pstate[page]) & PS_RESIDENT)   /* the caller's pin keeps it so */
			__atomic_fetch_or(&st->pstate[page], PS_DIRTY, __ATOMIC_RELAXED);
		mark_rec_dirty(st, t, page, NULL);
		return;
	}
	struct store_rec *r = loc_rec(st, loc, &t);
	if (r)
		mark_rec_dirty(st, t, loc_page(loc), r);
}

size_t store_dirty_collect(store_t *st, uint64_t *cursor, uint64_t *pages, size_t max)
{
	uint64_t end = LOAD(&st->next_page), p = *cursor;
	size_t n = 0;
	for (; p < end && n < max; p++)
		if (LOAD(&st->dirty[p]) && __atomic_exchange_n(&st->dirty[p], 0, __ATOMIC_ACQ_REL))
			pages[n++] = p;
	*cursor = p;
	return n;
}

void *store_pool(store_t *st, size_t *bytes)
{
	if (bytes)
		*bytes = st->pool_bytes;
	return st->pool;
}

uint32_t store_page_size(const store_t *st)
{
	return st->page_size;
}

/* ---- tiered stores: eviction, page access, stats ---- */

size_t store_evict_pick(store_t *st, unsigned part, unsigned nparts,
			struct store_victim *v, size_t max, size_t *dropped)
{
	if (!st->tiered || nparts == 0 || part >= nparts || max == 0)
		return 0;
	uint64_t nf = st->nframes - 1;
	uint64_t lo = 1 + nf * part / nparts, hi = 1 + nf * (part + 1) / nparts;
	if (hi <= lo)
		return 0;
	uint64_t *hand = &st->part_hand[part % EVICT_PARTS];
	size_t n = 0, freed = 0;
	for (uint64_t i = 0; i < 2 * (hi - lo) && n + freed < max; i++) {
		uint32_t f = (uint32_t)(lo + ADD(hand, 1) % (hi - lo));
		uint64_t page;
		int r = clock_visit(st, f, 1, &page);
		if (r == 1) {
			frame_put(st, f);
			freed++;
		} else if (r == 2) {
			v[n].page = page;
			v[n].frame = f;
			v[n].buf = st->pool + ((size_t)f << st->page_shift);
			n++;
		}
	}
	if (dropped)
		*dropped += freed;
	return n;
}

void store_evict_done(store_t *st, const struct store_victim *v, int status)
{
	uint64_t *w = &st->pstate[v->page];
	uint64_t s = LOAD(w);
	if (!(s & PS_LOCKED) || PS_FRAME(s) != v->frame) {
		log_error("store: evict_done for page %" PRIu64 " that is not a victim", v->page);
		return;
	}
	if (status < 0) {            /* stays resident; to be written again */
		ADD(&st->evict_errors, 1);
		STORE_REL(w, (s & ~PS_LOCKED) | PS_DIRTY);
		return;
	}
	STORE(&st->frame_page[v->frame], 0);
	__atomic_fetch_sub(&st->resident, 1, __ATOMIC_RELAXED);
	ADD(&st->evict_dirty, 1);
	STORE_REL(w, PS_BACKED);
	frame_put(st, v->frame);
}

unsigned store_free_frames(const store_t *st)
{
	return st->tiered ? LOAD(&st->nfree) : 0;
}

void *store_page_get(store_t *st, uint64_t page, int *err)
{
	unsigned char *base;
	int rc = page == 0 || page >= st->npages ? -EINVAL : page_pin(st, page, PIN_QUIET, &base);
	if (err)
		*err = rc;
	return rc ? NULL : base;
}

void store_page_put(store_t *st, uint64_t page)
{
	page_unpin(st, page);
}

void store_tier_set_frame_wait(store_t *st, unsigned ms)
{
	STORE(&st->topts.frame_wait_ms, ms ? ms : 10000u);
}

void store_tier_stats(store_t *st, struct store_tier_stats *s)
{
	memset(s, 0, sizeof(*s));
	if (!st->tiered)
		return;
	s->frames = st->nframes - 1;
	s->pages = st->npages;
	s->resident = LOAD(&st->resident);
	s->free_frames = LOAD(&st->nfree);
	for (uint32_t f = 1; f < st->nframes; f++) {
		uint64_t page = LOAD(&st->frame_page[f]);
		if (page && (LOAD(&st->pstate[page]) & (PS_RESIDENT | PS_DIRTY)) ==
			    (PS_RESIDENT | PS_DIRTY))
			s->dirty++;
	}
	s->misses = LOAD(&st->misses);
	s->miss_ns_sum = LOAD(&st->miss_ns_sum);
	s->miss_ns_max = LOAD(&st->miss_ns_max);
	s->miss_errors = LOAD(&st->miss_errors);
	s->miss_zero = LOAD(&st->miss_zero);
	s->evict_clean = LOAD(&st->evict_clean);
	s->evict_dirty = LOAD(&st->evict_dirty);
	s->evict_errors = LOAD(&st->evict_errors);
	s->frame_waits = LOAD(&st->frame_waits);
	s->frame_timeouts = LOAD(&st->frame_timeouts);
	s->prefetched = LOAD(&st->prefetched);
	s->prefetch_batches = LOAD(&st->prefetch_batches);
	s->prefetch_errors = LOAD(&st->prefetch_errors);
	s->misses_async = LOAD(&st->misses_async);
}
