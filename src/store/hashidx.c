/*
 * hashidx.c - the hash point index (hashidx.h): open addressing over 64-byte
 * buckets, seqlocked buckets for lock-free readers, incremental rehash.
 *
 * Layout.  A table is a power of two of buckets, each one cache line:
 *
 *   | ver (4 B) | tag[6] (2 B each) | val[6] (8 B each) |
 *
 * A key's hash picks its home bucket (low bits) and its tag (top 16 bits,
 * never 0: tag 0 marks a free entry).  An entry goes into the first bucket
 * with a free entry from home on (linear probing by bucket); every full
 * bucket it passes gets the OVERFLOW flag, which tells a lookup to go on to
 * the next bucket.  A lookup stops at the first bucket without the flag, so
 * at the load we keep (at most 80% of the entries) it reads one bucket
 * almost always.  A delete frees its entry at once (the free entry is reused
 * by the next insert that passes it) and leaves the flags: they are only
 * hints that probing must go on, so stale ones cost a read, not a result.
 * When more than a quarter of the buckets carry the flag after deletes of
 * more than a quarter of its entries, the table is rehashed into a fresh
 * one of the same size, which drops the stale flags.
 *
 * Buckets are seqlocks.  ver: bit 0 set while a writer changes the bucket,
 * bit 1 the OVERFLOW flag, bits 2.. count the writes.  A reader loads ver
 * (acquire), the entries (relaxed), fences (acquire) and checks ver again;
 * a writer (under the index mutex) sets bit 0, fences (release), writes the
 * entries and stores the next ver (release).  So every race is on atomics.
 *
 * Growth, incrementally.  When an insert would pass 80% of the entries, the
 * index maps a table twice the size (mmap: lazy, no pause for zeroing) and
 * makes it current; the old one is "migrating".  Every later put or del
 * first moves the entries of MIG_STEP old buckets into the current table
 * (asking the owner for each entry's hash) and then clears those old
 * buckets, so no single write pays for more than MIG_STEP buckets.  A reader
 * looks in the migrating table first, then in the current one: an entry is
 * written to the current table before it is cleared from the old one, so a
 * reader that no longer finds it in the old one finds it in the new.  The
 * pair (old, cur) changes only at the start and the end of a migration,
 * under a sequence word (h->seq); a reader that missed rechecks it and
 * retries if it changed.  A finished table is empty; its memory is given
 * back (MADV_DONTNEED: it reads as zeros, which is an empty table), 256 KiB
 * per later write, but the mapping is kept until hidx_destroy, so a slow
 * reader never faults.
 *
 * Retired tables are reused.  A migration to nb buckets takes a retired
 * table of nb buckets whose memory has been given back in full (all zero
 * pages: an empty table, no overflow flags) instead of mapping a new one.
 * Without that, every same-size rehash (the clean-up after deletes) left one
 * more table mapped, and churn at a constant count grew the process without
 * bound.  With it the retired list holds at most two tables per size (one
 * still being given back when the next migration starts maps a second), so
 * retired mappings stay below four times the current table.  Reuse keeps
 * the readers' rule: a mapping is never unmapped while the index lives, so
 * a slow reader that still holds the reused table (loaded before it
 * retired) reads mapped memory.  What it reads there is harmless: the entries are values
 * of this index, and a hit is one the owner's match said holds the key (a
 * value names one record, so it is the right one, whichever table it came
 * from; a torn bucket read, after the zeroing reset the bucket's ver, still
 * hands match one whole value); a miss counts only if h->seq did not change,
 * and a table is reused only after two changes of h->seq (the end of its
 * migration, the start of the next).
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "common/common.h"
#include "common/hash.h"
#include "store/hashidx.h"

#define HB_N        6
#define B_BUSY      1u
#define B_OVF       2u
#define B_STEP      4u
#define MIG_STEP    8            /* old buckets moved per write */
#define MIN_BUCKETS 64
#define LOAD_PCT    80
#define REL_STEP    (256u * 1024)  /* retired bytes given back per write */

#define LOAD(p)          __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v)      __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define LOAD_ACQ(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)

struct hbkt {
	uint32_t ver;
	uint16_t tag[HB_N];
	uint64_t val[HB_N];
};
_Static_assert(sizeof(struct hbkt) == 64, "a bucket is one cache line");

struct htab {
	uint64_t nb, mask;
	struct hbkt *b;
	size_t bytes;
	uint64_t novf;               /* buckets with B_OVF (writer only) */
	uint64_t ndel;               /* deletes from it (writer only) */
	size_t released;             /* retired: bytes given back so far */
	struct htab *retired_next;
};

