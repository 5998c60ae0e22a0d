/*
 * index.c - a concurrent B+tree with optimistic lock coupling (OLC).
 *
 * Layout.  Inner nodes hold up to INNER_CAP full separator keys (fixed
 * 128-byte key slots; inner nodes are ~1/50 of the nodes, so this costs
 * little) and INNER_CAP+1 children: child i holds the keys k with
 * sep[i-1] <= k < sep[i].  Leaves hold up to LEAF_CAP entries of
 * {8-byte key prefix, key length, value} (17 bytes each) and a pointer to the
 * right sibling.  Keys are ordered memcmp-then-length; every key is compared
 * as big-endian 64-bit words, zero-padded, so two keys whose common words are
 * equal compare by length.  Two keys with equal prefixes compare by length
 * when either is at most 8 bytes long; otherwise:
 *  - borrowed keys (index_create): the full key of the entry is fetched
 *    through index_key_fn (the record slot holds it);
 *  - own keys (index_create_owned): the index holds the rest itself.  A leaf
 *    that ever held a key longer than 8 bytes gets an extension (struct lext,
 *    allocated once, kept until index_destroy): per entry the key's bytes
 *    8..15 as a second word and, for keys longer than 16 bytes, a pointer to a
 *    key copy holding words 2.. (bytes 16..len-1).  Key copies come from
 *    per-size-class slabs (one class per word count, 1..14) that are never
 *    freed before index_destroy; a freed copy goes on its class's free list.
 *    So a table of 8-byte keys pays 8 bytes per leaf, and comparisons inside a
 *    leaf need the copy only when the first 16 bytes tie.
 *
 * Invariants:
 *  1. Nodes are never freed or merged before index_destroy; deletes may leave a
 *     leaf empty.  So a pointer read from any node stays dereferenceable, and
 *     keys only ever move rightwards (by splits), never leftwards.
 *  2. Every leaf is in the sibling chain, in key order.
 *  3. A leaf's version changes whenever one of its entries is added, removed or
 *     moved, and before the owner frees the record behind a removed value (the
 *     owner removes from the index first).  So a key fetched through
 *     index_key_fn is trustworthy once the leaf's version validates.
 *  4. Every field read optimistically is accessed with __atomic operations
 *     (relaxed; child/next/root/extension pointers release/acquire so that a
 *     new node's initialisation is visible), so the optimistic races are
 *     data-race-free.
 *  5. Own keys: a key copy is pushed on a free list only after its entry left
 *     the leaf under the leaf's lock (so the leaf's version changed), and its
 *     memory stays mapped.  A reader that still holds the old pointer may read
 *     bytes of a reused copy, but then fails validation and restarts.  A copy
 *     is filled after a release fence (and read with relaxed loads before the
 *     reader's acquire fence), so a reader that saw new bytes also sees the
 *     version change.  An optimistic reader may pair a length with the
 *     pointer of another entry (a torn read of a shifting leaf): each slab
 *     ends in a pad of the largest copy's size, so any read of up to 14 words
 *     from a copy's start stays inside the slab; a NULL pointer or extension
 *     seen with a long length is such a torn read and only needs to not fault.
 *
 * OLC protocol (Leis et al., "The ART of practical synchronization", 2016).
 * A node's version word: bit 1 = write-locked, upper bits count changes.
 *  - read:     v = load-acquire(version); retry if locked; read fields;
 *              acquire fence; valid iff version == v.
 *  - write:    CAS version v -> v+2 ("upgrade" a read); unlock adds 2.
 *  - descend:  read child pointer, validate parent, read child version,
 *              validate parent again (so the child is still the right one).
 *  - insert:   full inner nodes on the path are split eagerly (lock parent,
 *              then node; restart), so a full leaf's parent always has room:
 *              lock parent + leaf, split, restart.
 * All locks are try-locks (upgrade CAS), so there is no deadlock; a failure
 * restarts the operation from the root.
 *
 * Scans walk the leaf chain: each leaf is copied optimistically (entries, full
 * keys, next pointer) and validated, then its keys greater than the last one
 * returned are handed to the callback with no latch held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/index.h"

#define LEAF_CAP   64
#define INNER_CAP  63
#define KEY_WORDS  (INDEX_KEY_MAX / 8)
#define COPY_WORDS (KEY_WORDS - 2)   /* largest key copy: words 2..15 */
#define SLAB_BYTES (64 * 1024)
#define RESTART    1       /* internal: start the operation again */

#define LOAD(p)          __atomic_load_n((p), __ATOMIC_RELAXED)
#define STORE(p, v)      __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define LOAD_ACQ(p)      __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v)  __atomic_store_n((p), (v), __ATOMIC_RELEASE)

struct node {
	uint64_t version;    /* bit 1: locked; + 2 per lock and per unlock */
	uint16_t count;      /* keys (inner) or entries (leaf) */
	uint8_t is_leaf;     /* immutable */
};

/* Own keys: the rest of each entry's key (entries of at most 8 bytes leave
 * theirs unused). */
