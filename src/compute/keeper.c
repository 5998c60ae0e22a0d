/*
 * keeper.c - the lease keeper (keeper.h): one thread, a list of items under
 * one mutex, and a timed wait on a monotonic condition variable between
 * passes.  What an item is and how it is progressed is its owner's (the
 * visit function); the keeper knows only when.
 */
#include <time.h>
#include "common/common.h"
#include "common/log.h"
#include "compute/keeper.h"

static void *keeper_main(void *arg)
{
	struct lease_keeper *k = arg;
	uint64_t period_ns = (uint64_t)MAX(k->lease_ms / 8, 10u) * 1000000ULL;
	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + period_ns;
		ts.tv_sec += (time_t)(ns / 1000000000ULL);
		ts.tv_nsec = (long)(ns % 1000000000ULL);
		pthread_cond_timedwait(&k->cv, &k->mu, &ts);
		for (struct keeper_item *it = k->live; it && !k->stop; it = it->next)
			k->visit(it, period_ns);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

void lease_keeper_init(struct lease_keeper *k, unsigned lease_ms, keeper_visit_fn visit,
		       const char *who)
{
	pthread_condattr_t ca;
	k->on = k->stop = 0;
	k->live = NULL;
	k->lease_ms = lease_ms;
	k->visit = visit;
	k->who = who;
	pthread_mutex_init(&k->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
}

void lease_keeper_add(struct lease_keeper *k, struct keeper_item *it)
{
	pthread_mutex_lock(&k->mu);
	it->prev = NULL;
	it->next = k->live;
	if (k->live)
		k->live->prev = it;
	k->live = it;
	if (!k->on && !k->stop) {
		if (pthread_create(&k->thread, NULL, keeper_main, k) == 0)
			k->on = 1;
		else
			log_warn("%sno lease keeper thread: a session must be polled within "
				 "every lease (%u ms)", k->who, k->lease_ms);
	}
	pthread_mutex_unlock(&k->mu);
}

void lease_keeper_remove(struct lease_keeper *k, struct keeper_item *it)
{
	pthread_mutex_lock(&k->mu);   /* waits for a pass over it */
	if (it->prev)
		it->prev->next = it->next;
	else if (k->live == it)
		k->live = it->next;
	if (it->next)
		it->next->prev = it->prev;
	it->next = it->prev = NULL;
	pthread_mutex_unlock(&k->mu);
}

void lease_keeper_stop(struct lease_keeper *k)
{
	pthread_mutex_lock(&k->mu);
	k->stop = 1;
	pthread_cond_broadcast(&k->cv);
	int on = k->on;
	k->on = 0;
	pthread_mutex_unlock(&k->mu);
	if (on)
		pthread_join(k->thread, NULL);
}

void lease_keeper_destroy(struct lease_keeper *k)
{
	lease_keeper_stop(k);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
}
