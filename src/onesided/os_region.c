/*
 * os_region.c - build, grow and publish the one-sided regions (os_region.h).
 *
 * Bulk load: the table's records are scanned in key order (two passes: count,
 * then copy).  Each record is copied into a region record (unlocked, ts 0);
 * leaves take OS_BUILD_FILL entries each and are chained by sibling and fence
 * keys; each upper level is built over the one below until one page remains,
 * the root.  The first chunk is sized for the records plus room for inserts
 * (half as many again, at least OS_BUILD_SPARE); the allocation cursor in
 * its header is where compute servers FAA their new pages and records from.
 *
 * Growth: when a client finds the last chunk full it asks for the next one
 * (os_regions_attach with grow_from = the chunks it knows).  A new chunk is
 * as large as the table's chunks so far together (so n records take
 * O(log n) chunks), between OS_CHUNK_MIN and OS_CHUNK_MAX, and all the
 * regions of a server together stay within its budget (the server's
 * memory).  Its header (magic, cursor, end) is written before the reply
 * names it; from then on only the clients' FAA moves its cursor.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>
#include "common/common.h"
#include "common/vec.h"
#include "common/log.h"
#include "lotus.h"
#include "onesided/os_layout.h"
#include "onesided/os_region.h"

#define OS_MAX_TABLES  256
#define OS_BUILD_FILL  45        /* entries per page at build: 3/4 of 60 */
#define OS_BUILD_SPARE 4096      /* records' room for inserts, at least */
#define OS_CHUNK_MIN   (16ULL << 20)
#define OS_CHUNK_MAX   (1ULL << 30)

struct os_chunk {
	ucp_mem_h memh;
	unsigned char *base;
	size_t size;
	void *rkey;
	size_t rkey_len;
};

struct os_region {
	uint32_t value_max;
	unsigned nchunks;
	struct os_chunk ch[OS_MAX_CHUNKS];
};

struct os_regions {
	ucp_context_h ucp;
	store_t *st;
	uint64_t budget, used;    /* bytes of every region's chunks (budget 0: none) */
	pthread_mutex_t mu;
	struct os_region *tab[OS_MAX_TABLES];
};

int os_regions_create(net_ctx_t *net, store_t *st, uint64_t budget, os_regions_t **out)
{
	os_regions_t *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->ucp = net_ctx_ucp(net);
	r->st = st;
	r->budget = budget;
	pthread_mutex_init(&r->mu, NULL);
	*out = r;
	return 0;
}

static void chunk_free(ucp_context_h ucp, struct os_chunk *c)
{
	if (c->rkey)
		ucp_rkey_buffer_release(c->rkey);
	if (c->memh)
		ucp_mem_unmap(ucp, c->memh);
	memset(c, 0, sizeof(*c));
}

static void region_free(os_regions_t *r, struct os_region *g)
{
	for (unsigned i = 0; i < g->nchunks; i++) {
		r->used -= g->ch[i].size;
		chunk_free(r->ucp, &g->ch[i]);
	}
	free(g);
}

void os_regions_free(os_regions_t *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < OS_MAX_TABLES; i++)
		if (r->tab[i])
			region_free(r, r->tab[i]);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* Allocate, register and pack chunk g->ch[g->nchunks] of size bytes, with
 * its header; the caller holds r->mu.  0, LOTUS_ENOSPACE. */
static int chunk_add(os_regions_t *r, struct os_region *g, size_t size)
{
	if (g->nchunks == OS_MAX_CHUNKS || (r->budget && r->used + size > r->budget)) {
		log_error("onesided: no room for a %zu-byte region chunk (%u chunks; %llu of "
			  "%llu bytes of the server's memory in regions)", size, g->nchunks,
			  (unsigned long long)r->used, (unsigned long long)r->budget);
		return LOTUS_ENOSPACE;
	}
	struct os_chunk *c = &g->ch[g->nchunks];
	ucp_mem_map_params_t mp = {
		.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
		.length = size,
		.flags = UCP_MEM_MAP_ALLOCATE,
	};
	ucs_status_t st = ucp_mem_map(r->ucp, &mp, &c->memh);
	ucp_mem_attr_t ma = { .field_mask = UCP_MEM_ATTR_FIELD_ADDRESS |
					    UCP_MEM_ATTR_FIELD_LENGTH };
	if (st == UCS_OK)
		st = ucp_mem_query(c->memh, &ma);
	if (st == UCS_OK)
		st = ucp_rkey_pack(r->ucp, c->memh, &c->rkey, &c->rkey_len);
	if (st != UCS_OK) {
		log_error("onesided: cannot allocate a %zu-byte region chunk: %s", size,
			  ucs_status_string(st));
		chunk_free(r->ucp, c);
		return LOTUS_ENOSPACE;
	}
	c->base = ma.address;
	c->size = ma.length;
	struct os_region_hdr *h = (struct os_region_hdr *)c->base;
	memset(h, 0, sizeof(*h));
	h->magic = g->nchunks ? OS_CHUNK_MAGIC : OS_MAGIC;
	h->value_max = g->value_max;
	h->alloc = (uint64_t)(uintptr_t)c->base + OS_PAGE_SIZE;
	h->end = (uint64_t)(uintptr_t)c->base + c->size;
	r->used += c->size;
	g->nchunks++;
	return 0;
}

