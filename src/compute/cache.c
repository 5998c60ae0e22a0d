/*
 * cache.c - the compute server's record cache (cache.h): hint entries (key ->
 * record location) and data entries (key -> value, clean or dirty) in one
 * hash table, capacity in bytes, probabilistic admission, sampled-LFU
 * eviction with lazy aging, dirty write-back on eviction.
 *
 * Layout.  STRIPES stripes, each a latch plus its own chained bucket array
 * (grown under the stripe latch at load factor 1).  The top bits of a key's
 * hash pick the stripe, the low bits the bucket.
 *
 * Latches.  S = stripe latch (pthread mutex), E = entry latch (data entries
 * only).  Order: S before E.  Nobody ever *blocks* on a latch while holding
 * another one: E is only trylocked under S, and S only trylocked under E, so
 * there is no deadlock and a write-back (which holds E for a network round
 * trip, and no other cache latch, as cache.h promises) never stalls a stripe.
 *   S protects: the stripe's chains and count, every entry's `next` and
 *               `dead`, a hint's `loc`.
 *   E protects: a data entry's value, vlen, vcap, charge and dirty flag.
 *
 * Invariants.
 *   1. An entry is unlinked (and `dead` set) only under S, plus E for a data
 *      entry.  So whoever holds E sees a live entry stay live.
 *   2. refs = 1 for the table while linked, +1 per pin.  A thread pins an
 *      entry (under S or E) before letting go of both latches and still
 *      using it; the last entry_put() frees it.
 *   3. bytes = the charges of all linked entries + reservations in flight.
 *      Room is reserved (CAS, evicting first) before an entry is linked or
 *      grown, so bytes never exceeds capacity.
 *   4. A dirty value leaves the table only after the write-back callback
 *      returned 0 for that very value, under E (rcache_data_drop aside).
 *
 * Eviction (sampled LFU).  From a random stripe on, walk the stripes and
 * take up to SAMPLE_PER_STRIPE entries from each non-empty one (trylock,
 * skipping busy stripes) until SAMPLE candidates; try them in increasing
 * frequency.  A busy data entry (E held) is skipped.  A dirty one is written
 * back first; if that fails it stays and the next candidate is tried.
 *
 * Aging.  Each entry keeps (epoch, count).  The global epoch advances each
 * time the cache has seen AGE_MULT * max(entries, AGE_MIN) accesses; an
 * entry's count is halved once per epoch it missed, lazily when it is read
 * (count >> (epoch_now - epoch_entry)).  So popularity fades with a half-life
 * of about AGE_MULT accesses per cached entry, with no sweep.
 *
 * Semantics beyond cache.h: a hint never replaces a data entry, a data
 * write or fill replaces a hint; rcache_drop forgets hints only.  Admits and
 * rejects count admission decisions on misses (a miss that finds no room is
 * a reject).  A failed rcache_data_write leaves the key uncached: an older
 * value, even dirty, is dropped unwritten, since the caller writes the new
 * one through (a write-back of the old one in flight finishes first, under
 * E, so it cannot land after the write-through).  Per-thread state (RNG for admission and sampling,
 * batched access count) is thread-local, TLS_SLOTS slots keyed by cache id.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "common/ycsb_gen.h"
#include "compute/cache.h"

#define STRIPE_BITS       7
#define STRIPES           (1u << STRIPE_BITS)
#define BUCKETS_INIT      8
#define SAMPLE            8      /* eviction candidates */
#define SAMPLE_PER_STRIPE 2
#define SAMPLE_STRIPES    16     /* stripes latched per sample at most */
#define SAMPLE_SCAN       64     /* buckets scanned per stripe at most */
#define EVICT_FAILS       64     /* fruitless evictions before giving up */
#define RESERVE_ROUNDS    100000 /* any eviction attempts, a hard bound */
#define STORE_TRIES       64
#define AGE_MULT          10
#define AGE_MIN           1024
#define TLS_SLOTS         4
#define TLS_FLUSH         256    /* accesses batched per thread */
#define ENTRY_OVERHEAD    128

enum { KIND_HINT = 1, KIND_DATA = 2 };
#define RLX memory_order_relaxed

