/*
 * serve_types.c - Redis's data types, expiry and WATCH on lotus rows.
 *
 * The encoding (as Kvrocks, Pika and Titan put Redis on an ordered store):
 *
 *   table T (--table), one row per Redis key: its METADATA
 *     raw bytes not starting with HDR_MAGIC   a string without TTL written by
 *                                             an older serve (read as is)
 *     HDR_MAGIC type stamp expire exptag      a string: its bytes follow
 *     ... id size head tail                   a hash, list, set or sorted set
 *   table T.sub: the members, under the container's id (8 bytes, big-endian)
 *     id 'h' field -> value                   hash
 *     id 's' member -> ""                     set
 *     id 'z' member -> score (8 bytes)        sorted set, by member
 *     id 'i' score(8, ordered) member -> ""   sorted set, by score (the index)
 *     id 'l' index(8, ordered) -> chunk       list: chunks of up to LIST_CHUNK
 *                                             bytes of [u32 len][bytes] items,
 *                                             indexes head..tail, none empty
 *
 * Invariants: a container in T always has size >= 1 (the last member removed
 * deletes its metadata); its id is new each time it is created (a write
 * stamp), so rows of an earlier container of the same name are never seen.
 * Every write of serve gives the key a new stamp (unique: a counter started
 * from the clock at start, with the compute id on top).  WATCH compares
 * lotus's record versions of the metadata rows (every change of a key
 * rewrites its row), never the values, so no ABA; the stamp is its fallback
 * where a read has no version.
 *
 * DEL, RENAME over, FLUSHDB and a container's last member delete its rows
 * synchronously, in the same transaction (so a DEL costs a row per member).
 * A SET or MSET over a container does not read it (SET stays one write), so
 * its member rows are left behind, never visible (new ids), until FLUSHDB.
 *
 * Expiry: `expire` is a wall-clock time in ms (CLOCK_REALTIME of the serve
 * that set it).  A key past it reads as missing everywhere (lazy), and a
 * write over it replaces it.  An expiry index, table T.exp (in time order,
 * see xkey), lets a background sweep delete due keys without a full scan.
 * With several serves on one cluster their clocks must agree (NTP): each
 * decides by its own clock.
 *
 * Every command is one lotus transaction with the others of its job; reads of
 * members go through ov_get/ov_scan (serve_data.c), which run the job again
 * in further passes until all it needs is read.
 */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "serve/serve_int.h"
#include "serve/serve_types.h"

#define HDR_MAGIC "\xffLt1"
#define HDR_STR 29             /* magic 4, type 1, stamp 8, expire 8, exptag 8 */
#define HDR_BOX (HDR_STR + 32) /* + id, size, head, tail */
#define LIST_CHUNK 1024
#define SCAN_ALL (1u << 20)    /* KEYS, FLUSHDB: rows per scan */

static const char WRONGTYPE[] = "WRONGTYPE Operation against a key holding the wrong kind "
				"of value";

struct meta {
	int type;
	int fresh;             /* made in this pass: its rows cannot exist */
	uint64_t stamp;
	int64_t expire;        /* ms since the epoch, 0: none */
	uint64_t exptag;       /* names its expiry-index row (0: a new expiry) */
	uint64_t id;
	int64_t size, head, tail;
	const char *sval;      /* a string's bytes */
	size_t slen;
};

/* Fixed-width integers in the stored headers: little-endian (put64, get64)
 * and big-endian (ordered keys); one load or store each. */
