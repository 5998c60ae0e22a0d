/*
 * lock_cache.c - per-thread caches of the lock manager's small objects: lock
 * entries (struct lk with a key of at most LK_CACHE_KEY bytes), owner nodes
 * (struct lock_own) and transaction entries (struct lock_txn).
 *
 * Every lock request used to malloc a lock entry and an owner node and every
 * release freed them again.  Now a freed object goes onto the freeing
 * thread's own list (at most LK_CACHE_MAX of a kind; beyond that, free()),
 * and an allocation takes from the allocating thread's list first.  The lists
 * are thread-local, so no latch guards them; an object freed on another
 * thread than the one that made it simply changes lists.  Objects are only
 * memory here: callers initialise what they take.  A thread's lists are
 * freed when it exits (a pthread key destructor); the lists of the process's
 * last thread are still reachable at exit.
 *
 * Also the slow path of the spin latches (lock_int.h).
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include "lock/lock_int.h"

#define LK_CACHE_MAX 4096

struct free_obj {
	struct free_obj *next;
};

struct lk_cache {
	struct free_obj *head[LKC_N];
	unsigned n[LKC_N];
	bool registered;
};

static const size_t lkc_size[LKC_N] = {
	[LKC_LK] = LK_ENTRY_SIZE, [LKC_OWN] = sizeof(struct lock_own),
	[LKC_TXN] = LOCK_TXN_SIZE,
};

static _Thread_local struct lk_cache tl_cache;
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_drain(void *arg)
{
	struct lk_cache *c = arg;
	for (int k = 0; k < LKC_N; k++) {
		struct free_obj *o = c->head[k], *next;
		for (; o; o = next) {
			next = o->next;
			free(o);
		}
		c->head[k] = NULL;
		c->n[k] = 0;
	}
}

static void cache_key_init(void)
{
	pthread_key_create(&cache_key, cache_drain);
}

void *lkc_alloc(int kind)
{
	struct lk_cache *c = &tl_cache;
	struct free_obj *o = c->head[kind];
	if (o) {
		c->head[kind] = o->next;
		c->n[kind]--;
		return o;
	}
	return malloc(lkc_size[kind]);
}

void lkc_free(int kind, void *p)
{
	struct lk_cache *c = &tl_cache;
	if (!p)
		return;
	if (c->n[kind] >= LK_CACHE_MAX) {
		free(p);
		return;
	}
	if (unlikely(!c->registered)) {   /* so that the lists go when the thread does */
		pthread_once(&cache_once, cache_key_init);
		if (pthread_setspecific(cache_key, c) != 0) {
			free(p);
			return;
		}
		c->registered = true;
	}
	struct free_obj *o = p;
	o->next = c->head[kind];
	c->head[kind] = o;
	c->n[kind]++;
}

/* Spin a little (the holder is running), then yield, then sleep in short
 * naps: on an oversubscribed machine the holder may be waiting for a core,
 * and a waiter that keeps spinning or yielding would only take it away. */
void latch_lock_slow(latch_t *l)
{
	for (unsigned round = 0;; round++) {
		for (int i = 0; i < 100; i++) {
			if (!atomic_load_explicit(&l->v, memory_order_relaxed) &&
			    !atomic_exchange_explicit(&l->v, 1, memory_order_acquire))
				return;
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#endif
		}
		if (round < 4) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 20000 };
			nanosleep(&ts, NULL);
		}
	}
}