struct centry {
	struct centry *next;     /* S */
	uint64_t hash;
	_Atomic uint64_t freq;   /* epoch << 32 | count; racy updates are fine */
	_Atomic uint32_t refs;
	uint32_t table;
	uint16_t klen;
	uint8_t kind;
	bool dead;               /* S (+E for data) */
	_Atomic bool dirty;      /* E; read without E only as a hint */
	uint32_t vlen, vcap;     /* E */
	uint64_t charge;         /* E (fixed for hints) */
	uint64_t loc;            /* hint: S */
	unsigned char *val;      /* E */
	pthread_mutex_t latch;
	unsigned char key[];
};
static_assert(sizeof(struct centry) <= ENTRY_OVERHEAD, "ENTRY_OVERHEAD too small");

struct stripe {
	pthread_mutex_t latch;
	struct centry **buckets;
	uint32_t nb;                  /* power of two */
	_Atomic uint32_t count;       /* written under S, read racily by the sampler */
	_Atomic uint64_t hits, misses, admits, rejects;
} __attribute__((aligned(CACHELINE)));

struct rcache {
	struct stripe stripes[STRIPES];
	uint64_t capacity, seed, id;         /* read-mostly line: these and epoch */
	double admit;
	rcache_writeback_fn wb;
	void *wb_arg;
	_Atomic uint32_t epoch;
	/* Written on every admission and eviction. */
	_Atomic uint64_t bytes __attribute__((aligned(CACHELINE))), entries;
	_Atomic uint64_t evictions, writebacks, wb_errors;
	/* Written every TLS_FLUSH accesses of a thread, and once per thread. */
	_Atomic uint64_t ops __attribute__((aligned(CACHELINE))), age_mark, threads;
};

struct tls_slot {
	uint64_t cache_id;
	uint32_t ops;
	struct rng rng;
};
static __thread struct tls_slot tls_slots[TLS_SLOTS];
static _Atomic uint64_t cache_ids;

uint64_t rcache_entry_charge(uint16_t klen, uint32_t vlen)
{
	return (uint64_t)klen + vlen + ENTRY_OVERHEAD;
}

/* ---- small helpers ----------------------------------------------------- */

