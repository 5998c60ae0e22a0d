/*
 * wire.c - encode and check lotus messages (see wire.h for the format).
 *
 * The checker is the only place that trusts nothing: it walks the whole
 * message once, validating every length against the bytes that remain, before
 * any handler looks at an item.  The iterators re-check bounds anyway, so a
 * caller that skipped the check still cannot read past the end.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "net/wire.h"

void wire_buf_init(struct wire_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void wire_buf_free(struct wire_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static int wire_buf_reserve(struct wire_buf *b, size_t more)
{
	if (b->len + more > WIRE_MAX_MSG)
		return -E2BIG;
	if (b->len + more <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	unsigned char *p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int wire_buf_prealloc(struct wire_buf *b, size_t cap)
{
	cap = MIN(cap, (size_t)WIRE_MAX_MSG);
	if (cap <= b->cap)
		return 0;
	unsigned char *p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int wire_buf_begin(struct wire_buf *b, enum wire_type type, uint32_t sender, uint64_t seq)
{
	b->len = 0;
	b->count = 0;
	int rc = wire_buf_reserve(b, sizeof(struct wire_hdr));
	if (rc)
		return rc;
	struct wire_hdr *h = (struct wire_hdr *)b->data;
	memset(h, 0, sizeof(*h));
	h->magic = WIRE_MAGIC;
	h->version = WIRE_VERSION;
	h->type = (uint8_t)type;
	h->sender = sender;
	h->seq = seq;
	b->len = sizeof(*h);
	return 0;
}

/* Append a fixed part, key and value, then pad to 8.  Inlined into each
 * caller, so that the fixed part (a constant size) is a few moves, not a
 * memcpy call: it runs once per request and reply. */
static inline __attribute__((always_inline)) void *
wire_buf_put(struct wire_buf *b, const void *fixed, size_t flen, const void *key, size_t klen,
	     const void *value, size_t vlen, int *rc)
{
	size_t total = wire_pad8(flen + klen + vlen);
	*rc = wire_buf_reserve(b, total);
	if (*rc)
		return NULL;
	unsigned char *p = b->data + b->len;
	/* the padding (under 8 bytes, so all in the item's last word): zero
	 * that word first (total >= flen >= 8); the bytes copied below, or the
	 * value an in-place caller writes, overwrite what is not padding */
	memset(p + total - 8, 0, 8);
	memcpy(p, fixed, flen);
	if (klen)
		memcpy(p + flen, key, klen);
	if (vlen && value)
		memcpy(p + flen + klen, value, vlen);
	b->len += total;
	b->count++;
	return p + flen + klen;
}

/* hdr.count is 16 bits: a message holds at most UINT16_MAX items. */
static int wire_buf_item_room(const struct wire_buf *b)
{
	return b->count < UINT16_MAX ? 0 : -E2BIG;
}

int wire_buf_add_req(struct wire_buf *b, const struct wire_req *r, const void *key,
		     const void *value)
{
	int rc = wire_buf_item_room(b);
	if (rc)
		return rc;
	wire_buf_put(b, r, sizeof(*r), key, r->key_len, value, r->value_len, &rc);
	return rc;
}

int wire_buf_add_rep(struct wire_buf *b, const struct wire_rep *r, const void *key,
		     const void *value)
{
	int rc = wire_buf_item_room(b);
	if (rc)
		return rc;
	wire_buf_put(b, r, sizeof(*r), key, r->key_len, value, r->value_len, &rc);
	return rc;
}

void *wire_buf_add_rep_inplace(struct wire_buf *b, const struct wire_rep *r, const void *key)
{
	int rc;
	if (wire_buf_item_room(b))
		return NULL;
	return wire_buf_put(b, r, sizeof(*r), key, r->key_len, NULL, r->value_len, &rc);
}

int wire_buf_append_write(struct wire_buf *b, const struct wire_write *w, const void *key,
			  const void *value)
{
	int rc;
	wire_buf_put(b, w, sizeof(*w), key, w->key_len, value, w->value_len, &rc);
	return rc;
}

