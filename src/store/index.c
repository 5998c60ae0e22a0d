/*
 * index.c - a concurrent B+tree with optimistic lock coupling (OLC).
 *
 * Layout.  Inner nodes hold up to INNER_CAP full separator keys (fixed
 * 128-byte key slots; inner nodes are ~1/50 of the nodes, so this costs
 * little) and INNER_CAP+1 children: child i holds the keys k with
 * sep[i-1] <= k < sep[i].  Leaves hold up to LEAF_CAP entries of
 * {8-byte key prefix, key length, value} (17 bytes each) and a pointer to the
 * right sibling.  Two keys with equal prefixes compare by length when either is
 * at most 8 bytes long; otherwise the full key of the entry is fetched through
 * index_key_fn (the record slot holds it).  Keys are ordered memcmp-then-length.
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
 *     (relaxed; child/next/root pointers release/acquire so that a new node's
 *     initialisation is visible), so the optimistic races are data-race-free.
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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "store/index.h"

#define LEAF_CAP   64
#define INNER_CAP  63
#define KEY_WORDS  (INDEX_KEY_MAX / 8)
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

struct leaf {
	struct node h;
	struct leaf *next;             /* right sibling, NULL for the last */
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

struct index {
	struct node *root;
	index_key_fn key_fn;
	void *ctx;
	size_t bytes;
};

/* A search key with its prefix precomputed. */
struct skey {
	const unsigned char *b;
	unsigned len;
	uint64_t pfx;
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

static inline int key_cmp(const unsigned char *a, unsigned alen,
			  const unsigned char *b, unsigned blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);
	if (c)
		return c;
	return (alen > blen) - (alen < blen);
}

static void skey_init(struct skey *k, const void *b, unsigned len)
{
	k->b = b;
	k->len = len;
	k->pfx = key_prefix(b, len);
}

/* Full key of a leaf entry into buf (INDEX_KEY_MAX bytes); returns length. */
static unsigned entry_key(index_t *ix, uint64_t pfx, unsigned len, uint64_t val,
			  unsigned char *buf)
{
	if (len <= 8) {
		uint64_t x = be_to_host(pfx);
		memcpy(buf, &x, len);
		return len;
	}
	unsigned n = ix->key_fn(ix->ctx, val, buf);
	return n > INDEX_KEY_MAX ? INDEX_KEY_MAX : n;
}

/* Compare a search key with leaf entry {pfx, len, val}. */
static int entry_cmp(index_t *ix, const struct skey *k, uint64_t pfx, unsigned len,
		     uint64_t val)
{
	if (k->pfx != pfx)
		return k->pfx < pfx ? -1 : 1;
	if (k->len <= 8 || len <= 8)
		return (k->len > len) - (k->len < len);
	unsigned char buf[INDEX_KEY_MAX];
	unsigned n = entry_key(ix, pfx, len, val, buf);
	return key_cmp(k->b, k->len, buf, n);
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
	struct leaf *l = calloc(1, sizeof(*l));
	if (l) {
		l->h.is_leaf = 1;
		__atomic_fetch_add(&ix->bytes, sizeof(*l), __ATOMIC_RELAXED);
	}
	return l;
}