static void put64(char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint64_t get64(const char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}

static void put64be(char *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static uint64_t get64be(const char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return be64toh(v);
}

int64_t types_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t new_stamp(struct server *sv)
{
	return atomic_fetch_add(&sv->stamp_seq, 1);
}

/* The type of a stored value (expiry not looked at). */
static int meta_decode(const char *v, size_t n, struct meta *m)
{
	memset(m, 0, sizeof(*m));
	if (n < HDR_STR || memcmp(v, HDR_MAGIC, 4) || (unsigned char)v[4] > T_ZSET ||
	    ((unsigned char)v[4] != T_STRING && n < HDR_BOX)) {
		m->type = T_STRING;    /* an older serve's string */
		m->sval = v;
		m->slen = n;
		return T_STRING;
	}
	m->type = (unsigned char)v[4];
	m->stamp = get64(v + 5);
	m->expire = (int64_t)get64(v + 13);
	m->exptag = get64(v + 21);
	if (m->type == T_STRING) {
		m->sval = v + HDR_STR;
		m->slen = n - HDR_STR;
	} else {
		m->id = get64(v + HDR_STR);
		m->size = (int64_t)get64(v + HDR_STR + 8);
		m->head = (int64_t)get64(v + HDR_STR + 16);
		m->tail = (int64_t)get64(v + HDR_STR + 24);
	}
	return m->type;
}

int types_row_live(struct server *sv, const void *v, size_t n, int *type)
{
	struct meta m;
	*type = meta_decode(v, n, &m);
	return !m.expire || m.expire > types_now_ms();
}

const char *types_name(int type)
{
	static const char *const names[] = { "string", "hash", "list", "set", "zset" };
	return type >= 0 && type <= T_ZSET ? names[type] : "none";
}

int types_type_of(const struct resp_arg *name)
{
	for (int t = T_STRING; t <= T_ZSET; t++)
		if (resp_arg_is(name, types_name(t)))
			return t;
	return -1;
}

/* The live metadata of argument i: T_NONE if missing or expired. */
static int meta_get(struct job *j, unsigned ci, unsigned i, struct meta *m)
{
	const char *v;
	size_t n;
	if (!kv_get(j, ci, i, &v, &n)) {
		memset(m, 0, sizeof(*m));
		return m->type = T_NONE;
	}
	meta_decode(v, n, m);
	if (m->expire && m->expire <= types_now_ms()) {
		memset(m, 0, sizeof(*m));
		m->type = T_NONE;
	}
	return m->type;
}

/* The expiry index: rows 0^8 'e' expire(8, big-endian) exptag(8) -> key in
 * table T.exp, in time order.  A key's row is written with
 * its metadata whenever it has an expiry; a row whose key changed its expiry
 * since (another exptag) is stale and only dropped by the sweep. */
#define XKEY_LEN 25
static size_t xkey(char *out, int64_t expire, uint64_t tag)
{
	memset(out, 0, 8);
	out[8] = 'e';
	put64be(out + 9, (uint64_t)expire);
	put64be(out + 17, tag);
	return XKEY_LEN;
}

/* Store m (a new stamp) as argument i's row. */
static int meta_put(struct job *j, unsigned ci, unsigned i, struct meta *m)
{
	char hdr[HDR_BOX];
	memcpy(hdr, HDR_MAGIC, 4);
	hdr[4] = (char)m->type;
	m->stamp = new_stamp(job_server(j));
	if (m->expire && !m->exptag)
		m->exptag = m->stamp;
	if (!m->expire)
		m->exptag = 0;
	put64(hdr + 5, m->stamp);
	put64(hdr + 13, (uint64_t)m->expire);
	put64(hdr + 21, m->exptag);
	if (m->expire) {
		char xk[XKEY_LEN];
		struct resp_arg k = job_arg(j, ci, i);
		if (ov_put(j, TB_EXP, xk, xkey(xk, m->expire, m->exptag), k.p, k.len))
			return -ENOMEM;
	}
	if (m->type != T_STRING) {
		put64(hdr + HDR_STR, m->id);
		put64(hdr + HDR_STR + 8, (uint64_t)m->size);
		put64(hdr + HDR_STR + 16, (uint64_t)m->head);
		put64(hdr + HDR_STR + 24, (uint64_t)m->tail);
		return kv_set(j, ci, i, hdr, HDR_BOX);
	}
	return kv_set2(j, ci, i, hdr, HDR_STR, m->sval, m->slen);
}

int str_get(struct job *j, unsigned ci, unsigned i, const char **v, size_t *n, int64_t *expire)
{
	struct meta m;
	int t = meta_get(j, ci, i, &m);
	if (expire)
		*expire = m.expire;
	if (t == T_NONE)
		return 0;
	if (t != T_STRING)
		return -1;
	*v = m.sval;
	*n = m.slen;
	return 1;
}

int str_set(struct job *j, unsigned ci, unsigned i, const void *v, size_t n, int64_t expire)
{
	struct meta m = { .type = T_STRING, .expire = expire, .sval = v, .slen = n };
	return meta_put(j, ci, i, &m);
}

void put_wrongtype(struct rbuf *b)
{
	resp_error(b, "%s", WRONGTYPE);
}

/* ---- containers ----------------------------------------------------------- */

static size_t skey(char *out, uint64_t id, char kind, const void *f, size_t fn)
{
	put64be(out, id);
	out[8] = kind;
	if (fn)
		memcpy(out + 9, f, fn);
	return 9 + fn;
}

static size_t ckey(char *out, uint64_t id, int64_t idx)
{
	char be[8];
	put64be(be, (uint64_t)idx ^ (1ULL << 63));
	return skey(out, id, 'l', be, 8);
}

static uint64_t score_enc(double d)
{
	uint64_t u;
	if (d == 0)
		d = 0;   /* -0 sorts as 0 */
	memcpy(&u, &d, 8);
	return (u >> 63) ? ~u : u ^ (1ULL << 63);
}

static double score_dec(uint64_t u)
{
	double d;
	u = (u >> 63) ? u ^ (1ULL << 63) : ~u;
	memcpy(&d, &u, 8);
	return d;
}

static size_t ikey(char *out, uint64_t id, double score, const void *m, size_t mn)
{
	char k[8 + KEY_MAX];
	put64be(k, score_enc(score));
	memcpy(k + 8, m, mn);
	return skey(out, id, 'i', k, 8 + mn);
}

/* Argument 1's metadata if it is of type want (or missing): 1, else the
 * WRONGTYPE error and 0. */
static int want_type(struct job *j, unsigned ci, struct meta *m, int want, struct rbuf *b)
{
	int t = meta_get(j, ci, 1, m);
	if (t != T_NONE && t != want) {
		put_wrongtype(b);
		return 0;
	}
	return 1;
}

static void box_new(struct job *j, struct meta *m, int type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->fresh = 1;
	m->id = new_stamp(job_server(j));
	m->tail = -1;
}

/* The container after a change: stored, or deleted once empty. */
static void box_store(struct job *j, unsigned ci, struct meta *m, struct rbuf *b)
{
	int rc = m->size > 0 ? meta_put(j, ci, 1, m) : (kv_del(j, ci, 1), 0);
	if (rc)
		b->oom = 1;
}

static int member_ok(size_t n, size_t extra, struct rbuf *b)
{
	if (n + 9 + extra > KEY_MAX) {
		resp_error(b, "ERR member or field is %zu bytes, over lotus serve's limit of %zu "
			   "bytes for this type", n, (size_t)KEY_MAX - 9 - extra);
		return 0;
	}
	return 1;
}

/* Copy the keys of rows (they may point into buffers a delete moves). */
static char *rows_keys(const struct ov_row *r, int n)
{
	char *k = malloc((size_t)(n > 0 ? n : 1) * (KEY_MAX + 1));
	if (!k)
		return NULL;
	for (int i = 0; i < n; i++) {
		k[i * (KEY_MAX + 1)] = (char)r[i].kn;
		memcpy(k + i * (KEY_MAX + 1) + 1, r[i].k, r[i].kn);
	}
	return k;
}

static int del_prefix(struct job *j, uint64_t id, char kind, int64_t want)
{
	char p[9];
	struct ov_row *r;
	skey(p, id, kind, NULL, 0);
	int n = ov_scan(j, TB_SUB, p, 9, 9, (unsigned)want, &r);
	if (n < 0)
		return n;
	char *ks = rows_keys(r, n);
	free(r);
	if (!ks)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		ov_del(j, TB_SUB, ks + i * (KEY_MAX + 1) + 1,
		       (unsigned char)ks[i * (KEY_MAX + 1)]);
	free(ks);
	return 0;
}

/* Delete a container's rows (not its metadata): 0, OV_PENDING or -ENOMEM. */
static int box_drop(struct job *j, const struct meta *m)
{
	char k[KEY_MAX];
	switch (m->type) {
	case T_HASH:
		return del_prefix(j, m->id, 'h', m->size);
	case T_SET:
		return del_prefix(j, m->id, 's', m->size);
	case T_ZSET: {
		int a = del_prefix(j, m->id, 'z', m->size), c = del_prefix(j, m->id, 'i', m->size);
		return a < 0 ? a : c;
	}
	case T_LIST:
		for (int64_t i = m->head; i <= m->tail; i++)
			ov_del(j, TB_SUB, k, ckey(k, m->id, i));
		return 0;
	default:
		return 0;
	}
}

/* ---- hashes --------------------------------------------------------------- */

static int sub_get(struct job *j, const struct meta *m, char kind, const struct resp_arg *f,
		   const char **v, size_t *n)
{
	char k[KEY_MAX];
	return ov_get(j, TB_SUB, k, skey(k, m->id, kind, f->p, f->len), m->fresh, v, n);
}

static int sub_put(struct job *j, const struct meta *m, char kind, const struct resp_arg *f,
		   const void *v, size_t n)
{
	char k[KEY_MAX];
	return ov_put(j, TB_SUB, k, skey(k, m->id, kind, f->p, f->len), v, n);
}

static int sub_del(struct job *j, const struct meta *m, char kind, const struct resp_arg *f)
{
	char k[KEY_MAX];
	return ov_del(j, TB_SUB, k, skey(k, m->id, kind, f->p, f->len));
}

/* Ask for members from..argc-1 (step apart); 1 if some are not read yet. */
static int sub_need(struct job *j, const struct meta *m, char kind, unsigned ci, unsigned from,
		    unsigned step)
{
	int pend = 0;
	const char *v;
	size_t n;
	for (unsigned a = from; a < job_argc(j, ci); a += step) {
		struct resp_arg f = job_arg(j, ci, a);
		pend |= sub_get(j, m, kind, &f, &v, &n) == OV_PENDING;
	}
	return pend;
}

static int check_fields(struct job *j, unsigned ci, unsigned from, unsigned step, size_t extra,
			struct rbuf *b)
{
	for (unsigned a = from; a < job_argc(j, ci); a += step) {
		struct resp_arg f = job_arg(j, ci, a);
		if (!member_ok(f.len, extra, b))
			return 0;
	}
	return 1;
}

static void hset_generic(struct job *j, unsigned ci, struct rbuf *b, int hmset)
{
	struct meta m;
	const char *v;
	size_t n;
	if ((job_argc(j, ci) % 2) != 0) {
		resp_error(b, "ERR wrong number of arguments for '%s' command",
			   hmset ? "hmset" : "hset");
		return;
	}
	if (!want_type(j, ci, &m, T_HASH, b) || !check_fields(j, ci, 2, 2, 0, b))
		return;
	if (m.type == T_NONE)
		box_new(j, &m, T_HASH);
	if (sub_need(j, &m, 'h', ci, 2, 2))
		return;
	long long added = 0;
	for (unsigned a = 2; a + 1 < job_argc(j, ci); a += 2) {
		struct resp_arg f = job_arg(j, ci, a), val = job_arg(j, ci, a + 1);
		if (sub_get(j, &m, 'h', &f, &v, &n) == 0) {
			added++;
			m.size++;
		}
		if (sub_put(j, &m, 'h', &f, val.p, val.len))
			b->oom = 1;
	}
	box_store(j, ci, &m, b);
	if (hmset)
		resp_simple(b, "OK");
	else
		resp_int(b, added);
}

void run_hset(struct job *j, unsigned ci, struct rbuf *b) { hset_generic(j, ci, b, 0); }
void run_hmset(struct job *j, unsigned ci, struct rbuf *b) { hset_generic(j, ci, b, 1); }

void run_hsetnx(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	struct resp_arg f = job_arg(j, ci, 2), val = job_arg(j, ci, 3);
	if (!want_type(j, ci, &m, T_HASH, b) || !member_ok(f.len, 0, b))
		return;
	if (m.type == T_NONE)
		box_new(j, &m, T_HASH);
	int r = sub_get(j, &m, 'h', &f, &v, &n);
	if (r == OV_PENDING)
		return;
	if (r == 1) {
		resp_int(b, 0);
		return;
	}
	m.size++;
	if (sub_put(j, &m, 'h', &f, val.p, val.len))
		b->oom = 1;
	box_store(j, ci, &m, b);
	resp_int(b, 1);
}

void run_hget(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	struct resp_arg f = job_arg(j, ci, 2);
	if (!want_type(j, ci, &m, T_HASH, b))
		return;
	if (m.type == T_NONE || f.len + 9 > KEY_MAX) {
		resp_null(b);
		return;
	}
	int r = sub_get(j, &m, 'h', &f, &v, &n);
	if (r == 1)
		resp_bulk(b, v, n);
	else if (r == 0)
		resp_null(b);
}

void run_hmget(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	if (!want_type(j, ci, &m, T_HASH, b) || !check_fields(j, ci, 2, 1, 0, b))
		return;
	if (m.type != T_NONE && sub_need(j, &m, 'h', ci, 2, 1))
		return;
	resp_array(b, job_argc(j, ci) - 2);
	for (unsigned a = 2; a < job_argc(j, ci); a++) {
		struct resp_arg f = job_arg(j, ci, a);
		if (m.type != T_NONE && sub_get(j, &m, 'h', &f, &v, &n) == 1)
			resp_bulk(b, v, n);
		else
			resp_null(b);
	}
}

void run_hdel(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	if (!want_type(j, ci, &m, T_HASH, b))
		return;
	if (m.type == T_NONE) {
		resp_int(b, 0);
		return;
	}
	if (!check_fields(j, ci, 2, 1, 0, b) || sub_need(j, &m, 'h', ci, 2, 1))
		return;
	long long gone = 0;
	for (unsigned a = 2; a < job_argc(j, ci); a++) {
		struct resp_arg f = job_arg(j, ci, a);
		if (sub_get(j, &m, 'h', &f, &v, &n) == 1) {
			sub_del(j, &m, 'h', &f);
			gone++;
			m.size--;
		}
	}
	if (gone)
		box_store(j, ci, &m, b);
	resp_int(b, gone);
}

void run_hlen(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	if (want_type(j, ci, &m, T_HASH, b))
		resp_int(b, m.size);
}

void run_hexists(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	struct resp_arg f = job_arg(j, ci, 2);
	if (!want_type(j, ci, &m, T_HASH, b))
		return;
	if (m.type == T_NONE || f.len + 9 > KEY_MAX) {
		resp_int(b, 0);
		return;
	}
	int r = sub_get(j, &m, 'h', &f, &v, &n);
	if (r >= 0)
		resp_int(b, r);
}

void run_hincrby(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	struct resp_arg f = job_arg(j, ci, 2), inc = job_arg(j, ci, 3);
	long long by, cur = 0;
	if (resp_arg_ll(&inc, &by)) {
		resp_error(b, "ERR value is not an integer or out of range");
		return;
	}
	if (!want_type(j, ci, &m, T_HASH, b) || !member_ok(f.len, 0, b))
		return;
	if (m.type == T_NONE)
		box_new(j, &m, T_HASH);
	int r = sub_get(j, &m, 'h', &f, &v, &n);
	if (r == OV_PENDING)
		return;
	if (r == 1) {
		struct resp_arg a = { v, n };
		if (resp_arg_ll(&a, &cur)) {
			resp_error(b, "ERR hash value is not an integer");
			return;
		}
	} else {
		m.size++;
	}
	if ((by > 0 && cur > LLONG_MAX - by) || (by < 0 && cur < LLONG_MIN - by)) {
		resp_error(b, "ERR increment or decrement would overflow");
		return;
	}
	cur += by;
	char s[24];
	int len = snprintf(s, sizeof(s), "%lld", cur);
	if (sub_put(j, &m, 'h', &f, s, (size_t)len))
		b->oom = 1;
	box_store(j, ci, &m, b);
	resp_int(b, cur);
}

/* The rows of a container's members of one kind, or n < 0. */
static int box_rows(struct job *j, const struct meta *m, char kind, struct ov_row **r)
{
	char p[9];
	skey(p, m->id, kind, NULL, 0);
	if (m->type == T_NONE || m->size <= 0) {
		*r = NULL;
		return 0;
	}
	return ov_scan(j, TB_SUB, p, 9, 9, (unsigned)m->size, r);
}

/* HGETALL (what 3), HKEYS (1), HVALS (2), HSCAN (4: [0, fields and values]) */
static void hash_all(struct job *j, unsigned ci, struct rbuf *b, int what)
{
	struct meta m;
	struct ov_row *r;
	struct resp_arg pat = { NULL, 0 };
	if (!want_type(j, ci, &m, T_HASH, b))
		return;
	int n = box_rows(j, &m, 'h', &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	if (what == 4) {
		for (unsigned a = 3; a + 1 < job_argc(j, ci); a += 2) {
			struct resp_arg o = job_arg(j, ci, a);
			if (resp_arg_is(&o, "MATCH"))
				pat = job_arg(j, ci, a + 1);
		}
		resp_array(b, 2);
		resp_bulk_str(b, "0");   /* everything in one reply */
	}
	int hits = 0;
	for (int i = 0; i < n; i++)
		hits += !pat.p || serve_glob(pat.p, pat.len, r[i].k + 9, r[i].kn - 9);
	resp_array(b, (long long)hits * (what >= 3 ? 2 : 1));
	for (int i = 0; i < n; i++) {
		if (pat.p && !serve_glob(pat.p, pat.len, r[i].k + 9, r[i].kn - 9))
			continue;
		if (what & 1 || what == 4)
			resp_bulk(b, r[i].k + 9, r[i].kn - 9);
		if (what & 2 || what == 4)
			resp_bulk(b, r[i].v, r[i].vn);
	}
	free(r);
}

void run_hgetall(struct job *j, unsigned ci, struct rbuf *b) { hash_all(j, ci, b, 3); }
void run_hkeys(struct job *j, unsigned ci, struct rbuf *b) { hash_all(j, ci, b, 1); }
void run_hvals(struct job *j, unsigned ci, struct rbuf *b) { hash_all(j, ci, b, 2); }
void run_hscan(struct job *j, unsigned ci, struct rbuf *b) { hash_all(j, ci, b, 4); }

/* ---- sets ----------------------------------------------------------------- */

void run_sadd(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	if (!want_type(j, ci, &m, T_SET, b) || !check_fields(j, ci, 2, 1, 0, b))
		return;
	if (m.type == T_NONE)
		box_new(j, &m, T_SET);
	if (sub_need(j, &m, 's', ci, 2, 1))
		return;
	long long added = 0;
	for (unsigned a = 2; a < job_argc(j, ci); a++) {
		struct resp_arg f = job_arg(j, ci, a);
		if (sub_get(j, &m, 's', &f, &v, &n) == 0) {
			added++;
			m.size++;
			if (sub_put(j, &m, 's', &f, "", 0))
				b->oom = 1;
		}
	}
	if (added)
		box_store(j, ci, &m, b);
	resp_int(b, added);
}

void run_srem(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	if (!want_type(j, ci, &m, T_SET, b))
		return;
	if (m.type == T_NONE) {
		resp_int(b, 0);
		return;
	}
	if (!check_fields(j, ci, 2, 1, 0, b) || sub_need(j, &m, 's', ci, 2, 1))
		return;
	long long gone = 0;
	for (unsigned a = 2; a < job_argc(j, ci); a++) {
		struct resp_arg f = job_arg(j, ci, a);
		if (sub_get(j, &m, 's', &f, &v, &n) == 1) {
			sub_del(j, &m, 's', &f);
			gone++;
			m.size--;
		}
	}
	if (gone)
		box_store(j, ci, &m, b);
	resp_int(b, gone);
}

void run_sismember(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	struct resp_arg f = job_arg(j, ci, 2);
	if (!want_type(j, ci, &m, T_SET, b))
		return;
	if (m.type == T_NONE || f.len + 9 > KEY_MAX) {
		resp_int(b, 0);
		return;
	}
	int r = sub_get(j, &m, 's', &f, &v, &n);
	if (r >= 0)
		resp_int(b, r);
}

void run_scard(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	if (want_type(j, ci, &m, T_SET, b))
		resp_int(b, m.size);
}

void run_smembers(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	struct ov_row *r;
	if (!want_type(j, ci, &m, T_SET, b))
		return;
	int n = box_rows(j, &m, 's', &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	resp_array(b, n);
	for (int i = 0; i < n; i++)
		resp_bulk(b, r[i].k + 9, r[i].kn - 9);
	free(r);
}

/* SPOP key [count]: the first members in key order (not random). */
void run_spop(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	struct ov_row *r;
	long long count = 1;
	int has_count = job_argc(j, ci) > 2;
	if (has_count) {
		struct resp_arg c = job_arg(j, ci, 2);
		if (resp_arg_ll(&c, &count) || count < 0) {
			resp_error(b, "ERR value is out of range, must be positive");
			return;
		}
	}
	if (!want_type(j, ci, &m, T_SET, b))
		return;
	if (m.type == T_NONE || count == 0) {
		if (has_count)
			resp_array(b, 0);
		else
			resp_null(b);
		return;
	}
	char p[9];
	skey(p, m.id, 's', NULL, 0);
	if (count > m.size)
		count = m.size;
	int n = ov_scan(j, TB_SUB, p, 9, 9, (unsigned)count, &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	if (n > count)
		n = (int)count;
	char *ks = rows_keys(r, n);
	free(r);
	if (!ks) {
		b->oom = 1;
		return;
	}
	if (has_count)
		resp_array(b, n);
	for (int i = 0; i < n; i++) {
		const char *k = ks + i * (KEY_MAX + 1);
		resp_bulk(b, k + 1 + 9, (unsigned char)k[0] - 9);
		ov_del(j, TB_SUB, k + 1, (unsigned char)k[0]);
	}
	free(ks);
	m.size -= n;
	box_store(j, ci, &m, b);
}

/* ---- sorted sets ---------------------------------------------------------- */

static int parse_score(const struct resp_arg *a, double *d)
{
	char s[64];
	char *end;
	if (a->len == 0 || a->len >= sizeof(s))
		return -1;
	memcpy(s, a->p, a->len);
	s[a->len] = 0;
	*d = strtod(s, &end);
	return *end || isnan(*d) ? -1 : 0;
}

static void put_score(struct rbuf *b, double d)
{
	char s[40];
	if (isinf(d)) {
		resp_bulk_str(b, d > 0 ? "inf" : "-inf");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {   /* the shortest that reads back */
		snprintf(s, sizeof(s), "%.*g", prec, d);
		if (strtod(s, NULL) == d)
			break;
	}
	resp_bulk_str(b, s);
}

void run_zadd(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	int nx = 0, xx = 0, ch = 0;
	unsigned a = 2;
	for (; a < job_argc(j, ci); a++) {
		struct resp_arg o = job_arg(j, ci, a);
		if (resp_arg_is(&o, "NX"))
			nx = 1;
		else if (resp_arg_is(&o, "XX"))
			xx = 1;
		else if (resp_arg_is(&o, "CH"))
			ch = 1;
		else if (resp_arg_is(&o, "GT") || resp_arg_is(&o, "LT") || resp_arg_is(&o, "INCR")) {
			resp_error(b, "ERR ZADD %.*s is not supported by lotus serve", (int)o.len, o.p);
			return;
		} else
			break;
	}
	if (a >= job_argc(j, ci) || (job_argc(j, ci) - a) % 2 || (nx && xx)) {
		resp_error(b, nx && xx ? "ERR XX and NX options at the same time are not compatible"
				       : "ERR syntax error");
		return;
	}
	for (unsigned p = a; p < job_argc(j, ci); p += 2) {
		struct resp_arg s = job_arg(j, ci, p), f = job_arg(j, ci, p + 1);
		double d;
		if (parse_score(&s, &d)) {
			resp_error(b, "ERR value is not a valid float");
			return;
		}
		if (!member_ok(f.len, 8, b))
			return;
	}
	if (!want_type(j, ci, &m, T_ZSET, b))
		return;
	if (m.type == T_NONE)
		box_new(j, &m, T_ZSET);
	if (sub_need(j, &m, 'z', ci, a + 1, 2))
		return;
	long long added = 0, changed = 0;
	for (unsigned p = a; p < job_argc(j, ci); p += 2) {
		struct resp_arg s = job_arg(j, ci, p), f = job_arg(j, ci, p + 1);
		char k[KEY_MAX], sc[8];
		double d, old;
		parse_score(&s, &d);
		int r = sub_get(j, &m, 'z', &f, &v, &n);
		if ((r == 1 && nx) || (r == 0 && xx))
			continue;
		if (r == 1) {
			old = n == 8 ? score_dec(get64(v)) : 0;
			if (old == d)
				continue;
			ov_del(j, TB_SUB, k, ikey(k, m.id, old, f.p, f.len));
			changed++;
		} else {
			added++;
			m.size++;
		}
		put64(sc, score_enc(d));
		if (sub_put(j, &m, 'z', &f, sc, 8) ||
		    ov_put(j, TB_SUB, k, ikey(k, m.id, d, f.p, f.len), "", 0))
			b->oom = 1;
	}
	if (added || changed)
		box_store(j, ci, &m, b);
	resp_int(b, added + (ch ? changed : 0));
}

void run_zscore(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	struct resp_arg f = job_arg(j, ci, 2);
	if (!want_type(j, ci, &m, T_ZSET, b))
		return;
	if (m.type == T_NONE || f.len + 17 > KEY_MAX) {
		resp_null(b);
		return;
	}
	int r = sub_get(j, &m, 'z', &f, &v, &n);
	if (r == 1 && n == 8)
		put_score(b, score_dec(get64(v)));
	else if (r >= 0)
		resp_null(b);
}

void run_zcard(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	if (want_type(j, ci, &m, T_ZSET, b))
		resp_int(b, m.size);
}

void run_zrem(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	const char *v;
	size_t n;
	if (!want_type(j, ci, &m, T_ZSET, b))
		return;
	if (m.type == T_NONE) {
		resp_int(b, 0);
		return;
	}
	if (!check_fields(j, ci, 2, 1, 8, b) || sub_need(j, &m, 'z', ci, 2, 1))
		return;
	long long gone = 0;
	for (unsigned a = 2; a < job_argc(j, ci); a++) {
		struct resp_arg f = job_arg(j, ci, a);
		char k[KEY_MAX];
		if (sub_get(j, &m, 'z', &f, &v, &n) == 1) {
			double old = n == 8 ? score_dec(get64(v)) : 0;
			sub_del(j, &m, 'z', &f);
			ov_del(j, TB_SUB, k, ikey(k, m.id, old, f.p, f.len));
			gone++;
			m.size--;
		}
	}
	if (gone)
		box_store(j, ci, &m, b);
	resp_int(b, gone);
}

/* Index rows from score `from` on (NULL: all), up to want. */
static int zset_rows(struct job *j, const struct meta *m, const double *from, unsigned want,
		     struct ov_row **r)
{
	char k[KEY_MAX];
	size_t kn = skey(k, m->id, 'i', NULL, 0);
	*r = NULL;
	if (m->type == T_NONE || m->size <= 0 || want == 0)
		return 0;
	if (from) {
		put64be(k + 9, score_enc(*from));
		kn += 8;
	}
	return ov_scan(j, TB_SUB, k, kn, 9, want, r);
}

static void put_zrow(struct rbuf *b, const struct ov_row *r, int scores)
{
	resp_bulk(b, r->k + 17, r->kn - 17);
	if (scores)
		put_score(b, score_dec(get64be(r->k + 9)));
}

void run_zrange(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	struct ov_row *r;
	long long s, e;
	int scores = 0;
	struct resp_arg as = job_arg(j, ci, 2), ae = job_arg(j, ci, 3);
	for (unsigned a = 4; a < job_argc(j, ci); a++) {
		struct resp_arg o = job_arg(j, ci, a);
		if (!resp_arg_is(&o, "WITHSCORES")) {
			resp_error(b, "ERR syntax error (lotus serve's ZRANGE takes only WITHSCORES)");
			return;
		}
		scores = 1;
	}
	if (resp_arg_ll(&as, &s) || resp_arg_ll(&ae, &e)) {
		resp_error(b, "ERR value is not an integer or out of range");
		return;
	}
	if (!want_type(j, ci, &m, T_ZSET, b))
		return;
	if (s < 0)
		s += m.size;
	if (e < 0)
		e += m.size;
	if (s < 0)
		s = 0;
	if (e >= m.size)
		e = m.size - 1;
	if (m.type == T_NONE || s > e) {
		resp_array(b, 0);
		return;
	}
	int n = zset_rows(j, &m, NULL, (unsigned)(e + 1), &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	if (n > e + 1)
		n = (int)(e + 1);
	resp_array(b, (n > s ? n - s : 0) * (scores ? 2 : 1));
	for (int i = (int)s; i < n; i++)
		put_zrow(b, &r[i], scores);
	free(r);
}

static int parse_bound(const struct resp_arg *a, double *d, int *excl)
{
	struct resp_arg x = *a;
	*excl = x.len && x.p[0] == '(';
	if (*excl) {
		x.p++;
		x.len--;
	}
	return parse_score(&x, d);
}

void run_zrangebyscore(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	struct ov_row *r;
	double lo, hi;
	int xlo, xhi, scores = 0;
	long long off = 0, lim = -1;
	struct resp_arg amin = job_arg(j, ci, 2), amax = job_arg(j, ci, 3);
	if (parse_bound(&amin, &lo, &xlo) || parse_bound(&amax, &hi, &xhi)) {
		resp_error(b, "ERR min or max is not a float");
		return;
	}
	for (unsigned a = 4; a < job_argc(j, ci); a++) {
		struct resp_arg o = job_arg(j, ci, a);
		if (resp_arg_is(&o, "WITHSCORES")) {
			scores = 1;
		} else if (resp_arg_is(&o, "LIMIT") && a + 2 < job_argc(j, ci)) {
			struct resp_arg x = job_arg(j, ci, a + 1), y = job_arg(j, ci, a + 2);
			if (resp_arg_ll(&x, &off) || resp_arg_ll(&y, &lim)) {
				resp_error(b, "ERR value is not an integer or out of range");
				return;
			}
			a += 2;
		} else {
			resp_error(b, "ERR syntax error");
			return;
		}
	}
	if (!want_type(j, ci, &m, T_ZSET, b))
		return;
	int n = m.type == T_NONE ? 0 : zset_rows(j, &m, &lo, (unsigned)m.size, &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	int first = -1, last = -1, hits = 0;
	for (int i = 0; i < n; i++) {
		double d = score_dec(get64be(r[i].k + 9));
		if ((xlo && d <= lo) || d < lo)
			continue;
		if ((xhi && d >= hi) || d > hi)
			break;
		if (off > 0 && hits == 0 && first < 0) {
			off--;
			continue;
		}
		if (lim >= 0 && hits >= lim)
			break;
		if (first < 0)
			first = i;
		last = i;
		hits++;
	}
	resp_array(b, (long long)hits * (scores ? 2 : 1));
	for (int i = first; hits && i <= last; i++)
		put_zrow(b, &r[i], scores);
	if (m.type != T_NONE)
		free(r);
}

void run_zpopmin(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	struct ov_row *r;
	long long count = 1;
	if (job_argc(j, ci) > 2) {
		struct resp_arg c = job_arg(j, ci, 2);
		if (resp_arg_ll(&c, &count) || count < 0) {
			resp_error(b, "ERR value is out of range, must be positive");
			return;
		}
	}
	if (!want_type(j, ci, &m, T_ZSET, b))
		return;
	if (count > m.size)
		count = m.size;
	int n = zset_rows(j, &m, NULL, (unsigned)count, &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	if (n > count)
		n = (int)count;
	char *ks = rows_keys(r, n);
	free(r);
	if (!ks) {
		b->oom = 1;
		return;
	}
	resp_array(b, 2LL * n);
	for (int i = 0; i < n; i++) {
		const char *k = ks + i * (KEY_MAX + 1) + 1;
		size_t kn = (unsigned char)k[-1];
		char mk[KEY_MAX];
		resp_bulk(b, k + 17, kn - 17);
		put_score(b, score_dec(get64be(k + 9)));
		ov_del(j, TB_SUB, mk, skey(mk, m.id, 'z', k + 17, kn - 17));
		ov_del(j, TB_SUB, k, kn);
	}
	free(ks);
	if (n) {
		m.size -= n;
		box_store(j, ci, &m, b);
	}
}

/* ---- lists ---------------------------------------------------------------- */

/* Items of a chunk: [u32 len][bytes]... */
static int chunk_next(const char *v, size_t n, size_t *off, const char **p, size_t *len)
{
	if (*off + 4 > n)
		return 0;
	uint32_t l = (uint32_t)(unsigned char)v[*off] | (uint32_t)(unsigned char)v[*off + 1] << 8 |
		     (uint32_t)(unsigned char)v[*off + 2] << 16 |
		     (uint32_t)(unsigned char)v[*off + 3] << 24;
	if (*off + 4 + l > n)
		return 0;
	*p = v + *off + 4;
	*len = l;
	*off += 4 + l;
	return 1;
}

static void chunk_item(struct rbuf *b, const void *p, size_t n)
{
	char l[4] = { (char)n, (char)(n >> 8), (char)(n >> 16), (char)(n >> 24) };
	rbuf_put(b, l, 4);
	rbuf_put(b, p, n);
}

static int chunk_get(struct job *j, const struct meta *m, int64_t idx, const char **v,
		     size_t *n)
{
	char k[KEY_MAX];
	return ov_get(j, TB_SUB, k, ckey(k, m->id, idx), m->fresh, v, n);
}

/* Also ask for the chunks a walk from idx in direction dir will need next. */
static void chunk_ahead(struct job *j, const struct meta *m, int64_t idx, int dir, int64_t items)
{
	int64_t chunks = m->tail - m->head + 1;
	int64_t per = chunks > 0 && m->size / chunks > 0 ? m->size / chunks : 1;
	int64_t ahead = items / per + 2;
	const char *v;
	size_t n;
	if (ahead > 256)
		ahead = 256;
	for (int64_t i = 1; i <= ahead; i++) {
		int64_t at = idx + dir * i;
		if (at < m->head || at > m->tail)
			break;
		chunk_get(j, m, at, &v, &n);
	}
}

static void push_generic(struct job *j, unsigned ci, struct rbuf *b, int left)
{
	struct meta m;
	const char *v;
	size_t n;
	for (unsigned a = 2; a < job_argc(j, ci); a++)
		if (job_arg(j, ci, a).len + 4 > job_server(j)->max_value) {
			resp_error(b, "ERR list element over this table's limit (--max-value)");
			return;
		}
	if (!want_type(j, ci, &m, T_LIST, b))
		return;
	if (m.type == T_NONE)
		box_new(j, &m, T_LIST);
	if (m.size > 0 && chunk_get(j, &m, left ? m.head : m.tail, &v, &n) == OV_PENDING)
		return;
	for (unsigned a = 2; a < job_argc(j, ci); a++) {
		struct resp_arg e = job_arg(j, ci, a);
		struct rbuf nb;
		char k[KEY_MAX];
		int64_t idx = left ? m.head : m.tail;
		rbuf_init(&nb);
		if (m.size > 0 && chunk_get(j, &m, idx, &v, &n) == 1 && n + 4 + e.len <= LIST_CHUNK) {
			if (left) {
				chunk_item(&nb, e.p, e.len);
				rbuf_put(&nb, v, n);
			} else {
				rbuf_put(&nb, v, n);
				chunk_item(&nb, e.p, e.len);
			}
		} else {
			if (m.size > 0)
				idx += left ? -1 : 1;
			else
				idx = m.head = m.tail = 0;
			if (left)
				m.head = idx;
			else
				m.tail = idx;
			chunk_item(&nb, e.p, e.len);
		}
		if (nb.oom || ov_put(j, TB_SUB, k, ckey(k, m.id, idx), nb.data, nb.len))
			b->oom = 1;
		rbuf_free(&nb);
		m.size++;
	}
	box_store(j, ci, &m, b);
	resp_int(b, m.size);
}

void run_lpush(struct job *j, unsigned ci, struct rbuf *b) { push_generic(j, ci, b, 1); }
void run_rpush(struct job *j, unsigned ci, struct rbuf *b) { push_generic(j, ci, b, 0); }

static void pop_generic(struct job *j, unsigned ci, struct rbuf *b, int left)
{
	struct meta m;
	const char *v;
	size_t n;
	long long count = 1;
	int has_count = job_argc(j, ci) > 2;
	if (has_count) {
		struct resp_arg c = job_arg(j, ci, 2);
		if (resp_arg_ll(&c, &count) || count < 0) {
			resp_error(b, "ERR value is out of range, must be positive");
			return;
		}
	}
	if (!want_type(j, ci, &m, T_LIST, b))
		return;
	if (m.type == T_NONE) {
		if (has_count)
			resp_null_array(b);
		else
			resp_null(b);
		return;
	}
	if (count > m.size)
		count = m.size;
	struct rbuf out;
	rbuf_init(&out);
	long long got = 0;
	while (got < count) {
		int64_t idx = left ? m.head : m.tail;
		char k[KEY_MAX];
		int r = chunk_get(j, &m, idx, &v, &n);
		if (r == OV_PENDING) {
			chunk_ahead(j, &m, idx, left ? 1 : -1, count - got);
			rbuf_free(&out);
			return;
		}
		/* the chunk's items, to take from the front or the back */
		const char *p;
		size_t len, off = 0;
		size_t offs[LIST_CHUNK / 4 + 2], nit = 0;
		while (nit < LIST_CHUNK / 4 + 1 && chunk_next(v, n, &off, &p, &len))
			offs[nit++] = (size_t)(p - v) - 4;
		offs[nit] = n;
		size_t take = (size_t)(count - got) < nit ? (size_t)(count - got) : nit;
		for (size_t t = 0; t < take; t++) {
			size_t at = left ? offs[t] : offs[nit - 1 - t], o2 = at;
			chunk_next(v, n, &o2, &p, &len);
			resp_bulk(&out, p, len);
		}
		got += (long long)take;
		if (take == nit || nit == 0) {
			ov_del(j, TB_SUB, k, ckey(k, m.id, idx));
			if (left)
				m.head++;
			else
				m.tail--;
		} else {
			struct rbuf nb;
			rbuf_init(&nb);
			if (left)
				rbuf_put(&nb, v + offs[take], n - offs[take]);
			else
				rbuf_put(&nb, v, offs[nit - take]);
			if (nb.oom || ov_put(j, TB_SUB, k, ckey(k, m.id, idx), nb.data, nb.len))
				b->oom = 1;
			rbuf_free(&nb);
		}
		if (m.head > m.tail)
			break;
	}
	m.size -= got;
	box_store(j, ci, &m, b);
	if (has_count)
		resp_array(b, got);
	rbuf_put(b, out.data, out.len);
	rbuf_free(&out);
}

void run_lpop(struct job *j, unsigned ci, struct rbuf *b) { pop_generic(j, ci, b, 1); }
void run_rpop(struct job *j, unsigned ci, struct rbuf *b) { pop_generic(j, ci, b, 0); }

void run_llen(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	if (want_type(j, ci, &m, T_LIST, b))
		resp_int(b, m.size);
}

/* Items s..e (already within 0..size-1) into b, walking from the head. */
static int list_range(struct job *j, const struct meta *m, long long s, long long e,
		      struct rbuf *b)
{
	long long pos = 0;
	const char *v, *p;
	size_t n, len;
	for (int64_t idx = m->head; idx <= m->tail && pos <= e; idx++) {
		int r = chunk_get(j, m, idx, &v, &n);
		if (r == OV_PENDING) {
			chunk_ahead(j, m, idx, 1, e - pos);
			return OV_PENDING;
		}
		size_t off = 0;
		while (pos <= e && chunk_next(v, n, &off, &p, &len)) {
			if (pos >= s)
				resp_bulk(b, p, len);
			pos++;
		}
	}
	return 0;
}

void run_lrange(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	long long s, e;
	struct resp_arg as = job_arg(j, ci, 2), ae = job_arg(j, ci, 3);
	if (resp_arg_ll(&as, &s) || resp_arg_ll(&ae, &e)) {
		resp_error(b, "ERR value is not an integer or out of range");
		return;
	}
	if (!want_type(j, ci, &m, T_LIST, b))
		return;
	if (s < 0)
		s += m.size;
	if (e < 0)
		e += m.size;
	if (s < 0)
		s = 0;
	if (e >= m.size)
		e = m.size - 1;
	if (m.type == T_NONE || s > e) {
		resp_array(b, 0);
		return;
	}
	resp_array(b, e - s + 1);
	list_range(j, &m, s, e, b);
}

void run_lindex(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	long long i;
	struct resp_arg ai = job_arg(j, ci, 2);
	if (resp_arg_ll(&ai, &i)) {
		resp_error(b, "ERR value is not an integer or out of range");
		return;
	}
	if (!want_type(j, ci, &m, T_LIST, b))
		return;
	if (i < 0)
		i += m.size;
	if (m.type == T_NONE || i < 0 || i >= m.size) {
		resp_null(b);
		return;
	}
	list_range(j, &m, i, i, b);
}

/* ---- keys of any type ----------------------------------------------------- */

void run_type(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	resp_simple(b, types_name(meta_get(j, ci, 1, &m)));
}

void run_exists(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	long long n = 0;
	for (unsigned i = 1; i < job_argc(j, ci); i++)
		n += meta_get(j, ci, i, &m) != T_NONE;
	resp_int(b, n);
}

void run_del(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	long long n = 0;
	int pend = 0;
	for (unsigned i = 1; i < job_argc(j, ci); i++) {
		if (meta_get(j, ci, i, &m) == T_NONE)
			continue;
		int rc = box_drop(j, &m);
		if (rc == OV_PENDING)
			pend = 1;
		else if (rc < 0)
			b->oom = 1;
	}
	if (pend)
		return;
	for (unsigned i = 1; i < job_argc(j, ci); i++) {
		int live = meta_get(j, ci, i, &m) != T_NONE;
		if (kv_del(j, ci, i))
			n += live;
	}
	resp_int(b, n);
}

void run_rename(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m, d;
	if (meta_get(j, ci, 1, &m) == T_NONE) {
		resp_error(b, "ERR no such key");
		return;
	}
	struct resp_arg k1 = job_arg(j, ci, 1), k2 = job_arg(j, ci, 2);
	if (k1.len == k2.len && !memcmp(k1.p, k2.p, k1.len)) {
		resp_simple(b, "OK");
		return;
	}
	if (meta_get(j, ci, 2, &d) != T_NONE) {
		int rc = box_drop(j, &d);
		if (rc == OV_PENDING)
			return;
		if (rc < 0)
			b->oom = 1;
	}
	meta_get(j, ci, 1, &m);   /* the rows of a container stay: they hang on its id */
	m.exptag = 0;             /* a new expiry-index row, naming the new key */
	struct rbuf keep;
	rbuf_init(&keep);
	rbuf_put(&keep, m.sval, m.slen);
	m.sval = keep.data ? keep.data : "";
	if (meta_put(j, ci, 2, &m))
		b->oom = 1;
	rbuf_free(&keep);
	kv_del(j, ci, 1);
	resp_simple(b, "OK");
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: unit ms per unit, at: absolute. */
static void expire_generic(struct job *j, unsigned ci, struct rbuf *b, long long unit, int at)
{
	struct meta m;
	long long t;
	struct resp_arg a = job_arg(j, ci, 2);
	if (resp_arg_ll(&a, &t) || (t > 0 && t > LLONG_MAX / unit) || (t < 0 && t < LLONG_MIN / unit)) {
		resp_error(b, "ERR value is not an integer or out of range");
		return;
	}
	if (job_argc(j, ci) > 3) {
		resp_error(b, "ERR EXPIRE NX/XX/GT/LT are not supported by lotus serve");
		return;
	}
	if (meta_get(j, ci, 1, &m) == T_NONE) {
		resp_int(b, 0);
		return;
	}
	int64_t now = types_now_ms();
	long long when = t * unit;
	if (!at) {
		if ((when > 0 && now > LLONG_MAX - when)) {
			resp_error(b, "ERR invalid expire time in '%s' command", "expire");
			return;
		}
		when += now;
	}
	if (when <= now) {   /* in the past: the key goes now, as in Redis */
		int rc = box_drop(j, &m);
		if (rc == OV_PENDING)
			return;
		kv_del(j, ci, 1);
		resp_int(b, 1);
		return;
	}
	struct rbuf keep;
	rbuf_init(&keep);
	rbuf_put(&keep, m.sval, m.slen);
	m.sval = keep.data ? keep.data : "";
	m.expire = when;
	m.exptag = 0;
	if (meta_put(j, ci, 1, &m))
		b->oom = 1;
	rbuf_free(&keep);
	resp_int(b, 1);
}

void run_expire(struct job *j, unsigned ci, struct rbuf *b) { expire_generic(j, ci, b, 1000, 0); }
void run_pexpire(struct job *j, unsigned ci, struct rbuf *b) { expire_generic(j, ci, b, 1, 0); }
void run_expireat(struct job *j, unsigned ci, struct rbuf *b) { expire_generic(j, ci, b, 1000, 1); }
void run_pexpireat(struct job *j, unsigned ci, struct rbuf *b) { expire_generic(j, ci, b, 1, 1); }

static void ttl_generic(struct job *j, unsigned ci, struct rbuf *b, int ms)
{
	struct meta m;
	if (meta_get(j, ci, 1, &m) == T_NONE)
		resp_int(b, -2);
	else if (!m.expire)
		resp_int(b, -1);
	else {
		long long left = m.expire - types_now_ms();
		resp_int(b, ms ? left : (left + 500) / 1000);
	}
}

void run_ttl(struct job *j, unsigned ci, struct rbuf *b) { ttl_generic(j, ci, b, 0); }
void run_pttl(struct job *j, unsigned ci, struct rbuf *b) { ttl_generic(j, ci, b, 1); }

void run_persist(struct job *j, unsigned ci, struct rbuf *b)
{
	struct meta m;
	if (meta_get(j, ci, 1, &m) == T_NONE || !m.expire) {
		resp_int(b, 0);
		return;
	}
	struct rbuf keep;
	rbuf_init(&keep);
	rbuf_put(&keep, m.sval, m.slen);
	m.sval = keep.data ? keep.data : "";
	m.expire = 0;
	if (meta_put(j, ci, 1, &m))
		b->oom = 1;
	rbuf_free(&keep);
	resp_int(b, 1);
}

/* SETEX key seconds value, PSETEX key ms value */
static void setex_generic(struct job *j, unsigned ci, struct rbuf *b, long long unit)
{
	long long t;
	struct resp_arg a = job_arg(j, ci, 2), v = job_arg(j, ci, 3);
	if (resp_arg_ll(&a, &t) || t <= 0 || t > LLONG_MAX / unit / 2) {
		resp_error(b, "ERR invalid expire time in '%s' command", unit == 1 ? "psetex" : "setex");
		return;
	}
	if (str_set(j, ci, 1, v.p, v.len, types_now_ms() + t * unit))
		b->oom = 1;
	resp_simple(b, "OK");
}

void run_setex(struct job *j, unsigned ci, struct rbuf *b) { setex_generic(j, ci, b, 1000); }
void run_psetex(struct job *j, unsigned ci, struct rbuf *b) { setex_generic(j, ci, b, 1); }

void sweep_run(struct job *j, unsigned ci, struct rbuf *b);

/* KEYS pattern, FLUSHDB / FLUSHALL: one transaction over every row. */
void keys_run(struct job *j, unsigned ci, struct rbuf *b)
{
	struct ov_row *r;
	struct resp_arg name = job_arg(j, ci, 0);
	if (resp_arg_is(&name, "EXPIRESWEEP")) {
		sweep_run(j, ci, b);
		return;
	}
	int flush = !resp_arg_is(&name, "KEYS") && !resp_arg_is(&name, "KEYSPACE");
	int n = ov_scan(j, TB_MAIN, "", 1, 0, SCAN_ALL, &r);
	if (n == OV_PENDING)
		return;
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (resp_arg_is(&name, "KEYSPACE")) {   /* INFO keyspace, in the background */
		struct server *sv = job_server(j);
		long long keys = 0, expires = 0;
		for (int i = 0; i < n; i++) {
			struct meta m;
			meta_decode(r[i].v, r[i].vn, &m);
			if (m.expire && m.expire <= types_now_ms())
				continue;
			keys++;
			expires += m.expire != 0;
		}
		free(r);
		sv->ks_keys = keys;
		sv->ks_expires = expires;
		sv->ks_at_ns = serve_now_ns();
		return;
	}
	if (!flush) {
		struct resp_arg pat = job_arg(j, ci, 1);
		long long hits = 0;
		int ty;
		for (int i = 0; i < n; i++)
			hits += serve_glob(pat.p, pat.len, r[i].k, r[i].kn) &&
				types_row_live(job_server(j), r[i].v, r[i].vn, &ty);
		resp_array(b, hits);
		for (int i = 0; i < n; i++)
			if (serve_glob(pat.p, pat.len, r[i].k, r[i].kn) &&
			    types_row_live(job_server(j), r[i].v, r[i].vn, &ty))
				resp_bulk(b, r[i].k, r[i].kn);
		free(r);
		return;
	}
	struct ov_row *rs, *rx;
	int ns = ov_scan(j, TB_SUB, "", 1, 0, SCAN_ALL, &rs);
	int nx = ov_scan(j, TB_EXP, "", 1, 0, SCAN_ALL, &rx);
	if (ns < 0 || nx < 0) {
		free(r);
		if (ns >= 0)
			free(rs);
		if (nx >= 0)
			free(rx);
		if (ns != OV_PENDING && nx != OV_PENDING)
			b->oom = 1;
		return;
	}
	char *k3 = rows_keys(rx, nx);
	free(rx);
	for (int i = 0; k3 && i < nx; i++)
		ov_del(j, TB_EXP, k3 + i * (KEY_MAX + 1) + 1, (unsigned char)k3[i * (KEY_MAX + 1)]);
	if (!k3)
		b->oom = 1;
	free(k3);
	char *k1 = rows_keys(r, n), *k2 = rows_keys(rs, ns);
	free(r);
	free(rs);
	if (!k1 || !k2) {
		free(k1);
		free(k2);
		b->oom = 1;
		return;
	}
	for (int i = 0; i < n; i++)
		ov_del(j, TB_MAIN, k1 + i * (KEY_MAX + 1) + 1, (unsigned char)k1[i * (KEY_MAX + 1)]);
	for (int i = 0; i < ns; i++)
		ov_del(j, TB_SUB, k2 + i * (KEY_MAX + 1) + 1, (unsigned char)k2[i * (KEY_MAX + 1)]);
	free(k1);
	free(k2);
	resp_simple(b, "OK");
}

/* The active expiry sweep (a background job of worker 0, every 100 ms): the
 * first SWEEP_BATCH rows of the expiry index; each due one is dropped, and
 * its key deleted (members too) if it still has that expiry.  No full scan:
 * the index is in time order, so the sweep reads only due rows (and one). */
#define SWEEP_BATCH 32
struct xrow {
	char xk[XKEY_LEN];
	unsigned char kn;
	char k[KEY_MAX];
};

void sweep_run(struct job *j, unsigned ci, struct rbuf *b)
{
	char p[9];
	struct ov_row *r;
	memset(p, 0, 8);
	p[8] = 'e';
	int n = ov_scan(j, TB_EXP, p, 9, 9, SWEEP_BATCH, &r);
	if (n < 0) {
		if (n != OV_PENDING)
			b->oom = 1;
		return;
	}
	int64_t now = types_now_ms();
	struct xrow *x = malloc(sizeof(*x) * (size_t)(n > 0 ? n : 1));
	int nx = 0;
	for (int i = 0; x && i < n; i++) {
		if (r[i].kn != XKEY_LEN || r[i].vn == 0 || r[i].vn > KEY_MAX)
			continue;
		if ((int64_t)get64be(r[i].k + 9) > now)
			break;
		memcpy(x[nx].xk, r[i].k, XKEY_LEN);
		x[nx].kn = (unsigned char)r[i].vn;
		memcpy(x[nx].k, r[i].v, r[i].vn);
		nx++;
	}
	free(r);
	if (!x) {
		b->oom = 1;
		return;
	}
	for (int i = 0; i < nx; i++) {
		const char *v;
		size_t vn;
		struct meta m;
		int got = ov_get(j, TB_MAIN, x[i].k, x[i].kn, 0, &v, &vn);
		if (got == OV_PENDING)
			continue;
		if (got == 1) {
			meta_decode(v, vn, &m);
			if (m.expire == (int64_t)get64be(x[i].xk + 9) &&
			    m.exptag == get64be(x[i].xk + 17)) {
				if (box_drop(j, &m) == OV_PENDING)
					continue;
				ov_del(j, TB_MAIN, x[i].k, x[i].kn);
			}
		}
		ov_del(j, TB_EXP, x[i].xk, XKEY_LEN);
	}
	if (nx == SWEEP_BATCH)
		job_server(j)->sweep_next_ns = 0;   /* more may be due: again at once */
	free(x);
}

/* ---- WATCH ---------------------------------------------------------------- */

/* A watched key's state, 9 bytes: a kind, then 8 bytes.
 *   W_MISSING  the key does not exist
 *   W_VERSION  lotus's record version of its row (lotus_txn_result_version):
 *              every committed write of the row changes it, by serve or by
 *              any other lotus client, also one that writes the same bytes
 *   W_STAMP    serve's write stamp in the row's header: only when there is no
 *              version (a WATCH pipelined after a write of the key in the
 *              same job, whose version is known only after the commit)
 *   W_HASH     a hash of the bytes: the same, for an older serve's string
 * EXEC's check computes the same kind as WATCH did (a version: from its own
 * read, under its S lock until the commit). */
enum { W_MISSING = 0, W_STAMP = 1, W_HASH = 2, W_VERSION = 3 };

static void watch_state(struct job *j, unsigned ci, unsigned i, int kind, char rec[9])
{
	const char *v;
	size_t n;
	struct meta m;
	uint64_t ver;
	memset(rec, 0, 9);
	if (!kv_get(j, ci, i, &v, &n))
		return;
	if (kind == W_VERSION || kind < 0) {
		if (kv_version(j, ci, i, &ver) == 0) {
			rec[0] = W_VERSION;
			put64(rec + 1, ver);
			return;
		}
		if (kind == W_VERSION) {   /* none now: never equal to a version */
			rec[0] = W_STAMP;
			return;
		}
	}
	meta_decode(v, n, &m);
	if (m.stamp) {
		rec[0] = W_STAMP;
		put64(rec + 1, m.stamp);
	} else {
		uint64_t h = 0xcbf29ce484222325ULL;
		for (size_t x = 0; x < n; x++)
			h = (h ^ (unsigned char)v[x]) * 0x100000001b3ULL;
		rec[0] = W_HASH;
		put64(rec + 1, h);
	}
}

/* WATCH key...: remember each key's version, as this transaction reads it. */
void run_watch(struct job *j, unsigned ci, struct rbuf *b)
{
	struct conn *c = job_conn(j);
	for (unsigned i = 1; c && i < job_argc(j, ci); i++) {
		struct resp_arg k = job_arg(j, ci, i);
		char rec[9];
		unsigned char kl = (unsigned char)k.len;
		watch_state(j, ci, i, -1, rec);
		rbuf_put(&c->watch, &kl, 1);
		rbuf_put(&c->watch, k.p, k.len);
		rbuf_put(&c->watch, rec, 9);
		c->nwatch++;
	}
	resp_simple(b, "OK");
}

/* The check EXEC runs first: arguments key, state, key, state... */
static void run_watchcheck(struct job *j, unsigned ci, struct rbuf *b)
{
	(void)b;
	for (unsigned i = 1; i + 1 < job_argc(j, ci); i += 2) {
		char rec[9];
		struct resp_arg want = job_arg(j, ci, i + 1);
		if (want.len != 9) {
			job_set_watch_fail(j);
			return;
		}
		watch_state(j, ci, i, want.p[0] == W_MISSING ? -1 : want.p[0], rec);
		if (memcmp(want.p, rec, 9)) {
			job_set_watch_fail(j);
			return;
		}
	}
}

const struct cmd_def cmd_watchcheck = {
	.name = "WATCHCHECK", .arity = -1, .kind = CK_DATA, .keys = KS_R_PAIRS,
	.run = run_watchcheck,
};