static uint64_t key_hash(uint32_t table, const void *key, uint16_t klen)
{
	uint64_t h = fnv1a64(key, klen) ^ ((uint64_t)table * 0x9e3779b97f4a7c15ULL);
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static struct stripe *stripe_of(struct rcache *c, uint64_t h)
{
	return &c->stripes[h >> (64 - STRIPE_BITS)];
}

static struct tls_slot *my_slot(struct rcache *c)
{
	struct tls_slot *t = &tls_slots[c->id % TLS_SLOTS];
	if (t->cache_id != c->id) {
		uint64_t n = atomic_fetch_add_explicit(&c->threads, 1, RLX) + 1;
		rng_seed(&t->rng, c->seed ^ (n * 0xd1b54a32d192ed03ULL));
		t->cache_id = c->id;
		t->ops = 0;
	}
	return t;
}

static bool admit_draw(struct rcache *c)
{
	if (c->admit >= 1.0)
		return true;
	if (c->admit <= 0.0)
		return false;
	return rng_double(&my_slot(c)->rng) < c->admit;
}

/* Count one access; advance the aging epoch when a period has passed. */
static void tick(struct rcache *c)
{
	struct tls_slot *t = my_slot(c);
	if (++t->ops < TLS_FLUSH)
		return;
	t->ops = 0;
	uint64_t now = atomic_fetch_add_explicit(&c->ops, TLS_FLUSH, RLX) + TLS_FLUSH;
	uint64_t mark = atomic_load_explicit(&c->age_mark, RLX);
	uint64_t period = AGE_MULT * MAX(atomic_load_explicit(&c->entries, RLX), AGE_MIN);
	if (now - mark >= period &&
	    atomic_compare_exchange_strong_explicit(&c->age_mark, &mark, now, RLX, RLX))
		atomic_fetch_add_explicit(&c->epoch, 1, RLX);
}

static uint32_t freq_now(struct centry *e, uint32_t epoch)
{
	uint64_t f = atomic_load_explicit(&e->freq, RLX);
	uint32_t age = epoch - (uint32_t)(f >> 32);
	return age >= 32 ? 0 : (uint32_t)f >> age;
}

static void touch(struct rcache *c, struct centry *e)
{
	uint32_t ep = atomic_load_explicit(&c->epoch, RLX);
	uint32_t n = freq_now(e, ep);
	if (n < UINT32_MAX)
		n++;
	atomic_store_explicit(&e->freq, (uint64_t)ep << 32 | n, RLX);
	tick(c);
}

static void stat_inc(_Atomic uint64_t *ctr)
{
	atomic_fetch_add_explicit(ctr, 1, RLX);
}

/* ---- entries ----------------------------------------------------------- */

static struct centry *entry_new(struct rcache *c, uint8_t kind, uint64_t h, uint32_t table,
				const void *key, uint16_t klen, const void *val, uint32_t vlen)
{
	struct centry *e = calloc(1, sizeof(*e) + klen);
	if (!e)
		return NULL;
	if (vlen && !(e->val = malloc(vlen))) {
		free(e);
		return NULL;
	}
	if (vlen)
		memcpy(e->val, val, vlen);
	e->vlen = e->vcap = vlen;
	e->hash = h;
	e->table = table;
	e->klen = klen;
	e->kind = kind;
	e->charge = rcache_entry_charge(klen, vlen);
	atomic_init(&e->refs, 1);
	atomic_init(&e->freq, (uint64_t)atomic_load_explicit(&c->epoch, RLX) << 32 | 1);
	memcpy(e->key, key, klen);
	pthread_mutex_init(&e->latch, NULL);
	return e;
}

static void entry_free(struct centry *e)
{
	pthread_mutex_destroy(&e->latch);
	free(e->val);
	free(e);
}

static void entry_pin(struct centry *e)
{
	atomic_fetch_add_explicit(&e->refs, 1, RLX);
}

/* Drop n references at once (a pin and the table's, say). */
static void entry_put_n(struct centry *e, uint32_t n)
{
	if (atomic_fetch_sub_explicit(&e->refs, n, memory_order_acq_rel) == n)
		entry_free(e);
}

static void entry_put(struct centry *e)
{
	entry_put_n(e, 1);
}

/* ---- stripe chains (S held) -------------------------------------------- */

static struct centry *lookup(struct stripe *s, uint64_t h, uint32_t table, const void *key,
			     uint16_t klen)
{
	for (struct centry *e = s->buckets[h & (s->nb - 1)]; e; e = e->next)
		if (e->hash == h && e->table == table && e->klen == klen &&
		    !memcmp(e->key, key, klen))
			return e;
	return NULL;
}

static bool chain_holds(struct stripe *s, struct centry *x, uint64_t h)
{
	for (struct centry *e = s->buckets[h & (s->nb - 1)]; e; e = e->next)
		if (e == x)
			return true;
	return false;
}

/* Double the bucket array; on allocation failure keep the longer chains. */
static void stripe_grow(struct stripe *s)
{
	uint32_t nb = s->nb * 2;
	struct centry **nbk = calloc(nb, sizeof(*nbk));
	if (!nbk)
		return;
	for (uint32_t i = 0; i < s->nb; i++) {
		struct centry *e = s->buckets[i], *next;
		for (; e; e = next) {
			next = e->next;
			e->next = nbk[e->hash & (nb - 1)];
			nbk[e->hash & (nb - 1)] = e;
		}
	}
	free(s->buckets);
	s->buckets = nbk;
	s->nb = nb;
}

static void link_entry(struct rcache *c, struct stripe *s, struct centry *e)
{
	struct centry **b = &s->buckets[e->hash & (s->nb - 1)];
	e->next = *b;
	*b = e;
	uint32_t n = atomic_load_explicit(&s->count, RLX) + 1;
	atomic_store_explicit(&s->count, n, RLX);
	atomic_fetch_add_explicit(&c->entries, 1, RLX);
	if (n > s->nb)
		stripe_grow(s);
}

/* S held, and E for a data entry.  The caller then drops the table's ref. */
static void unlink_entry(struct rcache *c, struct stripe *s, struct centry *e)
{
	struct centry **p = &s->buckets[e->hash & (s->nb - 1)];
	while (*p != e)
		p = &(*p)->next;
	*p = e->next;
	e->dead = true;
	atomic_store_explicit(&s->count, atomic_load_explicit(&s->count, RLX) - 1, RLX);
	atomic_fetch_sub_explicit(&c->entries, 1, RLX);
	atomic_fetch_sub_explicit(&c->bytes, e->charge, RLX);
}

/* ---- room: reservation and eviction ------------------------------------ */

static bool bytes_try_reserve(struct rcache *c, uint64_t n)
{
	uint64_t cur = atomic_load_explicit(&c->bytes, RLX);
	do {
		if (n > c->capacity || cur > c->capacity - n)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&c->bytes, &cur, cur + n, RLX, RLX));
	return true;
}