struct lext {
	uint64_t w1[LEAF_CAP];         /* key bytes 8..15, as pfx */
	uint64_t *copy[LEAF_CAP];      /* words 2.. of keys longer than 16 bytes */
};

struct leaf {
	struct node h;
	struct leaf *next;             /* right sibling, NULL for the last */
	struct lext *x;                /* own keys: set once, under the lock */
	uint64_t pfx[LEAF_CAP];        /* first 8 key bytes as a big-endian number */
	uint64_t val[LEAF_CAP];
	uint8_t len[LEAF_CAP];
};

struct inner {
	struct node h;
	uint8_t klen[INNER_CAP];
	uint64_t key[INNER_CAP][KEY_WORDS];
	struct node *child[INNER_CAP + 1];
};

/* One size class of key copies (class c: copies of c words). */
struct kclass {
	pthread_mutex_t mu;
	uint64_t *free;                /* free copies, linked through word 0 */
	uint64_t *bump, *end;          /* carving the newest slab */
	void *slabs;                   /* slab list, linked through the first word */
};

/* Nodes kept for reserved inserts (index_reserve): each list is linked
 * through its blocks' first word; a block is handed out zeroed. */
struct spares {
	pthread_mutex_t mu;
	void *leaf, *inner, *lext, *slab;
	unsigned nleaf, ninner, nlext, nslab;
	unsigned reserved;             /* inserts reserved and not yet released */
};

struct index {
	struct node *root;
	index_key_fn key_fn;
	void *ctx;
	bool owned;
	size_t bytes;                  /* nodes and extensions */
	size_t key_bytes;              /* slabs of key copies */
	struct kclass kc[COPY_WORDS];
	struct spares sp;
};

/* A search key as zero-padded big-endian words (w[0] is its prefix). */
struct skey {
	const unsigned char *b;
	unsigned len;
	uint64_t pfx;
	uint64_t w[KEY_WORDS];
};

/* ---- keys ---- */

static inline uint64_t be_to_host(uint64_t x)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap64(x);
#else
	return x;
#endif
}

static inline uint64_t key_prefix(const unsigned char *k, unsigned len)
{
	uint64_t x = 0;
	memcpy(&x, k, len < 8 ? len : 8);
	return be_to_host(x);
}

/* The first n (<= 8) bytes of word w into buf. */
static inline void word_put(unsigned char *buf, uint64_t w, unsigned n)
{
	uint64_t x = be_to_host(w);
	memcpy(buf, &x, n < 8 ? n : 8);
}

static inline int key_cmp(const unsigned char *a, unsigned alen,
			  const unsigned char *b, unsigned blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	if (c)
		return c;
	return (alen > blen) - (alen < blen);
}

static inline int len_cmp(unsigned a, unsigned b)
{
	return (a > b) - (a < b);
}

static inline int word_cmp(uint64_t a, uint64_t b)
{
	return a < b ? -1 : 1;   /* callers know a != b */
}

static void skey_init(struct skey *k, const void *b, unsigned len)
{
	k->b = b;
	k->len = len;
	k->w[0] = key_prefix(b, len);
	for (unsigned w = 1; 8 * w < len; w++)
		k->w[w] = key_prefix(k->b + 8 * w, len - 8 * w);
	k->pfx = k->w[0];
}

/* ---- reserved nodes ----
 *
 * A commit's writes are logged before they are applied, so applying them must
 * not fail.  Their records' slots are reserved first (store_resv.c); the index
 * nodes their inserts may need are too: index_reserve(n) keeps enough spare
 * blocks for n more inserts in the worst case - a new leaf and its extension,
 * a split of every inner node on the path plus a new root, and a slab for a
 * key copy - allocated up front, where failing refuses the commit before
 * anything is logged.  Every allocation below tries calloc first and takes a
 * spare only when calloc fails, so spares are rarely used and an insert under
 * reservation never fails for memory.  (An insert that reserved nothing may
 * take a spare too; the server reserves for every insert it applies after
 * logging, and recovery runs before any reservation exists.) */

/* Pop a zeroed block of size sz from list *head (sp.mu held), or NULL. */
static void *spare_pop(void **head, unsigned *n, size_t sz)
{
	void *b = *head;
	if (b) {
		*head = *(void **)b;
		(*n)--;
		memset(b, 0, sz);
	}
	return b;
}

static void *node_alloc(index_t *ix, size_t sz, int kind)
{
	void *b = calloc(1, sz);
	if (b)
		return b;
	struct spares *sp = &ix->sp;
	pthread_mutex_lock(&sp->mu);
	switch (kind) {
	case 0: b = spare_pop(&sp->leaf, &sp->nleaf, sz); break;
	case 1: b = spare_pop(&sp->inner, &sp->ninner, sz); break;
	case 2: b = spare_pop(&sp->lext, &sp->nlext, sz); break;
	default: b = spare_pop(&sp->slab, &sp->nslab, sz); break;
	}
	pthread_mutex_unlock(&sp->mu);
	return b;
}

/* ---- own keys: copies in size-class slabs ---- */

static unsigned copy_words(unsigned len)
{
	return (len - 16 + 7) / 8;   /* len > 16 */
}