struct hidx {
	/* read by every lookup */
	uint32_t seq;                /* odd while (old, cur) change */
	struct htab *cur, *old;
	hidx_match_fn match;
	hidx_rehash_fn rehash;
	void *ctx;
	/* writers */
	pthread_mutex_t mu __attribute__((aligned(CACHELINE)));
	uint64_t mig;                /* next old bucket to move */
	uint64_t count;              /* entries (atomic reads for stats) */
	uint64_t rehashes;
	struct htab *retired;        /* finished tables, newest first */
	uint64_t nretired;           /* tables on that list (atomic reads) */
	uint64_t retired_bytes;      /* their mappings (atomic reads) */
	uint64_t reused;             /* migrations into a retired table (atomic reads) */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

uint64_t hidx_hash(const void *key, unsigned klen)
{
	return lotus_key_hash(key, klen);
}

static inline uint16_t tag_of(uint64_t hash)
{
	uint16_t t = (uint16_t)(hash >> 48);
	return t ? t : 1;
}

static struct htab *tab_new(uint64_t nb)
{
	struct htab *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->nb = nb;
	t->mask = nb - 1;
	t->bytes = nb * sizeof(struct hbkt);
	void *m = mmap(NULL, t->bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		free(t);
		return NULL;
	}
	t->b = m;
	return t;
}

static void tab_free(struct htab *t)
{
	if (!t)
		return;
	munmap(t->b, t->bytes);
	free(t);
}

int hidx_create(hidx_match_fn match, hidx_rehash_fn rehash, void *ctx, hidx_t **out)
{
	if (!match || !rehash)
		return -EINVAL;
	hidx_t *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	if (!(h->cur = tab_new(MIN_BUCKETS))) {
		free(h);
		return -ENOMEM;
	}
	h->match = match;
	h->rehash = rehash;
	h->ctx = ctx;
	pthread_mutex_init(&h->mu, NULL);
	*out = h;
	return 0;
}

void hidx_destroy(hidx_t *h)
{
	if (!h)
		return;
	tab_free(h->cur);
	tab_free(h->old);
	while (h->retired) {
		struct htab *t = h->retired;
		h->retired = t->retired_next;
		tab_free(t);
	}
	pthread_mutex_destroy(&h->mu);
	free(h);
}

/* ---- readers ---- */

/* A consistent copy of bucket b: its ver (without B_BUSY), tags and values. */
static inline uint32_t bkt_read(const struct hbkt *b, uint16_t *tag, uint64_t *val)
{
	for (;;) {
		uint32_t v = LOAD_ACQ(&b->ver);
		if (v & B_BUSY) {
			cpu_relax();
			continue;
		}
		for (unsigned i = 0; i < HB_N; i++) {
			tag[i] = LOAD(&b->tag[i]);
			val[i] = LOAD(&b->val[i]);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LOAD(&b->ver) == v)
			return v;
	}
}

static int tab_find(hidx_t *h, const struct htab *t, uint64_t hash, const void *key,
		    unsigned klen, uint64_t *out)
{
	uint16_t tg = tag_of(hash), tag[HB_N];
	uint64_t val[HB_N], i = hash & t->mask;
	for (uint64_t n = 0; n < t->nb; n++, i = (i + 1) & t->mask) {
		uint32_t v = bkt_read(&t->b[i], tag, val);
		for (unsigned s = 0; s < HB_N; s++)
			if (tag[s] == tg && h->match(h->ctx, val[s], key, klen)) {
				*out = val[s];
				return 0;
			}
		if (!(v & B_OVF))
			break;
	}
	return LOTUS_ENOTFOUND;
}

/* The tables a reader should look in, and the seq they go with. */
static inline uint32_t tabs_load(hidx_t *h, struct htab **old, struct htab **cur)
{
	for (;;) {
		uint32_t s = LOAD_ACQ(&h->seq);
		if (s & 1) {
			cpu_relax();
			continue;
		}
		*old = LOAD_ACQ(&h->old);
		*cur = LOAD_ACQ(&h->cur);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LOAD(&h->seq) == s)
			return s;
	}
}

int hidx_get(hidx_t *h, uint64_t hash, const void *key, unsigned klen, uint64_t *val)
{
	for (;;) {
		struct htab *o, *c;
		uint32_t s = tabs_load(h, &o, &c);
		if (o && tab_find(h, o, hash, key, klen, val) == 0)
			return 0;
		if (tab_find(h, c, hash, key, klen, val) == 0)
			return 0;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (LOAD(&h->seq) == s)
			return LOTUS_ENOTFOUND;
	}
}