static void bytes_release(struct rcache *c, uint64_t n)
{
	if (n)
		atomic_fetch_sub_explicit(&c->bytes, n, RLX);
}

struct cand {
	struct centry *e;
	uint64_t hash;
	uint32_t freq, stripe;
};

/* Up to SAMPLE candidates, least frequent first. */
static int sample(struct rcache *c, struct cand *out)
{
	struct tls_slot *t = my_slot(c);
	uint32_t ep = atomic_load_explicit(&c->epoch, RLX), si = (uint32_t)rng_below(&t->rng, STRIPES);
	int n = 0, latched = 0;
	for (uint32_t v = 0; v < STRIPES && n < SAMPLE && latched < SAMPLE_STRIPES; v++) {
		uint32_t idx = (si + v) % STRIPES;
		struct stripe *s = &c->stripes[idx];
		if (!atomic_load_explicit(&s->count, RLX) || pthread_mutex_trylock(&s->latch))
			continue;
		latched++;
		uint32_t b = (uint32_t)rng_below(&t->rng, s->nb), got = 0;
		for (uint32_t i = 0; i < MIN(s->nb, SAMPLE_SCAN) && got < SAMPLE_PER_STRIPE; i++) {
			struct centry *e = s->buckets[(b + i) & (s->nb - 1)];
			for (; e && got < SAMPLE_PER_STRIPE && n < SAMPLE; e = e->next, got++)
				out[n++] = (struct cand){ e, e->hash, freq_now(e, ep), idx };
		}
		pthread_mutex_unlock(&s->latch);
	}
	for (int i = 1; i < n; i++)             /* insertion sort by freq */
		for (int j = i; j > 0 && out[j].freq < out[j - 1].freq; j--) {
			struct cand tmp = out[j];
			out[j] = out[j - 1];
			out[j - 1] = tmp;
		}
	return n;
}

/* Call the write-back callback for a dirty entry, E held: 0 (now clean) or
 * the error (still dirty). */
static int write_back(struct rcache *c, struct centry *e)
{
	int rc = c->wb ? c->wb(c->wb_arg, e->table, e->key, e->klen, e->val, e->vlen) : -ENOTSUP;
	if (rc) {
		stat_inc(&c->wb_errors);
		return rc < 0 ? rc : -EIO;
	}
	stat_inc(&c->writebacks);
	atomic_store_explicit(&e->dirty, false, RLX);
	return 0;
}

/* Write back a dirty victim (E held, S not, pinned), then unlink it if it is
 * still clean.  Returns 1 evicted, 0 written back but kept, or the error. */
static int evict_dirty(struct rcache *c, struct stripe *s, struct centry *e)
{
	int rc = write_back(c, e);
	if (rc) {
		pthread_mutex_unlock(&e->latch);
		entry_put(e);
		return rc;
	}
	if (pthread_mutex_trylock(&s->latch)) {
		/* S is busy: let go of E to take the latches in order. */
		pthread_mutex_unlock(&e->latch);
		pthread_mutex_lock(&s->latch);
		if (e->dead || pthread_mutex_trylock(&e->latch)) {
			pthread_mutex_unlock(&s->latch);
			entry_put(e);
			return 0;
		}
	}
	bool gone = !e->dead && !atomic_load_explicit(&e->dirty, RLX);
	if (gone)
		unlink_entry(c, s, e);
	pthread_mutex_unlock(&e->latch);
	pthread_mutex_unlock(&s->latch);
	entry_put_n(e, gone ? 2 : 1);           /* our pin, and the table's if gone */
	if (gone)
		stat_inc(&c->evictions);
	return gone;
}