/* A copy of c words from class c's free list or its newest slab. */
static uint64_t *copy_alloc(index_t *ix, unsigned c)
{
	struct kclass *kc = &ix->kc[c - 1];
	uint64_t *p;

	pthread_mutex_lock(&kc->mu);
	if ((p = kc->free)) {
		kc->free = (uint64_t *)(uintptr_t)LOAD(&p[0]);
	} else {
		if (!kc->bump || kc->bump + c > kc->end) {
			/* calloc: the pad is read (never used) by torn reads */
			uint64_t *s = node_alloc(ix, SLAB_BYTES, 3);
			if (!s)
				goto out;
			s[0] = (uint64_t)(uintptr_t)kc->slabs;
			kc->slabs = s;
			kc->bump = s + 1;
			kc->end = s + SLAB_BYTES / 8 - COPY_WORDS;
			__atomic_fetch_add(&ix->key_bytes, SLAB_BYTES, __ATOMIC_RELAXED);
		}
		p = kc->bump;
		kc->bump += c;
	}
out:
	pthread_mutex_unlock(&kc->mu);
	return p;
}

/* Back on the free list; the entry left its leaf under the leaf's lock. */
static void copy_free(index_t *ix, uint64_t *p, unsigned c)
{
	struct kclass *kc = &ix->kc[c - 1];
	pthread_mutex_lock(&kc->mu);
	STORE(&p[0], (uint64_t)(uintptr_t)kc->free);
	kc->free = p;
	pthread_mutex_unlock(&kc->mu);
}

/* A filled copy of words 2.. of k (k->len > 16), or NULL (-ENOMEM). */
static uint64_t *copy_make(index_t *ix, const struct skey *k)
{
	unsigned c = copy_words(k->len);
	uint64_t *p = copy_alloc(ix, c);
	if (!p)
		return NULL;
	/* Invariant 5: a reader that sees these bytes sees the version bump of
	 * the removal that freed the copy. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	for (unsigned w = 0; w < c; w++)
		STORE(&p[w], k->w[w + 2]);
	return p;
}

static void copy_release(index_t *ix, uint64_t *p, unsigned len)
{
	if (p)
		copy_free(ix, p, copy_words(len));
}

/* ---- leaf entries ---- */

/* Compare a search key with entry i of leaf l.  Optimistic-safe. */
static int entry_cmp(index_t *ix, const struct skey *k, struct leaf *l, unsigned i)
{
	uint64_t pfx = LOAD(&l->pfx[i]);
	if (k->pfx != pfx)
		return word_cmp(k->pfx, pfx);
	unsigned len = LOAD(&l->len[i]);
	if (k->len <= 8 || len <= 8)
		return len_cmp(k->len, len);
	if (len > INDEX_KEY_MAX)
		len = INDEX_KEY_MAX;
	if (!ix->owned) {
		unsigned char buf[INDEX_KEY_MAX];
		unsigned n = ix->key_fn(ix->ctx, LOAD(&l->val[i]), buf);
		return key_cmp(k->b, k->len, buf, n > INDEX_KEY_MAX ? INDEX_KEY_MAX : n);
	}
	struct lext *x = LOAD_ACQ(&l->x);
	if (!x)
		return len_cmp(k->len, len);          /* torn read */
	uint64_t w1 = LOAD(&x->w1[i]);
	if (k->w[1] != w1)
		return word_cmp(k->w[1], w1);
	if (k->len <= 16 || len <= 16)
		return len_cmp(k->len, len);
	const uint64_t *c = LOAD(&x->copy[i]);
	if (!c)
		return len_cmp(k->len, len);          /* torn read */
	unsigned m = k->len < len ? k->len : len;
	for (unsigned w = 2; 8 * w < m; w++) {
		uint64_t e = LOAD(&c[w - 2]);
		if (k->w[w] != e)
			return word_cmp(k->w[w], e);
	}
	return len_cmp(k->len, len);
}

/* Full key of entry i of leaf l into buf (INDEX_KEY_MAX bytes); returns its
 * length.  Optimistic-safe (a torn read gives some bytes). */
static unsigned leaf_key(index_t *ix, struct leaf *l, unsigned i, unsigned char *buf)
{
	unsigned len = LOAD(&l->len[i]);
	if (len > INDEX_KEY_MAX)
		len = INDEX_KEY_MAX;
	word_put(buf, LOAD(&l->pfx[i]), len);
	if (len <= 8)
		return len;
	if (!ix->owned) {
		unsigned n = ix->key_fn(ix->ctx, LOAD(&l->val[i]), buf);
		return n > INDEX_KEY_MAX ? INDEX_KEY_MAX : n;
	}
	struct lext *x = LOAD_ACQ(&l->x);
	const uint64_t *c = x ? LOAD(&x->copy[i]) : NULL;
	word_put(buf + 8, x ? LOAD(&x->w1[i]) : 0, len - 8);
	for (unsigned w = 2; 8 * w < len; w++)
		word_put(buf + 8 * w, c ? LOAD(&c[w - 2]) : 0, len - 8 * w);
	return len;
}

/* ---- version latches ---- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* Start an optimistic read; false (restart) if the node is write-locked. */
static inline bool read_begin(struct node *n, uint64_t *v)
{
	*v = LOAD_ACQ(&n->version);
	if (*v & 2) {
		cpu_relax();
		return false;
	}
	return true;
}

static inline bool read_valid(struct node *n, uint64_t v)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return LOAD(&n->version) == v;
}