/* The batched lookups' first two phases.  Their answer is only a guess
 * (the caller checks it as it checks a client's hint), so they skip what
 * makes hidx_get exact: the (old, cur) sequence, the probing past an
 * overflowing bucket, the key match.  A table is never unmapped before
 * hidx_destroy, so a pointer loaded here stays readable however late.
 * While a migration runs, the entry may still be in the old table: it is
 * looked in (and prefetched) too. */
void hidx_prefetch(hidx_t *h, uint64_t hash)
{
	const struct htab *c = LOAD_ACQ(&h->cur), *o = LOAD_ACQ(&h->old);
	__builtin_prefetch(&c->b[hash & c->mask], 0, 3);
	if (o)
		__builtin_prefetch(&o->b[hash & o->mask], 0, 3);
}

/* The value of the first entry of hash's home bucket in t with its tag, read
 * as the seqlock says (a bucket being written: no guess). */
static inline uint64_t bkt_peek(const struct htab *t, uint64_t hash)
{
	const struct hbkt *b = &t->b[hash & t->mask];
	uint16_t tg = tag_of(hash);
	uint32_t v = LOAD_ACQ(&b->ver);
	if (v & B_BUSY)
		return 0;
	for (unsigned s = 0; s < HB_N; s++)
		if (LOAD(&b->tag[s]) == tg) {
			uint64_t val = LOAD(&b->val[s]);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			return LOAD(&b->ver) == v ? val : 0;
		}
	return 0;
}

uint64_t hidx_peek(hidx_t *h, uint64_t hash)
{
	const struct htab *o = LOAD_ACQ(&h->old), *c = LOAD_ACQ(&h->cur);
	uint64_t val = o ? bkt_peek(o, hash) : 0;
	return val ? val : bkt_peek(c, hash);
}

/* ---- writers (h->mu held) ---- */

static inline uint32_t bkt_begin(struct hbkt *b)
{
	uint32_t v = b->ver;
	STORE(&b->ver, v | B_BUSY);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return v;
}

static inline void bkt_end(struct hbkt *b, uint32_t v, uint32_t ovf)
{
	STORE_REL(&b->ver, ((v & ~(B_BUSY | B_OVF)) + B_STEP) | (v & B_OVF) | ovf);
}

static int tab_insert(struct htab *t, uint64_t hash, uint64_t val)
{
	uint16_t tg = tag_of(hash);
	uint64_t i = hash & t->mask;
	for (uint64_t n = 0; n < t->nb; n++, i = (i + 1) & t->mask) {
		struct hbkt *b = &t->b[i];
		for (unsigned s = 0; s < HB_N; s++)
			if (b->tag[s] == 0) {
				uint32_t v = bkt_begin(b);
				STORE(&b->val[s], val);
				STORE(&b->tag[s], tg);
				bkt_end(b, v, 0);
				return 0;
			}
		if (!(b->ver & B_OVF)) {
			bkt_end(b, bkt_begin(b), B_OVF);
			t->novf++;
		}
	}
	return -ENOMEM;
}

static int tab_remove(struct htab *t, uint64_t hash, uint64_t val)
{
	uint16_t tg = tag_of(hash);
	uint64_t i = hash & t->mask;
	for (uint64_t n = 0; n < t->nb; n++, i = (i + 1) & t->mask) {
		struct hbkt *b = &t->b[i];
		for (unsigned s = 0; s < HB_N; s++)
			if (b->tag[s] == tg && b->val[s] == val) {
				uint32_t v = bkt_begin(b);
				STORE(&b->tag[s], 0);
				STORE(&b->val[s], 0);
				bkt_end(b, v, 0);
				return 0;
			}
		if (!(b->ver & B_OVF))
			break;
	}
	return LOTUS_ENOTFOUND;
}

static void tabs_set(hidx_t *h, struct htab *old, struct htab *cur)
{
	uint32_t s = h->seq;
	STORE(&h->seq, s + 1);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	STORE_REL(&h->old, old);
	STORE_REL(&h->cur, cur);
	STORE_REL(&h->seq, s + 2);
}

/* Give back up to max more bytes of the newest retired table (empty: its
 * zero pages read as an empty table).  In steps, so that no write pays for
 * unmapping a big table's pages at once. */
static void release_step(hidx_t *h, size_t max)
{
	struct htab *r = h->retired;
	if (!r || r->released >= r->bytes)
		return;
	size_t n = MIN(max, r->bytes - r->released);
	madvise((char *)r->b + r->released, n, MADV_DONTNEED);
	r->released += n;
}