int wire_buf_append_row(struct wire_buf *b, const struct wire_row *row, const void *key,
			const void *value)
{
	int rc;
	wire_buf_put(b, row, sizeof(*row), key, row->key_len, value, row->value_len, &rc);
	return rc;
}

size_t wire_buf_end(struct wire_buf *b)
{
	struct wire_hdr *h = (struct wire_hdr *)b->data;
	h->count = (uint16_t)b->count;
	h->length = (uint32_t)b->len;
	return b->len;
}

unsigned char *wire_buf_detach(struct wire_buf *b, size_t *len)
{
	unsigned char *p = b->data;
	*len = b->len;
	memset(b, 0, sizeof(*b));
	return p;
}

/* ---- parsing ------------------------------------------------------------- */

void wire_iter_init(struct wire_iter *it, const void *msg, size_t len)
{
	const struct wire_hdr *h = msg;
	it->p = (const unsigned char *)msg + sizeof(*h);
	it->end = (const unsigned char *)msg + len;
	it->left = h->count;
}

void wire_iter_bytes(struct wire_iter *it, const void *p, size_t len, unsigned count)
{
	it->p = p;
	it->end = (const unsigned char *)p + len;
	it->left = count;
}

/* Take one item of fixed size flen whose key/value lengths are klen/vlen. */
static int wire_take(struct wire_iter *it, size_t flen, const void **fixed,
		     size_t (*lens)(const void *, size_t *), const unsigned char **key,
		     const unsigned char **value)
{
	if (it->left == 0)
		return 0;
	size_t avail = (size_t)(it->end - it->p);
	if (avail < flen)
		return LOTUS_EPROTO;
	size_t vlen, klen = lens(it->p, &vlen);
	if (klen > avail - flen || vlen > avail - flen - klen)
		return LOTUS_EPROTO;
	size_t total = wire_pad8(flen + klen + vlen);
	if (total > avail)
		total = avail; /* the last item's padding may be cut by a sender */
	*fixed = it->p;
	*key = it->p + flen;
	*value = it->p + flen + klen;
	it->p += total;
	it->left--;
	return 1;
}

static size_t req_lens(const void *p, size_t *vlen)
{
	struct wire_req r;
	memcpy(&r, p, sizeof(r));   /* p may be misaligned (COMMIT writes) */
	*vlen = r.value_len;
	return r.key_len;
}

static size_t rep_lens(const void *p, size_t *vlen)
{
	struct wire_rep r;
	memcpy(&r, p, sizeof(r));   /* p may be misaligned (COMMIT writes) */
	*vlen = r.value_len;
	return r.key_len;
}

static size_t write_lens(const void *p, size_t *vlen)
{
	struct wire_write w;
	memcpy(&w, p, sizeof(w));   /* p may be misaligned (COMMIT writes) */
	*vlen = w.value_len;
	return w.key_len;
}

static size_t row_lens(const void *p, size_t *vlen)
{
	struct wire_row w;
	memcpy(&w, p, sizeof(w));   /* p may be misaligned (COMMIT writes) */
	*vlen = w.value_len;
	return w.key_len;
}

int wire_next_req(struct wire_iter *it, const struct wire_req **r, const unsigned char **key,
		  const unsigned char **value)
{
	return wire_take(it, sizeof(**r), (const void **)r, req_lens, key, value);
}

int wire_next_rep(struct wire_iter *it, const struct wire_rep **r, const unsigned char **key,
		  const unsigned char **value)
{
	return wire_take(it, sizeof(**r), (const void **)r, rep_lens, key, value);
}

int wire_next_write(struct wire_iter *it, const struct wire_write **w, const unsigned char **key,
		    const unsigned char **value)
{
	return wire_take(it, sizeof(**w), (const void **)w, write_lens, key, value);
}

int wire_next_row(struct wire_iter *it, const struct wire_row **row, const unsigned char **key,
		  const unsigned char **value)
{
	return wire_take(it, sizeof(**row), (const void **)row, row_lens, key, value);
}