static struct inner *inner_new(index_t *ix)
{
	struct inner *in = calloc(1, sizeof(*in));
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
		int c = entry_cmp(ix, k, LOAD(&l->pfx[mid]), LOAD(&l->len[mid]),
				  LOAD(&l->val[mid]));
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

static void leaf_set(struct leaf *l, unsigned i, uint64_t pfx, unsigned len, uint64_t val)
{
	STORE(&l->pfx[i], pfx);
	STORE(&l->len[i], (uint8_t)len);
	STORE(&l->val[i], val);
}

/* Insert at pos; caller holds the write lock and checked there is room. */
static void leaf_insert_at(struct leaf *l, unsigned pos, const struct skey *k, uint64_t val)
{
	unsigned n = l->h.count;
	for (unsigned i = n; i > pos; i--)
		leaf_set(l, i, l->pfx[i - 1], l->len[i - 1], l->val[i - 1]);
	leaf_set(l, pos, k->pfx, k->len, val);
	STORE(&l->h.count, (uint16_t)(n + 1));
}

static void leaf_remove_at(struct leaf *l, unsigned pos)
{
	unsigned n = l->h.count;
	for (unsigned i = pos; i + 1 < n; i++)
		leaf_set(l, i, l->pfx[i + 1], l->len[i + 1], l->val[i + 1]);
	STORE(&l->h.count, (uint16_t)(n - 1));
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

/* k < separator i?  The separator's first word holds its first 8 bytes
 * zero-padded, like a prefix: if the prefixes differ they decide (as
 * entry_cmp), and if either key has at most 8 bytes the length does; only
 * longer keys with equal prefixes are copied out and compared in full. */
static inline bool key_below_sep(const struct inner *in, unsigned i, const struct skey *k)
{
	uint64_t sp = be_to_host(LOAD(&in->key[i][0]));
	if (k->pfx != sp)
		return k->pfx < sp;
	unsigned len = LOAD(&in->klen[i]);
	if (k->len <= 8 || len <= 8)
		return k->len < len;
	unsigned char buf[INDEX_KEY_MAX];
	len = inner_key(in, i, buf);
	return key_cmp(k->b, k->len, buf, len) < 0;
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
	unsigned n = l->h.count, mid = ins_pos >= n ? n - LEAF_CAP / 8 : n / 2;
	for (unsigned i = mid; i < n; i++) {
		r->pfx[i - mid] = l->pfx[i];
		r->len[i - mid] = l->len[i];
		r->val[i - mid] = l->val[i];
	}
	r->h.count = (uint16_t)(n - mid);
	r->next = l->next;
	STORE_REL(&l->next, r);
	STORE(&l->h.count, (uint16_t)mid);
	*seplen = entry_key(ix, r->pfx[0], r->len[0], r->val[0], sep);
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

int index_create(index_key_fn key_fn, void *ctx, index_t **out)
{
	index_t *ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->key_fn = key_fn;
	ix->ctx = ctx;
	struct leaf *root = leaf_new(ix);
	if (!root) {
		free(ix);
		return -ENOMEM;
	}
	ix->root = &root->h;
	*out = ix;
	return 0;
}

static void node_free(struct node *n)
{
	if (!n->is_leaf) {
		struct inner *in = (struct inner *)n;
		for (unsigned i = 0; i <= in->h.count; i++)
			node_free(in->child[i]);
	}
	free(n);
}

void index_destroy(index_t *ix)
{
	if (!ix)
		return;
	node_free(ix->root);
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

static int insert_try(index_t *ix, const struct skey *k, uint64_t val, uint64_t *old)
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
		leaf_insert_at(l, pos, k, val);
		rc = 0;
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
	while ((rc = insert_try(ix, &k, val, old)) == RESTART)
		;
	return rc;
}

/* Update (del = false) or delete the entry of k under the leaf's lock. */
static int modify_try(index_t *ix, const struct skey *k, bool del, uint64_t val,
		      uint64_t *old)
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
			leaf_remove_at(l, pos);
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
	while ((rc = modify_try(ix, &k, false, val, old)) == RESTART)
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
	while ((rc = modify_try(ix, &k, true, 0, old)) == RESTART)
		;
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
			unsigned len = LOAD(&l->len[i]);
			uint64_t val = LOAD(&l->val[i]);
			s->len[i] = (uint8_t)entry_key(ix, LOAD(&l->pfx[i]), len, val, s->key[i]);
			s->val[i] = val;
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
	return __atomic_load_n(&ix->bytes, __ATOMIC_RELAXED) + sizeof(*ix);
}