/* Move the entries of up to MIG_STEP old buckets into the current table. */
static void migrate_step(hidx_t *h)
{
	struct htab *o = h->old;
	if (!o) {
		release_step(h, REL_STEP);
		return;
	}
	for (unsigned k = 0; k < MIG_STEP && h->mig < o->nb; k++, h->mig++) {
		struct hbkt *b = &o->b[h->mig];
		bool any = false;
		for (unsigned s = 0; s < HB_N; s++) {
			if (!b->tag[s])
				continue;
			any = true;
			/* the current table has room for every entry (it was
			 * sized for them at the start): a failure cannot happen,
			 * but would only drop an entry the owner re-adds on
			 * rebuild; count it as gone */
			if (tab_insert(h->cur, h->rehash(h->ctx, b->val[s]), b->val[s]) != 0)
				h->count--;
		}
		if (any) {
			uint32_t v = bkt_begin(b);
			for (unsigned s = 0; s < HB_N; s++) {
				STORE(&b->tag[s], 0);
				STORE(&b->val[s], 0);
			}
			bkt_end(b, v, 0);
		}
	}
	if (h->mig < o->nb)
		return;
	tabs_set(h, NULL, h->cur);
	release_step(h, SIZE_MAX);   /* the one before, should it not be done */
	o->retired_next = h->retired;
	o->released = 0;
	h->retired = o;
	STORE(&h->nretired, h->nretired + 1);
	STORE(&h->retired_bytes, h->retired_bytes + o->bytes);
}

/* Take a retired table of nb buckets given back in full (it reads as an
 * empty table) off the list, or NULL. */
static struct htab *tab_reuse(hidx_t *h, uint64_t nb)
{
	for (struct htab **p = &h->retired; *p; p = &(*p)->retired_next) {
		struct htab *t = *p;
		if (t->nb != nb || t->released < t->bytes)
			continue;
		*p = t->retired_next;
		t->retired_next = NULL;
		t->novf = t->ndel = 0;
		t->released = 0;
		STORE(&h->nretired, h->nretired - 1);
		STORE(&h->retired_bytes, h->retired_bytes - t->bytes);
		STORE(&h->reused, h->reused + 1);
		return t;
	}
	return NULL;
}

/* Start moving everything into a table of nb buckets (no room: keep the
 * current one, which may still have free entries). */
static void migrate_start(hidx_t *h, uint64_t nb)
{
	struct htab *n = tab_reuse(h, nb);
	if (!n && !(n = tab_new(nb)))
		return;
	h->mig = 0;
	STORE(&h->rehashes, h->rehashes + 1);
	tabs_set(h, h->cur, n);
}

int hidx_put(hidx_t *h, uint64_t hash, uint64_t val)
{
	pthread_mutex_lock(&h->mu);
	migrate_step(h);
	if (!h->old) {
		struct htab *c = h->cur;
		if ((h->count + 1) * 100 > c->nb * HB_N * LOAD_PCT)
			migrate_start(h, c->nb * 2);
		else if (c->novf > c->nb / 4 && c->ndel > c->nb * HB_N / 4)
			migrate_start(h, c->nb);     /* stale overflow flags */
	}
	int rc = tab_insert(h->cur, hash, val);
	if (rc == 0)
		STORE(&h->count, h->count + 1);
	pthread_mutex_unlock(&h->mu);
	return rc;
}

int hidx_del(hidx_t *h, uint64_t hash, uint64_t val)
{
	pthread_mutex_lock(&h->mu);
	migrate_step(h);
	int rc = h->old ? tab_remove(h->old, hash, val) : LOTUS_ENOTFOUND;
	if (rc)
		rc = tab_remove(h->cur, hash, val);
	if (rc == 0)
		h->cur->ndel++;
	if (rc == 0)
		STORE(&h->count, h->count - 1);
	pthread_mutex_unlock(&h->mu);
	return rc;
}

void hidx_stats(hidx_t *h, struct hidx_stats *s)
{
	struct htab *o, *c;
	tabs_load(h, &o, &c);
	s->entries = LOAD(&h->count);
	s->buckets = c->nb;
	s->bytes = c->bytes + (o ? o->bytes : 0);
	s->rehashes = LOAD(&h->rehashes);
	s->retired = LOAD(&h->nretired);
	s->retired_bytes = LOAD(&h->retired_bytes);
	s->reused = LOAD(&h->reused);
	s->migrating = o != NULL;
}