/* 1 evicted, 0 gone or busy, <0 its write-back failed. */
static int try_evict(struct rcache *c, const struct cand *k)
{
	struct stripe *s = &c->stripes[k->stripe];
	struct centry *e = k->e;
	pthread_mutex_lock(&s->latch);
	if (!chain_holds(s, e, k->hash) ||
	    (e->kind == KIND_DATA && pthread_mutex_trylock(&e->latch))) {
		pthread_mutex_unlock(&s->latch);
		return 0;
	}
	if (e->kind == KIND_DATA && atomic_load_explicit(&e->dirty, RLX)) {
		entry_pin(e);
		pthread_mutex_unlock(&s->latch);
		return evict_dirty(c, s, e);
	}
	unlink_entry(c, s, e);
	if (e->kind == KIND_DATA)
		pthread_mutex_unlock(&e->latch);
	pthread_mutex_unlock(&s->latch);
	entry_put(e);
	stat_inc(&c->evictions);
	return 1;
}

/* Evict one entry.  1 done, 0 nothing evictable found, <0 a write-back error. */
static int evict_one(struct rcache *c)
{
	struct cand k[SAMPLE];
	int n = sample(c, k), err = 0;
	for (int i = 0; i < n; i++) {
		int rc = try_evict(c, &k[i]);
		if (rc > 0)
			return 1;
		if (rc < 0 && !err)
			err = rc;
	}
	return err;
}

/* Reserve n bytes, evicting as needed.  No latch may be held. */
static int bytes_reserve(struct rcache *c, uint64_t n)
{
	int fails = 0, err = -ENOMEM;
	if (n > c->capacity)
		return -ENOMEM;
	for (int round = 0; round < RESERVE_ROUNDS; round++) {
		if (bytes_try_reserve(c, n))
			return 0;
		int rc = evict_one(c);
		if (rc > 0)
			continue;
		if (rc < 0)
			err = rc;
		if (++fails >= EVICT_FAILS)
			break;
		sched_yield();                  /* room may be in flight elsewhere */
	}
	return err;
}

/* ---- public: lifetime and stats ---------------------------------------- */

int rcache_create(uint64_t capacity, double admit, uint64_t seed, rcache_writeback_fn wb,
		  void *wb_arg, rcache_t **out)
{
	if (!out || isnan(admit) || admit < 0.0 || admit > 1.0)
		return -EINVAL;
	struct rcache *c = aligned_alloc(CACHELINE, ALIGN_UP(sizeof(*c), CACHELINE));
	if (!c)
		return -ENOMEM;
	memset(c, 0, sizeof(*c));
	c->capacity = capacity;
	c->admit = admit;
	c->seed = seed;
	c->id = atomic_fetch_add(&cache_ids, 1) + 1;
	c->wb = wb;
	c->wb_arg = wb_arg;
	for (uint32_t i = 0; i < STRIPES; i++)
		pthread_mutex_init(&c->stripes[i].latch, NULL);
	for (uint32_t i = 0; i < STRIPES; i++) {
		struct stripe *s = &c->stripes[i];
		s->nb = BUCKETS_INIT;
		s->buckets = calloc(s->nb, sizeof(*s->buckets));
		if (!s->buckets) {
			rcache_destroy(c);
			return -ENOMEM;
		}
	}
	*out = c;
	return 0;
}

void rcache_destroy(rcache_t *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < STRIPES; i++) {
		struct stripe *s = &c->stripes[i];
		for (uint32_t b = 0; s->buckets && b < s->nb; b++) {
			struct centry *e = s->buckets[b], *next;
			for (; e; e = next) {
				next = e->next;
				entry_free(e);
			}
		}
		free(s->buckets);
		pthread_mutex_destroy(&s->latch);
	}
	free(c);
}