/* The next chunk's size: the table's chunks so far together, within bounds. */
static size_t chunk_next_size(const struct os_region *g)
{
	uint64_t total = 0;
	for (unsigned i = 0; i < g->nchunks; i++)
		total += g->ch[i].size;
	uint64_t least = OS_PAGE_SIZE * 2 + os_rec_size(g->value_max) * 64;
	return (size_t)MAX(MIN(MAX(total, OS_CHUNK_MIN), OS_CHUNK_MAX), least);
}

/* ---- bulk build ------------------------------------------------------------ */

struct build {
	store_t *st;
	uint16_t table;
	struct os_region *g;
	struct os_region_hdr *hdr;
	uint64_t n;               /* records seen */
	int bad_key;              /* 1 not 8 bytes, 2 no space, 3 store error err */
	int err;
	uint64_t *leaves;         /* addresses of the leaves, in order */
	uint64_t nleaves;
	size_t cap_leaves;
	struct os_page *leaf;     /* being filled */
};

static void *bump(struct build *b, uint64_t bytes)
{
	uint64_t a = b->hdr->alloc;
	if (a + bytes > b->hdr->end)
		return NULL;
	b->hdr->alloc = a + bytes;
	return (void *)(uintptr_t)a;
}

static int count_cb(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc)
{
	struct build *b = arg;
	(void)key;
	(void)loc;
	if (klen != 8)
		b->bad_key = 1;
	b->n++;
	return b->bad_key;
}

static struct os_page *new_page(struct build *b, uint16_t level, uint64_t low)
{
	struct os_page *p = bump(b, OS_PAGE_SIZE);
	if (!p)
		return NULL;
	memset(p, 0, sizeof(*p));
	p->level = level;
	p->low = low;
	p->high = OS_KEY_INF;
	return p;
}

static int leaf_push(struct build *b, uint64_t key)
{
	if (vec_reserve(b->leaves, b->cap_leaves, b->nleaves + 1, 64))
		return -ENOMEM;
	struct os_page *p = new_page(b, 0, b->leaf ? key : 0);
	if (!p)
		return LOTUS_ENOSPACE;
	if (b->leaf) {
		b->leaf->high = key;
		b->leaf->sibling = (uint64_t)(uintptr_t)p;
	}
	b->leaf = p;
	b->leaves[b->nleaves++] = (uint64_t)(uintptr_t)p;
	return 0;
}

static int copy_rec(struct build *b, const unsigned char *key, const struct store_rec *sr);

static int copy_cb(void *arg, const unsigned char *key, uint16_t klen, store_loc_t loc)
{
	struct build *b = arg;
	struct store_rec *sr;
	if (klen != 8)
		return 0;
	int rc = store_rec_get(b->st, loc, b->table, NULL, 0, &sr);
	if (rc == LOTUS_ENOTFOUND)
		return 0;
	if (rc) {                  /* a page could not be read in (tiered store) */
		b->bad_key = 3;
		b->err = rc;
		return 1;
	}
	rc = copy_rec(b, key, sr);
	store_rec_put(b->st, loc);
	return rc;
}

/* copy_cb's work on the pinned record sr of an 8-byte key. */
static int copy_rec(struct build *b, const unsigned char *key, const struct store_rec *sr)
{
	uint64_t k = os_key_u64(key);
	if ((!b->leaf || b->leaf->count == OS_BUILD_FILL) && leaf_push(b, k) != 0) {
		b->bad_key = 2;
		return 1;
	}
	struct os_rec_hdr *rec = bump(b, os_rec_size(b->g->value_max));
	if (!rec) {
		b->bad_key = 2;
		return 1;
	}
	uint32_t vlen = MIN(sr->value_len, b->g->value_max);
	rec->lock = 0;
	rec->ts = 0;
	rec->len = vlen;
	memcpy(rec + 1, store_rec_value((struct store_rec *)sr), vlen);
	b->leaf->e[b->leaf->count].key = k;
	b->leaf->e[b->leaf->count].ptr = (uint64_t)(uintptr_t)rec;
	b->leaf->count++;
	b->n++;
	return 0;
}