/* Turn an optimistic read at version v into a write lock. */
static inline bool upgrade(struct node *n, uint64_t v)
{
	if (!__atomic_compare_exchange_n(&n->version, &v, v + 2, false,
					 __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return false;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return true;
}

static inline void write_unlock(struct node *n)
{
	__atomic_fetch_add(&n->version, 2, __ATOMIC_RELEASE);
}

/* ---- nodes ---- */

static struct leaf *leaf_new(index_t *ix)
{
	struct leaf *l = node_alloc(ix, sizeof(*l), 0);
	if (l) {
		l->h.is_leaf = 1;
		__atomic_fetch_add(&ix->bytes, sizeof(*l), __ATOMIC_RELAXED);
	}
	return l;
}

static struct lext *lext_new(index_t *ix)
{
	struct lext *x = node_alloc(ix, sizeof(*x), 2);
	if (x)
		__atomic_fetch_add(&ix->bytes, sizeof(*x), __ATOMIC_RELAXED);
	return x;
}

/* Own keys: the extension of locked leaf l, made on its first long key. */
static struct lext *leaf_ext(index_t *ix, struct leaf *l)
{
	if (!l->x) {
		struct lext *x = lext_new(ix);
		if (!x)
			return NULL;
		STORE_REL(&l->x, x);
	}
	return l->x;
}

static struct inner *inner_new(index_t *ix)
{
	struct inner *in = node_alloc(ix, sizeof(*in), 1);
	if (in)
		__atomic_fetch_add(&ix->bytes, sizeof(*in), __ATOMIC_RELAXED);
	return in;
}

/* First position whose entry is >= k; *found if equal.  Optimistic-safe. */
static unsigned leaf_lower_bound(index_t *ix, struct leaf *l, unsigned n,
				 const struct skey *k, bool *found)
{
	unsigned lo = 0, hi = n;
	*found = false;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		int c = entry_cmp(ix, k, l, mid);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c > 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Entry s of locked leaf l to position d. */
static void leaf_move(struct leaf *l, unsigned d, unsigned s)
{
	STORE(&l->pfx[d], l->pfx[s]);
	STORE(&l->len[d], l->len[s]);
	STORE(&l->val[d], l->val[s]);
	if (l->x) {
		STORE(&l->x->w1[d], l->x->w1[s]);
		STORE(&l->x->copy[d], l->x->copy[s]);
	}
}

/* Insert at pos; caller holds the write lock, checked there is room and (own
 * keys, k longer than 8 bytes) made the extension. */
static void leaf_insert_at(struct leaf *l, unsigned pos, const struct skey *k, uint64_t val,
			   uint64_t *copy)
{
	unsigned n = l->h.count;
	for (unsigned i = n; i > pos; i--)
		leaf_move(l, i, i - 1);
	STORE(&l->pfx[pos], k->pfx);
	STORE(&l->len[pos], (uint8_t)k->len);
	STORE(&l->val[pos], val);
	if (l->x) {
		STORE(&l->x->w1[pos], k->len > 8 ? k->w[1] : 0);
		STORE(&l->x->copy[pos], copy);
	}
	STORE(&l->h.count, (uint16_t)(n + 1));
}

/* Remove entry pos of a locked leaf; returns its key copy (own keys). */
static uint64_t *leaf_remove_at(struct leaf *l, unsigned pos)
{
	unsigned n = l->h.count;
	uint64_t *copy = l->x ? l->x->copy[pos] : NULL;
	for (unsigned i = pos; i + 1 < n; i++)
		leaf_move(l, i, i + 1);
	STORE(&l->h.count, (uint16_t)(n - 1));
	return copy;
}

/* Separator key i of an inner node into buf; returns its length. */
static unsigned inner_key(const struct inner *in, unsigned i, unsigned char *buf)
{
	unsigned len = LOAD(&in->klen[i]);
	if (len > INDEX_KEY_MAX)
		len = INDEX_KEY_MAX;
	for (unsigned w = 0; w < (len + 7) / 8; w++) {
		uint64_t x = LOAD(&in->key[i][w]);
		memcpy(buf + 8 * w, &x, 8);
	}
	return len;
}

static void inner_set_key(struct inner *in, unsigned i, const unsigned char *k, unsigned len)
{
	for (unsigned w = 0; w < (len + 7) / 8; w++) {
		uint64_t x = 0;
		memcpy(&x, k + 8 * w, len - 8 * w < 8 ? len - 8 * w : 8);
		STORE(&in->key[i][w], x);
	}
	STORE(&in->klen[i], (uint8_t)len);
}

/* k < separator i?  The separator's words are zero-padded like the search
 * key's: the first word that differs decides, within the shorter key's words;
 * if all of those are equal, the length does. */
static inline bool key_below_sep(const struct inner *in, unsigned i, const struct skey *k)
{
	uint64_t sp = be_to_host(LOAD(&in->key[i][0]));
	if (k->pfx != sp)
		return k->pfx < sp;
	unsigned len = LOAD(&in->klen[i]);
	if (len > INDEX_KEY_MAX)
		len = INDEX_KEY_MAX;
	unsigned m = k->len < len ? k->len : len;
	for (unsigned w = 1; 8 * w < m; w++) {
		uint64_t s = be_to_host(LOAD(&in->key[i][w]));
		if (k->w[w] != s)
			return k->w[w] < s;
	}
	return k->len < len;
}

/* Index of the child that covers k: the first i with k < sep[i], else n. */
static unsigned inner_find(const struct inner *in, unsigned n, const struct skey *k)
{
	unsigned lo = 0, hi = n;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (key_below_sep(in, mid, k))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Add separator sep and its right child after position pos; locked, not full. */
static void inner_insert(struct inner *in, const unsigned char *sep, unsigned seplen,
			 struct node *right)
{
	struct skey k;
	skey_init(&k, sep, seplen);
	unsigned n = in->h.count, pos = inner_find(in, n, &k);
	unsigned char buf[INDEX_KEY_MAX];
	for (unsigned i = n; i > pos; i--) {
		unsigned len = inner_key(in, i - 1, buf);
		inner_set_key(in, i, buf, len);
		STORE_REL(&in->child[i + 1], in->child[i]);
	}
	inner_set_key(in, pos, sep, seplen);
	STORE_REL(&in->child[pos + 1], right);
	STORE(&in->h.count, (uint16_t)(n + 1));
}

/* Publish r (preallocated, so a split never fails half-way) as the new root. */
static void make_root(index_t *ix, struct inner *r, const unsigned char *sep,
		      unsigned seplen, struct node *left, struct node *right)
{
	inner_set_key(r, 0, sep, seplen);
	r->child[0] = left;
	r->child[1] = right;
	r->h.count = 1;
	STORE_REL(&ix->root, &r->h);
}

/* Split a locked full inner node; the caller links the new right half. */
static struct inner *inner_split(index_t *ix, struct inner *in, unsigned char *sep,
				 unsigned *seplen)
{
	struct inner *r = inner_new(ix);
	if (!r)
		return NULL;
	unsigned n = in->h.count, mid = n / 2;
	unsigned char buf[INDEX_KEY_MAX];
	*seplen = inner_key(in, mid, sep);
	for (unsigned i = mid + 1; i < n; i++) {
		unsigned len = inner_key(in, i, buf);
		inner_set_key(r, i - mid - 1, buf, len);
	}
	for (unsigned i = mid + 1; i <= n; i++)
		r->child[i - mid - 1] = in->child[i];
	r->h.count = (uint16_t)(n - mid - 1);
	STORE(&in->h.count, (uint16_t)mid);
	return r;
}

/* Split a locked full leaf.  An insert at the end (sequential load) leaves
 * the left leaf nearly full instead of half full. */
static struct leaf *leaf_split(index_t *ix, struct leaf *l, unsigned ins_pos,
			       unsigned char *sep, unsigned *seplen)
{
	struct leaf *r = leaf_new(ix);
	if (!r)
		return NULL;
	if (l->x && !(r->x = lext_new(ix))) {
		free(r);   /* (its bytes stay counted; harmless) */
		return NULL;
	}
	unsigned n = l->h.count, mid = ins_pos >= n ? n - LEAF_CAP / 8 : n / 2;
	for (unsigned i = mid; i < n; i++) {
		r->pfx[i - mid] = l->pfx[i];
		r->len[i - mid] = l->len[i];
		r->val[i - mid] = l->val[i];
		if (l->x) {   /* the copies move with their entries */
			r->x->w1[i - mid] = l->x->w1[i];
			r->x->copy[i - mid] = l->x->copy[i];
		}
	}
	r->h.count = (uint16_t)(n - mid);
	r->next = l->next;
	STORE_REL(&l->next, r);
	STORE(&l->h.count, (uint16_t)mid);
	*seplen = leaf_key(ix, r, 0, sep);
	return r;
}

/* ---- descent ---- */

struct path {
	struct leaf *leaf;
	uint64_t lv;
	struct inner *parent;   /* NULL if the leaf is the root */
	uint64_t pv;
};

/* Split the full inner node in (read at version v) whose parent is p (read at
 * pv).  Always returns RESTART or an error. */
static int split_full_inner(index_t *ix, struct inner *p, uint64_t pv,
			    struct inner *in, uint64_t v)
{
	unsigned char sep[INDEX_KEY_MAX];
	unsigned seplen;
	int rc = RESTART;
	struct inner *root = NULL, *r;

	if (p && !upgrade(&p->h, pv))
		return RESTART;
	if (!upgrade(&in->h, v))
		goto out_parent;
	if (!p && LOAD_ACQ(&ix->root) != &in->h)
		goto out_node;
	if ((!p && !(root = inner_new(ix))) || !(r = inner_split(ix, in, sep, &seplen))) {
		free(root);   /* (its bytes stay counted; harmless) */
		rc = -ENOMEM;
		goto out_node;
	}
	if (p)
		inner_insert(p, sep, seplen, &r->h);
	else
		make_root(ix, root, sep, seplen, &in->h, &r->h);
out_node:
	write_unlock(&in->h);
out_parent:
	if (p)
		write_unlock(&p->h);
	return rc;
}

/* Optimistically find the leaf for k.  On 0 the leaf was read at path->lv and
 * the parent validated after that, so the leaf covered k at version lv.  With
 * split_inner, full inner nodes met on the way are split (insert). */
static int descend(index_t *ix, const struct skey *k, bool split_inner, struct path *pa)
{
	struct node *n = LOAD_ACQ(&ix->root);
	uint64_t v, pv = 0;
	struct inner *p = NULL;

	if (!read_begin(n, &v) || n != LOAD_ACQ(&ix->root))
		return RESTART;
	while (!n->is_leaf) {
		struct inner *in = (struct inner *)n;
		unsigned cnt = LOAD(&in->h.count);
		if (cnt > INNER_CAP)
			return RESTART;
		if (split_inner && cnt == INNER_CAP)
			return split_full_inner(ix, p, pv, in, v);
		struct node *c = LOAD_ACQ(&in->child[inner_find(in, cnt, k)]);
		if (!read_valid(n, v) || !c)
			return RESTART;
		p = in;
		pv = v;
		n = c;
		if (!read_begin(n, &v) || !read_valid(&p->h, pv))
			return RESTART;
	}
	pa->leaf = (struct leaf *)n;
	pa->lv = v;
	pa->parent = p;
	pa->pv = pv;
	return 0;
}

/* ---- operations ---- */

static int check_key(unsigned klen)
{
	if (klen == 0)
		return -EINVAL;
	return klen > INDEX_KEY_MAX ? LOTUS_ETOOBIG : 0;
}

static int create(index_key_fn key_fn, void *ctx, bool owned, index_t **out)
{
	index_t *ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->key_fn = key_fn;
	ix->ctx = ctx;
	ix->owned = owned;
	for (unsigned c = 0; c < COPY_WORDS; c++)
		pthread_mutex_init(&ix->kc[c].mu, NULL);
	pthread_mutex_init(&ix->sp.mu, NULL);
	struct leaf *root = leaf_new(ix);
	if (!root) {
		free(ix);
		return -ENOMEM;
	}
	ix->root = &root->h;
	*out = ix;
	return 0;
}

int index_create(index_key_fn key_fn, void *ctx, index_t **out)
{
	if (!key_fn)
		return -EINVAL;
	return create(key_fn, ctx, false, out);
}

int index_create_owned(index_t **out)
{
	return create(NULL, NULL, true, out);
}

static void node_free(struct node *n)
{
	if (!n->is_leaf) {
		struct inner *in = (struct inner *)n;
		for (unsigned i = 0; i <= in->h.count; i++)
			node_free(in->child[i]);
	} else {
		free(((struct leaf *)n)->x);
	}
	free(n);
}

static void spares_free(void *head)
{
	for (void *b = head, *next; b; b = next) {
		next = *(void **)b;
		free(b);
	}
}

/* sp.mu held: the inner levels above the leaves (a racy walk down the left
 * edge: nodes are never freed, and a stale answer is corrected by the +1
 * margin of the caller or the next reservation). */
static unsigned tree_height(index_t *ix)
{
	unsigned h = 0;
	struct node *n = LOAD_ACQ(&ix->root);
	while (n && !n->is_leaf && h < 64) {
		n = LOAD_ACQ(&((struct inner *)n)->child[0]);
		h++;
	}
	return h;
}

/* sp.mu held: top the spares up to what reserved inserts may need. */
static int spares_fill(index_t *ix, unsigned reserved)
{
	struct spares *sp = &ix->sp;
	unsigned h = tree_height(ix) + 2;   /* every inner split, a new root, margin */
	unsigned wl = reserved, wi = reserved * h, wx = ix->owned ? 2 * reserved : 0;
	unsigned ws = !ix->owned ? 0 : MIN(reserved, reserved * COPY_WORDS /
						 (SLAB_BYTES / 8 - COPY_WORDS - 1) + COPY_WORDS);
	struct { void **head; unsigned *n, want; size_t sz; } l[] = {
		{ &sp->leaf, &sp->nleaf, wl, sizeof(struct leaf) },
		{ &sp->inner, &sp->ninner, wi, sizeof(struct inner) },
		{ &sp->lext, &sp->nlext, wx, sizeof(struct lext) },
		{ &sp->slab, &sp->nslab, ws, SLAB_BYTES },
	};
	for (unsigned i = 0; i < 4; i++)
		while (*l[i].n < l[i].want) {
			void *b = calloc(1, l[i].sz);
			if (!b)
				return -ENOMEM;
			*(void **)b = *l[i].head;
			*l[i].head = b;
			(*l[i].n)++;
		}
	return 0;
}

int index_reserve(index_t *ix, unsigned n)
{
	if (!n)
		return 0;
	pthread_mutex_lock(&ix->sp.mu);
	int rc = spares_fill(ix, ix->sp.reserved + n);
	if (rc == 0)
		ix->sp.reserved += n;
	pthread_mutex_unlock(&ix->sp.mu);
	return rc;
}

void index_unreserve(index_t *ix, unsigned n)
{
	struct spares *sp = &ix->sp;
	void *drop = NULL;
	if (!n)
		return;
	pthread_mutex_lock(&sp->mu);
	sp->reserved -= MIN(n, sp->reserved);
	/* keep what the next commits are likely to need; give back the rest of
	 * a big one (inner nodes are 8.6 KiB each) */
	unsigned keep = 4 * MAX(64u, sp->reserved * (tree_height(ix) + 2));
	while (sp->ninner > keep) {
		void *b = sp->inner;
		sp->inner = *(void **)b;
		sp->ninner--;
		*(void **)b = drop;
		drop = b;
	}
	pthread_mutex_unlock(&sp->mu);
	spares_free(drop);
}

void index_destroy(index_t *ix)
{
	if (!ix)
		return;
	spares_free(ix->sp.leaf);
	spares_free(ix->sp.inner);
	spares_free(ix->sp.lext);
	spares_free(ix->sp.slab);
	pthread_mutex_destroy(&ix->sp.mu);
	node_free(ix->root);
	for (unsigned c = 0; c < COPY_WORDS; c++) {
		for (void *s = ix->kc[c].slabs, *next; s; s = next) {
			next = (void *)(uintptr_t)*(uint64_t *)s;
			free(s);
		}
		pthread_mutex_destroy(&ix->kc[c].mu);
	}
	free(ix);
}

static int get_try(index_t *ix, const struct skey *k, uint64_t *val)
{
	struct path pa;
	bool found;
	int rc = descend(ix, k, false, &pa);
	if (rc)
		return rc;
	unsigned n = LOAD(&pa.leaf->h.count);
	if (n > LEAF_CAP)
		return RESTART;
	unsigned pos = leaf_lower_bound(ix, pa.leaf, n, k, &found);
	uint64_t v = found ? LOAD(&pa.leaf->val[pos]) : 0;
	if (!read_valid(&pa.leaf->h, pa.lv))
		return RESTART;
	if (!found)
		return LOTUS_ENOTFOUND;
	*val = v;
	return 0;
}

int index_get(index_t *ix, const void *key, unsigned klen, uint64_t *val)
{
	struct skey k;
	int rc = check_key(klen);
	if (rc)
		return rc;
	skey_init(&k, key, klen);
	while ((rc = get_try(ix, &k, val)) == RESTART)
		;
	return rc;
}

/* Split the full leaf pa->leaf (locked with its parent by the caller). */
static int split_leaf_locked(index_t *ix, struct path *pa, unsigned pos)
{
	unsigned char sep[INDEX_KEY_MAX];
	unsigned seplen;
	struct inner *root = NULL;
	struct leaf *r;

	if ((!pa->parent && !(root = inner_new(ix))) ||
	    !(r = leaf_split(ix, pa->leaf, pos, sep, &seplen))) {
		free(root);
		return -ENOMEM;
	}
	if (pa->parent)
		inner_insert(pa->parent, sep, seplen, &r->h);
	else
		make_root(ix, root, sep, seplen, &pa->leaf->h, &r->h);
	return 0;
}

static int insert_try(index_t *ix, const struct skey *k, uint64_t val, uint64_t *old,
		      uint64_t *copy)
{
	struct path pa;
	bool found, full;
	int rc = descend(ix, k, true, &pa);
	if (rc)
		return rc;
	struct leaf *l = pa.leaf;
	full = LOAD(&l->h.count) >= LEAF_CAP;
	if (full && pa.parent && !upgrade(&pa.parent->h, pa.pv))
		return RESTART;
	if (!upgrade(&l->h, pa.lv)) {
		rc = RESTART;
		goto out_parent;
	}
	unsigned pos = leaf_lower_bound(ix, l, l->h.count, k, &found);
	if (found) {
		if (old)
			*old = l->val[pos];
		rc = LOTUS_EEXISTS;
	} else if (!full) {
		if (ix->owned && k->len > 8 && !leaf_ext(ix, l)) {
			rc = -ENOMEM;
		} else {
			leaf_insert_at(l, pos, k, val, copy);
			rc = 0;
		}
	} else if (!pa.parent && LOAD_ACQ(&ix->root) != &l->h) {
		rc = RESTART;
	} else {
		rc = split_leaf_locked(ix, &pa, pos);
		if (rc == 0)
			rc = RESTART;   /* insert into the right half next time */
	}
	write_unlock(&l->h);
out_parent:
	if (full && pa.parent)
		write_unlock(&pa.parent->h);
	return rc;
}

int index_insert(index_t *ix, const void *key, unsigned klen, uint64_t val, uint64_t *old)
{
	struct skey k;
	int rc = check_key(klen);
	if (rc)
		return rc;
	skey_init(&k, key, klen);
	uint64_t *copy = NULL;
	if (ix->owned && klen > 16 && !(copy = copy_make(ix, &k)))
		return -ENOMEM;
	while ((rc = insert_try(ix, &k, val, old, copy)) == RESTART)
		;
	if (rc)
		copy_release(ix, copy, klen);   /* never published */
	return rc;
}

/* Update (del = false) or delete the entry of k under the leaf's lock. */
static int modify_try(index_t *ix, const struct skey *k, bool del, uint64_t val,
		      uint64_t *old, uint64_t **copy)
{
	struct path pa;
	bool found;
	int rc = descend(ix, k, false, &pa);
	if (rc)
		return rc;
	struct leaf *l = pa.leaf;
	if (!upgrade(&l->h, pa.lv))
		return RESTART;
	unsigned pos = leaf_lower_bound(ix, l, l->h.count, k, &found);
	if (found) {
		if (old)
			*old = l->val[pos];
		if (del)
			*copy = leaf_remove_at(l, pos);
		else
			STORE(&l->val[pos], val);
	}
	write_unlock(&l->h);
	return found ? 0 : LOTUS_ENOTFOUND;
}

int index_update(index_t *ix, const void *key, unsigned klen, uint64_t val, uint64_t *old)
{
	struct skey k;
	int rc = check_key(klen);
	if (rc)
		return rc;
	skey_init(&k, key, klen);
	uint64_t *copy = NULL;
	while ((rc = modify_try(ix, &k, false, val, old, &copy)) == RESTART)
		;
	return rc;
}

int index_delete(index_t *ix, const void *key, unsigned klen, uint64_t *old)
{
	struct skey k;
	int rc = check_key(klen);
	if (rc)
		return rc;
	skey_init(&k, key, klen);
	uint64_t *copy = NULL;
	while ((rc = modify_try(ix, &k, true, 0, old, &copy)) == RESTART)
		;
	/* Invariant 5: the entry left its leaf under the lock; now it may go. */
	if (rc == 0 && ix->owned)
		copy_release(ix, copy, klen);
	return rc;
}

/* ---- scan ---- */

/* A validated copy of one leaf. */
struct snap {
	unsigned n;
	struct leaf *next;
	uint64_t val[LEAF_CAP];
	uint8_t len[LEAF_CAP];
	unsigned char key[LEAF_CAP][INDEX_KEY_MAX];
};

static void leaf_snapshot(index_t *ix, struct leaf *l, struct snap *s)
{
	for (;;) {
		uint64_t v;
		if (!read_begin(&l->h, &v))
			continue;
		unsigned n = LOAD(&l->h.count);
		if (n > LEAF_CAP)
			continue;
		for (unsigned i = 0; i < n; i++) {
			s->val[i] = LOAD(&l->val[i]);
			s->len[i] = (uint8_t)leaf_key(ix, l, i, s->key[i]);
		}
		s->next = LOAD_ACQ(&l->next);
		s->n = n;
		if (read_valid(&l->h, v))
			return;
	}
}

static struct leaf *scan_first_leaf(index_t *ix, const struct skey *k)
{
	struct path pa;
	while (descend(ix, k, false, &pa) != 0)
		;
	return pa.leaf;
}

int index_scan(index_t *ix, const void *start, unsigned slen, unsigned limit,
	       index_scan_cb cb, void *arg)
{
	struct skey k;
	unsigned char last[INDEX_KEY_MAX];
	unsigned lastlen = 0, visited = 0;
	bool have_last = false;
	struct snap *s;

	if (slen > INDEX_KEY_MAX)
		return LOTUS_ETOOBIG;
	if (limit == 0)
		return 0;
	s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	skey_init(&k, slen ? start : (const void *)"", slen);
	struct leaf *l = scan_first_leaf(ix, &k);
	while (l) {
		leaf_snapshot(ix, l, s);
		for (unsigned i = 0; i < s->n; i++) {
			bool after = have_last ? key_cmp(s->key[i], s->len[i], last, lastlen) > 0
					       : key_cmp(s->key[i], s->len[i], k.b, k.len) >= 0;
			if (!after)
				continue;
			memcpy(last, s->key[i], s->len[i]);
			lastlen = s->len[i];
			have_last = true;
			visited++;
			if (cb(arg, s->key[i], s->len[i], s->val[i]) || visited >= limit)
				goto out;
		}
		l = s->next;
	}
out:
	free(s);
	return (int)visited;
}

size_t index_bytes(const index_t *ix)
{
	return __atomic_load_n(&ix->bytes, __ATOMIC_RELAXED) + index_key_bytes(ix) +
	       sizeof(*ix);
}

size_t index_key_bytes(const index_t *ix)
{
	return __atomic_load_n(&ix->key_bytes, __ATOMIC_RELAXED);
}

bool index_owns_keys(const index_t *ix)
{
	return ix->owned;
}