void rcache_stats(rcache_t *c, struct rcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < STRIPES; i++) {
		struct stripe *s = &c->stripes[i];
		out->hits += atomic_load_explicit(&s->hits, RLX);
		out->misses += atomic_load_explicit(&s->misses, RLX);
		out->admits += atomic_load_explicit(&s->admits, RLX);
		out->rejects += atomic_load_explicit(&s->rejects, RLX);
	}
	out->evictions = atomic_load_explicit(&c->evictions, RLX);
	out->writebacks = atomic_load_explicit(&c->writebacks, RLX);
	out->writeback_errors = atomic_load_explicit(&c->wb_errors, RLX);
	out->entries = atomic_load_explicit(&c->entries, RLX);
	out->bytes = atomic_load_explicit(&c->bytes, RLX);
	out->capacity = c->capacity;
}

/* ---- public: hints ------------------------------------------------------ */

int rcache_hint_get(rcache_t *c, uint32_t table, const void *key, uint16_t klen, uint64_t *loc)
{
	uint64_t h = key_hash(table, key, klen);
	struct stripe *s = stripe_of(c, h);
	pthread_mutex_lock(&s->latch);
	struct centry *e = lookup(s, h, table, key, klen);
	bool hit = e && e->kind == KIND_HINT;
	if (hit) {
		*loc = e->loc;
		touch(c, e);
	}
	pthread_mutex_unlock(&s->latch);
	stat_inc(hit ? &s->hits : &s->misses);
	return hit;
}

/* Replace the location of a cached hint (S held).  False if the key is not
 * cached as a hint (absent, or a data entry, which a hint never replaces). */
static bool hint_update(struct rcache *c, struct stripe *s, struct centry *e, uint64_t loc)
{
	if (e && e->kind == KIND_HINT) {
		e->loc = loc;
		touch(c, e);
	}
	return e != NULL;
}

void rcache_hint_put(rcache_t *c, uint32_t table, const void *key, uint16_t klen, uint64_t loc)
{
	uint64_t h = key_hash(table, key, klen);
	struct stripe *s = stripe_of(c, h);
	pthread_mutex_lock(&s->latch);
	bool cached = hint_update(c, s, lookup(s, h, table, key, klen), loc);
	pthread_mutex_unlock(&s->latch);
	if (cached)
		return;
	struct centry *n = NULL;
	if (!admit_draw(c) || !(n = entry_new(c, KIND_HINT, h, table, key, klen, NULL, 0)) ||
	    bytes_reserve(c, n->charge)) {
		stat_inc(&s->rejects);
		if (n)
			entry_free(n);
		return;
	}
	n->loc = loc;
	pthread_mutex_lock(&s->latch);
	cached = hint_update(c, s, lookup(s, h, table, key, klen), loc);
	if (!cached)
		link_entry(c, s, n);
	pthread_mutex_unlock(&s->latch);
	if (cached) {                           /* another thread was first */
		bytes_release(c, n->charge);
		entry_free(n);
	} else {
		stat_inc(&s->admits);
	}
}

void rcache_drop(rcache_t *c, uint32_t table, const void *key, uint16_t klen)
{
	uint64_t h = key_hash(table, key, klen);
	struct stripe *s = stripe_of(c, h);
	pthread_mutex_lock(&s->latch);
	struct centry *e = lookup(s, h, table, key, klen);
	if (e && e->kind == KIND_HINT)
		unlink_entry(c, s, e);
	else
		e = NULL;
	pthread_mutex_unlock(&s->latch);
	if (e)
		entry_put(e);
}

/* ---- public: data -------------------------------------------------------- */

/* The key's data entry with E held and S not, or NULL if there is none.
 * *pinned: whether data_release() must drop a pin. */
static struct centry *data_acquire(struct stripe *s, uint64_t h, uint32_t table,
				   const void *key, uint16_t klen, bool *pinned)
{
	for (;;) {
		pthread_mutex_lock(&s->latch);
		struct centry *e = lookup(s, h, table, key, klen);
		if (!e || e->kind != KIND_DATA) {
			pthread_mutex_unlock(&s->latch);
			return NULL;
		}
		if (!pthread_mutex_trylock(&e->latch)) {
			pthread_mutex_unlock(&s->latch);
			*pinned = false;
			return e;
		}
		entry_pin(e);                   /* busy (maybe a write-back): wait off S */
		pthread_mutex_unlock(&s->latch);
		pthread_mutex_lock(&e->latch);
		if (!e->dead) {
			*pinned = true;
			return e;
		}
		pthread_mutex_unlock(&e->latch);
		entry_put(e);
	}
}

