/*
 * keeper.h - the lease keeper: one thread that keeps idle network workers
 * answering their memory servers' liveness pings.  Both compute engines use
 * it: the two-sided engine for its sending groups (session.c), the one-sided
 * engine for its sessions (onesided/os_engine.c).
 *
 * A memory server gives a connection up when it hears nothing on it for a
 * lease (net_liveness.c), and only a progressed worker answers its PINGs.
 * A worker is progressed by its user's own calls, so a thread busy in its
 * own code for a lease (or done with its work while others go on) would
 * lose its connections although the process is alive.  The keeper therefore
 * wakes every lease/8 (at least 10 ms) and offers each item on its list to
 * the owner's visit function, which progresses the item's worker if it can
 * take it at once (a worker in use is progressed by its user anyway).  A
 * paused process pauses this thread too, so its leases do expire, which is
 * the point.
 *
 * The thread starts with the first item added; it is not an error when it
 * cannot be created (a warning says the owner must then poll within every
 * lease).
 *
 * Threads: every function may be called from any thread.  visit runs on the
 * keeper's thread with the list lock held: lease_keeper_remove() waits for a
 * pass over the item to end, so an item removed is never visited again, and
 * visit must not call back into the keeper.
 */
#ifndef LOTUS_KEEPER_H
#define LOTUS_KEEPER_H
#include <pthread.h>
#include <stdint.h>

/* A member of the keeper's list, embedded in what it keeps (container_of). */
struct keeper_item {
	struct keeper_item *prev, *next;
};

/* Offered each item every period: progress its worker if it is free now.
 * period_ns: the keeper's period (an item polled more recently than that
 * by its user may be skipped). */
typedef void (*keeper_visit_fn)(struct keeper_item *it, uint64_t period_ns);

struct lease_keeper {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int on, stop;                   /* under mu */
	struct keeper_item *live;       /* the items, under mu */
	unsigned lease_ms;
	keeper_visit_fn visit;
	const char *who;                /* its warning's prefix ("" or "onesided: ") */
};

/* Set up (no thread yet) for connections of lease_ms. */
void lease_keeper_init(struct lease_keeper *k, unsigned lease_ms, keeper_visit_fn visit,
		       const char *who);
/* Add an item (starting the thread with the first one) / remove it. */
void lease_keeper_add(struct lease_keeper *k, struct keeper_item *it);
void lease_keeper_remove(struct lease_keeper *k, struct keeper_item *it);
/* Stop and join the thread; items may still be removed afterwards (none is
 * visited any more).  Idempotent. */
void lease_keeper_stop(struct lease_keeper *k);
/* Stop, then free the lock and the condition variable. */
void lease_keeper_destroy(struct lease_keeper *k);

#endif
