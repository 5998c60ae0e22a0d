/*
 * misses.h - misses that do not block: a request whose page is not resident
 * parks on the page's wait list while the worker reads it on its own ring
 * (misses.c).
 */
#ifndef LOTUS_MS_MISSES_H
#define LOTUS_MS_MISSES_H
#include <stdint.h>
#include "memserver/ms_int.h"

/* Default reads in flight per worker (--miss-depth). */
#define MS_DEFAULT_MISS_DEPTH 32

/* p (filled, its lock held) is about to touch logical page `page`.  1: p is
 * parked (PEND_MISS) on the page's wait list and srv->hooks.miss_resume
 * answers it later; 0: go on now (the page is resident, or the worker takes
 * the blocking path: misses off, the hybrid rule, no frame, no room). */
int ms_miss_park(struct ms_worker *wk, uint64_t page, struct ms_pending *p);
/* Could ms_miss_park park anything on this worker?  (tiered, depth > 0) */
int ms_miss_on(const struct ms_worker *wk);
/* Pages being read or waiters not yet resumed. */
int ms_miss_busy(const struct ms_worker *wk);
/* How long a worker with reads in flight polls before it sleeps on
 * ms_miss_wake_fd: LOTUS_MISS_SPIN_US (default MS_DEFAULT_MISS_SPIN_US). */
#define MS_DEFAULT_MISS_SPIN_US 200
uint64_t ms_miss_spin_ns(void);
/* The fd the worker may sleep on while ms_miss_busy (it turns readable when
 * a read completes), or -1: then the loop must poll without sleeping. */
int ms_miss_wake_fd(const struct ms_worker *wk);
/* Every loop: submit what was prepared, reap, resume the waiters of the
 * pages read in (in the order their reads completed, each page's waiters in
 * arrival order), start queued reads.  Returns the requests resumed. */
int ms_miss_poll(struct ms_worker *wk);
/* At the worker's end: wait for every read, resume, close the ring. */
void ms_miss_drain(struct ms_worker *wk);

#endif