static void data_release(struct centry *e, bool pinned)
{
	pthread_mutex_unlock(&e->latch);
	if (pinned)
		entry_put(e);
}

int rcache_data_read(rcache_t *c, uint32_t table, const void *key, uint16_t klen, void *buf,
		     uint32_t cap, uint32_t *vlen)
{
	uint64_t h = key_hash(table, key, klen);
	struct stripe *s = stripe_of(c, h);
	bool pinned;
	struct centry *e = data_acquire(s, h, table, key, klen, &pinned);
	if (!e) {
		stat_inc(&s->misses);
		return 0;
	}
	if (MIN(cap, e->vlen))
		memcpy(buf, e->val, MIN(cap, e->vlen));
	*vlen = e->vlen;
	touch(c, e);
	data_release(e, pinned);
	stat_inc(&s->hits);
	return 1;
}

/* Store into an existing entry (E held).  A fill never replaces a dirty
 * value.  -EAGAIN with *need: reserve that many bytes off-latch and retry.
 * *credit holds bytes already reserved for this store. */
static int data_update(struct rcache *c, struct centry *e, const void *value, uint32_t vlen,
		       bool write, uint64_t *credit, uint64_t *need)
{
	if (!write && atomic_load_explicit(&e->dirty, RLX))
		return 0;
	if (vlen > e->vcap || (e->vcap > 256 && vlen < e->vcap / 4)) {
		unsigned char *v = realloc(e->val, MAX(vlen, 1));   /* grow, or shrink a lot */
		if (v) {
			e->val = v;
			e->vcap = MAX(vlen, 1);
		} else if (vlen > e->vcap) {
			return -ENOMEM;
		}
	}
	uint64_t charge = rcache_entry_charge(e->klen, vlen);
	if (charge > e->charge) {
		uint64_t grow = charge - e->charge;
		if (*credit < grow && !bytes_try_reserve(c, grow - *credit)) {
			*need = grow - *credit;
			return -EAGAIN;
		}
		*credit = *credit > grow ? *credit - grow : 0;
	} else {
		bytes_release(c, e->charge - charge);
	}
	e->charge = charge;
	if (vlen)
		memcpy(e->val, value, vlen);
	e->vlen = vlen;
	if (write)
		atomic_store_explicit(&e->dirty, true, RLX);
	touch(c, e);
	return 0;
}

/* Link a new data entry.  -EAGAIN if a data entry for the key appeared
 * meanwhile (the reservation stays in *credit); a hint for it is replaced. */
static int data_insert(struct rcache *c, struct stripe *s, uint64_t h, uint32_t table,
		       const void *key, uint16_t klen, const void *value, uint32_t vlen,
		       bool write, uint64_t *credit)
{
	struct centry *n = entry_new(c, KIND_DATA, h, table, key, klen, value, vlen);
	if (!n)
		return -ENOMEM;
	if (*credit < n->charge) {
		int rc = bytes_reserve(c, n->charge - *credit);
		if (rc) {
			entry_free(n);
			return rc;
		}
		*credit = n->charge;
	}
	atomic_init(&n->dirty, write);
	pthread_mutex_lock(&s->latch);
	struct centry *old = lookup(s, h, table, key, klen);
	if (old && old->kind == KIND_DATA) {
		pthread_mutex_unlock(&s->latch);
		entry_free(n);
		return -EAGAIN;
	}
	if (old)
		unlink_entry(c, s, old);
	*credit -= n->charge;                   /* n may be evicted once S is dropped */
	link_entry(c, s, n);
	pthread_mutex_unlock(&s->latch);
	if (old)
		entry_put(old);
	return 0;
}