/* Build the levels above pages[0..n) (their lows in order) up to one root. */
static int build_upper(struct build *b, uint64_t *pages, uint64_t n, uint16_t level)
{
	while (n > 1) {
		uint64_t m = 0;
		struct os_page *parent = NULL;
		level++;
		for (uint64_t i = 0; i < n; i++) {
			uint64_t caddr = pages[i];   /* pages[m] below may be pages[i] */
			struct os_page *child = (struct os_page *)(uintptr_t)caddr;
			if (!parent || parent->count == OS_BUILD_FILL) {
				struct os_page *p = new_page(b, level, parent ? child->low : 0);
				if (!p)
					return LOTUS_ENOSPACE;
				if (parent) {
					parent->high = child->low;
					parent->sibling = (uint64_t)(uintptr_t)p;
				}
				parent = p;
				pages[m++] = (uint64_t)(uintptr_t)p;   /* m <= i: in place */
			}
			parent->e[parent->count].key = parent->count ? child->low : parent->low;
			parent->e[parent->count].ptr = caddr;
			parent->count++;
		}
		n = m;
	}
	b->hdr->root = pages[0];
	return 0;
}

static int region_build(os_regions_t *r, uint16_t table, struct os_region **out)
{
	uint32_t vmax = store_table_max_value(r->st, table);
	if (!vmax)
		return LOTUS_ENOTABLE;
	struct build b = { .st = r->st, .table = table };
	store_scan(r->st, table, "", 0, UINT32_MAX, count_cb, &b);
	if (b.bad_key)
		return LOTUS_EUNSUPPORTED;
	uint64_t nrec = b.n + MAX(b.n / 2, OS_BUILD_SPARE);
	uint64_t npages = 2 * nrec / (OS_PAGE_ENTRIES / 2) + 64;
	size_t size = OS_PAGE_SIZE + npages * OS_PAGE_SIZE + nrec * os_rec_size(vmax);

	struct os_region *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->value_max = vmax;
	int rc = chunk_add(r, g, size);
	if (rc) {
		free(g);
		return rc;
	}
	b.g = g;
	b.hdr = (struct os_region_hdr *)g->ch[0].base;
	b.n = 0;
	store_scan(r->st, table, "", 0, UINT32_MAX, copy_cb, &b);
	rc = b.bad_key == 3 ? b.err : b.bad_key ? LOTUS_ENOSPACE : 0;
	if (rc == 0 && !b.leaf)
		rc = leaf_push(&b, 0);
	b.hdr->records = b.n;
	if (rc == 0)
		rc = build_upper(&b, b.leaves, b.nleaves, 0);
	free(b.leaves);
	if (rc) {
		region_free(r, g);
		return rc;
	}
	log_info("onesided: table %u: region of %zu bytes, %llu records", table, g->ch[0].size,
		 (unsigned long long)b.n);
	*out = g;
	return 0;
}

int os_regions_attach(os_regions_t *r, uint16_t table, uint32_t grow_from, void **info,
		      size_t *len)
{
	if (table >= OS_MAX_TABLES)
		return LOTUS_EUNSUPPORTED;
	int rc = 0;
	pthread_mutex_lock(&r->mu);
	if (!r->tab[table])
		rc = region_build(r, table, &r->tab[table]);
	struct os_region *g = r->tab[table];
	/* the asker knows every chunk and found the last one full: add one (the
	 * others who found it full too ask with the old count and get this one) */
	if (rc == 0 && grow_from && grow_from == g->nchunks) {
		rc = chunk_add(r, g, chunk_next_size(g));
		if (rc == 0)
			log_info("onesided: table %u: chunk %u of %zu bytes", table,
				 g->nchunks - 1, g->ch[g->nchunks - 1].size);
	}
	size_t n = sizeof(struct os_attach_info);
	unsigned nch = g ? g->nchunks : 0;
	for (unsigned i = 0; i < nch; i++)
		n += sizeof(struct os_chunk_info) + g->ch[i].rkey_len;
	struct os_attach_info *ai = rc ? NULL : malloc(n);
	if (!rc && !ai)
		rc = -ENOMEM;
	if (rc == 0) {
		ai->value_max = g->value_max;
		ai->nchunks = nch;
		unsigned char *p = (unsigned char *)(ai + 1);
		for (unsigned i = 0; i < nch; i++) {
			struct os_chunk_info ci = { .base = (uint64_t)(uintptr_t)g->ch[i].base,
						    .size = g->ch[i].size,
						    .rkey_len = (uint32_t)g->ch[i].rkey_len };
			memcpy(p, &ci, sizeof(ci));
			memcpy(p + sizeof(ci), g->ch[i].rkey, g->ch[i].rkey_len);
			p += sizeof(ci) + g->ch[i].rkey_len;
		}
	}
	pthread_mutex_unlock(&r->mu);
	if (rc)
		return rc;
	*info = ai;
	*len = n;
	return 0;
}

int os_regions_header(os_regions_t *r, uint16_t table, const struct os_region_hdr **hdr,
		      uint32_t *value_max)
{
	if (table >= OS_MAX_TABLES)
		return LOTUS_EUNSUPPORTED;
	int rc = 0;
	pthread_mutex_lock(&r->mu);
	if (!r->tab[table])
		rc = region_build(r, table, &r->tab[table]);
	if (rc == 0) {
		*hdr = (const struct os_region_hdr *)r->tab[table]->ch[0].base;
		*value_max = r->tab[table]->value_max;
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}