/* COMMIT's value must be a well-formed list of writes that exactly fills it. */
static int wire_check_writes(const unsigned char *v, size_t len, uint64_t count)
{
	struct wire_iter it;
	const struct wire_write *w;
	const unsigned char *k, *val;
	int rc;
	if (count > len / sizeof(struct wire_write))
		return LOTUS_EPROTO;
	wire_iter_bytes(&it, v, len, (unsigned)count);
	while ((rc = wire_next_write(&it, &w, &k, &val)) == 1) {
		struct wire_write wc;
		memcpy(&wc, w, sizeof(wc));   /* writes follow the key: maybe misaligned */
		if (wc.key_len == 0 || wc.key_len > 128)
			return LOTUS_EPROTO;
		if (wc.op != OP_READ_X && wc.op != OP_LOCK_X && wc.op != OP_INSERT &&
		    wc.op != OP_DELETE)
			return LOTUS_EPROTO;
	}
	return rc < 0 ? rc : 0;
}

static int wire_check_req(const struct wire_req *r, const unsigned char *value)
{
	if (r->op == 0 || r->op >= OP_MAX)
		return LOTUS_EPROTO;
	switch (r->op) {
	case OP_COMMIT:
		return wire_check_writes(value, r->value_len, r->arg);
	case OP_PREPARE:
		return r->arg == 0 ? LOTUS_EPROTO : wire_check_writes(value, r->value_len, r->arg);
	case OP_ABORT:
	case OP_STATS:
	case OP_TXN_STATUS:
	case OP_BACKUP_HOLD:
	case OP_BACKUP_MARK:
	case OP_BACKUP_BEGIN:
	case OP_BACKUP_END:   /* a key or value is ignored; READ's key: the default */
	case OP_REPL_HELLO:
	case OP_REPL_SHIP:
		return 0;
	case OP_CREATE_TABLE:
		return r->key_len == 0 || r->key_len > 64 ? LOTUS_EPROTO : 0;
	default:
		return r->key_len == 0 || r->key_len > 128 ? LOTUS_EPROTO : 0;
	}
}

int wire_msg_check(const void *msg, size_t len)
{
	const struct wire_hdr *h = msg;
	struct wire_iter it;
	const unsigned char *k, *v;
	int rc;

	if (len < sizeof(*h) || h->magic != WIRE_MAGIC)
		return LOTUS_EPROTO;
	if (h->version != WIRE_VERSION)
		return LOTUS_EVERSION;
	if (h->length != len || h->type == 0 || h->type >= WIRE_TYPE_MAX)
		return LOTUS_EPROTO;
	wire_iter_init(&it, msg, len);
	if (h->type == WIRE_REQ) {
		const struct wire_req *r;
		while ((rc = wire_next_req(&it, &r, &k, &v)) == 1)
			if ((rc = wire_check_req(r, v)) != 0)
				return rc;
	} else if (h->type == WIRE_REP) {
		const struct wire_rep *r;
		while ((rc = wire_next_rep(&it, &r, &k, &v)) == 1)
			;
	} else {
		rc = h->count == 0 ? 0 : LOTUS_EPROTO;
	}
	if (rc < 0)
		return rc;
	return it.p == it.end ? 0 : LOTUS_EPROTO;
}

const char *wire_type_name(unsigned type)
{
	static const char *names[] = { "none", "req", "rep", "error", "hello", "ping", "pong" };
	return type < ARRAY_SIZE(names) ? names[type] : "unknown";
}

const char *wire_op_name(unsigned op)
{
	static const char *names[] = { "none", "read", "read_x", "lock_x", "insert", "delete",
				       "scan", "commit", "abort", "create_table", "stats",
				       "writeback", "txn_status", "prepare", "os_attach",
				       "backup_hold", "backup_mark", "backup_begin", "backup_read",
				       "backup_end" };
	return op < ARRAY_SIZE(names) ? names[op] : "unknown";
}