static int data_store(struct rcache *c, uint32_t table, const void *key, uint16_t klen,
		      const void *value, uint32_t vlen, bool write)
{
	uint64_t h = key_hash(table, key, klen), credit = 0;
	struct stripe *s = stripe_of(c, h);
	bool drawn = false, pinned;
	int rc = -EAGAIN;
	if (rcache_entry_charge(klen, vlen) > c->capacity) {
		if (!write)                     /* never fits: evict nothing for it */
			stat_inc(&s->rejects);
		return -ENOMEM;
	}
	for (int tries = 0; tries < STORE_TRIES && rc == -EAGAIN; tries++) {
		struct centry *e = data_acquire(s, h, table, key, klen, &pinned);
		if (e) {
			uint64_t need = 0;
			rc = data_update(c, e, value, vlen, write, &credit, &need);
			data_release(e, pinned);
			if (rc == -EAGAIN && (rc = bytes_reserve(c, need)) == 0) {
				credit += need;
				rc = -EAGAIN;
			}
			continue;
		}
		if (!write && !drawn) {         /* a miss: the admission draw, once */
			drawn = true;
			if (!admit_draw(c)) {
				rc = 0;
				stat_inc(&s->rejects);
				break;
			}
		}
		rc = data_insert(c, s, h, table, key, klen, value, vlen, write, &credit);
		if (rc != -EAGAIN)
			stat_inc(rc ? &s->rejects : &s->admits);
	}
	bytes_release(c, credit);
	return rc == -EAGAIN ? -ENOMEM : rc;
}

int rcache_data_fill(rcache_t *c, uint32_t table, const void *key, uint16_t klen,
		     const void *value, uint32_t vlen)
{
	return data_store(c, table, key, klen, value, vlen, false);
}

int rcache_data_write(rcache_t *c, uint32_t table, const void *key, uint16_t klen,
		      const void *value, uint32_t vlen)
{
	int rc = data_store(c, table, key, klen, value, vlen, true);
	if (rc)         /* the caller writes the value through: an older one is stale */
		rcache_data_drop(c, table, key, klen);
	return rc;
}

void rcache_data_drop(rcache_t *c, uint32_t table, const void *key, uint16_t klen)
{
	uint64_t h = key_hash(table, key, klen);
	struct stripe *s = stripe_of(c, h);
	struct centry *e;
	bool pinned;
	while ((e = data_acquire(s, h, table, key, klen, &pinned))) {
		if (!pthread_mutex_trylock(&s->latch)) {          /* E held: S by trylock */
			unlink_entry(c, s, e);
			pthread_mutex_unlock(&s->latch);
			pthread_mutex_unlock(&e->latch);
			entry_put_n(e, pinned ? 2 : 1);   /* any pin, and the table's */
			return;
		}
		data_release(e, pinned);
		sched_yield();
	}
}

/* Write back one pinned entry if it is still dirty.  1 written, 0 not
 * needed, or the error.  Drops the pin. */
static int flush_entry(struct rcache *c, struct centry *e)
{
	int rc = 0;
	pthread_mutex_lock(&e->latch);
	if (!e->dead && atomic_load_explicit(&e->dirty, RLX))
		rc = write_back(c, e) ?: 1;
	pthread_mutex_unlock(&e->latch);
	entry_put(e);
	return rc;
}

int rcache_flush(rcache_t *c)
{
	int written = 0, err = 0;
	for (uint32_t i = 0; i < STRIPES; i++) {
		struct stripe *s = &c->stripes[i];
		pthread_mutex_lock(&s->latch);
		uint32_t n = atomic_load_explicit(&s->count, RLX), k = 0;
		struct centry **pin = n ? malloc(n * sizeof(*pin)) : NULL;
		if (n && !pin) {
			pthread_mutex_unlock(&s->latch);
			return -ENOMEM;
		}
		for (uint32_t b = 0; b < s->nb; b++)
			for (struct centry *e = s->buckets[b]; e; e = e->next)
				if (e->kind == KIND_DATA && atomic_load_explicit(&e->dirty, RLX)) {
					entry_pin(e);
					pin[k++] = e;
				}
		pthread_mutex_unlock(&s->latch);
		for (uint32_t j = 0; j < k; j++) {
			int rc = flush_entry(c, pin[j]);
			if (rc > 0)
				written++;
			else if (rc < 0 && !err)
				err = rc;
		}
		free(pin);
	}
	return err ? err : written;
}
